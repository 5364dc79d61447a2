"""Which features make the churn model drift over time? Refits scikit-learn's LogisticRegression
(same C, standardised features, same rows and split) on an `mm fit churn` output folder's
exported table with some features dropped, and prints the scoring window's mean prediction,
churn rate, calibration error (10 bins) and AUC.

    python tests/peers/churn_feature_drift.py out/churn
"""

import argparse
import json
from pathlib import Path

import numpy as np
import polars as pl
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler


def ece(p, y, bins=10):
    b = np.minimum((p * bins).astype(int), bins - 1)
    return sum((b == k).sum() / len(p) * abs(p[b == k].mean() - y[b == k].mean()) for k in range(bins) if (b == k).any())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", help="the mm fit churn output folder")
    a = ap.parse_args()
    model = json.loads((Path(a.out) / "churn_model.json").read_text())["model"]
    names, c = model["feature_names"], model["c"]
    d = pl.read_parquet(Path(a.out) / "churn_features.parquet")
    train, score = d.filter(pl.col("split") == "train"), d.filter(pl.col("split") == "score")
    ys = score["churned"].to_numpy().astype(int)
    drops = [[], ["log_games"], ["matches_last_1m"], ["log_games", "matches_last_1m"]]
    for drop in drops:
        keep = [n for n in names if n not in drop and not (n.startswith(tuple(drop)) and n.endswith("_known"))]
        x = train.select(keep).to_numpy().astype(float)
        s = StandardScaler().fit(x)
        lr = LogisticRegression(C=c, max_iter=2000).fit(s.transform(x), train["churned"].to_numpy().astype(int))
        p = lr.predict_proba(s.transform(score.select(keep).to_numpy().astype(float)))[:, 1]
        print(json.dumps({"dropped": drop, "mean_prediction": p.mean(), "churn_rate": ys.mean(),
                          "ece": ece(p, ys), "auc": roc_auc_score(ys, p)}))


if __name__ == "__main__":
    main()
