#!/usr/bin/env python3
"""The vrp-core evaluation of issue 29: reinterpretcat/vrp's solver (the PyPI `vrp-cli` wheel,
the same Rust crates compiled as a Python module) on VRPLIB instances with the DIMACS integral
matrix (tenths), judged by the checker of scripts/solve-bench.py. Run by hand:

    python3 -m venv /tmp/v && /tmp/v/bin/pip install vrp-cli
    /tmp/v/bin/python scripts/vrp-core-bench.py --time-limit 2 DIR/C101.vrp DIR/R101.vrp

Objectives: unassigned jobs first, then cost = distance (the fleet-size objective that
vrp-cli puts first by default is left out, so both solvers minimise the same thing)."""

import argparse
import importlib.util
import json
import pathlib
import time

import vrp_cli

here = pathlib.Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("bench", here / "solve-bench.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def stamp(t):
    # Tenths are passed as seconds; pragmatic times are RFC 3339 instants.
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def problem(inst):
    ids = sorted(inst["nodes"])
    index = {node: k for k, node in enumerate(ids)}
    nodes, depot = inst["nodes"], inst["depot"]
    jobs = []
    for c in ids:
        if c == depot:
            continue
        n = nodes[c]
        place = {"location": {"index": index[c]}, "duration": n["service"], "times": [[stamp(n["ready"]), stamp(n["due"])]]}
        jobs.append({"id": str(c), "deliveries": [{"places": [place], "demand": [n["demand"]]}]})
    shift = {
        "start": {"earliest": stamp(nodes[depot]["ready"]), "location": {"index": index[depot]}},
        "end": {"latest": stamp(nodes[depot]["due"]), "location": {"index": index[depot]}},
    }
    vehicle = {
        "typeId": "v", "vehicleIds": [f"v{k}" for k in range(inst["vehicles"])], "profile": {"matrix": "car"},
        "costs": {"fixed": 0, "distance": 1, "time": 0}, "shifts": [shift], "capacity": [inst["capacity"]],
    }
    plan = {"jobs": jobs}
    fleet = {"vehicles": [vehicle], "profiles": [{"name": "car"}]}
    objectives = [[{"type": "minimize-unassigned"}], [{"type": "minimize-cost"}]]
    matrix = [bench.tenths(nodes[a], nodes[b]) for a in ids for b in ids]
    return ({"plan": plan, "fleet": fleet, "objectives": objectives},
            {"profile": "car", "travelTimes": matrix, "distances": matrix})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("instances", nargs="+", type=pathlib.Path)
    p.add_argument("--time-limit", type=float, default=2.0)
    args = p.parse_args()
    config = {"termination": {"maxTime": max(1, round(args.time_limit))}, "telemetry": {"progress": {"enabled": False}}}
    rows = []
    for path in args.instances:
        inst = bench.read_vrplib(path)
        bks = bench.best_known(path)
        prob, matrix = problem(inst)
        began = time.monotonic()
        answer = json.loads(vrp_cli.solve_pragmatic(json.dumps(prob), [json.dumps(matrix)], json.dumps(config)))
        wall = time.monotonic() - began
        routes = [[int(a["jobId"]) for s in tour["stops"] for a in s["activities"] if a["type"] == "delivery"]
                  for tour in answer["tours"]]
        ok, cost, why = bench.check(inst, routes)
        gap = 100.0 * (cost - bks) / bks
        rows.append((ok, gap, wall))
        print(f"{path.stem:<10} {bks / 10:>8.1f} | {'ok' if ok else 'NO':>2} {cost / 10:>9.1f} {gap:>6.2f} {wall:>5.2f} {why}",
              flush=True)
    good = [g for ok, g, _ in rows if ok]
    print(f"vrp-core: {len(good)}/{len(rows)} feasible, average gap {sum(good) / max(len(good), 1):.2f} %, "
          f"average {sum(w for *_, w in rows) / len(rows):.2f} s an instance")


if __name__ == "__main__":
    main()
