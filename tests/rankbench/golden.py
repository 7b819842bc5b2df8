#!/usr/bin/env python3
"""Golden values for online/rank (run from the repository root):

    python3 tests/rankbench/golden.py      # writes online/rank/testdata/golden.json

Needs numpy, scipy and scikit-learn (Debian: python3-sklearn python3-scipy).
Contents:
  measures  scipy.stats values (pearsonr, kendalltau = tau-b, somersd(y, f) =
            seed 001's tau, spearmanr) and brute-force O(n^2) ranking error,
            MSD and M1D on small vectors with and without ties;
  splits    boston_ordinal stratified 70/30 splits, seeds 0..9
            (train_test_split(..., stratify=y, random_state=seed));
  lsrrank   on split 0 (features standardised on the training split):
            sklearn KernelRidge(alpha=m*lam/2, kernel="precomputed") on the
            centred kernel H K H and centred targets; alpha and
            K(test, train) @ alpha;
  krr       KernelRidge(alpha=lam, kernel="rbf", gamma=gamma) on the raw
            levels: alpha and test predictions.
"""
import json
import os

import numpy as np
from scipy import stats
from sklearn.kernel_ridge import KernelRidge
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import train_test_split

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "online", "rank", "testdata", "golden.json")
DATA = os.path.join(ROOT, "online", "rank", "testdata", "boston_ordinal.csv")


def brute(f, y):
    n = len(f)
    P = 0
    werr = 0.0
    conc = disc = 0
    for i in range(n):
        for j in range(n):
            if y[i] > y[j]:
                P += 1
                w = 1.0 if f[i] < f[j] else (0.5 if f[i] == f[j] else 0.0)
                werr += (y[i] - y[j]) * w
                conc += f[i] > f[j]
                disc += f[i] < f[j]
    r = y - f
    d = r[:, None] - r[None, :]
    return dict(ranking_error=werr / P, tau_seed_brute=(conc - disc) / P,
                msd=float((d ** 2).sum() / n ** 2), m1d=float(np.abs(d).sum() / n ** 2))


def measure_case(name, f, y):
    f = np.asarray(f, float)
    y = np.asarray(y, float)
    b = brute(f, y)
    sd = stats.somersd(y, f).statistic  # D(f|y) = (C - D) / (pairs untied in y)
    assert abs(sd - b["tau_seed_brute"]) < 1e-12, (sd, b["tau_seed_brute"])
    return dict(name=name, f=f.tolist(), y=y.tolist(),
                pearson=stats.pearsonr(f, y)[0],
                kendall_tau_b=stats.kendalltau(f, y)[0],
                kendall_tau=sd,
                spearman=stats.spearmanr(f, y)[0],
                ranking_error=b["ranking_error"], msd=b["msd"], m1d=b["m1d"])


def main():
    rng = np.random.default_rng(7)
    cases = []
    y = rng.integers(1, 6, 40).astype(float)
    cases.append(measure_case("ordinal_continuous_f", y + rng.normal(0, 1.2, 40), y))
    f = np.round(y + rng.normal(0, 1.0, 40))
    cases.append(measure_case("ordinal_tied_f", f, y))
    y2 = rng.normal(0, 3, 57)
    cases.append(measure_case("continuous", 0.5 * y2 + rng.normal(0, 2, 57), y2))
    cases.append(measure_case("reversed_with_ties", -np.array([1, 2, 2, 3, 3, 3, 4.0]), np.array([1, 1, 2, 2, 3, 5, 4.0])))

    D = np.loadtxt(DATA, delimiter=",", skiprows=1)
    X, yl = D[:, :-1], D[:, -1]
    splits = []
    for seed in range(10):
        tr, te = train_test_split(np.arange(len(yl)), test_size=0.3, stratify=yl, random_state=seed)
        splits.append(dict(seed=seed, train=tr.tolist(), test=te.tolist()))

    tr, te = np.array(splits[0]["train"]), np.array(splits[0]["test"])
    mu, sd = X[tr].mean(0), X[tr].std(0)
    Xtr, Xte = (X[tr] - mu) / sd, (X[te] - mu) / sd
    ytr = yl[tr]
    m = len(tr)
    gamma, lam = 0.05, 1e-3
    K = rbf_kernel(Xtr, Xtr, gamma=gamma)
    H = np.eye(m) - np.ones((m, m)) / m
    kr = KernelRidge(alpha=m * lam / 2, kernel="precomputed").fit(H @ K @ H, ytr - ytr.mean())
    alpha = kr.dual_coef_
    Kte = rbf_kernel(Xte, Xtr, gamma=gamma)
    ls = dict(split=0, gamma=gamma, **{"lambda": lam}, alpha=alpha.tolist(), f_test=(Kte @ alpha).tolist())

    krr = KernelRidge(alpha=0.5, kernel="rbf", gamma=gamma).fit(Xtr, ytr)
    kd = dict(split=0, gamma=gamma, **{"lambda": 0.5}, alpha=krr.dual_coef_.tolist(), f_test=krr.predict(Xte).tolist())

    out = dict(measures=cases, splits=splits, lsrrank=ls, krr=kd,
               versions=dict(numpy=np.__version__, scipy=__import__("scipy").__version__,
                             sklearn=__import__("sklearn").__version__))
    with open(OUT, "w") as fh:
        json.dump(out, fh, indent=0)
        fh.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
