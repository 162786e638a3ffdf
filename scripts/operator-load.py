#!/usr/bin/env python3
"""The operator side under load (issue 33 item 5), the client half of `ONLY=operator
scripts/load.sh`: day plans solved while the API is measured, 200 driver apps running a
published day beside it, and the recipient e-mails their moves cause. Standard library only.
load.sh starts the server (its own database, SMTP pointed at crates/dropslot/examples/
smtp_sink.rs), runs scripts/plan-load.py for the day (2,000 drop-offs with recipient e-mails),
measures preview and sync with wrk, and calls the subcommands below in between:

  solve BASE OPERATOR DATE LIMIT
      Deletes the date's draft plans, then asks for one delivery plan per depot at once
      (time_limit_s LIMIT), as load.sh's wrk runs start: the solver busy under the API load.
      One JSON line per depot, then {"solve": …, "started", "first_answer", "last_answer"}
      (Unix seconds): load.sh checks the solvers were still at work when its run ended.
  prepare BASE OPERATOR OPS LIVE DATE STATE
      The driver day: OPERATOR_DRIVERS (200) new drivers, half per depot, their vans sized so
      the day needs every one (OPERATOR_VAN parcels each; default the day's parcels over the
      drivers, rounded up); the date's drafts deleted; one plan per depot over those drivers
      (OPERATOR_PLAN_LIMIT s, default 10), published; every planned shipment brought to the
      depot with the ops API (to_pick_up, picked_up, processing). Writes STATE (JSON): the
      drivers with their tokens, their routes, each shipment's recipient e-mail (the planned
      ones' from the ops moves' answers, the unassigned ones' read with the LIVE token).
  drive BASE STATE SINK_LOG SECONDS OUT
      The day played by every driver's app at once, one thread (one keep-alive connection) an
      app, one action at a time as the app sends them: sign in (GET /driver/route), scan each
      parcel (POST /driver/scans), start the route (POST /driver/route/start: its drop-offs go
      in_transit, "out for delivery" e-mails), then each stop at its planned ETA: delivered
      (a signature PNG uploaded to POST /driver/proofs, then the transition with the receiver's
      name and the signature) or, for OPERATOR_FAIL_PCT % (10) of the shipments, failed with a
      reason; and a position (POST /driver/positions) every OPERATOR_POSITION_EVERY s (30) of
      real time from the route's start to the drive's end. TIME IS COMPRESSED for the stops:
      the day's departures and ETAs are mapped onto SECONDS of real time (or onto
      OPERATOR_DAY_S s, when set: what falls after the drive's end is left undone, a route
      departing then is not started); positions are not (every 30 s real, ~200/30 = 6.7/s),
      their `at` 30 s apart on the phone's clock. With OPERATOR_SERVER_PID, the server's CPU
      per driver call (the e-mails it sends meanwhile included). Then
      waits (60 s at most) for every e-mail the moves owe to reach the sink. Prints the driver
      calls' p50/p99 by kind, delivered events/s against e-mails/s, and the lag from a move to
      its e-mail at the sink; writes OUT (JSON). Exits 1 on any non-2xx answer.
  verify BASE LIVE STATE SINK_LOG DRIVE_OUT
      Every shipment of the day: its e-mail rows (GET /shipments/{id}/notifications) all
      `sent`, one per trigger, the ones its moves owe present, and the sink holding exactly as
      many e-mails for its recipient, no Message-ID twice. Exits 1 on a lost, unsent or
      duplicated e-mail.
  report BASE OPERATOR DATE
      After the drive: the day's report of each depot (GET /ops/reports/day, CONTRACT §17),
      as JSON and as CSV, 5 times each, one request at a time. One JSON line a depot (its
      shipments, served, on-time and ETA-kept shares, the JSON p50/max and CSV p50 in ms, the
      CSV's size), then a line to read. Exits 1 on a non-200.
"""

import hashlib
import http.client
import json
import math
import os
import struct
import sys
import threading
import time
import urllib.parse
import zlib
from datetime import datetime, timedelta, timezone

API = "/scheduled-service/api/v1"
DEPOTS = ["YYZ1", "YYZ2"]


