#!/usr/bin/env python3
"""Failed deliveries through the driver API, with and without the automatic re-attempt
(issue 44's paired figure). The client half of scripts/failure-bench.sh, which starts a server
of its own (a fresh database, the clock pinned to Monday 2026-11-23 07:00 in Toronto) and
passes its base URL, an operator token, a live token and the server's PID.

  prepare BASE OPERATOR LIVE OPS STATE
      DRIVERS drivers of depot YYZ1 (vans of ORDERS/DRIVERS parcels, so each has a route), ORDERS live one-parcel orders in
      zone TOR-DT for today's 14:00-18:00 slot, each brought to the depot with the ops API; one
      delivery plan (5 s), published; every driver's route started (each parcel scanned).
      Writes STATE (JSON): each driver's token and shipments.
  fail BASE LIVE STATE POLICY PID
      Sets the client's attempts policy (`hold`: the failure alone; `reattempt`: the failure and
      the re-attempt booked in its transaction), then every driver fails each of its stops
      through POST /driver/shipments/{id}/transitions, one keep-alive connection a driver, all
      drivers at once. Checks each answer's status (`failed`, or `to_attempt` with a later
      date). Prints one line: failures/s, p50/p99 ms, the server's CPU µs a failure.
"""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
load = __import__("operator-load")
Conn, must, pct, parallel, server_cpu = load.Conn, load.must, load.pct, load.parallel, load.server_cpu

DATE = "2026-11-23"


def prepare(base, operator, live, ops, state_path):
    drivers_n, orders_n = int(os.environ.get("DRIVERS", "10")), int(os.environ.get("ORDERS", "400"))
    op = Conn(base, operator)
    drivers = []
    # Vans just large enough for the day, so every driver has a route (and a connection).
    van = -(-orders_n // drivers_n)
    for i in range(drivers_n):
        body = {
            "name": f"Driver {i}", "phone": "+1 416 555 0199", "depot": "YYZ1",
            "vehicle": {"name": "Van", "capacity_parcels": van, "capacity_kg": 4000},
            "shift": {"start": "08:00", "end": "23:00"}, "weekdays": ["mon"],
        }
        d = must(op.call("POST", "/ops/drivers", body), 201, "POST /ops/drivers")
        drivers.append({"id": d["id"], "token": d["sign_in_url"].split("#token=", 1)[1]})

    def order(k, i):
        c = conns[k]
        lat, lng = 43.640 + 0.0004 * (i % 40), -79.400 + 0.0005 * (i // 40)
        body = {
            "pick_up_address": {"text": "100 King St W, Toronto, ON M5X 1A9"},
            "drop_offs": [{
                "address": {"text": f"{100 + i} Front St W, Toronto, ON M5V 2T6", "lat": lat, "lng": lng,
                            "person_name": f"R {i}", "person_phone": "+1 416 555 0100"},
                "scheduled_date": DATE, "time_slot_code": "TOR-DT-PM",
                "parcels": [{"unit": "g", "values": 800}],
            }],
        }
        o = must(c.call("POST", "/requests/sync", body), 201, "POST /requests/sync")
        code = o["shipments"][0]["drop_off_shipment"]["unique_id"]
        for to in ("to_pick_up", "picked_up", "processing"):
            must(mover[k].call("POST", f"/ops/shipments/{code}/transitions", {"to": to}), 200, f"ops {to}")
        return code

    conns = [Conn(base, live) for _ in range(8)]
    mover = [Conn(base, ops) for _ in range(8)]
    parallel(list(range(orders_n)), order, threads=8)
    plan = must(op.call("POST", "/ops/plans", {"date": DATE, "depot": "YYZ1", "kind": "delivery", "time_limit_s": 5}),
                201, "POST /ops/plans")
    if plan["unassigned"]:
        sys.exit(f"failure-bench: {len(plan['unassigned'])} shipments unassigned")
    must(op.call("POST", f"/ops/plans/{plan['id']}/publish", {}), 200, "publish")
    for d in drivers:
        c = Conn(base, d["token"])
        day = must(c.call("GET", "/driver/route"), 200, "GET /driver/route")
        stops = [sh for r in day["routes"] for s in r["stops"] if s["kind"] == "drop_off" for sh in s["shipments"]]
        codes = [p["pick_up_code"] for sh in stops for p in sh["parcels"]]
        if stops:
            must(c.call("POST", "/driver/route/start", {"scanned": codes}, key="start"), 200, "start")
        d["shipments"] = [sh["unique_id"] for sh in stops]
    with open(state_path, "w") as f:
        json.dump({"drivers": drivers}, f)
    print(f"prepared: {orders_n} shipments over {sum(1 for d in drivers if d['shipments'])} routes")


def fail(base, live, state_path, policy, pid):
    state = json.load(open(state_path))
    body = {"max_attempts": 3, "after_failure": policy, "max_return_attempts": 2}
    must(Conn(base, live).call("PUT", "/attempts/settings", body), 200, "PUT /attempts/settings")
    expected = "failed" if policy == "hold" else "to_attempt"
    times, lock, errors = [], threading.Lock(), []

    def run(d):
        c = Conn(base, d["token"])
        mine = []
        for code in d["shipments"]:
            status, got, ms, _ = c.call("POST", f"/driver/shipments/{code}/transitions",
                                        {"to": "failed", "reason": "Nobody at home"}, key=f"fail-{code}")
            if status != 200 or got["object"]["status"] != expected:
                errors.append(f"{code}: {status} {json.dumps(got)[:300]}")
            elif expected == "to_attempt" and got["object"]["drop_off_shipment"]["scheduled_date"] <= DATE:
                errors.append(f"{code}: re-attempt not after {DATE}")
            mine.append(ms)
        with lock:
            times.extend(mine)

    threads = [threading.Thread(target=run, args=(d,)) for d in state["drivers"] if d["shipments"]]
    cpu0, t0 = server_cpu(pid), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - t0, server_cpu(pid) - cpu0
    if errors:
        sys.exit("failure-bench: " + "; ".join(errors[:5]))
    n = len(times)
    print(f"policy={policy} failures={n} per_s={n / wall:.1f} p50_ms={pct(times, 50):.1f} "
          f"p99_ms={pct(times, 99):.1f} cpu_us_per_failure={cpu / n * 1e6:.0f}")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "prepare":
        prepare(*args)
    elif cmd == "fail":
        fail(args[0], args[1], args[2], args[3], int(args[4]))
    else:
        sys.exit(__doc__)
