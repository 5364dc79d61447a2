#!/usr/bin/env python3
"""Sums a `cargo build --timings` page's compilation by crate family (docs/benchmarks.md,
Build time): the seconds of every unit of each family, summed over units (on 2 cores about
twice the wall time they take), and the build's wall time.

    python3 tests/bench/timings.py target/cargo-timings/cargo-timing.html
"""

import json
import re
import sys
from pathlib import Path

FAMILIES = [
    ("polars", lambda n: n.startswith("polars")),
    ("our own crates", lambda n: n.startswith("mm-")),
    ("arrow-rs", lambda n: n.startswith("arrow")),
    ("AWS SDK and aws-lc", lambda n: n.startswith("aws")),
    ("delta-rs's kernel and engine", lambda n: n.startswith("buoyant_kernel")),
    ("parquet", lambda n: n == "parquet"),
    ("deltalake crates", lambda n: n.startswith("deltalake")),
    ("object_store", lambda n: n == "object_store"),
]


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    page = Path(sys.argv[1]).read_text()
    found = re.search(r"const UNIT_DATA = (\[.*?\]);", page, re.S)
    if not found:
        sys.exit(f"{sys.argv[1]}: no UNIT_DATA (not a cargo timings page?)")
    by_crate: dict[str, float] = {}
    units = json.loads(found.group(1))
    for u in units:
        by_crate[u["name"]] = by_crate.get(u["name"], 0.0) + u["duration"]
    total = sum(by_crate.values())
    print(f"{len(units)} units, {total:,.0f} s of compilation")
    rest = total
    for family, member in FAMILIES:
        s = sum(t for n, t in by_crate.items() if member(n))
        rest -= s
        print(f"  {family}: {s:,.0f} s")
    print(f"  everything else: {rest:,.0f} s")
    wall = re.search(r"Total time:</td><td>([^<]*)", page)
    if wall:
        print(f"wall time: {wall.group(1)}")


if __name__ == "__main__":
    main()
