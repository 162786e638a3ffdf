#!/usr/bin/env python3
"""The day-plan benchmark of scripts/load.sh (issue 30): a Toronto day of 2,000 drop-offs over
the demo area's 4 zones and 2 slots, 40 drivers (20 per depot), then one delivery plan per depot
through the API, timed from request to answer. Every plan is judged from its own answer: each
stop served in its window, each route within its driver's shift and capacity, every shipment in
exactly one route or unassigned. Prints one JSON line per plan and a summary line; exits 1 when a
rule is broken or a request fails.

Usage: plan-load.py BASE_URL OPERATOR_TOKEN LIVE_TOKEN [DATE]
Env: PLAN_ORDERS (2000), PLAN_DRIVERS (40), PLAN_TIME_LIMIT (seconds the solver may search, 20),
     PLAN_SEED (1), PLAN_PARALLEL (1: both depots' plans at once; default 0, one after the other),
     PLAN_EMAIL (a domain: every drop-off gets a recipient e-mail of its own there, r<N>@DOMAIN, so
     that recipient notifications go out; scripts/operator-load.py uses it).
"""

import json
import math
import os
import random
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime

API = "/scheduled-service/api/v1"

# Zone → (a drop-off address of the zone, its slots). W and N have one slot, DT and E two.
ZONES = {
    "TOR-DT": ("290 Bremner Blvd, Toronto, ON M5V 3L9", ["TOR-DT-PM", "TOR-DT-EV"]),
    "TOR-E": ("300 Borough Dr, Scarborough, ON M1P 4P5", ["TOR-E-PM", "TOR-E-EV"]),
    "TOR-W": ("25 The West Mall, Etobicoke, ON M9C 1B8", ["TOR-W-PM"]),
    "TOR-N": ("5100 Yonge St, North York, ON M2N 5V7", ["TOR-N-PM"]),
}
DEPOTS = {"YYZ1": ["TOR-DT", "TOR-W"], "YYZ2": ["TOR-E", "TOR-N"]}
PICK_UP = "100 King St W, Toronto, ON M5X 1A9"


def call(base, method, path, token, body=None, timeout=120):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + API + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + token)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def must(status, body, expected, what):
    if status != expected:
        sys.exit(f"plan-load: {what} answered {status}: {json.dumps(body)[:500]}")
    return body["object"]


def ts(text):
    return datetime.fromisoformat(text).timestamp()


def judge(plan, shipments, drivers):
    """Every broken rule of the plan, in words (an empty list when it keeps them all)."""
    broken, seen = [], []
    for route in plan["routes"]:
        d = drivers[route["driver_id"]]
        start, end = ts(route["start"]), ts(route["end"])
        if start < d["shift_start"] or end > d["shift_end"]:
            broken.append(f"route {route['id']} runs outside its shift")
        load = 0
        for stop in route["stops"]:
            if stop["kind"] == "depot":
                continue
            eta = ts(stop["eta"])
            if not ts(stop["window"]["from"]) <= eta <= ts(stop["window"]["to"]):
                broken.append(f"stop {stop['seq']} of {route['id']} is served outside its window")
            load += stop["parcels"]
            seen.extend(stop["shipment_unique_ids"])
        if load > d["capacity"]:
            broken.append(f"route {route['id']} carries {load} parcels")
    seen.extend(u["shipment_unique_id"] for u in plan["unassigned"])
    if sorted(seen) != sorted(shipments):
        broken.append("the shipments are not each in exactly one route or unassigned")
    return broken