class Conn:
    """One keep-alive HTTP connection (one app, or one worker): requests timed from the first
    byte sent to the last byte read, reconnecting once when the server closed an idle one."""

    def __init__(self, base, token, timeout=120):
        u = urllib.parse.urlsplit(base)
        self.host, self.port, self.token, self.timeout = u.hostname, u.port, token, timeout
        self.c = None
        self.reconnects = 0

    def call(self, method, path, body=None, key=None, ctype="application/json"):
        """(status, parsed body or None, milliseconds, request start as Unix seconds)."""
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        headers = {"Authorization": "Bearer " + self.token}
        if data is not None:
            headers["Content-Type"] = ctype
        if key is not None:
            headers["Idempotency-Key"] = key
        began, t0 = time.time(), time.perf_counter()
        for attempt in (0, 1):
            if self.c is None:
                self.c = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.c.request(method, API + path, body=data, headers=headers)
                r = self.c.getresponse()
                raw = r.read()
                break
            except (http.client.HTTPException, OSError):
                self.c.close()
                self.c = None
                # A connection the server closed while idle. Safe to send again: reads, and
                # driver actions carry an Idempotency-Key.
                if attempt or (method == "POST" and key is None):
                    raise
                self.reconnects += 1
        ms = (time.perf_counter() - t0) * 1000
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        if r.getheader("Connection", "").lower() == "close":
            self.c.close()
            self.c = None
        return r.status, parsed, ms, began

    def close(self):
        if self.c is not None:
            self.c.close()


def must(answer, expected, what):
    status, body = answer[0], answer[1]
    if status != expected:
        sys.exit(f"operator-load: {what} answered {status}: {json.dumps(body)[:500]}")
    return body["object"]


def ts(text):
    return datetime.fromisoformat(text).timestamp()


def pct(values, p):
    """Nearest-rank percentile (0 for none)."""
    if not values:
        return 0.0
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def parallel(jobs, worker, threads=8):
    """worker(conn_index, job) over jobs from `threads` threads; the results in order."""
    out = [None] * len(jobs)
    lock = threading.Lock()
    nxt = [0]

    def run(k):
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(jobs):
                return
            out[i] = worker(k, jobs[i])

    ts_ = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for t in ts_:
        t.start()
    for t in ts_:
        t.join()
    return out


def delete_drafts(conn, date):
    plans = must(conn.call("GET", f"/ops/plans?date={date}"), 200, "GET /ops/plans")["plans"]
    for p in plans:
        if p["status"] == "draft":
            must(conn.call("DELETE", f"/ops/plans/{p['id']}"), 200, f"DELETE /ops/plans/{p['id']}")
    return plans


