#!/usr/bin/env python3
"""Turn an image into a one-frame Y4M video: Chromium's fake camera plays it
(--use-file-for-fake-video-capture=FILE.y4m), so a browser test's camera sees a label.

Usage: png_to_y4m.py IMAGE OUT.y4m
Writes 4:2:0 (I420, full-range JPEG chroma siting) at the image's size, rounded down to even
numbers. Exits 3 if Pillow is missing (run scripts/test-deps.sh).
"""

import sys

try:
    from PIL import Image
except ImportError as e:  # pragma: no cover - reported to the Rust test
    print(f"png_to_y4m.py: {e}; run scripts/test-deps.sh", file=sys.stderr)
    sys.exit(3)


def main(src, dst):
    with Image.open(src) as img:
        rgb = img.convert("RGB")
    w, h = rgb.width // 2 * 2, rgb.height // 2 * 2
    y, cb, cr = rgb.crop((0, 0, w, h)).convert("YCbCr").split()
    half = (w // 2, h // 2)
    with open(dst, "wb") as out:
        out.write(f"YUV4MPEG2 W{w} H{h} F30:1 Ip A1:1 C420jpeg\n".encode())
        out.write(b"FRAME\n")
        out.write(y.tobytes())
        out.write(cb.resize(half, Image.BILINEAR).tobytes())
        out.write(cr.resize(half, Image.BILINEAR).tobytes())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
