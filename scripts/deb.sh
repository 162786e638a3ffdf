#!/usr/bin/env bash
# Builds the Debian package of dropslot for this machine's architecture with dpkg-deb alone
# (no cargo-deb to compile; docs/architecture.md, "The Debian package"): the binary, the
# configuration as a conffile, the unit, the maintainer scripts in packaging/debian/, the
# licences and attributions. Prints the .deb's path on stdout.
#
#   scripts/deb.sh                   cargo build --release --locked -p dropslot, then package
#   scripts/deb.sh --binary PATH     package a binary already built (the tests: the debug one)
#   scripts/deb.sh --out DIR         where the .deb goes (default: $CARGO_TARGET_DIR/deb or target/deb)
#
# Environment: DROPSLOT_DEB_MAINTAINER (default "dropslot maintainers <maintainers@dropslot.invalid>"),
# SOURCE_DATE_EPOCH (default: the last commit's time; file times and the changelog date).
set -euo pipefail
cd "$(dirname "$0")/.."
umask 022

target_dir=${CARGO_TARGET_DIR:-target}
binary=""
out="$target_dir/deb"
while [ $# -gt 0 ]; do
    case "$1" in
        --binary) binary=${2:?--binary needs a path}; shift 2 ;;
        --out) out=${2:?--out needs a directory}; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "deb.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

if [ -z "$binary" ]; then
    cargo build --release --locked -p dropslot --bin dropslot >&2
    binary="$target_dir/release/dropslot"
fi
[ -x "$binary" ] || { echo "deb.sh: $binary is not an executable" >&2; exit 1; }

# The version of the dropslot crate (the workspace has no version of its own), Debian
# revision 1: the package is built from the upstream source by upstream itself.
upstream=$(cargo metadata --no-deps --format-version 1 --locked --offline \
    | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "dropslot"))')
version="$upstream-1"
arch=$(dpkg --print-architecture)
maintainer=${DROPSLOT_DEB_MAINTAINER:-dropslot maintainers <maintainers@dropslot.invalid>}
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
    SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

stage=$(mktemp -d)
chmod 0755 "$stage"
work=$(mktemp -d)
trap 'rm -rf "$stage" "$work"' EXIT
pkg=packaging/debian
doc="$stage/usr/share/doc/dropslot"

install -d -m 0755 "$stage/DEBIAN" "$stage/usr/bin" "$stage/etc/dropslot" "$stage/lib/systemd/system" \
    "$stage/usr/share/dropslot" "$doc"
install -d -m 0750 "$stage/var/lib/dropslot"
# Stripped like dh_strip does; the line tables stay in the build's own binary.
install -m 0755 "$binary" "$stage/usr/bin/dropslot"
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$stage/usr/bin/dropslot"
# The commented embedded default, as it is: with --config it changes nothing (the config
# module's test the_default_given_as_the_file_changes_nothing), and the admin edits it.
install -m 0644 crates/dropslot-core/src/config/default.toml "$stage/etc/dropslot/dropslot.toml"
install -m 0644 "$pkg/dropslot.service" "$stage/lib/systemd/system/dropslot.service"
install -m 0644 "$pkg/env" "$stage/usr/share/dropslot/env"
install -D -m 0644 "$pkg/lintian-overrides" "$stage/usr/share/lintian/overrides/dropslot"
install -d -m 0755 "$stage/usr/share/man/man1"
gzip -9n -c "$pkg/dropslot.1" > "$stage/usr/share/man/man1/dropslot.1.gz"
chmod 0644 "$stage/usr/share/man/man1/dropslot.1.gz"

# Licences and attributions.
install -m 0644 "$pkg/copyright" "$doc/copyright"
install -m 0644 "$pkg/README.Debian" "$doc/README.Debian"
install -m 0644 crates/dropslot-core/data/ATTRIBUTION.md "$doc/ATTRIBUTION-geodata.md"
{
    echo "# The Rust crates statically linked into /usr/bin/dropslot: name, version, licence."
    cargo tree -p dropslot -e normal,build --prefix none --format '{p} {l}' --locked --offline 2>/dev/null \
        | sed -e 's/ (proc-macro)//' -e 's/ (\/[^)]*)//' -e 's/ (\*)$//' | grep -v '^dropslot' | sort -u
} > "$doc/crates.txt"
cat > "$work/changelog.Debian" <<CHANGELOG
dropslot ($version) unstable; urgency=medium

  * Built by scripts/deb.sh from commit $commit of the dropslot workspace.

 -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")
CHANGELOG
gzip -9n -c "$work/changelog.Debian" > "$doc/changelog.Debian.gz"
# As dh_compress: documentation over 4 KiB is compressed (copyright never).
for f in "$doc/ATTRIBUTION-geodata.md" "$doc/crates.txt"; do
    if [ "$(stat -c %s "$f")" -gt 4096 ]; then gzip -9n "$f"; fi
done
chmod 0644 "$doc"/*

# Maintainer scripts and control files.
install -m 0755 "$pkg/postinst" "$pkg/prerm" "$pkg/postrm" "$stage/DEBIAN/"
echo /etc/dropslot/dropslot.toml > "$stage/DEBIAN/conffiles"
# Shared-library dependencies as dpkg-shlibdeps computes them (it wants a debian/control).
mkdir -p "$work/src/debian"
printf 'Source: dropslot\n\nPackage: dropslot\nArchitecture: any\n' > "$work/src/debian/control"
shlibs=$(cd "$work/src" && dpkg-shlibdeps -O "$stage/usr/bin/dropslot" | sed -n 's/^shlibs:Depends=//p')
installed_size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: dropslot
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_size
Depends: $shlibs, adduser
Section: net
Priority: optional
Description: scheduled same-day parcel delivery service
 dropslot is a self-hostable platform for scheduled same-day parcel delivery:
 merchants preview rates and time slots, create orders with tracking codes and
 printable labels, and receive signed webhooks as their shipments move. One
 binary serves the API, the dashboard, the tracking pages and the driver app
 on an embedded SQLite database (or PostgreSQL).
 .
 This package runs it as the systemd service dropslot.service, under its own
 system user, with its database in /var/lib/dropslot.
CONTROL
(cd "$stage" && find . -type f ! -path './DEBIAN/*' ! -path './etc/*' -printf '%P\0' | sort -z \
    | xargs -0 md5sum) > "$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles" "$stage/DEBIAN/md5sums"

mkdir -p "$out"
deb="$out/dropslot_${version}_${arch}.deb"
dpkg-deb --build --root-owner-group -Zxz "$stage" "$deb" >&2
echo "$deb"