def plan_both(base, operator, date, limit, driver_ids=None):
    """One delivery plan per depot, asked for at once; {depot: (plan, seconds, answered)}."""
    results, lock = {}, threading.Lock()

    def one(depot):
        body = {"date": date, "depot": depot, "kind": "delivery", "time_limit_s": limit}
        if driver_ids is not None:
            body["driver_ids"] = driver_ids[depot]
        c = Conn(base, operator, timeout=limit + 120)
        t0 = time.monotonic()
        answer = c.call("POST", "/ops/plans", body)
        seconds, answered = time.monotonic() - t0, time.time()
        c.close()
        with lock:
            results[depot] = (answer, seconds, answered)

    threads = [threading.Thread(target=one, args=(d,)) for d in DEPOTS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out = {}
    for depot in DEPOTS:
        answer, seconds, answered = results[depot]
        out[depot] = (must(answer, 201, f"POST /ops/plans ({depot})"), seconds, answered)
    return out


# ------------------------------------------------------------------------------ solve
def solve(base, operator, date, limit):
    conn = Conn(base, operator)
    delete_drafts(conn, date)
    conn.close()
    started = time.time()
    plans = plan_both(base, operator, date, int(limit))
    for depot, (p, seconds, _) in plans.items():
        c = p["cost"]
        print(json.dumps({"depot": depot, "seconds": round(seconds, 2), "time_limit_s": int(limit),
                          "assigned": c["shipments_assigned"], "unassigned": c["shipments_unassigned"],
                          "routes_used": c["routes_used"], "distance_km": round(c["distance_m"] / 1000, 1)}),
              flush=True)
    answers = [a for _, _, a in plans.values()]
    print(json.dumps({"solve": True, "started": round(started, 3), "first_answer": round(min(answers), 3),
                      "last_answer": round(max(answers), 3)}), flush=True)


# ------------------------------------------------------------------------------ prepare
def prepare(base, operator, ops, live, date, state_path):
    n = int(os.environ.get("OPERATOR_DRIVERS", "200"))
    limit = int(os.environ.get("OPERATOR_PLAN_LIMIT", "10"))
    conn = Conn(base, operator)
    began = time.monotonic()
    # The day's parcels, from the newest draft (item 1's plans cover every shipment of the day).
    plans = delete_drafts(conn, date)
    drafts = [p for p in plans if p["status"] == "draft"]
    parcels = sum(s["parcels"] for p in drafts for r in p["routes"] for s in r["stops"] if s["kind"] == "drop_off")
    van = int(os.environ.get("OPERATOR_VAN") or max(1, math.ceil(parcels / n)))

    def new_driver(k, i):
        c = conns[k]
        depot = DEPOTS[i % 2]
        body = {"name": f"App driver {i + 1}", "phone": "+1 416 555 0199", "depot": depot,
                "vehicle": {"name": f"Small van {i + 1}", "capacity_parcels": van, "capacity_kg": 1000},
                "shift": {"start": "12:00", "end": "22:00"},
                "weekdays": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]}
        d = must(c.call("POST", "/ops/drivers", body), 201, "POST /ops/drivers")
        return {"id": d["id"], "depot": depot, "token": d["sign_in_url"].split("#token=", 1)[1]}

    conns = [Conn(base, operator) for _ in range(8)]
    drivers = parallel(list(range(n)), new_driver)
    by_depot = {d: [x["id"] for x in drivers if x["depot"] == d] for d in DEPOTS}
    made = plan_both(base, operator, date, limit, by_depot)
    routes, unassigned = {}, []
    for depot, (p, seconds, _) in made.items():
        must(conn.call("POST", f"/ops/plans/{p['id']}/publish"), 200, f"POST /ops/plans/{p['id']}/publish")
        for r in p["routes"]:
            routes[r["driver_id"]] = r
        unassigned += [u["shipment_unique_id"] for u in p["unassigned"]]
        c = p["cost"]
        print(json.dumps({"depot": depot, "plan": p["id"], "drivers": len(by_depot[depot]), "van_parcels": van,
                          "seconds": round(seconds, 2), "assigned": c["shipments_assigned"],
                          "unassigned": c["shipments_unassigned"], "routes_used": c["routes_used"]}), flush=True)
    planned = [u for r in routes.values() for s in r["stops"] if s["kind"] == "drop_off" for u in s["shipment_unique_ids"]]

    # To the depot: what the pick-up round and the sorting would have done.
    ops_conns = [Conn(base, ops) for _ in range(8)]

    def to_depot(k, unique_id):
        c, answer = ops_conns[k], None
        for to in ("to_pick_up", "picked_up", "processing"):
            answer = must(c.call("POST", f"/ops/shipments/{unique_id}/transitions", {"to": to}), 200,
                          f"ops move of {unique_id} to {to}")
        return answer["drop_off_address"].get("person_email")

    emails = dict(zip(planned, parallel(planned, to_depot)))
    # The unassigned ones' recipients too (their "scheduled" e-mail is checked as well).
    live_conns = [Conn(base, live) for _ in range(8)]

    def recipient(k, unique_id):
        s = must(live_conns[k].call("GET", f"/shipments/{unique_id}"), 200, f"GET /shipments/{unique_id}")
        return s["drop_off_address"].get("person_email")

    emails.update(zip(unassigned, parallel(unassigned, recipient)))
    for d in drivers:
        d["route"] = routes.get(d["id"])
    state = {"date": date, "van_parcels": van, "drivers": drivers, "emails": emails, "unassigned": unassigned,
             "plans": [p["id"] for p, _, _ in made.values()]}
    with open(state_path, "w") as f:
        json.dump(state, f)
    used = sum(1 for d in drivers if d["route"] and any(s["kind"] == "drop_off" for s in d["route"]["stops"]))
    print(json.dumps({"prepared": True, "drivers": n, "drivers_with_stops": used, "van_parcels": van,
                      "planned_shipments": len(planned), "unassigned": len(unassigned),
                      "with_email": sum(1 for e in emails.values() if e), "seconds": round(time.monotonic() - began, 1)}),
          flush=True)
    if not all(emails.values()):
        sys.exit("operator-load: some planned shipments have no recipient e-mail (plan-load.py without PLAN_EMAIL?)")


