"""scikit-learn reference for clicklog_test.go (issue 17).

usage: sklearn_ref.py CSV NTRAIN NTEST C [C ...]

Reads the click log CSV (country,device,category,user,item,click), one-hot
encodes the five fields plus the device x category interaction on the
first NTRAIN rows (scipy sparse; values first seen in the test rows get no
column), fits LogisticRegression(C, lbfgs) for each C and prints, per C, a
line "C logloss" of the log loss on the next NTEST rows. Exit code 3: no
scikit-learn.
"""
import sys

try:
    import numpy as np
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import log_loss
except ImportError as e:  # the Go test skips
    print("missing:", e)
    sys.exit(3)


def main():
    path, ntrain, ntest = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cs = [float(c) for c in sys.argv[4:]]
    rows, ys = [], []
    with open(path) as f:
        header = f.readline().strip().split(",")
        assert header[:5] == ["country", "device", "category", "user", "item"], header
        for line in f:
            if len(rows) == ntrain + ntest:
                break
            p = line.rstrip("\n").split(",")
            rows.append(["%s=%s" % (header[j], p[j]) for j in range(5)] + ["device*category=%s*%s" % (p[1], p[2])])
            ys.append(int(p[5]))
    cols = {}
    for r in rows[:ntrain]:
        for k in r:
            if k not in cols:
                cols[k] = len(cols)

    def matrix(rs):
        ind, ptr = [], [0]
        for r in rs:
            ind.extend(cols[k] for k in r if k in cols)
            ptr.append(len(ind))
        return sp.csr_matrix((np.ones(len(ind)), np.array(ind), np.array(ptr)), shape=(len(rs), len(cols)))

    xtr, xte = matrix(rows[:ntrain]), matrix(rows[ntrain:])
    ytr, yte = np.array(ys[:ntrain]), np.array(ys[ntrain:])
    for c in cs:
        m = LogisticRegression(C=c, solver="lbfgs", max_iter=2000, tol=1e-6).fit(xtr, ytr)
        print(c, log_loss(yte, m.predict_proba(xte)[:, 1], labels=[0, 1]))
    sys.stdout.flush()


main()
