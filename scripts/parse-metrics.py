#!/usr/bin/env python3
"""Parses a /metrics answer with the Prometheus project's own OpenMetrics parser (PyPI
`prometheus_client`), independently of dropslot's encoder. A body that does not parse is an
error (exit 1, the parser's message on stderr).

stdin: the exposition text.
stdout: a JSON array of samples, each {"name", "labels": {...}, "value"}.
"""
import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

samples = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        samples.append({"name": s.name, "labels": dict(s.labels), "value": s.value})
json.dump(samples, sys.stdout)
