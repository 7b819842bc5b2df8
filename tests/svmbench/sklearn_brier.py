#!/usr/bin/python3
"""Golden Brier score for online/svm's TestProbabilityBrier.

Run from the repository root with Debian's python3-sklearn:

    /usr/bin/python3 tests/svmbench/sklearn_brier.py

It reads online/svm/testdata/breast_cancer.csv, makes one stratified 70/30 split
(train_test_split(test_size=0.3, stratify=y, random_state=0)), standardises the features with
StandardScaler fitted on the training part (population standard deviation), fits
SVC(kernel="rbf", C=1, gamma=1/d, probability=True, random_state=0) — Platt scaling on internal
5-fold CV — and writes

    online/svm/testdata/breast_cancer_split.txt   "train" and "test" lines of 0-based row indices
    online/svm/testdata/breast_cancer_brier.tsv   C, gamma, Brier score of P(y=+1) on the test part,
                                                  test error, sklearn version
"""
import os
import sys

import numpy as np
import sklearn
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "online", "svm", "testdata")
data = np.loadtxt(os.path.join(here, "breast_cancer.csv"), delimiter=",", skiprows=1)
X, y = data[:, :-1], data[:, -1]
idx = np.arange(len(y))
tr, te = train_test_split(idx, test_size=0.3, stratify=y, random_state=0)
tr.sort()
te.sort()
sc = StandardScaler().fit(X[tr])
Xtr, Xte = sc.transform(X[tr]), sc.transform(X[te])
C, gamma = 1.0, 1.0 / X.shape[1]
clf = SVC(kernel="rbf", C=C, gamma=gamma, probability=True, random_state=0).fit(Xtr, y[tr])
pos = list(clf.classes_).index(1.0)
p = clf.predict_proba(Xte)[:, pos]
brier = float(np.mean((p - (y[te] == 1)) ** 2))
err = float(np.mean(clf.predict(Xte) != y[te]))

with open(os.path.join(here, "breast_cancer_split.txt"), "w") as f:
    f.write("train " + " ".join(map(str, tr)) + "\n")
    f.write("test " + " ".join(map(str, te)) + "\n")
with open(os.path.join(here, "breast_cancer_brier.tsv"), "w") as f:
    f.write("C\tgamma\tbrier\ttest_error\tsklearn\n")
    f.write("%r\t%r\t%.10f\t%.10f\t%s\n" % (C, gamma, brier, err, sklearn.__version__))
print("sklearn %s: Brier %.6f, test error %.4f (n_test = %d)" % (sklearn.__version__, brier, err, len(te)), file=sys.stderr)
