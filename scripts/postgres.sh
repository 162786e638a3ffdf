#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers on 127.0.0.1:5432 for the test suite and prints the
# admin URL the suite creates its per-test databases from. Idempotent:
#   - already answering (pg_isready): nothing to do;
#   - installed but stopped: starts the Debian cluster;
#   - not installed: installs Debian's postgresql package, then starts it.
# Trust authentication on 127.0.0.1 is what a fresh Debian cluster and the CI machine have;
# set DROPSLOT_TEST_DATABASE_URL to use another server instead.
set -euo pipefail

URL=${DROPSLOT_TEST_POSTGRES_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}
log() { printf 'postgres.sh: %s\n' "$*" >&2; }

ready() { command -v pg_isready >/dev/null && pg_isready -q -h 127.0.0.1 -p 5432 -t 2; }

if ! ready; then
    SUDO=
    [[ $(id -u) -eq 0 ]] || SUDO=sudo
    if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
        log "installing PostgreSQL from Debian's packages"
        timeout 600 $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive timeout 900 $SUDO apt-get install -y -qq postgresql >/dev/null
    fi
    version=$(ls /etc/postgresql | sort -V | tail -1)
    log "starting the PostgreSQL $version cluster"
    timeout 120 $SUDO pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    for _ in $(seq 60); do ready && break; sleep 0.5; done
    ready || { log "PostgreSQL does not answer on 127.0.0.1:5432"; exit 1; }
fi
# The suite needs to create databases: check that before any test does.
if ! timeout 20 psql "$URL" -qtAc 'SELECT 1' >/dev/null 2>&1; then
    log "cannot connect as $URL (trust authentication on 127.0.0.1 expected)"
    exit 1
fi
echo "$URL"
