#!/usr/bin/env bash
# The route solver's benchmark (issue 29), run by hand, not a test: `dropslot solve` on the
# VRPTW instances in a directory, optionally VROOM (PyPI `pyvroom`) side by side on the same
# instances with the same integral matrix (DIMACS: distances truncated to one decimal, in
# tenths), every answer judged by the independent checker in scripts/solve-bench.py, with the
# gap to the best-known cost of each instance's `.sol` file. Results: docs/performance.md.
#
#   scripts/solve-bench.sh DIR                 # every DIR/*.vrp at --time-limit 2
#   TIME_LIMIT=60 scripts/solve-bench.sh DIR 'C1_10_1 R1_10_1'   # a subset, by name
#   VROOM=1 scripts/solve-bench.sh DIR         # VROOM side by side (needs python3 -m venv)
#
# DIR holds VRPLIB `.vrp` files with their `.sol` files. This machine reaches only the
# crates.io, PyPI, Debian and npm registries, not GitHub, so the instances are fetched
# beforehand into DIR from PyVRP/Instances (MIT): Solomon's 56 and the 200-800 sets are in
# its history at commit dfb59ea, the 1,000-customer set at its head. For example, from a
# clone (or a mirror of it):
#   git -C Instances archive dfb59ea VRPTW/Solomon | tar -x -C /tmp && DIR=/tmp/VRPTW/Solomon
#   git -C Instances archive dfb59ea VRPTW | tar -x -C /tmp         # 1,000 customers in /tmp/VRPTW
#
# Env: TIME_LIMIT (dropslot's --time-limit, default 2), SEED (1), VROOM (1: run VROOM too;
# its exploration level VROOM_LEVEL, default 5, and VROOM_TIME_LIMIT seconds, default none),
# VENV (the virtualenv for pyvroom, default /tmp/dropslot-bench-venv), CARGO_TARGET_DIR.
set -euo pipefail

dir=${1:?usage: scripts/solve-bench.sh DIR [NAMES]}
names=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}

cargo build --release --locked -p dropslot --bin dropslot --manifest-path "$root/Cargo.toml" >&2
binary=$target/release/dropslot

files=()
if [[ -n $names ]]; then
  for n in $names; do files+=("$dir/$n.vrp"); done
else
  mapfile -t files < <(ls "$dir"/*.vrp | sort -V)
fi

python=python3
extra=()
if [[ ${VROOM:-0} == 1 ]]; then
  venv=${VENV:-/tmp/dropslot-bench-venv}
  [[ -x $venv/bin/python ]] || python3 -m venv "$venv"
  "$venv/bin/python" -c 'import vroom' 2>/dev/null || "$venv/bin/pip" install -q pyvroom
  python=$venv/bin/python
  extra=(--vroom --vroom-level "${VROOM_LEVEL:-5}" --vroom-time-limit "${VROOM_TIME_LIMIT:-0}")
fi

echo "# $(date -u +%FT%TZ) $(uname -srm), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)"
echo "# dropslot $(git -C "$root" rev-parse --short HEAD) --time-limit ${TIME_LIMIT:-2} --seed ${SEED:-1}"
exec "$python" "$root/scripts/solve-bench.py" "$binary" "${files[@]}" \
  --time-limit "${TIME_LIMIT:-2}" --seed "${SEED:-1}" "${extra[@]}"
