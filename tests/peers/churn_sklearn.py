#!/usr/bin/env python3
"""scikit-learn on the exported churn feature table: same features, same split, same C.

Reads `churn_features.parquet` and `churn_model.json` from an `mm fit churn` output folder,
fits StandardScaler + LogisticRegression(C=<ours>, lbfgs) on the rows marked `train`, scores the
rows marked `score`, and prints one JSON object: both AUCs and log-losses on the scoring rows,
their difference, and the largest difference of the standardised coefficients.

When the exported model was refitted on every labelled row (`refit` in `churn_metrics.json`, the
default), the predictions on the scoring rows are still the training window's model's, and the
coefficients compared are those of a second scikit-learn fit on the rows marked `train` and
`score` together (when no labelled row was left out by the row cap).

    python tests/peers/churn_sklearn.py out/churn [--max-diff 0.002]

Exits 1 when the AUCs differ by more than --max-diff, or a standardised coefficient by more than
--max-coef-diff (both fits solve the same penalised problem, so they should agree closely).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import polars as pl
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score
from sklearn.preprocessing import StandardScaler


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="the mm fit churn output folder")
    ap.add_argument("--max-diff", type=float, default=0.002)
    ap.add_argument("--max-coef-diff", type=float, default=1e-3)
    a = ap.parse_args()
    spec = json.load(open(os.path.join(a.out, "churn_model.json")))
    model = spec["model"]
    names = model["feature_names"]
    df = pl.read_parquet(os.path.join(a.out, "churn_features.parquet"),
                         columns=names + ["churned", "split", "p_churn"])
    tr = df.filter(pl.col("split") == "train")
    sc = df.filter(pl.col("split") == "score")
    xtr = tr.select(names).to_numpy().astype(np.float64)
    ytr = tr["churned"].to_numpy().astype(np.int64)
    xsc = sc.select(names).to_numpy().astype(np.float64)
    ysc = sc["churned"].to_numpy().astype(np.int64)
    scaler = StandardScaler().fit(xtr)
    t = time.perf_counter()
    lr = LogisticRegression(C=model["c"], solver="lbfgs", max_iter=5000, tol=1e-8)
    lr.fit(scaler.transform(xtr), ytr)
    fit_s = time.perf_counter() - t
    p_sk = lr.predict_proba(scaler.transform(xsc))[:, 1]
    p_mm = sc["p_churn"].to_numpy()
    auc_sk = float(roc_auc_score(ysc, p_sk))
    auc_mm = float(roc_auc_score(ysc, p_mm))
    # StandardScaler leaves constant columns at scale 1, as ours does.
    coef = lr.coef_[0]
    metrics = json.load(open(os.path.join(a.out, "churn_metrics.json")))
    refit = metrics.get("refit")
    if refit is not None:
        if refit["rows_unused"] > 0:
            sys.exit("the refit left rows out by the row cap; its rows are not marked in the table")
        both = df.filter(pl.col("split").is_in(["train", "score"]))
        xb = both.select(names).to_numpy().astype(np.float64)
        sb = StandardScaler().fit(xb)
        coef = LogisticRegression(C=model["c"], solver="lbfgs", max_iter=5000, tol=1e-8).fit(
            sb.transform(xb), both["churned"].to_numpy().astype(np.int64)).coef_[0]
    coef_diff = float(np.max(np.abs(coef - np.asarray(model["coef"]))))
    res = {
        "train_rows": int(len(ytr)), "score_rows": int(len(ysc)), "features": len(names),
        "C": model["c"], "sklearn_fit_s": fit_s, "sklearn_n_iter": int(lr.n_iter_[0]),
        "auc_mm": auc_mm, "auc_sklearn": auc_sk, "auc_diff": auc_mm - auc_sk,
        "log_loss_mm": float(log_loss(ysc, p_mm)), "log_loss_sklearn": float(log_loss(ysc, p_sk)),
        "max_abs_coef_diff": coef_diff, "coef_of": "refit on train + score" if refit else "train",
        "max_abs_prediction_diff": float(np.max(np.abs(p_mm - p_sk))),
    }
    print(json.dumps(res, indent=1))
    if abs(auc_mm - auc_sk) > a.max_diff:
        print(f"AUC differs by {auc_mm - auc_sk:+.4f} (> {a.max_diff})", file=sys.stderr)
        sys.exit(1)
    if coef_diff > a.max_coef_diff:
        print(f"a coefficient differs by {coef_diff:.2e} (> {a.max_coef_diff})", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
