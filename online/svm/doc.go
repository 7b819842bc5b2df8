// Package svm is a C-support-vector-classification solver that gives LIBSVM's answers: the
// same dual objective, support vectors, offset and predictions as svm-train/svm-predict (3.24)
// to solver tolerance, at svm-train's speed or better. It is a pure solver: no I/O, no
// goroutines, and it imports nothing of the service but online/codec (the project's binary
// encoding, for Model's).
//
// # Problem
//
// Train solves the dual of the soft-margin SVM (docs/math.md §7)
//
//	min_α ½ αᵀQα − Σ α_i   s.t.  Σ α_i y_i = 0,  0 ≤ α_i ≤ C_i,   Q_ij = y_i y_j K(x_i, x_j),
//
// with labels y_i ∈ {−1, +1} and boxes C_i = C₊ or C₋ by class (Params.CPos, CNeg), times a
// per-example weight in TrainWeighted. The classifier is f(x) = Σ α_i y_i K(x_i, x) + B. Model.Obj
// is the minimised value above — the number svm-train prints as "obj" — and Model.Rho() is its
// rho = −B.
//
// # Algorithm
//
// SMO as in LIBSVM's Solver (Fan, Chen and Lin 2005; Chang and Lin 2011), transcribed step by
// step so that on the same data it takes the same iterations:
//
//   - working-set selection WSS 2: i maximises −y_i∇_i over I_up, j minimises the second-order
//     decrease −(b_ij²)/a_ij over I_low (a_ij ≤ 0 replaced by τ = 1e-12);
//   - stopping when m(α) − M(α) < Eps (svm-train -e, default 1e-3);
//   - shrinking every min(n, 1000) iterations, with LIBSVM's one-time unshrink (gradient
//     reconstruction from Ḡ = Σ_{α_j = C_j} C_j Q_j and the free α) when the violation first drops
//     below 10·Eps, and a final reconstruction before the last stopping test;
//   - an LRU cache of float32 kernel rows (LIBSVM's Qfloat) holding at most CacheBytes (default
//     100 MB, svm-train -m 100), kept consistent with the index swaps of shrinking, reusing evicted
//     rows instead of allocating;
//   - B from the average of y_i∇_i over free α, or the midpoint of the feasible interval when no
//     α is free (LIBSVM's calculate_rho).
//
// RBF rows are computed from precomputed squared norms, ‖x_i‖² + ‖x_j‖² − 2<x_i, x_j>, with an
// inlined dot product and a table-based exp accurate to 1e-15.
//
// Sparse rows (TrainSparse: hashed features, a few dozen entries among 2^18 or more indices) are
// trained by the same solver: a kernel row comes from an inverted index of the rows, O(l + the
// entries the row shares with the others), the distance from ‖x‖² + ‖x'‖² − 2<x, x'> as LIBSVM
// computes it on its sparse input; the model keeps its support vectors sparse and scores a sparse
// input through their inverted index (DecisionSparse), O(nSV + shared entries). On HouseVotes84
// one-hot and a hashed click log at 2^18 dimensions the objective agrees with svm-train's to 1e-7
// and every prediction with svm-predict's (TestSparseAgreement).
//
// Kernels (Kernel): linear, polynomial (γ<x,x'> + r)^d, RBF exp(−γ‖x−x'‖²), Laplacian
// exp(−γ‖x−x'‖₂) and sigmoid tanh(γ<x,x'> + r), with LIBSVM's meaning of -g, -r and -d.
//
// # Warm start and cancellation
//
// A warm start α (e.g. Model.Alpha of a fit with other C or weights) is made feasible by
// ProjectFeasible — clip to [0, C_i], then scale down the class with the larger Σα so both class
// sums agree — and the gradient is built from it; the solution is the same optimum, reached in
// fewer iterations when the start is close. Train checks its context every 256 iterations (and
// while building a warm-start gradient) and returns ctx.Err() with no model.
//
// # Guarantees
//
// At return (Converged) the maximal KKT violation is below Eps, so Obj is within O(Eps) of the
// optimum and Σ α_i y_i = 0, 0 ≤ α_i ≤ C_i hold exactly. W2() = αᵀQα = ‖w‖² feeds
// ClippedMarginBound, Corollary 1 of docs/math.md §4 with the clip transform, which bounds
// P(g(Y f(X)) ≤ −ρ) for the SVM's scores with probability ≥ 1 − δ.
//
// # Probability and model selection
//
// TrainProbability fits the weighted SVMs of seed 002 §2.2 for π_h = h/H and ProbModel.Prob
// estimates p(x) = P(y = +1 | x) from the number of them that score x positive (monotone by
// construction). Select does warm-started k-fold cross-validation over a (C, gamma) grid within a
// time budget.
//
// Acceptance figures (tests and tests/svmbench): on heart_scale and ripley, rbf and linear at
// two (C, gamma) settings each, the objective agrees with svm-train to better than 1e-7
// relative, nSV exactly, predictions on every row; on the first 10 000 letter rows Train takes
// less CPU time than svm-train.
package svm
