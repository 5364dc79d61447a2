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
Then issue 29's boosted alternative (`boosted`): gradient-boosted trees, calibrated, on the same
rows, scored beside ours.

Usage (scikit-learn and polars from the peers' virtualenv, `task peers:setup`):

    ~/.venvs/peers/bin/python notebooks/churn_sensitivity.py out/oracle/s9001 [churn]

where the directory holds `lake/` (a simulated 1v1 lake) and `churn/` (`mm fit churn` on it;
the second argument names another fit's directory), as `task evaluate:oracle` leaves them.
Last, it bounds what any model can know of the sensitivity from the players' histories
(`observable_bound`).
"""

import json
import sys
from pathlib import Path

import numpy as np
import polars as pl
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler


def main(root: Path, churn: str) -> None:
    model = json.loads((root / churn / "churn_model.json").read_text())["model"]
    names = model["feature_names"]
    col = {n: k for k, n in enumerate(names)}
    coef, mean = np.array(model["coef"]), np.array(model["mean"])
    scale = np.array(model["scale"])
    scale = np.where(scale == 0, 1.0, scale)
    feats = pl.read_parquet(root / churn / "churn_features.parquet")
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

    def outcome_of(k: int) -> np.ndarray:
        """Earlier match k's outcome: 0 win, 1 draw, 2 loss, -1 absent."""
        w, d = x[:, col[f"last{k}_win"]], x[:, col[f"last{k}_draw"]]
        return np.where(x[:, col[f"last{k}_present"]] == 0, -1, np.where(w == 1, 0, np.where(d == 1, 1, 2)))

    def with_outcome(outcome: int) -> np.ndarray:
        """The feature rows with the upcoming outcome set (0 win, 2 loss)."""
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
        # The outcome pattern: the cell of the upcoming outcome and the k - 1 before it.
        pattern = [n for n in names if n.startswith("now_pattern_")]
        if pattern:
            seq = np.full(len(z), "WDL"[outcome])
            for k in range(1, len(pattern[0]) - len("now_pattern_")):
                seq = np.char.add(seq, np.array(["W", "D", "L", "-"])[outcome_of(k)])
            for n in pattern:
                z[:, col[n]] = (seq == n[len("now_pattern_") :]).astype(float)
        return z

    def logistic(z: np.ndarray) -> np.ndarray:
        """The exported model's churn on feature rows `z`."""
        return 1.0 / (1.0 + np.exp(-(model["intercept"] + ((z - mean) / scale) @ coef)))

    def ours(outcome: int) -> np.ndarray:
        """The exported model's churn with the upcoming outcome set (0 win, 2 loss)."""
        return logistic(with_outcome(outcome))

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
    # The last two outcomes as one of 9 sequences (the earlier part of a pattern of 3).
    o1, o2 = outcome_of(1), outcome_of(2)
    runs = np.column_stack([((o1 == a) & (o2 == b)).astype(float) for a in range(3) for b in range(3)])
    lost1, lost2 = o1 == 2, o2 == 2
    for a in (False, True):
        for b in (False, True):
            m = (lost1 == a) & (lost2 == b)
            print(f"  last match lost {a!s:<5}, the one before lost {b!s:<5}: mean true sensitivity {true_d[m].mean():.3f} ({m.sum()} rows)")
    either = (lost1 | lost2).astype(float)
    print(f"  correlation of 'either of the last two lost' with the true sensitivity: {np.corrcoef(either, true_d)[0, 1]:.3f}")
    for label, design_ols in (
        ("linear", ols),
        ("linear + squares", np.column_stack([ols, base**2])),
        ("linear + squares + the last two outcomes as one of 9 runs", np.column_stack([ols, base**2, runs])),
    ):
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
    with_quit = np.column_stack([ols, base**2, runs, quit, quit**2])
    beta = np.linalg.lstsq(with_quit[train], true_d[train], rcond=None)[0]
    fit = with_quit @ beta
    print(
        "least squares on the true sensitivity (linear + squares + runs + the hidden quit_base): "
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

    boosted(x, y, train, score, with_outcome, true_d, logistic)


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error over equal-count bins of the prediction."""
    order = np.argsort(p)
    return float(sum(abs(p[b].mean() - y[b].mean()) * len(b) for b in np.array_split(order, bins)) / len(p))


def boosted(x, y, train, score, with_outcome, true_d, logistic) -> None:
    """Issue 29's boosted alternative: gradient-boosted trees (scikit-learn's histogram GBDT) on
    the same feature rows, Platt- or isotonic-calibrated by 3-fold cross-validation on the
    training rows, scored like ours on the later scoring rows: log-loss and calibration error
    against the labels, and its sensitivity's correlation with the truth."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import log_loss

    def report(label: str, predict) -> None:
        p = predict(x[score])
        d = predict(with_outcome(2)[score]) - predict(with_outcome(0)[score])
        print(
            f"{label}: scoring rows log-loss {log_loss(y[score], p):.5f}, ECE {ece(p, y[score]):.4f}; "
            f"sensitivity sd {d.std():.4f}, correlation with the truth {np.corrcoef(d, true_d[score])[0, 1]:.3f}"
        )

    report("ours (the exported logistic model)", logistic)
    for lr, leaves in ((0.05, 15), (0.05, 31)):
        gb = HistGradientBoostingClassifier(
            learning_rate=lr, max_leaf_nodes=leaves, max_iter=500, early_stopping=True,
            validation_fraction=0.2, n_iter_no_change=20, l2_regularization=1.0, random_state=0,
        )
        for method in ("sigmoid", "isotonic"):
            cal = CalibratedClassifierCV(gb, method=method, cv=3).fit(x[train], y[train])
            report(f"boosted trees (learning rate {lr}, {leaves} leaves, {method})",
                   lambda z: cal.predict_proba(z)[:, 1])


def observable_bound(root: Path) -> None:
    """How well the sensitivity can be known from what a player's history shows.

    A learner that knew the simulator's stop model and every input of it except the hidden
    `quit_base` (the session position, the outcomes, games played and the return-time
    distribution, all read off the truth's own `p_stop` and conditional churn), and estimated
    `quit_base` as its posterior mean given the player's earlier stop decisions (a grid over
    its N(0, 0.35) prior, each earlier match a Bernoulli stop with the truth's probability).
    What such a learner's sensitivity shares with the truth bounds what any churn model fitted
    on this history can: the rest is the propensity the history has not yet revealed.
    """
    t = pl.read_parquet(root / "lake/truth/player_matches/*/*.parquet").filter(pl.col("mode") == "duel-1v1")
    t = t.join(
        pl.read_parquet(root / "lake/truth/players.parquet").select("player_id", "quit_base"), on="player_id"
    ).sort("player_id", "start_time", "match_id")
    logit = lambda p: np.log(p / (1 - p))  # noqa: E731
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    p_stop, qb = t["p_stop"].to_numpy(), t["quit_base"].to_numpy()
    tail = t["churn_8h"].to_numpy() / p_stop  # P(no match within 8 h | the player stops)
    known = logit(p_stop) - qb  # the stop logit without the hidden propensity
    stopped = t["stopped"].to_numpy()
    # Stop logits under each hypothetical outcome, without quit_base (tail as realised).
    x_if = {o: logit(np.clip(t[f"churn_8h_if_{o}"].to_numpy() / tail, 1e-9, 1 - 1e-9)) - qb for o in ("win", "loss")}
    grid = np.linspace(-2.0, 2.0, 161)
    prior = -0.5 * (grid / 0.35) ** 2
    pid = t["player_id"].to_numpy()
    est = {o: np.zeros(len(t)) for o in x_if}
    ll = prior.copy()
    for i in range(len(t)):
        if i > 0 and pid[i] != pid[i - 1]:
            ll = prior.copy()
        w = np.exp(ll - ll.max())
        w /= w.sum()
        for o in x_if:
            est[o][i] = tail[i] * (w @ sig(x_if[o][i] + grid))
        p = sig(known[i] + grid)
        ll += np.log(p) if stopped[i] else np.log1p(-p)
    true_d = (t["churn_8h_if_loss"] - t["churn_8h_if_win"]).to_numpy()
    est_d = est["loss"] - est["win"]
    ms = t["start_time"].dt.epoch("ms").to_numpy()
    late = ms >= np.quantile(ms, 0.75)
    print(
        "a learner knowing the stop model, quit_base estimated from the player's earlier stops: "
        f"correlation with the true sensitivity {np.corrcoef(est_d[late], true_d[late])[0, 1]:.3f} "
        "on the last quarter's rows"
    )


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "out/oracle/s9001")
    main(root, sys.argv[2] if len(sys.argv) > 2 else "churn")
    observable_bound(root)
