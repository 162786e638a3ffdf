#!/usr/bin/env bash
# Prints the path of the `dropslot` binary the test suite builds (`cargo test --workspace
# --no-run`, the debug profile), building it if needed: what scripts/deb-test.sh packages and
# scripts/container-test.sh wraps, so neither compiles the project a second time.
set -euo pipefail
cargo test --workspace --locked --no-run --message-format=json-render-diagnostics | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "dropslot" \
            and m["target"]["kind"] == ["bin"] and not m["profile"]["test"] and m.get("executable"):
        print(m["executable"])'
