#!/usr/bin/env python3
"""Joins a webhook bench's receipts with its queue (scripts/webhook-bench.sh, issue 33).

    webhook-stats.py QUEUE RECEIPTS ENDPOINT_ID...

QUEUE: lines `ENDPOINT_ID WEBHOOK_ID QUEUED_MS` (the run's deliveries, queued_ms taken in the
transaction that committed the event); RECEIPTS: lines `INDEX WEBHOOK_ID RECEIPT_MS` from
examples/hook_sink.rs, INDEX being the sink port's, the endpoints given in the same order.
Prints one line: expected deliveries, received, duplicates (a webhook-id received twice at
one endpoint), missing, unexpected, the span from the first commit to the last receipt, the
rate over it, and commit-to-receipt p50 / p99 / max. Exit status 1 when any delivery is
missing, duplicated or unexpected.
"""
import sys


def pct(sorted_values, q):
    if not sorted_values:
        return 0.0
    k = max(0, min(len(sorted_values) - 1, int(len(sorted_values) * q + 0.5) - 1))
    return sorted_values[k]


def main():
    queue_file, receipts_file, *endpoints = sys.argv[1:]
    index = {e: i for i, e in enumerate(endpoints)}
    queued = {}
    with open(queue_file) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 3:
                continue
            e, wid, ms = parts
            if e not in index:
                continue
            queued[(index[e], wid)] = float(ms)
    first = {}
    duplicates = 0
    unexpected = 0
    with open(receipts_file) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 3:
                continue
            key = (int(parts[0]), parts[1])
            at = float(parts[2])
            if key not in queued:
                unexpected += 1
            elif key in first:
                duplicates += 1
            else:
                first[key] = at
    missing = len(queued) - len(first)
    lat = sorted(first[k] - queued[k] for k in first)
    span = (max(first.values()) - min(queued.values())) if first else 0.0
    rate = len(first) * 1000.0 / span if span > 0 else 0.0
    print(
        f"HOOKS deliveries={len(queued)} received={len(first)} duplicates={duplicates} missing={missing} "
        f"unexpected={unexpected} span_ms={span:.0f} per_s={rate:.0f} p50_ms={pct(lat, 0.50):.1f} "
        f"p99_ms={pct(lat, 0.99):.1f} max_ms={(lat[-1] if lat else 0):.1f}"
    )
    return 1 if (missing or duplicates or unexpected) else 0


if __name__ == "__main__":
    sys.exit(main())
