#!/usr/bin/env python3
"""Verifies webhook signatures with the Standard Webhooks reference library (PyPI
`standardwebhooks`), independently of dropslot's own signing code.

stdin: a JSON array of {"secret": "whsec_...", "headers": {name: value}, "body": "..."}
stdout: a JSON array of booleans, one per item (true = verified).
"""
import json
import sys

from standardwebhooks.webhooks import Webhook

results = []
for item in json.load(sys.stdin):
    try:
        Webhook(item["secret"]).verify(item["body"], item["headers"])
        results.append(True)
    except Exception:  # any verification failure
        results.append(False)
json.dump(results, sys.stdout)
