#!/usr/bin/env bash
# The Debian package on this machine, end to end (issue 34; docs/operations.md, "Debian
# package and systemd"): builds it from the binary the test run built, checks its contents
# and lintian (no errors), installs it with dpkg -i, verifies the unit with systemd-analyze
# (verify, and security: exposure at most 2.0), then runs the unit's ExecStart by hand as
# systemd would (systemd is not PID 1 here): as User=/Group=, in WorkingDirectory= with UMask=,
# with the EnvironmentFile= and a NOTIFY_SOCKET; READY=1 must come with /readyz already 200;
# a preview and an order with the demo token from the log; SIGTERM gives STOPPING=1 and exit 0.
# A migration failing halfway leaves the database as it was and the start failed with the
# reason on stderr. Then dpkg -r keeps the data and the user, and dpkg --purge deletes them.
#
# Builds as the calling user, then needs root (dpkg -i, setpriv; through sudo when not root).
# Idempotent: an earlier install is purged first, and the package is purged again on the way
# out, whatever happened. DROPSLOT_BIN=PATH packages that binary instead of asking cargo for
# the one the tests use; DROPSLOT_DEB=PATH tests that package as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { echo "== deb-test: $*"; }
fail() { echo "deb-test: FAILED: $*" >&2; exit 1; }

# --- as the calling user: the binary `cargo test --workspace` (and so `cargo nextest run
# --workspace`) builds for the end-to-end tests, so that CI compiles nothing twice; the
# package from it (into $CARGO_TARGET_DIR/deb, as scripts/deb.sh does by default).
if [ -z "${DROPSLOT_DEB:-}" ]; then
    if [ -n "${DROPSLOT_BIN:-}" ]; then
        bin=$DROPSLOT_BIN
    else
        step "the binary the tests use (cargo test --workspace --no-run)"
        bin=$(scripts/test-binary.sh)
    fi
    [ -x "$bin" ] || fail "no dropslot binary ($bin)"
    step "build the package from $bin"
    DROPSLOT_DEB=$(scripts/deb.sh --binary "$bin")
fi
deb=$DROPSLOT_DEB

# --- the rest installs packages and switches users: root.
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || fail "needs root (dpkg -i, setpriv)"
    exec sudo DROPSLOT_DEB="$deb" "$0"
fi

work=$(mktemp -d)
chmod 0755 "$work"
server_pid=""
listener_pid=""
cleanup() {
    local rc=$?
    set +e
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    [ -n "$listener_pid" ] && kill "$listener_pid" 2>/dev/null && wait "$listener_pid" 2>/dev/null
    dpkg --purge dropslot >/dev/null 2>&1
    if [ $rc -ne 0 ]; then
        for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }; done
    fi
    rm -rf "$work"
    exit $rc
}
trap cleanup EXIT

version=$(dpkg-deb -f "$deb" Version)
[ "$(dpkg-deb -f "$deb" Architecture)" = "$(dpkg --print-architecture)" ] || fail "architecture"
[ "$(basename "$deb")" = "dropslot_${version}_$(dpkg --print-architecture).deb" ] || fail "file name $deb"

step "contents (dpkg-deb -c)"
dpkg-deb -c "$deb" | tee "$work/contents.log"
has() { # mode path
    grep -Eq "^$1 root/root +[0-9]+ [0-9-]+ [0-9:]+ \./$2\$" "$work/contents.log" || fail "$2 ($1) is not in the package"
}
has '-rwxr-xr-x' usr/bin/dropslot
has '-rw-r--r--' etc/dropslot/dropslot.toml
has '-rw-r--r--' lib/systemd/system/dropslot.service
has '-rw-r--r--' usr/share/dropslot/env
has 'drwxr-x---' var/lib/dropslot/
has '-rw-r--r--' usr/share/doc/dropslot/copyright
has '-rw-r--r--' usr/share/doc/dropslot/changelog.Debian.gz
has '-rw-r--r--' 'usr/share/doc/dropslot/ATTRIBUTION-geodata.md(.gz)?'
has '-rw-r--r--' 'usr/share/doc/dropslot/crates.txt(.gz)?'
dpkg-deb --ctrl-tarfile "$deb" | tar -x -C "$work" ./conffiles ./postinst ./prerm ./postrm
[ "$(cat "$work/conffiles")" = /etc/dropslot/dropslot.toml ] || fail "conffiles: $(cat "$work/conffiles")"
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./etc/dropslot/dropslot.toml \
    | cmp - crates/dropslot-core/src/config/default.toml || fail "dropslot.toml is not the embedded default"

