#!/usr/bin/env python3
"""What one durable commit costs this machine's disk: a 4 KiB pwrite then fdatasync, 500
times, in a file of DIR (default: the temporary directory, where load.sh keeps its database).
Prints the median and p90 in microseconds. performance.md quotes it beside each machine."""
import os
import sys
import tempfile
import time

directory = sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir()
fd, path = tempfile.mkstemp(dir=directory, prefix="fsync-probe.")
try:
    took = []
    for i in range(500):
        os.pwrite(fd, b"x" * 4096, (i % 16) * 4096)
        start = time.perf_counter()
        os.fdatasync(fd)
        took.append(time.perf_counter() - start)
finally:
    os.close(fd)
    os.unlink(path)
took.sort()
print(f"fdatasync of 4 KiB in {directory}: median {took[250] * 1e6:.0f} us, p90 {took[450] * 1e6:.0f} us")
