#!/usr/bin/env python3
"""Times scikit-learn KernelRidge(alpha, kernel="rbf", gamma).fit on the first
m rows of a CSV (features..., target; header row), best of `reps` runs, and
prints one JSON line. Used by `go run ./tests/rankbench`.

    python3 time_sklearn.py data.csv m gamma alpha reps
"""
import json
import sys
import time

import numpy as np
import sklearn
from sklearn.kernel_ridge import KernelRidge

path, m, gamma, alpha, reps = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
D = np.loadtxt(path, delimiter=",", skiprows=1)[:m]
X, y = D[:, :-1], D[:, -1]
best = float("inf")
for _ in range(reps):
    t = time.perf_counter()
    KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma).fit(X, y)
    best = min(best, time.perf_counter() - t)
print(json.dumps(dict(m=m, seconds=best, sklearn=sklearn.__version__, numpy=np.__version__)))
