#!/usr/bin/python3
"""Reference implementation of the low-rank large-margin classifier
(docs/math.md, "Low-rank classifier"; the block coordinate descent of
Pirsiavash, Ramanan & Fowlkes, NIPS 2009, Algorithm 1) for the Go tests of
online/lowrank.

It is written from the formulas, not from the Go code: each block step
builds the n×n Gram matrix of the step's kernel exactly as the algorithm
states it,

    U-step: K_ij = <X_i, X_j V (VᵀV)⁺ Vᵀ>_F,   U = Σ α_i y_i X_i V (VᵀV)⁺
    V-step: K_ij = <X_i, U (UᵀU)⁺ Uᵀ X_j>_F,   V = Σ α_i y_i X_iᵀ U (UᵀU)⁺

and solves the SVM dual with scikit-learn's SVC(kernel='precomputed')
(LIBSVM), whereas the Go code trains a linear SVM on the transformed
features X V (VᵀV)^(-1/2). Same initialisation as the Go code: V⁰ = the
top-r right singular vectors of the difference of the class means. Same
stopping rule: after a full iteration (U-step then V-step) stop when the
primal objective ½‖UVᵀ‖²_F + C Σ max(0, 1 − y_i(<UVᵀ, X_i> + b)) changed
by at most tol·|objective|, or after max_iterations.

Usage (from the repository root or anywhere):

    /usr/bin/python3 online/lowrank/testdata/reference.py [--out DIR] [--regenerate]

writes, into DIR (default: this script's directory),

    train.csv.gz, test.csv.gz   the synthetic rank-1 problem (made only when
                                absent or with --regenerate; label then the
                                d1·d2 features of X in row-major order)
    reference.json              per rank: objective, iterations, training
                                and test error, bias; the parameters
    pred_rank<r>.csv            the decision value of every test row

Needs numpy and scikit-learn (1.2.1 made the stored outputs, numpy on
OpenBLAS 0.3.21's SkylakeX kernels: OPENBLAS_CORETYPE=SkylakeX reproduces
them on another AVX-512 machine).
"""

import argparse
import gzip
import json
import os
import sys

import numpy as np
from sklearn.svm import SVC

D1, D2 = 20, 20
N_TRAIN, N_TEST = 400, 1000
SEED = 2009
NOISE = 0.3  # y = sign(<u vᵀ, X> + NOISE·ε)
C = 1.0
TOL = 1e-4          # relative change of the objective
MAX_ITERATIONS = 50
SVM_TOL = 1e-5      # LIBSVM's stopping tolerance of each block's dual
RANKS = (1, 2)


def make_problem():
    """The synthetic rank-1 problem: X with i.i.d. N(0, 1) entries rounded
    to two decimals, y from the sign of <u vᵀ, X> plus Gaussian noise, u and
    v random unit vectors."""
    rng = np.random.default_rng(SEED)
    u = rng.standard_normal(D1)
    v = rng.standard_normal(D2)
    u /= np.linalg.norm(u)
    v /= np.linalg.norm(v)
    n = N_TRAIN + N_TEST
    X = np.round(rng.standard_normal((n, D1, D2)), 2)
    s = np.einsum("j,ijk,k->i", u, X, v) + NOISE * rng.standard_normal(n)
    y = np.where(s > 0, 1.0, -1.0)
    return (X[:N_TRAIN], y[:N_TRAIN]), (X[N_TRAIN:], y[N_TRAIN:])


def write_csv(path, X, y):
    with gzip.open(path, "wt", compresslevel=9) as f:
        f.write("# label, then %d×%d features row-major\n" % (D1, D2))
        for xi, yi in zip(X, y):
            f.write("%d," % int(yi) + ",".join("%.2f" % v for v in xi.ravel()) + "\n")


def read_csv(path):
    rows = []
    with gzip.open(path, "rt") as f:
        for line in f:
            if line.startswith("#"):
                continue
            rows.append([float(v) for v in line.split(",")])
    a = np.array(rows)
    return a[:, 1:].reshape(-1, D1, D2), a[:, 0]


