"""How well a fitted 1v1 churn model knows each player's sensitivity to the outcome (issue 29).

EOMM gains over skill matching only through players differing in how much a loss, rather than
a win, raises their churn: the sensitivity `churn(loss) - churn(win)`. On a simulated lake the
truth has it exactly (`churn_8h_if_loss - churn_8h_if_win` per player-match); this script
computes the fitted model's for the same rows (its exported coefficients applied to the feature
table with the upcoming outcome set to a loss, then a win) and compares the two: their spread,
their correlation, and which features each follows. It then fits, with scikit-learn, the
richer alternative of issue 29 that crosses the upcoming win and loss with every other
feature, on the same training rows, and reports its sensitivity's correlation with the truth
on the later scoring rows, beside a bound: least squares fitted to the true sensitivity itself.

Usage (scikit-learn and polars from the peers' virtualenv, `task peers:setup`):

    ~/.venvs/peers/bin/python notebooks/churn_sensitivity.py out/oracle/s9001

where the directory holds `lake/` (a simulated 1v1 lake) and `churn/` (`mm fit churn` on it),
as `task evaluate:oracle` leaves them.
"""

import json
import sys
from pathlib import Path

import numpy as np
import polars as pl
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler


def main(root: Path) -> None:
    model = json.loads((root / "churn/churn_model.json").read_text())["model"]
    names = model["feature_names"]
    col = {n: k for k, n in enumerate(names)}
    coef, mean = np.array(model["coef"]), np.array(model["mean"])
    scale = np.array(model["scale"])
    scale = np.where(scale == 0, 1.0, scale)
    feats = pl.read_parquet(root / "churn/churn_features.parquet")
    truth = pl.read_parquet(root / "lake/truth/player_matches/*/*.parquet").select(
        "match_id", "player_id", "churn_8h_if_win", "churn_8h_if_loss"
    )
    rows = feats.join(truth, on=["match_id", "player_id"])
    x = rows.select(names).to_numpy().astype(float)
    split = rows["split"].to_numpy()
    train, score = split == "train", split == "score"

    def last_k(k: int, what: str) -> np.ndarray:
        if what == "win":
            return x[:, col[f"last{k}_win"]]
        return x[:, col[f"last{k}_present"]] - x[:, col[f"last{k}_win"]] - x[:, col[f"last{k}_draw"]]

    def ours(outcome: int) -> np.ndarray:
        """The exported model's churn with the upcoming outcome set (0 win, 2 loss)."""
        z = x.copy()
        win, loss = float(outcome == 0), float(outcome == 2)
        z[:, col["now_win"]], z[:, col["now_draw"]], z[:, col["now_loss"]] = win, 0.0, loss
        for k in range(1, model["spec"]["outcome_interactions"] + 1):
            for now, flag in (("win", win), ("loss", loss)):
                for before in ("win", "loss"):
                    z[:, col[f"now_{now}_x_last{k}_{before}"]] = flag * last_k(k, before)
        if "past_churn_logodds" in col:
            z[:, col["now_win_x_past_churn"]] = win * z[:, col["past_churn_logodds"]]
            z[:, col["now_loss_x_past_churn"]] = loss * z[:, col["past_churn_logodds"]]
        return 1.0 / (1.0 + np.exp(-(model["intercept"] + ((z - mean) / scale) @ coef)))

    true_d = rows["churn_8h_if_loss"].to_numpy() - rows["churn_8h_if_win"].to_numpy()
    our_d = ours(2) - ours(0)
    print(f"{root}: {len(rows)} rows ({train.sum()} train, {score.sum()} score)")
    print(
        f"sensitivity churn(loss) - churn(win): truth mean {true_d.mean():.4f} sd {true_d.std():.4f}; "
        f"model mean {our_d.mean():.4f} sd {our_d.std():.4f}; correlation {np.corrcoef(our_d, true_d)[0, 1]:.3f} "
        f"(scoring rows {np.corrcoef(our_d[score], true_d[score])[0, 1]:.3f})"
    )
    for n in ["last1_win", "last1_draw", "last1_score_diff", "skill_percentile", "past_churn_logodds"]:
        if n in col:
            v = x[:, col[n]]
            print(
                f"  correlation with {n:<20} truth {np.corrcoef(v, true_d)[0, 1]:+.3f}, "
                f"model {np.corrcoef(v, our_d)[0, 1]:+.3f}"
            )

    # The richer alternative: every non-outcome feature crossed with the upcoming win and loss.
    base = x[:, [k for k, n in enumerate(names) if not n.startswith("now_")]]
    outcome = np.where(x[:, col["now_win"]] == 1, 0, np.where(x[:, col["now_draw"]] == 1, 1, 2))

    def design(o: np.ndarray) -> np.ndarray:
        w, d, l = (o == 0).astype(float), (o == 1).astype(float), (o == 2).astype(float)
        return np.column_stack([base, w, d, l, base * w[:, None], base * l[:, None]])

    # A bound on what the features tell: least squares fitted to the true sensitivity itself
    # (the truth as the target, which no real fit has), on the training rows.
    ols = np.column_stack([np.ones(len(base)), base])
    for label, design_ols in (("linear", ols), ("linear + squares", np.column_stack([ols, base**2]))):
        beta = np.linalg.lstsq(design_ols[train], true_d[train], rcond=None)[0]
        fit = design_ols @ beta
        print(
            f"least squares on the true sensitivity ({label}): correlation with the truth on the "
            f"scoring rows {np.corrcoef(fit[score], true_d[score])[0, 1]:.3f}"
        )

    # The same with the simulator's hidden per-player stop propensity, which no feature holds.
    quit = rows.join(
        pl.read_parquet(root / "lake/truth/players.parquet").select("player_id", "quit_base"),
        on="player_id",
        how="left",
    )["quit_base"].to_numpy()
    with_quit = np.column_stack([ols, base**2, quit, quit**2])
    beta = np.linalg.lstsq(with_quit[train], true_d[train], rcond=None)[0]
    fit = with_quit @ beta
    print(
        "least squares on the true sensitivity (linear + squares + the hidden quit_base): "
        f"correlation {np.corrcoef(fit[score], true_d[score])[0, 1]:.3f}"
    )

    y = rows["churned"].fill_null(False).to_numpy().astype(int)
    std = StandardScaler().fit(design(outcome)[train])
    for c in [0.001, 0.01, 0.1]:
        lr = LogisticRegression(C=c, max_iter=3000).fit(std.transform(design(outcome)[train]), y[train])
        rich = lambda o: lr.predict_proba(std.transform(design(np.full(len(rows), o))))[:, 1]  # noqa: E731
        d = rich(2) - rich(0)
        print(
            f"every feature x outcome, C = {c}: sensitivity sd {d[score].std():.4f}, correlation with the "
            f"truth on the scoring rows {np.corrcoef(d[score], true_d[score])[0, 1]:.3f}"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "out/oracle/s9001"))
