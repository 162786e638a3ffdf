#!/usr/bin/env bash
# The container image and compose.yaml on this machine, end to end (docs/operations.md,
# "Containers"), with Debian's podman, runc and podman-compose only. No image registry is
# reachable here, so the images the Containerfile and compose.yaml name are made locally:
#   - docker.io/library/debian:bookworm-slim: `debootstrap --variant=minbase bookworm`, then
#     `podman import` under that name. The tree is cached as a tarball
#     ($DROPSLOT_CONTAINER_CACHE, default ~/.cache/dropslot/container, keyed by suite), and
#     the image stays in podman's storage: a rerun debootstraps nothing.
#   - PostgreSQL 15: Debian's postgresql-15 on that base (scripts/container/postgres.Containerfile),
#     passed to compose.yaml as DROPSLOT_POSTGRES_IMAGE; kept while its Containerfile is unchanged.
#   - dropslot: by default the Containerfile's `prebuilt` target around the (stripped) debug
#     binary the test run already built, as scripts/deb-test.sh uses it, so that CI compiles
#     nothing twice. `--full` builds the default target instead, the multi-stage build users
#     run: a release build inside the container, offline, of a copy of the tracked tree, with
#     the host's Rust toolchain on the same base (scripts/container/rust.Containerfile) and the
#     host's cargo registry mounted (47 minutes here under load; docs/operations.md).
# Then, for compose.yaml's two ways (dropslot on PostgreSQL 15, and dropslot-sqlite alone),
# each under a project of its own on free loopback ports: `podman-compose up -d SERVICE`;
# /readyz 200 on the published port; the process runs as 10001:10001; the health check
# passes; a webhook endpoint on this host, a preview (200), an order (201), and the signed
# `same.shipment.scheduled` delivery verified with the Standard Webhooks library; the database
# where it belongs (PostgreSQL's schema_migrations, or the SQLite file in the named volume);
# the documented backup; `podman stop` exits 0 (SIGTERM drains); `down` and `up` again keep
# the data (no new demo client, the order's Idempotency-Key replays it); `down -v` at the end.
#
# Containers run with runc and a containers.conf holding `default_ulimits = []` (written to the
# cache folder, CONTAINERS_CONF): crun refuses this machine's cgroup mode and podman's default
# rlimits. Where a container cannot start at all, the test prints why and skips (exit 0).
#
# Root (rootful podman; through sudo when not root). DROPSLOT_BIN=PATH puts that binary in the
# image instead of the one `cargo test --workspace --no-run` reports. With --full,
# DROPSLOT_TOOLCHAIN (default: rustup's for this tree) and DROPSLOT_CARGO_REGISTRY (default
# ~/.cargo/registry) name what the build uses.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { echo "== container-test: $*"; }
fail() { echo "container-test: FAILED: $*" >&2; exit 1; }
skip() {
    echo "container-test: SKIPPED: this machine cannot run containers: $*" >&2
    exit 0
}

full=0
case "${1:-}" in
    --full) full=1 ;;
    "") ;;
    *) fail "usage: $0 [--full]" ;;
esac

SUITE=bookworm
DEBIAN_IMAGE=docker.io/library/debian:bookworm-slim

# --- as the calling user: the binary the tests built (as scripts/deb-test.sh finds it).
if [ $full -eq 0 ] && [ -z "${DROPSLOT_BIN:-}" ]; then
    step "the binary the tests use (cargo test --workspace --no-run)"
    DROPSLOT_BIN=$(scripts/test-binary.sh)
fi
if [ $full -eq 0 ]; then
    [ -x "$DROPSLOT_BIN" ] || fail "no dropslot binary ($DROPSLOT_BIN)"
    DROPSLOT_BIN=$(realpath "$DROPSLOT_BIN")
fi
if [ $full -eq 1 ]; then
    # The host's toolchain, as rustup resolves it for this tree (rustup cannot fetch one in a
    # container here), and the host's cargo registry.
    DROPSLOT_TOOLCHAIN=${DROPSLOT_TOOLCHAIN:-$(dirname "$(dirname "$(rustup which rustc)")")}
    DROPSLOT_CARGO_REGISTRY=${DROPSLOT_CARGO_REGISTRY:-${CARGO_HOME:-$HOME/.cargo}/registry}
    [ -x "$DROPSLOT_TOOLCHAIN/bin/rustc" ] || fail "no Rust toolchain at $DROPSLOT_TOOLCHAIN"
    [ -d "$DROPSLOT_CARGO_REGISTRY" ] || fail "no cargo registry at $DROPSLOT_CARGO_REGISTRY"
