#!/usr/bin/env python3
"""The fleet-capacity benchmark of scripts/load.sh (issue 45).

  fleet-load.py seed BASE OPERATOR LIVE DATE
      FLEET_DRIVERS (320) drivers of depot YYZ1 (08:00-22:00, 300 parcels and 2,000 kg each),
      then FLEET_STOPS (1000) live drop-offs on DATE through BASE (a server with
      [capacity] mode = "fleet", so each takes its place in YYZ1's tentative plan): zones
      TOR-DT and TOR-W of YYZ1, scattered within 3 km of each zone's centre, slots in turn, 1 or
      2 parcels, from 8 threads. Prints one JSON line: stops booked, refused, seconds.
  fleet-load.py plan FLEET_BASE FLEET_OPERATOR SCRATCH_BASE SCRATCH_OPERATOR DATE
      The day plan of YYZ1 on DATE made by the fleet server (it starts from the tentative
      plan that sold the day) and by a limits-mode server whose database was seeded with the
      same drop-offs (from scratch), each with FLEET_PLAN_LIMIT (20) seconds, one after the
      other (each draft deleted after). Prints one JSON line: each plan's distance, routes,
      assigned and unassigned, and their ratio; exits 1 if the booked day's plan places fewer
      than were booked.
  fleet-load.py late BASE OPERATOR LIVE DATE NEXT
      Issue 46: publishes depot YYZ1's delivery plan of DATE (the seeded day: 1,000 stops,
      FLEET_PLAN_LIMIT s), then books FLEET_LATE (30) live orders one after another for DATE
      (each placed into a route not started yet before its 201) and as many for NEXT (a day
      without a published plan: the same order without a placement), each timed from the
      request to its answer. Prints one JSON line: median and p99 of each, how many of DATE's
      late orders a route took and how many went unassigned; exits 1 if one is neither.
"""


import importlib.util
import json
import math
import os
import random
import sys
import threading
import time

PICK_UP = "100 King St W, Toronto, ON M5X 1A9"
ZONES = {
    "TOR-DT": ("290 Bremner Blvd, Toronto, ON M5V 3L9", (43.6426, -79.3871), ["TOR-DT-PM", "TOR-DT-EV"]),
    "TOR-W": ("25 The West Mall, Etobicoke, ON M9C 1B8", (43.6435, -79.5650), ["TOR-W-PM"]),
}


# The HTTP helpers of the day-plan benchmark (one place for both scripts).
_spec = importlib.util.spec_from_file_location("plan_load", os.path.join(os.path.dirname(__file__), "plan-load.py"))
plan_load = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plan_load)
call, must = plan_load.call, plan_load.must