# ------------------------------------------------------------------------------ drive
def signature_png(seed):
    """A 240×80 greyscale PNG with a stroke across it: a signature as the app draws one."""
    w, h = 240, 80
    rows = []
    for y in range(h):
        row = bytearray([255] * w)
        for x in range(w):
            if abs(y - (h / 2 + 20 * math.sin((x + seed % 97) / 17))) < 2:
                row[x] = 0
        rows.append(b"\x00" + bytes(row))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))


def server_cpu(pid):
    """The process's user+sys CPU so far, in seconds (/proc/PID/stat); 0 without a PID."""
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class SinkTail(threading.Thread):
    """Follows the SMTP sink's log (one JSON line a message): each message's arrival time
    (seen within POLL of its line being written) and recipient."""

    POLL = 0.02

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path, self.arrivals, self.lock, self.stopping = path, [], threading.Lock(), False
        with open(path, "rb") as f:
            self.before = sum(1 for _ in f)
            self.offset = f.tell()

    def run(self):
        buf = b""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            while not self.stopping:
                chunk = f.read()
                now = time.time()
                if chunk:
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    with self.lock:
                        for line in lines:
                            m = json.loads(line)
                            for rcpt in m["rcpt_tos"]:
                                self.arrivals.append((now, m["message_id"], rcpt.lower()))
                else:
                    time.sleep(self.POLL)

    def count(self):
        with self.lock:
            return len(self.arrivals)


