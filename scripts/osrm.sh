#!/usr/bin/env bash
# Installs a real OSRM routing engine (osrm-extract, osrm-contract, osrm-routed, plus
# osrm-partition, osrm-customize, osrm-datastore, osrm-components) and its Lua profiles
# (share/profiles/car.lua and the lib/ it requires), so the tests can build a tiny road graph
# and check the service's road distances against OSRM's own `table` service. Prints the bin
# directory as the last line on stdout; everything else goes to stderr.
#
# Where it comes from: PyPI's osrm-bindings wheel (pinned version and hash) ships the upstream
# osrm-backend executables, statically linked but for glibc and libstdc++ (manylinux_2_28,
# x86_64), in osrm/bin/ and the profiles in osrm/share/profiles/. We only unpack that wheel:
# no Python import, no compiler. Building the sdist instead is not possible from the package
# registries alone (its vcpkg manifest fetches gauche-rs, sol2 and vtzero from GitHub; Debian 12
# lacks sol2 and vtzero, has Boost 1.81 where 1.83 is required, and GCC 12 has no <format>).
#
# Idempotent: does nothing when the prefix already holds the executables of this version.
#   DROPSLOT_OSRM_DIR    install prefix (default ~/.cache/dropslot/osrm-26.10.0)
#   DROPSLOT_OSRM_CACHE  where the downloaded wheel is kept (default ~/.cache/dropslot/downloads)
set -euo pipefail

VERSION=26.10.0
# sha256 of osrm_bindings-26.10.0-cp312-abi3-manylinux_2_28_x86_64.whl on PyPI.
WHEEL_SHA256=840d6f82812eb9f9e17c71eb9083dfa15f3be2bfec4965c32aefa48b00d3a951
PLATFORM=manylinux_2_28_x86_64
PREFIX=${DROPSLOT_OSRM_DIR:-$HOME/.cache/dropslot/osrm-$VERSION}
CACHE=${DROPSLOT_OSRM_CACHE:-$HOME/.cache/dropslot/downloads}
BIN=$PREFIX/bin
TOOLS=(osrm-extract osrm-contract osrm-routed osrm-partition osrm-customize osrm-datastore osrm-components)

log() { printf 'osrm.sh: %s\n' "$*" >&2; }

installed() {
    local t
    for t in "${TOOLS[@]}"; do [[ -x $BIN/$t ]] || return 1; done
    [[ -f $PREFIX/share/profiles/car.lua && -d $PREFIX/share/profiles/lib ]] || return 1
    [[ $("$BIN/osrm-routed" --version 2>/dev/null) == "v$VERSION" ]]
}

if installed; then
    echo "$BIN"
    exit 0
fi

if [[ $(uname -m) != x86_64 ]]; then
    log "only x86_64 is supported (the pinned wheel is $PLATFORM); found $(uname -m)"
    exit 1
fi

if ! python3 -m pip --version >/dev/null 2>&1; then
    SUDO=
    [[ $(id -u) -eq 0 ]] || SUDO=sudo
    log "installing pip from Debian's packages"
    timeout 600 $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 900 $SUDO apt-get install -y -qq python3-pip >/dev/null
fi

wheel=$CACHE/osrm_bindings-$VERSION-cp312-abi3-$PLATFORM.whl
if [[ ! -f $wheel ]] || ! echo "$WHEEL_SHA256  $wheel" | sha256sum -c --status; then
    log "downloading osrm-bindings $VERSION ($PLATFORM wheel) from PyPI"
    mkdir -p "$CACHE"
    req=$(mktemp)
    trap 'rm -f "$req"' EXIT
    echo "osrm-bindings==$VERSION --hash=sha256:$WHEEL_SHA256" >"$req"
    # --platform/--python-version pick the wheel whatever the local Python is; nothing is installed.
    timeout 900 python3 -m pip download --quiet --disable-pip-version-check --no-deps \
        --only-binary :all: --platform "$PLATFORM" --python-version 3.12 --implementation cp \
        --require-hashes -r "$req" -d "$CACHE" >&2
fi
echo "$WHEEL_SHA256  $wheel" | sha256sum -c --status || { log "bad checksum: $wheel"; exit 1; }

log "unpacking into $PREFIX"
mkdir -p "$(dirname "$PREFIX")"
stage=$(mktemp -d "$PREFIX.tmp.XXXXXX")
trap 'rm -rf "$stage" "${req:-}"' EXIT
python3 -m zipfile -e "$wheel" "$stage/wheel"
mkdir -p "$stage/out/bin" "$stage/out/share"
for t in "${TOOLS[@]}"; do
    install -m 0755 "$stage/wheel/osrm/bin/$t" "$stage/out/bin/$t"
done
cp -R "$stage/wheel/osrm/share/profiles" "$stage/out/share/profiles"
cp "$stage/wheel/osrm_bindings-$VERSION.dist-info/licenses/LICENSE.TXT" "$stage/out/LICENSE.TXT"
# A smoke run: the executables must start on this machine's glibc/libstdc++.
for t in osrm-extract osrm-contract osrm-routed; do
    got=$("$stage/out/bin/$t" --version 2>&1) || { log "$t does not run: $got"; exit 1; }
    [[ $got == "v$VERSION" ]] || { log "$t reports '$got', expected v$VERSION"; exit 1; }
done
rm -rf "$PREFIX"
mv "$stage/out" "$PREFIX"

installed || { log "installation in $PREFIX is incomplete"; exit 1; }
log "OSRM $VERSION ready: $BIN (profiles in $PREFIX/share/profiles)"
echo "$BIN"
