"""Executes every notebook here with nbclient, top to bottom, and fails on the first cell error.

    python notebooks/run.py [--out DIR] [NOTEBOOK ...]

The notebooks read their inputs from the MM_* environment variables described in mmnb.py
(defaults: the outputs of the README's main command). With --out, the executed notebooks (with
their tables and plots) are written there; the committed ones stay without outputs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="*", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = ap.parse_args()
    books = args.notebooks or sorted(HERE.glob("*.ipynb"))
    failed = 0
    for path in books:
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=args.timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}})
        t = time.perf_counter()
        try:
            client.execute()
            status = "ok"
        except CellExecutionError as e:
            failed += 1
            status = f"FAILED\n{e}"
        print(f"{path.name}: {status} ({time.perf_counter() - t:.1f} s)", flush=True)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, args.out / path.name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