def drive(base, state_path, sink_log, seconds, out_path):
    state = json.load(open(state_path))
    seconds = float(seconds)
    every = float(os.environ.get("OPERATOR_POSITION_EVERY", "30"))
    fail_pct = float(os.environ.get("OPERATOR_FAIL_PCT", "10"))
    now_env = os.environ.get("NOW", "2026-11-23T12:00:00Z").replace("Z", "+00:00")
    phone_clock0 = datetime.fromisoformat(now_env) - timedelta(hours=6)
    drivers = state["drivers"]

    # The day's timeline, departures to the last stop, onto [LEAD, seconds - TAIL] of real time.
    lead, tail = 1.0, 3.0
    stops_of = {}
    for d in drivers:
        r = d["route"]
        stops_of[d["id"]] = [s for s in r["stops"] if s["kind"] == "drop_off"] if r else []
    worked = [d for d in drivers if stops_of[d["id"]]]
    day0 = min(ts(d["route"]["start"]) for d in worked)
    day1 = max(ts(stops_of[d["id"]][-1]["eta"]) for d in worked)
    day_s = float(os.environ.get("OPERATOR_DAY_S") or 0) or seconds - lead - tail
    scale = (day1 - day0) / max(1.0, day_s)
    server = os.environ.get("OPERATOR_SERVER_PID")
    cpu0 = server_cpu(server)
    t0 = time.time() + 0.5

    def real(at_text):
        return t0 + lead + (ts(at_text) - day0) / scale

    # Signatures drawn beforehand: making one costs the client ~10 ms of CPU the server needs.
    signatures = [signature_png(i) for i in range(16)]
    sink = SinkTail(sink_log)
    sink.start()
    lock = threading.Lock()
    calls = {}  # kind -> [ms]
    bad = []  # (kind, status, body)
    moves = {}  # unique_id -> (outcome, request start, answer time)
    started_ids = []
    positions = [0]
    reconnects = [0]
    apps_started, left = [0], [0]

    def record(kind, answer, expected):
        status, body, ms, _ = answer
        with lock:
            calls.setdefault(kind, []).append(ms)
            if status != expected:
                bad.append((kind, status, json.dumps(body)[:300]))
        return status == expected

    def sleep_until(t):
        d = t - time.time()
        if d > 0:
            time.sleep(d)

    def app(index, d):
        c = Conn(base, d["token"])
        my_stops = stops_of[d["id"]]
        route = d["route"]
        depot_stop = next((s for s in route["stops"] if s["kind"] == "depot"), None) if route else None
        here = (depot_stop["lat"], depot_stop["lng"]) if depot_stop else (43.65, -79.38)
        # Empty routes start with the first departures; a route departing after the drive's
        # end is not started (OPERATOR_DAY_S longer than the drive).
        depart = real(route["start"]) if my_stops else t0 + lead
        if depart >= t0 + seconds:
            return
        sleep_until(depart)
        with lock:
            apps_started[0] += 1
        answer = c.call("GET", "/driver/route")
        if not record("route", answer, 200):
            return
        codes = [p["pick_up_code"] for r in answer[1]["object"]["routes"] for s in r["stops"] if s["kind"] == "drop_off"
                 for sh in s["shipments"] for p in sh["parcels"]]
        for code in codes:
            record("scan", c.call("POST", "/driver/scans", {"code": code}), 200)
        answer = c.call("POST", "/driver/route/start", {"scanned": codes}, key=f"start-{d['id']}")
        if record("start", answer, 200):
            moved = [sh["unique_id"] for r in answer[1]["object"]["routes"] for s in r["stops"]
                     if s["kind"] == "drop_off" for sh in s["shipments"] if sh["status"] == "in_transit"]
            with lock:
                started_ids.extend(moved)
        # Positions every `every` s from now, each app at its own phase (so ~n/every a second).
        k = 0
        next_position = time.time() + every * index / len(drivers)
        queue = list(my_stops)
        last_point, last_time = here, time.time()
        end = t0 + seconds
        while True:
            next_stop = real(queue[0]["eta"]) if queue else math.inf
            # Stops after the drive's end stay undone (OPERATOR_DAY_S longer than the drive).
            if next_stop >= end:
                next_stop = math.inf
            t = min(next_position, next_stop)
            if t >= end:
                with lock:
                    left[0] += sum(len(s["shipment_unique_ids"]) for s in queue)
                break
            sleep_until(t)
            if queue and next_stop <= next_position:
                s = queue.pop(0)
                for u in s["shipment_unique_ids"]:
                    h = int(hashlib.sha256(u.encode()).hexdigest()[:8], 16)
                    if h % 10000 < fail_pct * 100:
                        body, outcome = {"to": "failed", "reason": "Nobody at the address"}, "failed"
                    else:
                        png = signatures[h % len(signatures)]
                        proof = c.call("POST", "/driver/proofs", png, key=f"sig-{u}", ctype="image/png")
                        if not record("proof", proof, 201):
                            continue
                        body = {"to": "delivered", "proof_of_delivery": [
                            {"type": "receiver_name", "value": "Receiver"},
                            {"type": "signature", "value": proof[1]["object"]["url"]}]}
                        outcome = "delivered"
                    answer = c.call("POST", f"/driver/shipments/{u}/transitions", body, key=f"outcome-{u}")
                    if record(outcome, answer, 200):
                        with lock:
                            moves[u] = (outcome, answer[3], answer[3] + answer[2] / 1000)
                last_point, last_time = (s["lat"], s["lng"]), time.time()
            else:
                # Where the van is: on the way from the last stop to the next one.
                if queue:
                    nxt, f = queue[0], min(1.0, (time.time() - last_time) / max(0.001, next_stop - last_time))
                    lat = last_point[0] + f * (nxt["lat"] - last_point[0])
                    lng = last_point[1] + f * (nxt["lng"] - last_point[1])
                else:
                    lat, lng = last_point
                at = (phone_clock0 + timedelta(seconds=30 * k)).strftime("%Y-%m-%dT%H:%M:%SZ")
                body = {"lat": round(lat, 6), "lng": round(lng, 6), "accuracy_m": 12.5, "at": at}
                record("position", c.call("POST", "/driver/positions", body, key=f"pos-{d['id']}-{k}"), 201)
                with lock:
                    positions[0] += 1
                k += 1
                next_position += every
        with lock:
            reconnects[0] += c.reconnects
        c.close()

    threads = [threading.Thread(target=app, args=(i, d), daemon=True) for i, d in enumerate(drivers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ended = time.time()
    cpu1 = server_cpu(server)
    client_cpu = sum(os.times()[:2])
    # Every e-mail the moves owe: "out for delivery" for each started shipment, and one for its
    # outcome. Waited for, 60 s at most.
    owed = len(set(started_ids)) + len(moves)
    deadline = time.time() + 60
    while sink.count() < owed and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    sink.stopping = True
    sink.join()
    drained = time.time()

    # Lag: from a move's request to its recipient's last e-mail at the sink.
    by_rcpt = {}
    for at, _, rcpt in sink.arrivals:
        by_rcpt.setdefault(rcpt, []).append(at)
    lags, outcome_mails = [], []
    for u, (_, sent, _) in moves.items():
        got = [a for a in by_rcpt.get(state["emails"][u].lower(), []) if a >= sent]
        if got:
            lags.append((max(got) - sent) * 1000)
            outcome_mails.append(max(got))
    outcome_mails.sort()
    mail_span = (outcome_mails[-1] - outcome_mails[0]) if len(outcome_mails) > 1 else 0.0
    outcomes = sorted(a for _, _, a in moves.values())
    span = (outcomes[-1] - outcomes[0]) if len(outcomes) > 1 else 0.0
    mails = sorted(a for a, _, _ in sink.arrivals)
    mails_in_span = [a for a in mails if outcomes and outcomes[0] <= a <= outcomes[-1]]
    kinds = ["route", "scan", "start", "proof", "delivered", "failed", "position"]
    summary = {
        "drivers": len(drivers), "drivers_with_stops": len(worked), "seconds": seconds,
        "compression": round(scale, 1), "day_s": round(day_s, 1), "apps_started": apps_started[0],
        "shipments_left_in_transit": left[0], "day": [datetime.fromtimestamp(day0, timezone.utc).isoformat(),
                                                datetime.fromtimestamp(day1, timezone.utc).isoformat()],
        "started": round(t0, 3), "last_action": round(ended, 3), "drained": round(drained, 3),
        "position_every_s": every, "positions": positions[0],
        "calls": {k: {"n": len(calls.get(k, [])), "p50_ms": round(pct(calls.get(k, []), 50), 2),
                      "p99_ms": round(pct(calls.get(k, []), 99), 2), "max_ms": round(max(calls.get(k, [0])), 2)}
                  for k in kinds},
        "non2xx": len(bad), "first_bad": bad[:3], "reconnects": reconnects[0],
        # The server's CPU (user+sys) over the drive, and per driver call (the e-mails' sending
        # included, and whatever else the server answered meanwhile); and this client's own.
        "server_cpu_ms_per_call": round((cpu1 - cpu0) * 1000 / max(1, sum(len(v) for v in calls.values())), 2)
        if server else None,
        "server_cpu_s": round(cpu1 - cpu0, 1) if server else None,
        "client_cpu_s": round(client_cpu, 1),
        "started_shipments": len(set(started_ids)),
        "delivered": sum(1 for o, _, _ in moves.values() if o == "delivered"),
        "failed": sum(1 for o, _, _ in moves.values() if o == "failed"),
        "outcome_span_s": round(span, 2),
        "outcomes_per_s": round(len(outcomes) / span, 1) if span else 0,
        "emails_owed": owed, "emails_received": len(mails),
        "emails_in_outcome_span": len(mails_in_span),
        "emails_per_s_in_outcome_span": round(len(mails_in_span) / span, 1) if span else 0,
        "outcome_emails": len(outcome_mails), "outcome_email_span_s": round(mail_span, 2),
        "outcome_emails_per_s": round(len(outcome_mails) / mail_span, 1) if mail_span else 0,
        "lag_ms": {"n": len(lags), "p50": round(pct(lags, 50), 1), "p99": round(pct(lags, 99), 1),
                   "max": round(max(lags or [0]), 1)},
    }
    with open(out_path, "w") as f:
        json.dump({"summary": summary, "moves": {u: list(v) for u, v in moves.items()},
                   "started": sorted(set(started_ids))}, f)
    print(json.dumps(summary), flush=True)
    if bad:
        sys.exit(f"operator-load: {len(bad)} driver calls answered other than expected, first: {bad[0]}")
    if len(mails) < owed:
        sys.exit(f"operator-load: {owed - len(mails)} of the {owed} e-mails the moves owe did not reach the sink in 60 s")


# ------------------------------------------------------------------------------ verify
def verify(base, live, state_path, sink_log, drive_path):
    state = json.load(open(state_path))
    moved = json.load(open(drive_path))
    outcome_of = {u: v[0] for u, v in moved["moves"].items()}
    started = set(moved["started"])
    lines = [json.loads(line) for line in open(sink_log) if line.strip()]
    ids = [m["message_id"] for m in lines]
    dup_ids = len(ids) - len(set(ids))
    per_rcpt = {}
    for m in lines:
        for r in m["rcpt_tos"]:
            per_rcpt[r.lower()] = per_rcpt.get(r.lower(), 0) + 1
    conns = [Conn(base, live) for _ in range(8)]

    def rows(k, u):
        return u, must(conns[k].call("GET", f"/shipments/{u}/notifications"), 200, f"GET /shipments/{u}/notifications")

    shipments = list(state["emails"])
    problems, sent_rows = [], 0
    for u, listing in parallel(shipments, rows):
        email = [n for n in listing["notifications"] if n["channel"] == "email"]
        triggers = [n["trigger"] for n in email]
        owed = {"scheduled"}
        if u in started:
            owed.add("out_for_delivery")
        if u in outcome_of:
            owed.add(outcome_of[u])
        # Once a trigger, but "new time" up to twice a day (CONTRACT §16).
        if any(triggers.count(t) > (2 if t == "new_time" else 1) for t in set(triggers)):
            problems.append(f"{u}: a trigger enqueued twice ({sorted(triggers)})")
        if not owed <= set(triggers):
            problems.append(f"{u}: no e-mail row for {sorted(owed - set(triggers))}")
        # A switched-off trigger's rows are recorded `disabled` (next_stop is off by default).
        unsent = [f"{n['trigger']}={n['state']}" for n in email if n["state"] not in ("sent", "disabled")]
        if unsent:
            problems.append(f"{u}: not sent: {', '.join(unsent)}")
        sent = sum(1 for n in email if n["state"] == "sent")
        sent_rows += sent
        got = per_rcpt.get(state["emails"][u].lower(), 0)
        if got != sent:
            problems.append(f"{u}: {sent} e-mails sent by the service, {got} at the sink")
    known = {e.lower() for e in state["emails"].values()}
    stray = sum(v for r, v in per_rcpt.items() if r not in known)
    print(json.dumps({"verified": True, "shipments": len(shipments), "email_rows_sent": sent_rows,
                      "sink_messages": len(lines), "duplicate_message_ids": dup_ids,
                      "sink_messages_for_other_recipients": stray, "problems": len(problems),
                      "first_problems": problems[:5]}), flush=True)
    if problems or dup_ids or stray or sent_rows + stray != len(lines):
        sys.exit(f"operator-load: notifications lost, unsent or duplicated ({len(problems)} shipments, "
                 f"{dup_ids} duplicate Message-IDs)")


# ------------------------------------------------------------------------------ report
def report(base, operator, date, rounds="5"):
    """Times the day's report of each depot (CONTRACT §17) after the drive: JSON and CSV,
    `rounds` times each, one after the other; one JSON line a depot, then a line to read."""
    u = urllib.parse.urlsplit(base)
    for depot in DEPOTS:
        path = f"{API}/ops/reports/day?date={date}&depot={depot}"
        times = {"json": [], "csv": []}
        body = {"json": b"", "csv": b""}
        for _ in range(int(rounds)):
            for kind, accept in (("json", "application/json"), ("csv", "text/csv")):
                c = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
                t0 = time.perf_counter()
                c.request("GET", path, headers={"Authorization": "Bearer " + operator, "Accept": accept})
                r = c.getresponse()
                raw = r.read()
                times[kind].append((time.perf_counter() - t0) * 1000)
                c.close()
                if r.status != 200:
                    sys.exit(f"operator-load: the report of {depot} ({kind}) answered {r.status}: {raw[:300]!r}")
                body[kind] = raw
        totals = json.loads(body["json"])["object"]["days"][0]["totals"]
        line = {"depot": depot, "shipments": totals["shipments"], "served": totals["served"],
                "on_time_share": totals["on_time_share"], "eta_kept_share": totals["eta_kept_share"],
                "json_ms_p50": round(pct(times["json"], 50), 1), "json_ms_max": round(max(times["json"]), 1),
                "csv_ms_p50": round(pct(times["csv"], 50), 1), "csv_bytes": len(body["csv"])}
        print(json.dumps(line), flush=True)
        print(f"report {depot}: {totals['shipments']} shipments ({totals['served']} served): JSON p50 "
              f"{line['json_ms_p50']} ms (max {line['json_ms_max']}), CSV p50 {line['csv_ms_p50']} ms "
              f"({line['csv_bytes']} bytes), {rounds} rounds", flush=True)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cmd, args = sys.argv[1], sys.argv[2:]
    commands = {"solve": (solve, 4), "prepare": (prepare, 6), "drive": (drive, 5), "verify": (verify, 5),
                "report": (report, 3)}
    if cmd not in commands or len(args) != commands[cmd][1]:
        sys.exit(__doc__)
    commands[cmd][0](*args)


if __name__ == "__main__":
    main()