step "lintian: no error, no warning (the informational tags are explained in docs/operations.md)"
rc=0
lintian --fail-on error,warning --display-level '>=info' "$deb" > "$work/lintian.log" 2>&1 || rc=$?
grep -v 'running with root privileges' "$work/lintian.log" || true
[ $rc -eq 0 ] || fail "lintian exited $rc"
! grep -q '^[EW]:' "$work/lintian.log" || fail "lintian found errors or warnings"

step "install (dpkg -i), after purging any earlier install"
dpkg --purge dropslot >/dev/null 2>&1 || true
dpkg -i "$deb"
getent passwd dropslot >/dev/null || fail "no dropslot user"
getent group dropslot >/dev/null || fail "no dropslot group"
[ "$(getent passwd dropslot | cut -d: -f6,7)" = "/var/lib/dropslot:/usr/sbin/nologin" ] || fail "the user's home/shell"
[ "$(id -u dropslot)" -lt 1000 ] || fail "dropslot is not a system user"
[ "$(stat -c '%a %U %G' /var/lib/dropslot)" = "750 dropslot dropslot" ] || fail "/var/lib/dropslot: $(stat -c '%a %U %G' /var/lib/dropslot)"
[ "$(stat -c '%a %U %G' /etc/dropslot/env)" = "640 root dropslot" ] || fail "/etc/dropslot/env: $(stat -c '%a %U %G' /etc/dropslot/env)"
dpkg-query -W -f='${Conffiles}\n' dropslot | grep -q '/etc/dropslot/dropslot.toml' || fail "not a conffile"
[ "$(/usr/bin/dropslot --version)" = "dropslot ${version%-*}" ] || fail "dropslot --version: $(/usr/bin/dropslot --version)"

unit=/lib/systemd/system/dropslot.service
step "systemd-analyze verify $unit"
rc=0
systemd-analyze verify "$unit" > "$work/verify.log" 2>&1 || rc=$?
cat "$work/verify.log"
[ $rc -eq 0 ] || fail "systemd-analyze verify exited $rc"
! grep -q . "$work/verify.log" || fail "systemd-analyze verify warned"

step "systemd-analyze security --offline=true: exposure at most 2.0"
systemd-analyze security --offline=true "$unit" > "$work/security.log" 2>&1 || true
exposure=$(sed -n 's/.*Overall exposure level for dropslot.service: \([0-9.]*\).*/\1/p' "$work/security.log")
grep -v '^✓' "$work/security.log" || true
[ -n "$exposure" ] || fail "no exposure figure"
awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }' || fail "exposure $exposure is above 2.0"
echo "exposure: $exposure"

