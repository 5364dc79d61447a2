"""How far two churn models (`churn_model.json` of `mm fit churn`) are apart: the chosen C, the
rows they were fitted on, whether the features are the same, and the largest differences of
their coefficients, intercepts, means, scales and cross-validation grids.

    python3 tests/bench/churn_models_diff.py A/churn_model.json B/churn_model.json

tests/bench/churn_fit_vs.sh runs it on each pair of runs (docs/benchmarks.md)."""

import json
import sys


def main(a_path: str, b_path: str) -> None:
    a = json.load(open(a_path))["model"]
    b = json.load(open(b_path))["model"]
    print(f"C {a['c']} and {b['c']}; rows {a['rows']} and {b['rows']}; "
          f"cross-validation rows {a['cv_rows']} and {b['cv_rows']}")
    print("same features:", a["feature_names"] == b["feature_names"])
    for k in ("coef", "mean", "scale"):
        d = max(abs(x - y) for x, y in zip(a[k], b[k]))
        print(f"{k}: largest difference {d:.2g} (largest value {max(abs(x) for x in a[k]):.3g})")
    print(f"intercept: difference {abs(a['intercept'] - b['intercept']):.2g}")
    grid = max(abs(x["cv_log_loss"] - y["cv_log_loss"]) for x, y in zip(a["grid"], b["grid"]))
    print(f"cross-validation log-loss: largest difference {grid:.2g}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