def seed(base, operator, live, date):
    drivers = int(os.environ.get("FLEET_DRIVERS", "320"))
    stops = int(os.environ.get("FLEET_STOPS", "1000"))
    rng = random.Random(int(os.environ.get("FLEET_SEED", "1")))
    for i in range(drivers):
        body = {
            "name": f"Fleet driver {i + 1}", "phone": "+1 416 555 0100", "depot": "YYZ1",
            "vehicle": {"name": f"Van {i + 1}", "capacity_parcels": 300, "capacity_kg": 2000},
            "shift": {"start": "08:00", "end": "22:00"},
            "weekdays": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
        }
        must(*call(base, "POST", "/ops/drivers", operator, body), 201, "POST /ops/drivers")
    jobs = []
    names = list(ZONES)
    for i in range(stops):
        zone = names[i % len(names)]
        text, (lat0, lng0), slots = ZONES[zone]
        r, a = 3000 * math.sqrt(rng.random()), 2 * math.pi * rng.random()
        lat = lat0 + r * math.cos(a) / 111_195
        lng = lng0 + r * math.sin(a) / (111_195 * math.cos(math.radians(lat0)))
        jobs.append({"pick_up_address": {"text": PICK_UP}, "drop_offs": [{
            "address": {"text": text, "lat": round(lat, 6), "lng": round(lng, 6),
                        "person_name": f"Receiver {i}", "person_phone": "+1 416 555 0100"},
            "scheduled_date": date, "time_slot_code": slots[(i // len(names)) % len(slots)],
            "parcels": [{"unit": "g", "values": 1000 + rng.randrange(4000)} for _ in range(1 + rng.randrange(2))]}]})
    lock, done, refused, failed = threading.Lock(), [0], [0], []

    def post(chunk):
        for body in chunk:
            status, answer = call(base, "POST", "/requests/sync", live, body)
            with lock:
                if status == 201:
                    done[0] += 1
                elif status == 422:
                    refused[0] += 1
                else:
                    failed.append((status, answer))

    began = time.monotonic()
    threads = [threading.Thread(target=post, args=(jobs[k::8],)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        sys.exit(f"fleet-load: {len(failed)} orders failed, first: {json.dumps(failed[0])[:500]}")
    print(json.dumps({"drivers": drivers, "booked": done[0], "refused_full": refused[0],
                      "seconds": round(time.monotonic() - began, 1)}), flush=True)


def plan(fleet, fleet_operator, scratch, scratch_operator, date):
    limit = int(os.environ.get("FLEET_PLAN_LIMIT", "20"))
    out = {}
    for name, base, operator in (("booked", fleet, fleet_operator), ("scratch", scratch, scratch_operator)):
        body = {"date": date, "depot": "YYZ1", "kind": "delivery", "time_limit_s": limit}
        t0 = time.monotonic()
        p = must(*call(base, "POST", "/ops/plans", operator, body, timeout=limit + 120), 201, f"POST /ops/plans ({name})")
        cost = p["cost"]
        out[name] = {"seconds": round(time.monotonic() - t0, 1), "distance_km": round(cost["distance_m"] / 1000, 2),
                     "duration_h": round(cost["duration_s"] / 3600, 2), "routes": cost["routes_used"],
                     "assigned": cost["shipments_assigned"], "unassigned": len(p["unassigned"])}
        status, answer = call(base, "DELETE", f"/ops/plans/{p['id']}", operator)
        if status != 200:
            sys.exit(f"fleet-load: DELETE /ops/plans/{p['id']} answered {status}: {json.dumps(answer)[:300]}")
    out["distance_ratio"] = round(out["booked"]["distance_km"] / max(out["scratch"]["distance_km"], 0.001), 4)
    print(json.dumps(out), flush=True)
    if out["booked"]["unassigned"]:
        sys.exit("fleet-load: the booked day's plan left shipments unassigned")


def late(base, operator, live, date, next_date):
    n = int(os.environ.get("FLEET_LATE", "30"))
    limit = int(os.environ.get("FLEET_PLAN_LIMIT", "20"))
    body = {"date": date, "depot": "YYZ1", "kind": "delivery", "time_limit_s": limit}
    p = must(*call(base, "POST", "/ops/plans", operator, body, timeout=limit + 120), 201, "POST /ops/plans (late)")
    must(*call(base, "POST", f"/ops/plans/{p['id']}/publish", operator, {}), 200, "publish (late)")
    rng = random.Random(7)
    text, (lat0, lng0), slots = ZONES["TOR-DT"]

    def book(day, i):
        r, a = 2500 * math.sqrt(rng.random()), 2 * math.pi * rng.random()
        lat = lat0 + r * math.cos(a) / 111_195
        lng = lng0 + r * math.sin(a) / (111_195 * math.cos(math.radians(lat0)))
        order = {"pick_up_address": {"text": PICK_UP}, "drop_offs": [{
            "address": {"text": text, "lat": round(lat, 6), "lng": round(lng, 6),
                        "person_name": f"Late {i}", "person_phone": "+1 416 555 0100"},
            "scheduled_date": day, "time_slot_code": slots[-1],
            "parcels": [{"unit": "g", "values": 1500}]}]}
        t0 = time.monotonic()
        answer = must(*call(base, "POST", "/requests/sync", live, order), 201, "POST /requests/sync (late)")
        return time.monotonic() - t0, answer["shipments"][0]["drop_off_shipment"]["unique_id"]

    def pct(values, q):
        values = sorted(values)
        return round(1000 * values[min(len(values) - 1, int(q * len(values)))], 1)

    late_orders = [book(date, i) for i in range(n)]
    plain = [book(next_date, n + i) for i in range(n)]
    plan_now = must(*call(base, "GET", f"/ops/plans/{p['id']}", operator), 200, "GET the published plan")
    routed = {u for r in plan_now["routes"] for s in r["stops"] for u in s["shipment_unique_ids"]}
    waiting = {u["shipment_unique_id"] for u in plan_now["unassigned"]}
    ids = [u for _, u in late_orders]
    out = {"late_orders": n, "stops_before": p["cost"]["shipments_assigned"],
           "late_ms": {"p50": pct([t for t, _ in late_orders], 0.5), "p99": pct([t for t, _ in late_orders], 0.99)},
           "unpublished_day_ms": {"p50": pct([t for t, _ in plain], 0.5), "p99": pct([t for t, _ in plain], 0.99)},
           "routed": sum(u in routed for u in ids), "unassigned": sum(u in waiting for u in ids)}
    print(json.dumps(out), flush=True)
    if out["routed"] + out["unassigned"] != n:
        sys.exit("fleet-load: a late order is neither in a route nor unassigned")


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "seed":
        seed(*sys.argv[2:])
    elif len(sys.argv) == 7 and sys.argv[1] == "plan":
        plan(*sys.argv[2:])
    elif len(sys.argv) == 7 and sys.argv[1] == "late":
        late(*sys.argv[2:])
    else:
        sys.exit(__doc__)