# --- the unit, read rather than repeated: the [Service] keys the start depends on.
key() { sed -n "/^\[Service\]/,/^\[/s/^$1=//p" "$unit" | tail -n 1; }
exec_start=$(key ExecStart)
user=$(key User)
group=$(key Group)
env_file=$(key EnvironmentFile)
workdir=$(key WorkingDirectory)
umask_value=$(key UMask)
[ "$(key Type)" = notify ] || fail "Type= is not notify"
case "$exec_start" in [-@+!:]* | *[\"\'\$%]*) fail "ExecStart has a prefix, quotes or specifiers this script does not model: $exec_start" ;; esac
[ -n "$user" ] && [ -n "$group" ] && [ -n "$env_file" ] && [ -n "$workdir" ] && [ -n "$umask_value" ] || fail "unit keys"
read -r -a exec_argv <<< "$exec_start"

# The admin's edit of the environment file: a free loopback port, the clock pinned so that the
# demo area's slots are the same every run (both documented variables).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -i "s|^DROPSLOT_LISTEN=.*|DROPSLOT_LISTEN=127.0.0.1:$port|" "$env_file"
echo "DROPSLOT_NOW=2026-11-23T12:00:00Z" >> "$env_file"
base="http://127.0.0.1:$port"
api="$base/scheduled-service/api/v1"

step "installing again (the upgrade path of the maintainer scripts) keeps the admin's edits"
dpkg -i "$deb" > "$work/reinstall.log" 2>&1 || { cat "$work/reinstall.log"; fail "dpkg -i over the installed package"; }
grep -qx "DROPSLOT_LISTEN=127.0.0.1:$port" "$env_file" || fail "the upgrade rewrote $env_file"
[ "$(stat -c '%a %U %G' "$env_file")" = "640 root dropslot" ] || fail "$env_file after the upgrade"
[ "$(stat -c '%a %U %G' /var/lib/dropslot)" = "750 dropslot dropslot" ] || fail "/var/lib/dropslot after the upgrade"
[ "$(getent passwd dropslot | cut -d: -f3)" = "$(id -u "$user")" ] || fail "the user changed"

# EnvironmentFile= as systemd reads it: KEY=VALUE lines, blank lines and #/; comments
# skipped, one pair of surrounding quotes removed. Printed NUL-separated for `env`.
unit_env() {
    python3 - "$env_file" <<'PY'
import re, sys
for raw in open(sys.argv[1], encoding="utf-8"):
    line = raw.strip()
    if not line or line[0] in "#;":
        continue
    key, sep, value = line.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        sys.exit(f"{sys.argv[1]}: not KEY=VALUE: {raw!r}")
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    sys.stdout.write(f"{key}={value}\0")
PY
}

# Starts ExecStart as systemd would (user, group, working directory, umask, environment,
# NOTIFY_SOCKET, stdout+stderr to LOG); sets server_pid.
start_unit() { # LOG NOTIFY_SOCKET
    local -a environment
    mapfile -d '' environment < <(unit_env)
    (
        cd "$workdir"
        umask "$umask_value"
        exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="$workdir" USER="$user" LOGNAME="$user" \
            "${environment[@]}" NOTIFY_SOCKET="$2" \
            setpriv --reuid="$user" --regid="$group" --init-groups --inh-caps=-all --bounding-set=-all \
            --no-new-privs -- "${exec_argv[@]}"
    ) > "$1" 2>&1 &
    server_pid=$!
}

wait_for() { # SECONDS DESCRIPTION COMMAND...
    local deadline=$((SECONDS + $1)) what=$2
    shift 2
    until "$@"; do
        [ $SECONDS -lt $deadline ] || fail "$what: not within the deadline"
        if [ -n "$server_pid" ] && ! kill -0 "$server_pid" 2>/dev/null; then fail "$what: the server exited"; fi
        sleep 0.2
    done
}

step "start ExecStart by hand: ${exec_argv[*]} as $user:$group in $workdir"
python3 scripts/sd-notify-listener.py "$work/notify.sock" "$work/notify.log" "$base/readyz" 120 &
listener_pid=$!
wait_for 10 "the notification socket" grep -qsx listening "$work/notify.log"
start_unit "$work/serve.log" "$work/notify.sock"
wait_for 60 "READY=1" grep -q 'READY=1' "$work/notify.log"
grep -q 'READY=1 .*readyz=200' "$work/notify.log" || fail "READY=1 came before /readyz answered 200: $(cat "$work/notify.log")"
wait_for 30 "/readyz 200" curl -sf -o /dev/null "$base/readyz"
[ "$(stat -c '%U %G %a' /var/lib/dropslot/dropslot.db)" = "dropslot dropslot 600" ] \
    || fail "the database file: $(stat -c '%U %G %a' /var/lib/dropslot/dropslot.db) (UMask=$umask_value, User=$user)"
[ "$(ps -o user= -p "$server_pid")" = "$user" ] || fail "the server does not run as $user"

step "a preview and an order with the demo token from the log"
token=$(grep -o 'ds_test_[A-Za-z0-9_-]*' "$work/serve.log" | head -n 1)
[ -n "$token" ] || fail "no demo token in the server's output"
body='{"pick_up_address":{"text":"100 King St W, Toronto, ON M5X 1A9"},
  "drop_offs":[{"address":{"text":"290 Bremner Blvd, Toronto, ON M5V 3L9",
    "person_name":"Jane Doe","person_phone":"+1 416 555 0100"},
  "parcels":[{"unit":"g","values":500},{"unit":"kg","values":3,"custom_code":"ABCDEFGH12345678"}]}]}'