fi

if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || fail "needs root (rootful podman, debootstrap)"
    exec sudo DROPSLOT_BIN="${DROPSLOT_BIN:-}" DROPSLOT_CONTAINER_CACHE="${DROPSLOT_CONTAINER_CACHE:-$HOME/.cache/dropslot/container}" \
        DROPSLOT_TOOLCHAIN="${DROPSLOT_TOOLCHAIN:-}" DROPSLOT_CARGO_REGISTRY="${DROPSLOT_CARGO_REGISTRY:-}" \
        PATH="$PATH" "$0" "$@"
fi

started=$SECONDS
CACHE=${DROPSLOT_CONTAINER_CACHE:-$HOME/.cache/dropslot/container}
mkdir -p "$CACHE"

# --- the tools, from Debian's packages.
need=()
for tool in podman:podman runc:runc podman-compose:podman-compose debootstrap:debootstrap strip:binutils; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || need+=("${tool#*:}")
done
# The compose network's names (dropslot reaches the database as `postgres`): podman's CNI
# backend resolves them only with the dnsname plugin, which apt-get installs with podman only
# as a recommendation (not installed here: --no-install-recommends).
[ -x /usr/lib/cni/dnsname ] || need+=(golang-github-containernetworking-plugin-dnsname)
python3 -c 'import standardwebhooks' 2>/dev/null || fail "python3 standardwebhooks is missing (scripts/test-deps.sh)"
if [ ${#need[@]} -gt 0 ]; then
    step "install ${need[*]} (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

cat > "$CACHE/containers.conf" <<'EOF'
# scripts/container-test.sh: crun refuses this machine's cgroup mode and podman's default
# rlimits; runc with no default ulimits runs.
[containers]
default_ulimits = []
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF=$CACHE/containers.conf
if ! probe=$(podman info 2>&1 >/dev/null); then
    skip "podman info: $probe"
fi

work=$(mktemp -d)
project=dropslot-ct-$$
image=localhost/dropslot-test:$$
hook_pid=""
projects=()
anonymous=()
compose() { # PROJECT ARGS...
    local p=$1
    shift
    podman-compose -p "$p" -f compose.yaml -f "$work/override.yaml" "$@"
}
cleanup() {
    local rc=$?
    set +e
    if [ $rc -ne 0 ]; then
        for p in "${projects[@]}"; do
            for c in $(podman ps -a --filter "label=io.podman.compose.project=$p" --format '{{.Names}}'); do
                echo "--- podman logs $c"
                podman logs --tail 30 "$c" 2>&1
            done
        done
        for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }; done
    fi
    for p in "${projects[@]}"; do
        for c in $(podman ps -a --filter "label=io.podman.compose.project=$p" --format '{{.Names}}'); do
            note_anonymous_volumes "$c"
        done
        compose "$p" down -v >/dev/null 2>&1
        podman network rm -f "${p}_default" >/dev/null 2>&1
    done
    [ ${#anonymous[@]} -gt 0 ] && podman volume rm -f "${anonymous[@]}" >/dev/null 2>&1
    [ -n "$hook_pid" ] && kill "$hook_pid" 2>/dev/null && wait "$hook_pid" 2>/dev/null
    podman rmi -f "$image" >/dev/null 2>&1
    rm -rf "$work"
    exit $rc
}
trap cleanup EXIT

# --- the Debian base: podman's storage, else the cached tree, else debootstrap.
if ! podman image exists "$DEBIAN_IMAGE"; then
    tarball=$CACHE/debian-$SUITE-minbase.tar
    if [ ! -s "$tarball" ]; then
        step "debootstrap --variant=minbase $SUITE (once; cached in $tarball)"
        root=$work/rootfs
        t0=$SECONDS
        debootstrap --variant=minbase "$SUITE" "$root" http://deb.debian.org/debian > "$work/debootstrap.log" 2>&1 \
            || fail "debootstrap: $(tail -n 3 "$work/debootstrap.log")"
        # What the official slim image also leaves out: the package lists and downloaded
        # packages, documentation and manual pages.
        rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
            "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
        tar --numeric-owner -C "$root" -cf "$tarball.tmp" .
        mv "$tarball.tmp" "$tarball"
        rm -rf "$root"
        echo "debootstrap: $((SECONDS - t0)) s"
    fi
    step "podman import $tarball as $DEBIAN_IMAGE"
    podman import --change 'CMD ["bash"]' --change "LABEL org.dropslot.debootstrap=$SUITE-minbase" \
        --quiet "$tarball" "$DEBIAN_IMAGE" >/dev/null
fi

step "can this machine run a container? (podman run --runtime runc)"
if ! probe=$(podman run --rm --network none "$DEBIAN_IMAGE" true 2>&1); then
    skip "podman run $DEBIAN_IMAGE true: $probe"
fi

# --- PostgreSQL 15 from Debian's packages, tagged by its Containerfile's content.
pg_tag=$(cat scripts/container/postgres.Containerfile scripts/container/postgres-entrypoint.sh | sha256sum | cut -c1-12)
pg_image=localhost/dropslot-test/postgres:15-$pg_tag
if ! podman image exists "$pg_image"; then
    step "build $pg_image (Debian's postgresql-15; once)"
    podman build --format docker -f scripts/container/postgres.Containerfile -t "$pg_image" scripts/container \
        > "$work/postgres-build.log" 2>&1 || fail "the PostgreSQL image: $(tail -n 5 "$work/postgres-build.log")"
fi

# --- the dropslot image.
if [ $full -eq 0 ]; then
    step "build $image: the Containerfile's prebuilt target around $DROPSLOT_BIN"
    ctx=$work/context
    mkdir -p "$ctx/packaging/container"
    cp packaging/container/healthcheck "$ctx/packaging/container/"
    strip --remove-section=.comment --remove-section=.note --strip-unneeded -o "$ctx/dropslot" "$DROPSLOT_BIN"
    podman build --format docker --target prebuilt -f Containerfile -t "$image" "$ctx" > "$work/build.log" 2>&1 \
        || fail "podman build --target prebuilt: $(tail -n 5 "$work/build.log")"
else
    toolchain=$DROPSLOT_TOOLCHAIN
    cargo_registry=$DROPSLOT_CARGO_REGISTRY
    rust_image=localhost/dropslot-build/rust:$("$toolchain/bin/rustc" --version | cut -d' ' -f2)
    if ! podman image exists "$rust_image"; then
        step "build $rust_image: gcc from Debian and the host's toolchain ($toolchain) on $DEBIAN_IMAGE"
        rctx=$work/rust-context
        mkdir -p "$rctx/toolchain"
        cp scripts/container/rust.Containerfile "$rctx/"
        for d in bin lib libexec; do cp -a "$toolchain/$d" "$rctx/toolchain/"; done
        podman build --format docker -f "$rctx/rust.Containerfile" -t "$rust_image" "$rctx" > "$work/rust-build.log" 2>&1 \
            || fail "the Rust image: $(tail -n 5 "$work/rust-build.log")"
        rm -rf "$rctx"
    fi
    # The tracked tree as the context (what a clone holds), and the host's cargo registry,
    # which holds every crate this platform's build needs, mounted as an overlay (writes to it
    # stay in the build): offline, nothing downloaded. (`cargo vendor` cannot work offline
    # here: it wants every platform's crates, and the cache holds only this one's.)
    step "build $image: the multi-stage build (release, offline, the host's cargo registry mounted)"
    ctx=$work/context
    mkdir -p "$ctx"
    git ls-files -z | xargs -0 cp --parents -t "$ctx"
    t0=$SECONDS
    podman build --format docker --build-arg "RUST_IMAGE=$rust_image" --build-arg CARGO_NET_OFFLINE=true \
        -v "$cargo_registry:/usr/local/cargo/registry:O" -f "$ctx/Containerfile" -t "$image" "$ctx" \
        > "$work/build.log" 2>&1 || fail "podman build: $(tail -n 15 "$work/build.log")"
    echo "the multi-stage build: $((SECONDS - t0)) s"
fi
[ "$(podman image inspect "$image" --format '{{.Config.User}}')" = 10001:10001 ] || fail "the image does not run as 10001:10001"
# (Each output is taken whole before grep reads it: with pipefail, `grep -q` leaving early would
# fail the pipeline with SIGPIPE.)
[[ $(podman image inspect "$image" --format '{{json .Config.Healthcheck}}') == *'/usr/libexec/dropslot/healthcheck'* ]] \
    || fail "the image has no health check"
[[ $(podman image inspect "$image" --format '{{json .Config.Volumes}}') == *'"/var/lib/dropslot"'* ]] \
    || fail "/var/lib/dropslot is not a volume"
podman run --rm --no-healthcheck --network none "$image" --version

# --- a webhook receiver on this host, reached from the containers as host.containers.internal.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
hook_port=$(free_port)
python3 - "$hook_port" "$work/hooks.jsonl" > "$work/receiver.log" 2>&1 <<'PY' &
import http.server, json, sys

port, out = int(sys.argv[1]), sys.argv[2]

class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        with open(out, "a") as f:
            f.write(json.dumps({"path": self.path, "headers": dict(self.headers.items()), "body": body}) + "\n")
        self.send_response(204)
        self.end_headers()

http.server.ThreadingHTTPServer(("0.0.0.0", port), Hook).serve_forever()
PY
hook_pid=$!

# Test-only settings over compose.yaml: the clock pinned (the demo area's slots are the same
# every run) and webhooks allowed to this host's private address.
cat > "$work/override.yaml" <<'EOF'
services:
  dropslot:
    environment:
      DROPSLOT_NOW: "2026-11-23T12:00:00Z"
      DROPSLOT_WEBHOOKS_ALLOW_PRIVATE: "1"
  dropslot-sqlite:
    environment:
      DROPSLOT_NOW: "2026-11-23T12:00:00Z"
      DROPSLOT_WEBHOOKS_ALLOW_PRIVATE: "1"
EOF
export DROPSLOT_IMAGE=$image DROPSLOT_POSTGRES_IMAGE=$pg_image

wait_for() { # SECONDS DESCRIPTION COMMAND...
    local deadline=$((SECONDS + $1)) what=$2
    shift 2
    until "$@"; do
        [ $SECONDS -lt $deadline ] || fail "$what: not within the deadline"
        sleep 0.2
    done
}

body='{"pick_up_address":{"text":"100 King St W, Toronto, ON M5X 1A9"},
  "drop_offs":[{"address":{"text":"290 Bremner Blvd, Toronto, ON M5V 3L9",
    "person_name":"Jane Doe","person_phone":"+1 416 555 0100"},
  "parcels":[{"unit":"g","values":500},{"unit":"kg","values":3,"custom_code":"ABCDEFGH12345678"}]}]}'

json_get() { python3 -c 'import json,sys; v = json.load(open(sys.argv[1])); [v := v[int(k) if isinstance(v, list) else k] for k in sys.argv[2:]]; print(v)' "$@"; }
# The drop-off's tracking code in an order answer: the last segment of its tracking_url.
tracking_of() {
    python3 - "$1" <<'PY'
import json, sys
def urls(v):
    if isinstance(v, dict):
        for k, x in v.items():
            if k == "tracking_url" and isinstance(x, str):
                yield x
            yield from urls(x)
    elif isinstance(v, list):
        for x in v:
            yield from urls(x)
print(*sorted({u.rsplit("/", 1)[1] for u in urls(json.load(open(sys.argv[1]))["object"])}))
PY
}
# The anonymous volumes of a container (the image's VOLUME where compose.yaml mounts nothing
# there), for the cleanup: podman-compose 1.0's `down -v` removes only named ones.
note_anonymous_volumes() { # CONTAINER
    local v
    for v in $(podman inspect "$1" --format '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}' 2>/dev/null); do
        [[ $v =~ ^[0-9a-f]{64}$ ]] && anonymous+=("$v")
    done
    return 0
}

# One of compose.yaml's ways, end to end.
run_stack() { # SERVICE
    local service=$1 p=$project-$1
    local ctr=${p}_${service}_1 port base api token code secret tracking
    projects+=("$p")
    port=$(free_port)
    base="http://127.0.0.1:$port"
    api="$base/scheduled-service/api/v1"
    export DROPSLOT_PUBLISH=127.0.0.1:$port DROPSLOT_BASE_URL=$base

    step "$service: podman-compose up -d $service (project $p, $base)"
    compose "$p" up -d "$service" > "$work/$service-up.log" 2>&1 || fail "podman-compose up: $(tail -n 5 "$work/$service-up.log")"
    wait_for 120 "$service: /readyz 200" curl -sf -o /dev/null --max-time 5 "$base/readyz"
    [ "$(podman exec "$ctr" id -u):$(podman exec "$ctr" id -g)" = 10001:10001 ] || fail "$service does not run as 10001:10001"
    [ "$(podman inspect "$ctr" --format '{{.Config.User}}')" = 10001:10001 ] || fail "$service: the container's user"
    podman healthcheck run "$ctr" > "$work/$service-health.log" 2>&1 || fail "$service: the health check failed: $(cat "$work/$service-health.log")"

    podman logs "$ctr" > "$work/$service-serve.log" 2>&1
    token=$(grep -o 'ds_test_[A-Za-z0-9_-]*' "$work/$service-serve.log" | head -n 1)
    [ -n "$token" ] || fail "$service: no demo token in the logs"

    step "$service: a webhook endpoint, a preview, an order, the signed delivery"
    code=$(curl -s -o "$work/$service-webhook.json" -w '%{http_code}' --max-time 30 "$api/webhooks" \
        -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
        -d "{\"url\":\"http://host.containers.internal:$hook_port/$service\",\"events\":[\"same.shipment.scheduled\"]}")
    [ "$code" = 201 ] || fail "$service: webhook endpoint: $code $(cat "$work/$service-webhook.json")"
    secret=$(json_get "$work/$service-webhook.json" object secret)
    code=$(curl -s -o "$work/$service-preview.json" -w '%{http_code}' --max-time 30 "$api/requests/preview" \
        -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$body")
    [ "$code" = 200 ] || fail "$service: preview: $code $(cat "$work/$service-preview.json")"
    code=$(curl -s -o "$work/$service-order.json" -w '%{http_code}' --max-time 30 "$api/requests/sync" \
        -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -H "Idempotency-Key: container-$service" -d "$body")
    [ "$code" = 201 ] || fail "$service: order: $code $(cat "$work/$service-order.json")"
    tracking=$(tracking_of "$work/$service-order.json")
    [ -n "$tracking" ] || fail "$service: the order has no tracking code"
    echo "preview 200, order 201 ($tracking)"

    hooks_for() { [ -f "$work/hooks.jsonl" ] && grep -q "\"path\": \"/$service\"" "$work/hooks.jsonl"; }
    wait_for 60 "$service: the webhook delivery" hooks_for
    grep "\"path\": \"/$service\"" "$work/hooks.jsonl" | head -n 1 > "$work/$service-hook.json"
    python3 - "$work/$service-hook.json" "$secret" "$tracking" <<'PY' || fail "$service: the webhook delivery"
import json, sys
from standardwebhooks.webhooks import Webhook
hook = json.load(open(sys.argv[1]))
headers = {k.lower(): v for k, v in hook["headers"].items()}
Webhook(sys.argv[2]).verify(hook["body"], headers)  # raises on a bad signature
event = json.loads(hook["body"])
assert event["event"] == "same.shipment.scheduled", event["event"]
assert sys.argv[3] in hook["body"], "the tracking number is not in the event"
print("webhook", event["event"], "verified")
PY

    if [ "$service" = dropslot ]; then
        step "$service: the data is in PostgreSQL; pg_dump"
        local migrations
        migrations=$(ls crates/dropslot-store/migrations/postgres/*.sql | wc -l)
        [ "$(podman exec "${p}_postgres_1" psql -U dropslot -d dropslot -tAc 'SELECT max(version) FROM schema_migrations')" = "$migrations" ] \
            || fail "PostgreSQL's schema_migrations does not reach $migrations"
        podman exec "${p}_postgres_1" pg_dump -U dropslot -Fc dropslot > "$work/dropslot.dump"
        podman exec -i "${p}_postgres_1" pg_restore -l < "$work/dropslot.dump" > "$work/dump-list.log"
        grep -q 'TABLE public schema_migrations' "$work/dump-list.log" \
            || fail "the dump has no schema_migrations"
    else
        step "$service: the SQLite file in the named volume; dropslot backup"
        [ "$(podman exec "$ctr" stat -c '%u %g' /var/lib/dropslot/dropslot.db)" = "10001 10001" ] || fail "the database's owner"
        podman volume inspect "${p}_dropslot" --format '{{.Mountpoint}}' > "$work/volume.log" || fail "no volume ${p}_dropslot"
        [ -f "$(cat "$work/volume.log")/dropslot.db" ] || fail "the database is not in the volume"
        podman exec "$ctr" dropslot backup /var/lib/dropslot/backup.db | tee "$work/backup.log"
        grep -q '^/var/lib/dropslot/backup.db: [0-9]* bytes, [0-9]* pages$' "$work/backup.log" || fail "dropslot backup"
        podman cp "$ctr:/var/lib/dropslot/backup.db" "$work/backup.db"
        [ "$(python3 -c 'import sqlite3,sys; c = sqlite3.connect(sys.argv[1]); print(c.execute("PRAGMA integrity_check").fetchone()[0], c.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] > 0)' "$work/backup.db")" = "ok True" ] \
            || fail "the backup is not a sound database"
        python3 -c 'import sqlite3,sys; sys.exit(sys.argv[2] not in "\n".join(sqlite3.connect(sys.argv[1]).iterdump()))' \
            "$work/backup.db" "$tracking" || fail "the backup does not hold the order"

        step "$service: an order after the backup; the documented restore; that order is gone"
        code=$(curl -s -o "$work/$service-order2.json" -w '%{http_code}' --max-time 30 "$api/requests/sync" \
            -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -H "Idempotency-Key: container-$service-2" \
            -d "${body/ABCDEFGH12345678/ABCDEFGH12345679}")
        [ "$code" = 201 ] || fail "$service: the second order: $code $(cat "$work/$service-order2.json")"
        local first second
        first=$(json_get "$work/$service-order.json" object unique_id)
        second=$(json_get "$work/$service-order2.json" object unique_id)
        compose "$p" stop "$service" > "$work/$service-stop.log" 2>&1 || fail "podman-compose stop"
        chmod 0644 "$work/backup.db"
        podman run --rm --no-healthcheck --network none -v "${p}_dropslot:/var/lib/dropslot" -v "$work/backup.db:/restore.db:ro" \
            --entrypoint bash "$image" -c 'rm -f dropslot.db-wal dropslot.db-shm && cp /restore.db dropslot.db' \
            || fail "the restore"
        compose "$p" start "$service" > "$work/$service-start.log" 2>&1 || fail "podman-compose start"
        wait_for 120 "$service: /readyz 200 after the restore" curl -sf -o /dev/null --max-time 5 "$base/readyz"
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$api/orders/$first" -H "Authorization: Bearer $token")" = 200 ] \
            || fail "$service: the order of the backup is missing after the restore"
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$api/orders/$second" -H "Authorization: Bearer $token")" = 404 ] \
            || fail "$service: the order made after the backup survived the restore"
    fi

    step "$service: podman stop (SIGTERM) exits 0; down and up keep the data"
    podman stop -t 30 "$ctr" >/dev/null 2>&1
    [ "$(podman inspect "$ctr" --format '{{.State.ExitCode}}')" = 0 ] || fail "$service exited $(podman inspect "$ctr" --format '{{.State.ExitCode}}') on SIGTERM"
    note_anonymous_volumes "$ctr"
    compose "$p" down > "$work/$service-down.log" 2>&1 || fail "podman-compose down"
    compose "$p" up -d "$service" > "$work/$service-up2.log" 2>&1 || fail "podman-compose up (again): $(tail -n 5 "$work/$service-up2.log")"
    wait_for 120 "$service: /readyz 200 after down and up" curl -sf -o /dev/null --max-time 5 "$base/readyz"
    podman logs "$ctr" > "$work/$service-serve2.log" 2>&1
    ! grep -q 'Demo client created' "$work/$service-serve2.log" || fail "$service: a new demo client: the database was not kept"
    code=$(curl -s -o "$work/$service-replay.json" -w '%{http_code}' --max-time 30 "$api/requests/sync" \
        -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -H "Idempotency-Key: container-$service" -d "$body")
    [ "$code" = 201 ] || fail "$service: the replayed order: $code $(cat "$work/$service-replay.json")"
    [ "$(tracking_of "$work/$service-replay.json")" = "$tracking" ] \
        || fail "$service: the replay is not the first order"
    note_anonymous_volumes "$ctr"
    compose "$p" down -v > "$work/$service-down.log" 2>&1 || fail "podman-compose down -v"
    echo "$service: ok"
}

run_stack dropslot
run_stack dropslot-sqlite

step "ok ($((SECONDS - started)) s)"
