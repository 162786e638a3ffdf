#!/usr/bin/env python3
"""Fails unless the end-to-end suite called every store operation on the backend it ran on.

Usage: scripts/store-trace.py FOLDER BACKEND

FOLDER is what DROPSLOT_STORE_TRACE named while the suite ran: each process that opened a
store wrote there the operations it called (crates/dropslot-store/src/trace.rs). The
operations expected are every method of every role trait, read from the store's sources
(`pub trait XStore` in crates/dropslot-store/src/<domain>/mod.rs), so a trait that grows a
method grows the check. Prints what each trait's methods were and which none called.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "crates" / "dropslot-store" / "src"


def operations():
    found = set()
    for mod in sorted(SRC.glob("*/mod.rs")):
        text = mod.read_text()
        for m in re.finditer(r"pub trait (\w+Store)\b[^{]*\{", text):
            depth, i = 1, m.end()
            while depth:
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            body = text[m.end():i - 1]
            for name in re.findall(r"(?m)^    (?:async )?fn (\w+)", body):
                found.add(f"{m.group(1)}::{name}")
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    folder, backend = pathlib.Path(sys.argv[1]), sys.argv[2]
    expected = operations()
    if len(expected) < 90:
        sys.exit(f"store-trace: read only {len(expected)} operations from {SRC}: the parser is broken")
    called = set()
    for f in folder.glob("*"):
        called.update(line.strip() for line in f.read_text().splitlines() if line.strip())
    unknown = called - expected
    missing = sorted(expected - called)
    print(f"store-trace ({backend}): {len(expected) - len(missing)} of {len(expected)} operations called "
          f"by the suite, by {len(list(folder.glob('*')))} processes")
    if unknown:
        print(f"store-trace ({backend}): recorded but not in any role trait: {sorted(unknown)}")
    if missing:
        for op in missing:
            print(f"  never called on {backend}: {op}")
        sys.exit(1)


if __name__ == "__main__":
    main()
