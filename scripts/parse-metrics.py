#!/usr/bin/env python3
"""Parses a /metrics answer with the Prometheus project's own parsers (PyPI
`prometheus_client`), independently of dropslot's encoder: OpenMetrics by default, the
classic text format (`text/plain; version=0.0.4`) with `--classic`. A body that does not
parse is an error (exit 1, the parser's message on stderr).

stdin: the exposition text.
stdout: a JSON array of samples, each {"name", "labels": {...}, "value", "type"}, where
"type" is the type of the family the parser put the sample in ("unknown" when no `# TYPE`
line named it: the classic parser's reading of a mismatched name).
"""
import json
import sys

if "--classic" in sys.argv[1:]:
    from prometheus_client.parser import text_string_to_metric_families
else:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

samples = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        samples.append({"name": s.name, "labels": dict(s.labels), "value": s.value, "type": family.type})
json.dump(samples, sys.stdout)
