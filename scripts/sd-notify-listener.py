#!/usr/bin/env python3
"""Stands in for systemd's notification socket (scripts/deb-test.sh).

Binds a datagram socket at SOCKET (reachable by any user, like /run/systemd/notify), and
writes each notification it receives to LOG as one line, its fields joined by spaces. When
READY=1 arrives it asks READYZ_URL at once and appends `readyz=<status>`, so the log shows
what readiness answered at the moment the service said it was ready. Exits after
STOPPING=1, or after TIMEOUT seconds without a notification.

usage: sd-notify-listener.py SOCKET LOG READYZ_URL [TIMEOUT]
"""
import os
import socket
import sys
import urllib.error
import urllib.request


def readyz(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError as e:
        return f"error:{e}"


def main():
    path, log, url = sys.argv[1:4]
    timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 120
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    os.chmod(path, 0o666)
    s.settimeout(timeout)
    with open(log, "a", buffering=1) as out:
        out.write("listening\n")
        while True:
            try:
                data = s.recv(4096).decode()
            except socket.timeout:
                out.write("timeout\n")
                return 1
            fields = [f for f in data.split("\n") if f]
            line = " ".join(fields)
            if "READY=1" in fields:
                line += f" readyz={readyz(url)}"
            out.write(line + "\n")
            if "STOPPING=1" in fields:
                return 0


if __name__ == "__main__":
    sys.exit(main())
