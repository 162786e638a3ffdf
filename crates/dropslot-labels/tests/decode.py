#!/usr/bin/env python3
"""Decode barcodes in images with zxing-cpp, independently of the Rust code.

Usage: decode.py IMAGE...
Prints one JSON object: {"IMAGE": [{"format": "Code128", "text": "...",
"box": [x_min, y_min, x_max, y_max]}, ...], ...} with the box in pixels.
Exits 3 if zxing-cpp or Pillow is missing (run scripts/test-deps.sh).
"""

import json
import sys

try:
    import zxingcpp
    from PIL import Image
except ImportError as e:  # pragma: no cover - reported to the Rust test
    print(f"decode.py: {e}; run scripts/test-deps.sh", file=sys.stderr)
    sys.exit(3)


def box(position):
    points = [position.top_left, position.top_right, position.bottom_right, position.bottom_left]
    xs = [p.x for p in points]
    ys = [p.y for p in points]
    return [min(xs), min(ys), max(xs), max(ys)]


def main(paths):
    out = {}
    for path in paths:
        with Image.open(path) as img:
            results = zxingcpp.read_barcodes(img.convert("L"))
        out[path] = [
            {"format": r.format.name, "text": r.text, "box": box(r.position)}
            for r in results
        ]
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
