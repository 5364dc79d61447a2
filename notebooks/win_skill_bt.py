"""How much retention a better win model buys EOMM: a whole-history skill in place of raw skill (issue 29).

Raw skill is an online estimate: each match moves it, and the latest value is all it keeps. A
Bradley-Terry fit over the whole history before the cutoff (an L2 logistic regression of each
decisive 1v1 on player indicators, `P(A wins | decisive) = sigmoid(theta_A - theta_B)`) uses
every match at once. This script fits one on a simulated 1v1 lake and writes a copy of the skill
fit's directory whose `players.parquet` holds it in place of the raw skill (divided by a constant
K, so it stays inside [-1, 1]) and whose `team_model.json` carries the matching coefficient. The
percentile column, which the churn model's skill feature reads, is left as it was. `mm export`
and `mm evaluate` then score EOMM with this win model against the same truth.

The coefficient is calibrated out of sample: Bradley-Terry fitted on the matches before the last
ten days of the fit's window gives a scale `c` fitted on those ten days' decisive matches; the
exported coefficient is `K c` on the skills fitted on the whole window. The draw model keeps its
intercept and drops its skill-gap term (the simulator's draws do not depend on skill).

Usage (scikit-learn, scipy and polars from the peers' virtualenv, `task peers:setup`), on a
world of `task evaluate:oracle` after its fits:

    ~/.venvs/peers/bin/python notebooks/win_skill_bt.py out/oracle/s9001 skill 2024-02-26
    cargo run -- export --skill out/oracle/s9001/skill-bt --churn out/oracle/s9001/churn --models out/oracle/s9001/models-bt
    cargo run -- evaluate --lake out/oracle/s9001/lake --artifact out/oracle/s9001/models-bt/duel-1v1 \
        --out out/oracle/s9001/evaluation-bt --pool-sizes 300 --rounds 3000

The arguments are the world's directory, the skill fit's folder in it and the fit's `--until`.
This is a diagnostic, not a pipeline stage. `mm fit skill` now fits its own win skill
(`pipelines/fit/src/skill/win.rs`, a `win_skill` column beside raw skill, read by a team win model
with `basis: win-skill`); this script swaps the raw skill column itself, so SkillMM pairs on it
too, and it needs scikit-learn.
"""

import json
import shutil
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import polars as pl
from scipy import sparse
from scipy.optimize import minimize_scalar
from scipy.stats import spearmanr
from sklearn.linear_model import LogisticRegression

# Inverse L2 strength: on seed 9001, Spearman against the true skill was 0.851, 0.875 and 0.883
# at C = 1, 3 and 10 (raw skill: 0.780 over the same players).
C = 10.0
CALIBRATION_DAYS = 10


def main(root: Path, skill: str, until: str) -> None:
    cut = datetime.fromisoformat(until).replace(tzinfo=timezone.utc)
    mid = cut - timedelta(days=CALIBRATION_DAYS)
    lake = pl.read_parquet(root / "lake/matches/*/*.parquet").filter(
        (pl.col("mode") == "duel-1v1") & (pl.col("start_time") < cut)
    )
    teams = lake["team"].unique().sort().to_list()
    if len(teams) != 2:
        raise SystemExit(f"{root}: a 1v1 lake has two team numbers per match, found {teams}")
    a = lake.filter(pl.col("team") == teams[0]).select("match_id", "start_time", pa="player_id", oa="outcome")
    b = lake.filter(pl.col("team") == teams[1]).select("match_id", pb="player_id")
    x = a.join(b, on="match_id").filter(pl.col("oa") != "draw")
    ids = sorted(set(x["pa"].to_list()) | set(x["pb"].to_list()))
    ix = {p: i for i, p in enumerate(ids)}
    ia = np.array([ix[p] for p in x["pa"]])
    ib = np.array([ix[p] for p in x["pb"]])
    n = len(x)
    y = (x["oa"] == "win").to_numpy()
    rows = np.r_[np.arange(n), np.arange(n)]
    design = sparse.csr_matrix((np.r_[np.ones(n), -np.ones(n)], (rows, np.r_[ia, ib])), shape=(n, len(ids)))
    early = x.select(pl.col("start_time") < mid).to_series().to_numpy()

    def bradley_terry(m: np.ndarray) -> np.ndarray:
        return LogisticRegression(C=C, fit_intercept=False, max_iter=3000).fit(design[m], y[m]).coef_[0]

    theta_early = bradley_terry(early)
    gap, late_y = theta_early[ia[~early]] - theta_early[ib[~early]], y[~early]

    def nll(c: float) -> float:
        p = 1.0 / (1.0 + np.exp(-c * gap))
        return -np.sum(late_y * np.log(p) + (1 - late_y) * np.log1p(-p))

    c = minimize_scalar(nll, bounds=(0.01, 3.0), method="bounded").x
    theta = bradley_terry(np.ones(n, bool))
    k = 1.2 * np.abs(theta).max()
    src, dst = root / skill, root / f"{skill}-bt"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    players = pl.read_parquet(src / "players.parquet")
    bt = dict(zip(ids, theta / k))
    swapped = players.with_columns(
        raw_skill=pl.col("player_id")
        .replace_strict(bt, default=0.0, return_dtype=pl.Float64)
        .cast(players.schema["raw_skill"])
    )
    swapped.write_parquet(dst / "players.parquet")
    team = json.loads((dst / "team_model.json").read_text())
    team["model"]["skill_coef"] = float(k * c)
    team["model"]["draw"]["abs_diff_coef"] = 0.0
    (dst / "team_model.json").write_text(json.dumps(team, indent=2))

    truth = (
        pl.read_parquet(root / "lake/truth/player_matches/*/*.parquet")
        .filter(pl.col("start_time") < cut)
        .sort("start_time")
        .group_by("player_id")
        .agg(pl.col("true_skill").last())
    )
    true = dict(zip(truth["player_id"], truth["true_skill"]))
    known = [p for p in players["player_id"] if p in true]
    raw = dict(zip(players["player_id"], players["raw_skill"]))
    print(
        f"{root}: Bradley-Terry on {n} decisive matches of {len(ids)} players (C = {C}); scale {c:.3f} "
        f"fitted on the last {CALIBRATION_DAYS} days, K = {k:.3f}, exported coefficient {k * c:.3f}"
    )
    print(
        f"Spearman against the true skill at the cutoff over {len(known)} players: raw skill "
        f"{spearmanr([raw[p] for p in known], [true[p] for p in known]).statistic:.3f}, Bradley-Terry "
        f"{spearmanr([bt.get(p, 0.0) for p in known], [true[p] for p in known]).statistic:.3f}"
    )
    print(f"wrote {dst}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "skill", sys.argv[3] if len(sys.argv) > 3 else "2024-02-26")
