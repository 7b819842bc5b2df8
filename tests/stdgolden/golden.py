#!/usr/bin/python3
"""Golden scikit-learn numbers for standardised SVC / KernelRidge on breast_cancer.

Run from the repository root with Debian's python3-sklearn (NOT a pyenv python):

    /usr/bin/python3 tests/stdgolden/golden.py

Generated with scikit-learn 1.2.1, numpy 1.24.2, scipy 1.10.1 (Debian 12 packages);
the versions actually used are also written into the JSON.

Reads  eval/testdata/breast_cancer.csv   (header row, 30 raw features, last column
                                          `label` in {-1,+1}; 569 rows)
Writes eval/testdata/breast_cancer_std_golden.json

For seed in 0..9:
  train, test = train_test_split(np.arange(569), test_size=0.3, stratify=y,
                                 random_state=seed)   (index order kept as returned;
                                 0-based data rows, header excluded)
  scaler = StandardScaler().fit(X[train])             (population std, ddof=0)
  SVC(C=1.0, kernel="rbf", gamma=1/30, tol=1e-3, shrinking=True, cache_size=200)
      fitted on the scaled training rows: decision_function on the scaled test rows,
      test error = mean(sign(decision) != y) with decision 0 counted as an error,
      n_sv = n_support_.sum()
  KernelRidge(alpha=1.0, kernel="rbf", gamma=1/30) fitted on the scaled training rows
      with y in {-1,+1} as float: predictions on the scaled test rows, test error of
      sign(prediction) vs y (0 counted as an error), Kendall tau-b
      (scipy.stats.kendalltau, variant="b") of prediction vs y
  plus the scaler's mean_ and scale_.
Top level: versions, C, gamma, krr_alpha, per-split records and the means over the
10 splits of the SVC error, KRR error and KRR tau-b.

Deterministic: no randomness besides the fixed random_state seeds.
"""
import json
import os

import numpy as np
import scipy
import sklearn
from scipy import stats
from sklearn.kernel_ridge import KernelRidge
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = os.path.join(ROOT, "eval", "testdata", "breast_cancer.csv")
OUT = os.path.join(ROOT, "eval", "testdata", "breast_cancer_std_golden.json")

C = 1.0
KRR_ALPHA = 1.0
SEEDS = range(10)


def sign_error(f, y):
    """Fraction of rows where sign(f) != y; f == 0 counts as an error."""
    return float(np.mean(np.where(f > 0, 1.0, np.where(f < 0, -1.0, 0.0)) != y))


def floats(a):
    return [float(v) for v in np.asarray(a).ravel()]


def main():
    data = np.loadtxt(DATA, delimiter=",", skiprows=1)
    X, y = data[:, :-1], data[:, -1]
    n, d = X.shape
    assert (n, d) == (569, 30), (n, d)
    assert set(np.unique(y)) == {-1.0, 1.0}
    gamma = 1.0 / d

    splits = []
    for seed in SEEDS:
        train, test = train_test_split(np.arange(n), test_size=0.3, stratify=y,
                                       random_state=seed)
        scaler = StandardScaler().fit(X[train])
        Xtr, Xte = scaler.transform(X[train]), scaler.transform(X[test])
        ytr, yte = y[train], y[test]

        svc = SVC(C=C, kernel="rbf", gamma=gamma, tol=1e-3, shrinking=True,
                  cache_size=200).fit(Xtr, ytr)
        assert list(svc.classes_) == [-1.0, 1.0]  # decision > 0 <=> +1
        dec = svc.decision_function(Xte)

        krr = KernelRidge(alpha=KRR_ALPHA, kernel="rbf", gamma=gamma).fit(Xtr, ytr)
        pred = krr.predict(Xte)
        tau = stats.kendalltau(pred, yte, variant="b")

        splits.append({
            "seed": seed,
            "train": [int(i) for i in train],
            "test": [int(i) for i in test],
            "mean": floats(scaler.mean_),
            "scale": floats(scaler.scale_),
            "svc": {"decision": floats(dec), "error": sign_error(dec, yte),
                    "n_sv": int(svc.n_support_.sum())},
            "krr": {"prediction": floats(pred), "error": sign_error(pred, yte),
                    "kendall_tau_b": float(tau.correlation)},
        })

    out = {
        "sklearn": sklearn.__version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "C": C,
        "gamma": gamma,
        "krr_alpha": KRR_ALPHA,
        "splits": splits,
        "svc_mean_error": float(np.mean([s["svc"]["error"] for s in splits])),
        "krr_mean_error": float(np.mean([s["krr"]["error"] for s in splits])),
        "krr_mean_tau_b": float(np.mean([s["krr"]["kendall_tau_b"] for s in splits])),
    }
    with open(OUT, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print("wrote %s: svc_mean_error=%.6f krr_mean_error=%.6f krr_mean_tau_b=%.6f"
          % (os.path.normpath(OUT), out["svc_mean_error"], out["krr_mean_error"],
             out["krr_mean_tau_b"]))


if __name__ == "__main__":
    main()
