#!/usr/bin/env python3
"""The main job's wall time, one mode at a time against the default (two at once).

Runs `mm retrain data/sample --simulate data/world.toml` ROUNDS times with each
`--parallel-modes` setting, alternating (so the machine's drift falls on both alike), each
into a fresh temporary folder, and prints every run's wall time, the medians, and the stage
times of each setting's median run. Checks that both settings export the same model files
(every file of each artifact but its manifest, which records paths and times).

    cargo build && python3 tests/bench/main_job.py [ROUNDS] [MM_BINARY]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def binary() -> Path:
    if len(sys.argv) > 2:
        return Path(sys.argv[2])
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "mm"


def run(mm: Path, parallel: int, out: Path) -> float:
    args = [
        str(mm), "retrain", "data/sample", "--simulate", "data/world.toml",
        "--lake", str(out / "lake"), "--models", str(out / "models"),
        "--work", str(out / "retrain"), "--parallel-modes", str(parallel),
    ]
    t = time.perf_counter()
    subprocess.run(args, cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def model_files(models: Path) -> dict:
    return {
        str(p.relative_to(models)): p.read_bytes()
        for p in sorted(models.rglob("*"))
        if p.is_file() and p.name != "manifest.json" and "v0001" in p.parts
    }


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    mm = binary()
    runs = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for p in (1, 2):
                out = Path(tmp) / f"p{p}-r{r}"
                s = run(mm, p, out)
                stages = json.loads((out / "retrain" / "last_run.json").read_text())["timings_s"]
                runs[p].append((s, stages, out))
                print(f"--parallel-modes {p}, round {r + 1}: {s:.1f} s", flush=True)
        a, b = (model_files(runs[p][0][2] / "models") for p in (1, 2))
        same = a.keys() == b.keys() and all(a[k] == b[k] for k in a)
        for p in (1, 2):
            times = sorted(x[0] for x in runs[p])
            med = statistics.median(times)
            print(f"--parallel-modes {p}: median {med:.1f} s "
                  f"({times[0]:.1f} to {times[-1]:.1f} s over {rounds} runs)")
            s, stages, _ = min(runs[p], key=lambda x: abs(x[0] - med))
            print("  " + ", ".join(f"{k} {v:.2f} s" for k, v in stages))
        print(f"same model files ({len(a)} files): {same}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