code=$(curl -s -o "$work/preview.json" -w '%{http_code}' --max-time 30 "$api/requests/preview" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$body")
[ "$code" = 200 ] || fail "preview: $code $(cat "$work/preview.json")"
code=$(curl -s -o "$work/order.json" -w '%{http_code}' --max-time 30 "$api/requests/sync" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -H 'Idempotency-Key: deb-test-1' -d "$body")
[ "$code" = 201 ] || fail "order: $code $(cat "$work/order.json")"
tracking=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["object"]).count("tracking"))' "$work/order.json")
[ "$tracking" -gt 0 ] || fail "the order has no tracking code: $(cat "$work/order.json")"
echo "preview 200, order 201"

step "the courier's side of a new install: demo links, and a live order booked on the demo fleet"
live=$(grep -o 'ds_live_[A-Za-z0-9_-]*' "$work/serve.log" | head -n 1)
[ -n "$live" ] || fail "no live token in the server's output"
grep -q '/ops/sign-in#token=ds_operator_' "$work/serve.log" || fail "no operator sign-in link in the server's output"
[ "$(grep -c '/driver#token=ds_driver_' "$work/serve.log")" = 4 ] || fail "not four demo drivers' links"
live_body='{"pick_up_address":{"text":"100 King St W, Toronto, ON M5X 1A9"},
  "drop_offs":[{"address":{"text":"290 Bremner Blvd, Toronto, ON M5V 3L9",
    "person_name":"Jane Doe","person_phone":"+1 416 555 0100"},"parcels":[{"unit":"g","values":500}]}]}'
code=$(curl -s -o "$work/live.json" -w '%{http_code}' --max-time 30 "$api/requests/sync" \
    -H "Authorization: Bearer $live" -H 'Content-Type: application/json' -d "$live_body")
[ "$code" = 201 ] || fail "a live order on the demo fleet: $code $(cat "$work/live.json")"
echo "operator link, 4 driver links, live order 201"

step "SIGTERM: STOPPING=1, then exit 0"
kill -TERM "$server_pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=""
[ $rc -eq 0 ] || fail "serve exited $rc after SIGTERM"
wait "$listener_pid" || fail "no STOPPING=1: $(cat "$work/notify.log")"
listener_pid=""
grep -qx 'STOPPING=1' "$work/notify.log" || fail "no STOPPING=1"

step "a migration that fails halfway leaves the database as it was, and the start failed"
as_service() { setpriv --reuid="$user" --regid="$group" --init-groups -- "$@"; }
# The distribution's Python: one under root's home (pyenv) is out of the service user's reach.
service_python=/usr/bin/python3
[ -x "$service_python" ] || fail "$service_python is missing"
sql() { as_service "$service_python" -c 'import sqlite3,sys; c = sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.close()' /var/lib/dropslot/dropslot.db "$1"; }
digest() { as_service "$service_python" -c 'import hashlib,sqlite3,sys; c = sqlite3.connect(sys.argv[1]); print(hashlib.sha256("\n".join(c.iterdump()).encode()).hexdigest())' /var/lib/dropslot/dropslot.db; }
# The database as the release before migration 19 left it, except that an index holds the
# name 19's second statement creates: its CREATE TABLE succeeds, its CREATE INDEX fails.
sql "DROP INDEX stop_etas_by_route; DROP TABLE stop_etas; DELETE FROM schema_migrations WHERE version = 19;
     CREATE INDEX stop_etas_by_route ON clients (name);"
