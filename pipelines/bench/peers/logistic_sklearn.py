import json, sys, time
sys.path.insert(0, sys.argv[1])
from bench_lr import load_xy
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score, log_loss
Xtr, ytr, _ = load_xy(sys.argv[2]); Xte, yte, _ = load_xy(sys.argv[3])
fits = []
for _ in range(int(sys.argv[4])):
    m = LogisticRegression(C=1.0, solver="lbfgs", max_iter=200)
    t = time.perf_counter(); m.fit(Xtr, ytr); fits.append(time.perf_counter() - t)
w, b = m.coef_[0], float(m.intercept_[0])
obj = float(log_loss(ytr, m.predict_proba(Xtr)[:, 1], normalize=False) + 0.5 * np.dot(w, w))
print(json.dumps({"fit_s": fits, "n_iter": int(m.n_iter_[0]), "objective": obj,
                  "test_auc": float(roc_auc_score(yte, m.predict_proba(Xte)[:, 1]))}))
