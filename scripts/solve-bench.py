#!/usr/bin/env python3
"""The VRPTW benchmark behind scripts/solve-bench.sh: runs `dropslot solve` (and, with
--vroom, VROOM through the `pyvroom` package) on VRPLIB instances, judges every answer with
the checker below (written apart from the Rust code: the solvers' own word is never taken),
and prints one row per instance plus averages.

Costs follow the DIMACS convention: travel time = distance = Euclidean distance truncated to
one decimal. Both solvers get that same matrix, in integer tenths."""

import argparse
import datetime
import json
import math
import pathlib
import subprocess
import sys
import time


def read_vrplib(path):
    """Nodes by VRPLIB number: x, y, demand, ready, due, service; plus the header."""
    header, section, rows = {}, None, {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line == "EOF":
            continue
        if line.endswith("_SECTION"):
            section, rows[line] = line, rows.get(line, {})
            continue
        if ":" in line and section is None:
            key, value = line.split(":", 1)
            header[key.strip()] = value.strip()
            continue
        tokens = line.split()
        if section == "DEPOT_SECTION":
            if tokens[0] != "-1":
                header["DEPOT"] = int(tokens[0])
            continue
        rows[section][int(tokens[0])] = [float(t) for t in tokens[1:]]
    n = int(header["DIMENSION"])
    service = rows.get("SERVICE_TIME_SECTION")
    nodes = {}
    for i in range(1, n + 1):
        x, y = rows["NODE_COORD_SECTION"][i]
        ready, due = rows["TIME_WINDOW_SECTION"][i]
        s = service[i][0] if service else float(header.get("SERVICE_TIME", 0))
        nodes[i] = dict(x=x, y=y, demand=int(rows["DEMAND_SECTION"][i][0]), ready=round(ready * 10),
                        due=round(due * 10), service=round(s * 10))
    depot = header.get("DEPOT", 1)
    nodes[depot]["service"] = 0
    return dict(nodes=nodes, depot=depot, vehicles=int(header.get("VEHICLES", n - 1)),
                capacity=int(header["CAPACITY"]))


def tenths(a, b):
    return math.floor(math.hypot(a["x"] - b["x"], a["y"] - b["y"]) * 10)


def check(inst, routes):
    """(feasible, cost in tenths, first problem): windows with waiting, capacity, depot hours,
    each customer once, at most the vehicles."""
    nodes, depot = inst["nodes"], inst["depot"]
    seen, cost, problems = {}, 0, []
    routes = [r for r in routes if r]
    if len(routes) > inst["vehicles"]:
        problems.append(f"{len(routes)} routes > {inst['vehicles']} vehicles")
    for route in routes:
        at, time_, load = depot, nodes[depot]["ready"], 0
        for c in route:
            if c not in nodes or c == depot:
                problems.append(f"{c} is not a customer")
                continue
            seen[c] = seen.get(c, 0) + 1
            leg = tenths(nodes[at], nodes[c])
            cost += leg
            time_ = max(time_ + nodes[at]["service"] + leg, nodes[c]["ready"])
            if time_ > nodes[c]["due"]:
                problems.append(f"late at {c}")
            load += nodes[c]["demand"]
            at = c
        leg = tenths(nodes[at], nodes[depot])
        cost += leg
        if time_ + nodes[at]["service"] + leg > nodes[depot]["due"]:
            problems.append("back after the depot closes")
        if load > inst["capacity"]:
            problems.append(f"load {load} > {inst['capacity']}")
    for c in nodes:
        if c != depot and seen.get(c, 0) != 1:
            problems.append(f"customer {c} visited {seen.get(c, 0)} times")
    return not problems, cost, (problems[0] if problems else "")


def best_known(path):
    sol = path.with_suffix(".sol")
    if not sol.exists():
        return None
    for line in sol.read_text().splitlines():
        if line.startswith("Cost"):
            return round(float(line.split()[1]) * 10)
    return None


def run_dropslot(binary, path, limit, seed):
    began = time.monotonic()
    out = subprocess.run([binary, "solve", str(path), "--time-limit", str(limit), "--seed", str(seed)],
                         capture_output=True, text=True)
    wall = time.monotonic() - began
    if out.returncode != 0:
        return None, wall, out.stderr.strip()
    return json.loads(out.stdout)["routes"], wall, ""


def run_vroom(inst, limit, level):
    import vroom  # pip install pyvroom

    ids = sorted(inst["nodes"])
    index = {node: k for k, node in enumerate(ids)}
    nodes, depot = inst["nodes"], inst["depot"]
    matrix = [[tenths(nodes[a], nodes[b]) for b in ids] for a in ids]
    problem = vroom.Input()
    problem.set_durations_matrix(profile="car", matrix_input=matrix)
    window = vroom.TimeWindow(nodes[depot]["ready"], nodes[depot]["due"])
    for v in range(inst["vehicles"]):
        problem.add_vehicle(vroom.Vehicle(id=v + 1, start=index[depot], end=index[depot],
                                          capacity=[inst["capacity"]], time_window=window))
    for c in ids:
        if c == depot:
            continue
        n = nodes[c]
        problem.add_job(vroom.Job(id=c, location=index[c], default_service=n["service"], delivery=[n["demand"]],
                                  time_windows=[vroom.TimeWindow(n["ready"], n["due"])]))
    began = time.monotonic()
    kwargs = dict(exploration_level=level, nb_threads=2)
    if limit:
        kwargs["timeout"] = datetime.timedelta(seconds=limit)  # pyvroom 1.15 takes a timedelta (milliseconds fail its assert)
    solution = problem.solve(**kwargs)
    wall = time.monotonic() - began
    routes = []
    for _, steps in solution.routes.groupby("vehicle_id"):
        routes.append([int(j) for j in steps[steps["type"] == "job"]["id"]])
    return routes, wall


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("binary")
    p.add_argument("instances", nargs="+", type=pathlib.Path)
    p.add_argument("--time-limit", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--vroom", action="store_true", help="run VROOM (pyvroom) side by side")
    p.add_argument("--vroom-level", type=int, default=5, help="VROOM's exploration level (1-5)")
    p.add_argument("--vroom-time-limit", type=float, default=0, help="VROOM timeout in seconds (0: none)")
    args = p.parse_args()

    head = f"{'instance':<10} {'bks':>8} | {'ok':>2} {'dropslot':>9} {'gap%':>6} {'s':>5}"
    if args.vroom:
        head += f" | {'ok':>2} {'vroom':>9} {'gap%':>6} {'s':>5}"
    print(head)
    totals = {"dropslot": [], "vroom": []}
    for path in args.instances:
        inst = read_vrplib(path)
        bks = best_known(path)
        row = f"{path.stem:<10} {bks / 10 if bks else float('nan'):>8.1f}"
        runs = [("dropslot", lambda: run_dropslot(args.binary, path, args.time_limit, args.seed))]
        if args.vroom:
            runs.append(("vroom", lambda: run_vroom(inst, args.vroom_time_limit, args.vroom_level) + ("",)))
        for name, run in runs:
            routes, wall, why = run()
            if routes is None:
                row += f" | {'no':>2} {'-':>9} {'-':>6} {wall:>5.2f}"
                totals[name].append((False, None, wall))
                print(f"  {name}: {why}", file=sys.stderr)
                continue
            ok, cost, problem = check(inst, routes)
            gap = 100.0 * (cost - bks) / bks if bks else float("nan")
            row += f" | {'ok' if ok else 'NO':>2} {cost / 10:>9.1f} {gap:>6.2f} {wall:>5.2f}"
            totals[name].append((ok, gap if ok else None, wall))
            if not ok:
                print(f"  {name} on {path.stem}: {problem}", file=sys.stderr)
        print(row, flush=True)
    for name, rows in totals.items():
        if not rows:
            continue
        feasible = sum(1 for ok, _, _ in rows if ok)
        gaps = [g for ok, g, _ in rows if ok and g is not None]
        secs = [s for _, _, s in rows]
        mean_gap = sum(gaps) / len(gaps) if gaps else float("nan")
        print(f"{name}: {feasible}/{len(rows)} feasible, average gap {mean_gap:.2f} %, "
              f"average {sum(secs) / len(secs):.2f} s an instance")


if __name__ == "__main__":
    main()
