// Package calibrate turns a model's scores into published certainty:
// calibrated probabilities with a validity guarantee for classifiers
// (inductive Venn–Abers prediction, IVAP) and prediction intervals for
// regression and ranking scores (split conformal prediction). Both are
// fitted on a sliding Window of the model's own prequential pairs: every
// score in it was made before the model learned the label, so the pairs are
// out of sample by construction.
//
// # Use
//
// The engine calls Window.Add (classifiers: score, label) or
// Window.AddResidual (regression: prediction, actual value) for every
// labelled event, under the shard lock that guards the window. Every K
// labelled events (Window.Added) it snapshots the window's recent pairs
// (Window.CopyRecentTo)
// and fits a new table on a background goroutine (a Fitter, whose working
// memory serves every refit, or FitVennAbers; FitConformal; the Fitter's
// VennAbersAt and ConformalAt update the last fit's sorted scores with the
// pairs that left and entered the window since, the same table in
// O(n + K log K)), then
// publishes it with an atomic pointer store. A fitted
// table is immutable, so lookups (VennAbers.Probability,
// Conformal.Interval) run on the previous table while the next is fitted,
// from any number of goroutines. Lookups and Add do not allocate.
//
// # Inductive Venn–Abers prediction
//
// For calibration pairs (s_i, y_i), y_i ∈ {0, 1}, and a test score s, let
// p0(s) be the value at s of the isotonic (nondecreasing, least-squares)
// regression of y on s fitted on the pairs plus (s, 0), and p1(s) the same
// with (s, 1); equal scores form one block weighted by its multiplicity.
// Then 0 ≤ p0(s) ≤ p1(s) ≤ 1, and the published certainty is
// {p, lower = p0, upper = p1, n} with the merged probability
// p = p1/(1 − p0 + p1) (the paper's merge of the two for log loss).
//
// Guarantee: if the calibration pairs and the test pair are exchangeable,
// the pair (p0, p1) is a multiprobabilistic prediction that is perfectly
// calibrated in the sense of Venn predictors: one of p0, p1 — the one
// whose hypothetical label is the true one — is a calibrated probability,
// P(y = 1 | p_y) = p_y (Vovk and Petej 2014; Vovk, Petej and Fedorova
// 2015, §2). So the true conditional probability of the positive class
// lies in [p0, p1] in that sense; the width p1 − p0 typically shrinks like
// 1/n where the scores are dense (0.016 at n = 2000 on letter). There
// is no assumption on the model: a bad scorer gives wide or uninformative
// (near the base rate), not wrong, probabilities.
//
// Under drift, or while the model itself is still learning, the pairs in
// the window are not exchangeable with the present, and the guarantee does
// not hold; the window follows the stream within Size pairs. Measured on
// breast_cancer and letter (online/calibrate's TestIVAPValidity): a model
// that is still improving makes its old scores less reliable than its
// current ones, and a table fitted on them is underconfident (observed
// rates more extreme than p) by several standard errors during the first
// few thousand events of letter. Window.CopyRecentTo, which the engine
// fits, keeps only the pairs of the later half of the stream so far (at
// least RecentMin), scored by a model that had learned at least half of
// what it knows now. That removes the effect there, gives a table from
// the RecentMin-th pair on, and on seven more public data sets (R's
// mlbench, mam and svm) left three deciles of 14 cases just outside their
// limits (2.0–2.3 standard errors), against 17 deciles out with every
// pair of the window. For a refitted model the
// engine skips events scored before its first fit.
//
// Algorithm (Vovk, Petej and Fedorova 2015, §3, Algorithms 1–2): sort the
// calibration scores and merge ties into k distinct scores s'_1 < … < s'_k
// with weights w_i and positive counts; build the cumulative sum diagram
// P_0 = (0, 0), P_i = (Σ_{j≤i} w_j, Σ_{j≤i} y_j). p1 is constant on each
// run (s'_{j}, s'_{j+1}] of test scores (a test example labelled 1 just
// below a block always pools with it) and p0 on each run [s'_j, s'_{j+1})
// (by symmetry); so both take k + 1 values. The k + 1 values of p1 are the
// slopes of the greatest convex minorant of the diagram with the test
// example inserted, over the test example's segment: one Graham scan builds
// the minorant for the test example below all scores, and a second pass
// moves it right one block at a time, each move replacing one point of the
// diagram and restoring convexity at the top of a stack. p0 is 1 − p1 of
// the mirrored data (scores negated, labels flipped). A lookup is one
// binary search into the sorted distinct scores and two array reads.
// Coordinates are integer counts held exactly in float64 (turn tests are
// exact for n < 2^25), and the tests check the result against two
// pool-adjacent-violators regressions per test score to 1e-12.
//
// Complexity: FitVennAbers O(n log n) time (the sort; the two passes are
// O(n)) and O(n) memory; Probability O(log n), no allocation.
//
// # Split conformal intervals
//
// With the absolute residuals r_i = |y_i − ŷ_i| of the n pairs of the
// window and a new prediction ŷ, the interval at level 1 − δ is ŷ ± q, q
// the ⌈(n+1)(1−δ)⌉-th smallest r_i; when that rank exceeds n (n < (1−δ)/δ:
// n < 9 at δ = 0.1) no finite interval has the guarantee, and the
// interval is (−∞, +∞) with ok false. Guarantee: for exchangeable pairs
// the interval covers the new y with probability ≥ 1 − δ, and, for
// residuals without ties, < 1 − δ + 1/(n+1) (Vovk, Gammerman and Shafer
// 2005; Lei, G'Sell, Rinaldo, Tibshirani and Wasserman 2018). The same
// caveats about drift and a learning model apply: on boston_ordinal with
// kernel ridge regression the literal window over-covers (0.934 at 0.9)
// because the early fits' residuals are larger; fitted on the later half
// (CopyRecentTo) it covers 0.920. FitConformal is O(n log n); Quantile and
// Interval are O(1), no allocation.
//
// # References
//
//   - V. Vovk, I. Petej and V. Fedorova, "Large-scale probabilistic
//     predictors with and without guarantees of validity", NeurIPS 2015
//     (arXiv:1511.00213).
//   - V. Vovk and I. Petej, "Venn–Abers predictors", UAI 2014
//     (arXiv:1211.0025).
//   - V. Vovk, A. Gammerman and G. Shafer, Algorithmic Learning in a
//     Random World, Springer 2005.
//   - J. Lei, M. G'Sell, A. Rinaldo, R. J. Tibshirani and L. Wasserman,
//     "Distribution-free predictive inference for regression", JASA 2018.
package calibrate