def init_v(X, y, r):
    """V⁰: the top-r right singular vectors of mean(X | y=+1) − mean(X | y=−1)."""
    M = X[y > 0].mean(axis=0) - X[y < 0].mean(axis=0)
    _, _, vt = np.linalg.svd(M)
    return vt[:r].T.copy()


def svm_step(K, y):
    """Solves the SVM dual on the Gram matrix K; returns α_i y_i (n) and b."""
    svc = SVC(kernel="precomputed", C=C, tol=SVM_TOL, cache_size=200)
    svc.fit(K, y)
    coef = np.zeros(len(y))
    # classes_ is [-1, 1]: dual_coef_ holds α_i y_i with the decision
    # function Σ coef_i K(x_i, x) + intercept_ positive for class +1.
    coef[svc.support_] = svc.dual_coef_[0]
    dec = K @ coef + svc.intercept_[0]
    assert np.allclose(dec, svc.decision_function(K), atol=1e-8), "sign convention"
    return coef, svc.intercept_[0]


def objective(B, b, X, y):
    f = np.einsum("jk,ijk->i", B, X) + b
    return 0.5 * np.sum(B * B) + C * np.sum(np.maximum(0.0, 1.0 - y * f))


def fit(X, y, r):
    n = len(y)
    flat = X.reshape(n, -1)
    V = init_v(X, y, r)
    prev = np.inf
    it = 0
    while it < MAX_ITERATIONS:
        it += 1
        # U-step, V fixed.
        G = np.linalg.pinv(V.T @ V)
        P = V @ G @ V.T                                  # d2×d2
        K = flat @ (X @ P).reshape(n, -1).T              # <X_i, X_j P>
        coef, b = svm_step(K, y)
        U = np.einsum("i,ijk->jk", coef, X) @ V @ G
        # V-step, U fixed.
        G = np.linalg.pinv(U.T @ U)
        P = U @ G @ U.T                                  # d1×d1
        K = flat @ np.einsum("ab,jbk->jak", P, X).reshape(n, -1).T  # <X_i, P X_j>
        coef, b = svm_step(K, y)
        V = np.einsum("i,ijk->jk", coef, X).T @ U @ G
        B = U @ V.T
        obj = objective(B, b, X, y)
        if abs(prev - obj) <= TOL * abs(obj):
            break
        prev = obj
    return B, b, obj, it


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=here)
    ap.add_argument("--regenerate", action="store_true", help="rewrite the data files")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    train_path = os.path.join(args.out, "train.csv.gz")
    test_path = os.path.join(args.out, "test.csv.gz")
    if args.regenerate or not os.path.exists(train_path):
        (Xtr, ytr), (Xte, yte) = make_problem()
        write_csv(train_path, Xtr, ytr)
        write_csv(test_path, Xte, yte)
    Xtr, ytr = read_csv(train_path)  # the stored, rounded values
    Xte, yte = read_csv(test_path)
    out = {"d1": D1, "d2": D2, "C": C, "tol": TOL, "max_iterations": MAX_ITERATIONS,
           "svm_tol": SVM_TOL, "seed": SEED, "noise": NOISE,
           "n_train": len(ytr), "n_test": len(yte), "ranks": {}}
    for r in RANKS:
        B, b, obj, it = fit(Xtr, ytr, r)
        ftr = np.einsum("jk,ijk->i", B, Xtr) + b
        fte = np.einsum("jk,ijk->i", B, Xte) + b
        res = {"objective": obj, "iterations": it, "bias": b,
               "train_error": float(np.mean(np.where(ftr > 0, 1, -1) != ytr)),
               "test_error": float(np.mean(np.where(fte > 0, 1, -1) != yte)),
               "norm_B": float(np.linalg.norm(B))}
        out["ranks"][str(r)] = res
        with open(os.path.join(args.out, "pred_rank%d.csv" % r), "w") as f:
            f.write("decision\n")
            for v in fte:
                f.write("%.10g\n" % v)
        print("rank %d: objective %.6f after %d iterations, train error %.4f, test error %.4f"
              % (r, obj, it, res["train_error"], res["test_error"]), file=sys.stderr)
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