before=$(digest)
python3 scripts/sd-notify-listener.py "$work/notify-fail.sock" "$work/notify-fail.log" "$base/readyz" 60 &
listener_pid=$!
wait_for 10 "the notification socket" grep -qsx listening "$work/notify-fail.log"
start_unit "$work/serve-fail.log" "$work/notify-fail.sock"
deadline=$((SECONDS + 60))
while kill -0 "$server_pid" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "serve did not stop on the failed migration"
    sleep 0.2
done
rc=0
wait "$server_pid" || rc=$?
server_pid=""
kill "$listener_pid" 2>/dev/null || true
wait "$listener_pid" 2>/dev/null || true
listener_pid=""
cat "$work/serve-fail.log"
[ $rc -eq 1 ] || fail "serve exited $rc on a failed migration, not 1"
grep -q '^dropslot: .*stop_etas_by_route already exists' "$work/serve-fail.log" || fail "the reason is not on stderr"
! grep -q 'READY=1' "$work/notify-fail.log" || fail "READY=1 although the migration failed"
[ "$(digest)" = "$before" ] || fail "the failed migration changed the database"
# Not byte for byte: a free page the rolled-back CREATE TABLE had taken keeps what was
# written to it (SQLite does not journal free pages, whose content means nothing), and the
# header records the last library version that wrote the file. Every table and row, the
# schema and the migration records are what they were, and the file is sound.
[ "$(as_service "$service_python" -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA integrity_check").fetchone()[0])' /var/lib/dropslot/dropslot.db)" = ok ] \
    || fail "integrity_check after the failed migration"
# Back to the shipped schema, by the CLI as the service's user.
sql "DROP INDEX stop_etas_by_route;"
mapfile -d '' environment < <(unit_env)
(cd "$workdir" && env -i PATH=/usr/bin:/bin "${environment[@]}" setpriv --reuid="$user" --regid="$group" \
    --init-groups -- /usr/bin/dropslot migrate) 2>&1 | tee "$work/migrate.log"
grep -qx 'migrations applied: \[19\]' "$work/migrate.log" || fail "migrate after the repair"

step "dpkg -r keeps the database, the environment and the user"
dpkg -r dropslot
[ ! -e /usr/bin/dropslot ] || fail "/usr/bin/dropslot is still there"
[ -f /var/lib/dropslot/dropslot.db ] || fail "remove deleted the database"
[ -f /etc/dropslot/env ] && [ -f /etc/dropslot/dropslot.toml ] || fail "remove deleted /etc/dropslot"
getent passwd dropslot >/dev/null || fail "remove deleted the user"
[ "$(dpkg-query -W -f='${db:Status-Abbrev}' dropslot)" = "rc " ] || fail "status after remove: $(dpkg-query -W -f='${db:Status-Abbrev}' dropslot)"

step "dpkg --purge deletes them"
dpkg --purge dropslot
[ ! -e /var/lib/dropslot ] || fail "purge left /var/lib/dropslot"
[ ! -e /etc/dropslot ] || fail "purge left /etc/dropslot"
! getent passwd dropslot >/dev/null || fail "purge left the user"
! getent group dropslot >/dev/null || fail "purge left the group"
! dpkg-statoverride --list /var/lib/dropslot >/dev/null || fail "purge left the statoverride"
! dpkg-query -W dropslot >/dev/null 2>&1 || fail "dpkg still knows the package"
[ ! -e /etc/systemd/system/dropslot.service ] && [ ! -L /etc/systemd/system/dropslot.service ] || fail "purge left a mask"

step "ok (exposure $exposure)"