def main():
    base, operator, live = sys.argv[1], sys.argv[2], sys.argv[3]
    date = sys.argv[4] if len(sys.argv) > 4 else "2026-11-23"
    orders = int(os.environ.get("PLAN_ORDERS", "2000"))
    n_drivers = int(os.environ.get("PLAN_DRIVERS", "40"))
    limit = int(os.environ.get("PLAN_TIME_LIMIT", "20"))
    rng = random.Random(int(os.environ.get("PLAN_SEED", "1")))
    domain = os.environ.get("PLAN_EMAIL", "")

    def email(address, name):
        """The address with a recipient e-mail of its own when PLAN_EMAIL is set."""
        if domain:
            address["person_email"] = f"{name}@{domain}"
        return address

    # Drivers: half per depot, 12:00 to 22:00, 150 parcels and 1,000 kg each.
    drivers = {}
    for i in range(n_drivers):
        depot = "YYZ1" if i % 2 == 0 else "YYZ2"
        body = {
            "name": f"Driver {i + 1}", "phone": "+1 416 555 0100", "depot": depot,
            "vehicle": {"name": f"Van {i + 1}", "capacity_parcels": 150, "capacity_kg": 1000},
            "shift": {"start": "12:00", "end": "22:00"},
            "weekdays": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        }
        d = must(*call(base, "POST", "/ops/drivers", operator, body), 201, "POST /ops/drivers")
        day = datetime.fromisoformat(f"{date}T12:00:00-05:00").timestamp()
        drivers[d["id"]] = {"capacity": 150, "shift_start": day, "shift_end": day + 10 * 3600}

    # Each zone's centre: where its address is placed, from a first order's answer.
    centres = {}
    for zone, (text, slots) in ZONES.items():
        body = {"pick_up_address": {"text": PICK_UP}, "drop_offs": [{
            "address": email({"text": text, "person_name": "Probe", "person_phone": "+1 416 555 0100"},
                             f"probe-{zone.lower()}"),
            "scheduled_date": date, "time_slot_code": slots[0],
            "parcels": [{"unit": "g", "values": 1000}]}]}
        o = must(*call(base, "POST", "/requests/sync", live, body), 201, f"POST /requests/sync ({zone})")
        tracking = o["shipments"][0]["drop_off_shipment"]["unique_id"]
        a = must(*call(base, "GET", f"/shipments/{tracking}", live), 200, "GET /shipments/…")["drop_off_address"]
        centres[zone] = (a["lat"], a["lng"], tracking)

    # The day's drop-offs: a quarter per zone, scattered within 3 km of its centre, slots in
    # turn, 1 or 2 parcels. Posted from 8 threads.
    by_depot = {d: [centres[z][2] for z in zones] for d, zones in DEPOTS.items()}
    jobs = []
    zones = list(ZONES)
    for i in range(orders - len(zones)):
        zone = zones[i % 4]
        lat0, lng0, _ = centres[zone]
        r, a = 3000 * math.sqrt(rng.random()), 2 * math.pi * rng.random()
        lat = lat0 + r * math.cos(a) / 111_195
        lng = lng0 + r * math.sin(a) / (111_195 * math.cos(math.radians(lat0)))
        slots = ZONES[zone][1]
        body = {"pick_up_address": {"text": PICK_UP}, "drop_offs": [{
            "address": email({"text": ZONES[zone][0], "lat": round(lat, 6), "lng": round(lng, 6),
                              "person_name": f"Receiver {i}", "person_phone": "+1 416 555 0100"}, f"r{i}"),
            "scheduled_date": date, "time_slot_code": slots[(i // 4) % len(slots)],
            "parcels": [{"unit": "g", "values": 1000 + rng.randrange(4000)} for _ in range(1 + rng.randrange(2))]}]}
        jobs.append((zone, body))
    lock, failures = threading.Lock(), []
    zone_depot = {z: d for d, zs in DEPOTS.items() for z in zs}

    def post(chunk):
        for zone, body in chunk:
            status, answer = call(base, "POST", "/requests/sync", live, body)
            with lock:
                if status != 201:
                    failures.append((status, answer))
                else:
                    by_depot[zone_depot[zone]].append(answer["object"]["shipments"][0]["drop_off_shipment"]["unique_id"])

    began = time.monotonic()
    threads = [threading.Thread(target=post, args=(jobs[k::8],)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        sys.exit(f"plan-load: {len(failures)} orders failed, first: {json.dumps(failures[0])[:500]}")
    print(json.dumps({"orders": orders, "drivers": n_drivers, "seconds_to_order": round(time.monotonic() - began, 1)}),
          flush=True)

    results, bad = {}, []

    def plan(depot):
        t0 = time.monotonic()
        body = {"date": date, "depot": depot, "kind": "delivery", "time_limit_s": limit}
        status, answer = call(base, "POST", "/ops/plans", operator, body, timeout=limit + 60)
        seconds = time.monotonic() - t0
        p = must(status, answer, 201, f"POST /ops/plans ({depot})")
        broken = judge(p, by_depot[depot], drivers)
        cost = p["cost"]
        line = {
            "depot": depot, "seconds": round(seconds, 2), "time_limit_s": limit,
            "shipments": len(by_depot[depot]), "assigned": cost["shipments_assigned"],
            "assigned_pct": round(100 * cost["shipments_assigned"] / max(1, len(by_depot[depot])), 2),
            "routes_used": cost["routes_used"], "stops": cost["stops"],
            "distance_km": round(cost["distance_m"] / 1000, 1), "duration_h": round(cost["duration_s"] / 3600, 1),
            "roads": cost["roads"], "broken": broken[:5],
        }
        with lock:
            results[depot] = line
            bad.extend(broken)
        print(json.dumps(line), flush=True)

    if os.environ.get("PLAN_PARALLEL") == "1":
        ts_ = [threading.Thread(target=plan, args=(d,)) for d in DEPOTS]
        for t in ts_:
            t.start()
        for t in ts_:
            t.join()
    else:
        for d in DEPOTS:
            plan(d)
    total = sum(r["shipments"] for r in results.values())
    assigned = sum(r["assigned"] for r in results.values())
    summary = {"summary": True, "shipments": total, "assigned": assigned,
               "assigned_pct": round(100 * assigned / max(1, total), 2),
               "slowest_s": max(r["seconds"] for r in results.values()), "rules_broken": len(bad)}
    print(json.dumps(summary), flush=True)
    if bad:
        sys.exit(f"plan-load: {len(bad)} rules broken, first: {bad[0]}")


if __name__ == "__main__":
    main()
