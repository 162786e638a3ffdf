#!/usr/bin/env bash
# Regenerates crates/dropslot-core/data/postal-codes.tsv from the npm package
# `zipcodes`. Development time only, run by hand; the service never touches
# the network. The version and tarball hash are pinned so that a rerun
# either reproduces the committed file byte for byte or fails loudly.
set -euo pipefail

readonly PKG=zipcodes
readonly VERSION=8.0.0
# dist.integrity from `npm view zipcodes@8.0.0 dist.integrity`.
readonly INTEGRITY='sha512-V8NolFaJhsPamGeCv5lJdk60Q7JBiXI6e+8JDksPC1NJWZ0t7g1OFfqVLZb2Nc2F5jmf9JTdYdWJBnIhGBvtbA=='

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$root/crates/dropslot-core/data/postal-codes.tsv"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# `npm pack` fetches the published tarball without running install scripts.
(cd "$tmp" && npm pack --silent "$PKG@$VERSION" >/dev/null)
tarball="$tmp/$PKG-$VERSION.tgz"

# npm checks the registry's hash itself; checking it against our pin as well
# catches a republished or substituted tarball.
actual="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [[ "$actual" != "$INTEGRITY" ]]; then
    echo "integrity mismatch for $PKG@$VERSION: got $actual" >&2
    exit 1
fi

tar -xzf "$tarball" -C "$tmp"
node "$here/derive-geodata.js" "$tmp/package" "$VERSION" >"$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out ($(wc -c <"$out") bytes)" >&2
