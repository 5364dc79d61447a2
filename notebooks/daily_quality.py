"""Continued daily retrains against full ones, on the simulator's truth (issue 54).

From one full fit with nine days held out, two chains run over the same eight days:
chain A continues the promoted model for seven days and fits in full on the eighth;
chain B fits in full every day. Each day's candidate is evaluated on the next day
(`mm retrain --holdout-days h`, h = 8 .. 1) and always promoted (`--margin 1`), so each
chain continues its own models. Per day and chain: the raw skill's Spearman correlation
with the simulator's true skill (players with at least 10 matches), the holdout's churn
AUC, calibration error and log-loss, the win log-loss, and the run's time. Then the two
chains' models of the day side by side on the same held-out searches (`mm evaluate
--compare`): each score's difference A - B with its 95% paired-bootstrap interval (churn
resampled by player, the win model by match), and the same for the Spearman correlation
(resampled by player).

    python notebooks/daily_quality.py MM_BINARY [--world data/world.toml] [--out out/daily]
        [--retrain-args '--churn-window-days 7']

Prints two Markdown tables (docs/daily.md).
"""

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import rankdata

MODE = "tdm-6v6"


def spearman(a, b):
    df = pl.DataFrame({"a": a, "b": b}).with_columns(
        pl.col("a").rank(), pl.col("b").rank()
    )
    return df.select(pl.corr("a", "b")).item()


def skill_and_truth(models: Path, lake: Path) -> pl.DataFrame:
    """The promoted snapshot's raw skill beside the simulator's true skill on its day, for
    players with at least 10 matches."""
    root = models / MODE
    version = (root / "LATEST").read_text().strip()
    art = root / version
    manifest = json.loads((art / "manifest.json").read_text())
    day = time.strftime(
        "%Y-%m-%d", time.gmtime(manifest["snapshot_as_of_ms"] / 1000)
    )
    snap = pl.read_parquet(art / "players.parquet").filter(pl.col("games") >= 10)
    truth = pl.read_parquet(
        lake / "truth" / "skill_daily" / f"day={day}", hive_partitioning=False
    )
    return snap.join(truth, on="player_id").select("player_id", "raw_skill", "true_skill")


def spearman_diff(a: pl.DataFrame, b: pl.DataFrame, resamples=1000, seed=1):
    """Spearman(A) - Spearman(B) on the players both rank, with a 95% interval from a paired
    bootstrap over players."""
    j = a.join(b, on="player_id", suffix="_b")
    x, xb, t = (j[c].to_numpy() for c in ("raw_skill", "raw_skill_b", "true_skill"))

    def rho(u, v):
        return np.corrcoef(rankdata(u), rankdata(v))[0, 1]

    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(resamples):
        k = rng.integers(0, len(t), len(t))
        diffs.append(rho(x[k], t[k]) - rho(xb[k], t[k]))
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return rho(x, t) - rho(xb, t), lo, hi


def run(mm, args):
    t = time.monotonic()
    p = subprocess.run([mm, *args, "-q"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"mm {' '.join(args)} failed:\n{p.stdout}\n{p.stderr}")
    return time.monotonic() - t, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mm")
    ap.add_argument("--world", default="data/world.toml")
    ap.add_argument("--out", default="out/daily")
    ap.add_argument("--days", type=int, default=8)
    ap.add_argument(
        "--retrain-args", default="", help="more `mm retrain` flags for every run, e.g. "
        "'--churn-window-days 7'"
    )
    a = ap.parse_args()
    out = Path(a.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    lake = out / "lake"
    common = [
        "--mode", MODE, "--lake", str(lake), "--margin", "1", "--tick-s", "20",
        *a.retrain_args.split(),
    ]

    def chain(name):
        return ["--models", str(out / name / "models"), "--work", str(out / name / "work")]

    # The common start: a full fit with days + 1 days held out, copied to both chains.
    run(
        a.mm,
        ["retrain", "--simulate", a.world, *common, *chain("A"), "--holdout-days", str(a.days + 1)],
    )
    shutil.copytree(out / "A" / "models", out / "B" / "models")
    rows = []
    for h in range(a.days, 0, -1):
        row = {"holdout": h}
        for name, extra in [
            ("A", ["--full"] if h == 1 else ["--full-every", "30d"]),
            ("B", ["--full"]),
        ]:
            seconds, text = run(
                a.mm, ["retrain", *common, *chain(name), "--holdout-days", str(h), *extra]
            )
            ev = json.loads(
                (out / name / "work" / MODE / "evaluation" / "evaluation.json").read_text()
            )
            ho = ev["holdout"][0]
            row[name] = {
                "kind": "continued" if "continued v" in text else "full",
                "spearman": spearman(
                    *skill_and_truth(out / name / "models", lake)
                    .select("raw_skill", "true_skill")
                    .get_columns()
                ),
                "auc": ho["churn_auc"],
                "ece": ho["churn_ece"],
                "churn_ll": ho["churn_log_loss"],
                "win_ll": ho["win_log_loss"],
                "seconds": seconds,
                "day": ev["window"],
            }
        # Both chains' models of the day on the same held-out searches.
        run(
            a.mm,
            [
                "evaluate", "--lake", str(lake), "--tick-s", "20",
                "--artifact", str(out / "A" / "models" / MODE),
                "--compare", str(out / "B" / "models" / MODE),
                "--out", str(out / "paired"),
            ],
        )
        ev = json.loads((out / "paired" / "evaluation.json").read_text())
        row["diff"] = ev["holdout_diff"]
        row["diff"]["spearman"] = spearman_diff(
            skill_and_truth(out / "A" / "models", lake),
            skill_and_truth(out / "B" / "models", lake),
        )
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    print(
        "| day held out | chain A | Spearman A / B | churn AUC A / B | churn ECE A / B "
        "| churn log-loss A / B | win log-loss A / B | seconds A / B |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        A, B = r["A"], r["B"]
        print(
            f"| {A['day'][:10]} | {A['kind']} | {A['spearman']:.4f} / {B['spearman']:.4f} "
            f"| {A['auc']:.4f} / {B['auc']:.4f} | {A['ece']:.4f} / {B['ece']:.4f} "
            f"| {A['churn_ll']:.4f} / {B['churn_ll']:.4f} | {A['win_ll']:.4f} / {B['win_ll']:.4f} "
            f"| {A['seconds']:.1f} / {B['seconds']:.1f} |"
        )


    def ci(x):
        if isinstance(x, dict):
            d, (lo, hi) = x["diff"], x["ci95"]
        else:
            d, lo, hi = x
        return f"{d:+.4f} ({lo:+.4f} to {hi:+.4f})"

    print()
    print(
        "| day held out | chain A | Spearman | churn AUC | churn ECE | churn log-loss "
        "| win log-loss | players |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        d = r["diff"]
        print(
            f"| {r['A']['day'][:10]} | {r['A']['kind']} | {ci(d['spearman'])} "
            f"| {ci(d['churn_auc'])} | {ci(d['churn_ece'])} | {ci(d['churn_log_loss'])} "
            f"| {ci(d['win_log_loss'])} | {d['players']:,} |"
        )

if __name__ == "__main__":
    main()
