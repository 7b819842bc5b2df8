// Package rank implements least-squares kernel ranking — LSRRank and
// multiscale MLSRRank (seed 001; docs/math.md §8) — and kernel ridge regression,
// exactly and with random Fourier features, plus the ranking measures of
// seed 001 §IV. It is standalone: it imports only the standard library,
// gonum (tests), online/codec (the binary encoding) and
// online/internal/dense, the packed AVX2 kernels its Cholesky
// factorisations and rank-k updates run on.
//
// # Kernels
//
// Kernel is RBF, K(x, x') = exp(−Gamma‖x − x'‖²), or Linear, <x, x'>, with
// a weight V. Several kernels form MLSRRank's combined kernel
// K̄ = Σ_t K_t / v_t, the weights normalised so that min v_t = 1 (v ↦ v/min v).
//
// # Exact solver
//
// Fit solves, by one Cholesky factorisation of an m × m SPD matrix,
//
//	LSRRank / MLSRRank: (H K̄ H + (mλ/2) I) α = H y,  H = I − 11ᵀ/m,
//	                    f(x) = Σ αᵢ K̄(xᵢ, x) + b,  b = ȳ − (1/m)Σᵢ(K̄α)ᵢ
//	KRR:                (K̄ + λ I) α = y,           f(x) = Σ αᵢ K̄(xᵢ, x)
//
// The first is Lemma 1's (D K + (m²λ/2) I) α = D y with D = mI − 11ᵀ, and,
// for several kernels, Theorem 1's lm × lm block system reduced to K̄ (both
// checked in the tests to 1e-8). It is kernel ridge regression on the
// centred kernel and targets: scikit-learn's
// KernelRidge(alpha=mλ/2, kernel="precomputed") on (HK̄H, y − ȳ) gives the
// same α. The offset b only puts f on the scale of y (the mean fitted value
// is ȳ); ranking needs only the order. KRR uses KernelRidge(alpha=λ)'s
// scaling, without intercept.
//
// FitSparse solves the same systems on sparse rows (hashed features): the
// kernel from sparse dot products (‖x − x'‖² = ‖x‖² + ‖x'‖² − 2<x, x'>),
// each row of the kernel matrix from an inverted index of the rows; the
// model scores a sparse input through the same index (PredictSparse), in
// O(m + the entries it shares with the rows) instead of O(m·d). Scores
// agree with Fit on the densified rows to 1e-13 of their scale.
//
// # Random features
//
// FeatureMap is φ with <φ(x), φ(x')> ≈ K̄(x, x') (pair-form random Fourier
// features per RBF kernel, seeded; x itself for a linear kernel; each
// block scaled by 1/sqrt(v_t)). Sums keeps ΦᵀΦ, Φᵀ1, Φᵀy, Σy and n as
// running sums with Add and Remove (a window by subtraction; see Sums for
// the numerics), and Sums.Fit solves the equivalent centred D × D ridge
// problem (ΦᵀHΦ + (nλ/2) I) w = ΦᵀHy, f(x) = <w, φ(x)> + b; Sums.FitKRR
// kernel ridge regression in feature space, (ΦᵀΦ + λI) w = Φᵀy,
// f(x) = <w, φ(x)> (docs/math.md §8).
//
// # Measures
//
// Measure returns seed 001's ranking error, Pearson correlation, Kendall's
// τ (the seed's definition, (C − D)/|P|, with its sign misprint fixed; it
// equals scipy.stats.somersd(y, f)), Kendall's τ-b (scipy.stats.kendalltau),
// Spearman's ρ, MSD and M1D, all in O(n log n).
//
// # Encodings
//
// Model, FeatureModel and Sums implement encoding.BinaryMarshaler, with
// package online/codec's conventions; see codec.go for the versioned
// formats, pinned by testdata/format_v1_*.bin. UnmarshalModel,
// UnmarshalFeatureModel and Sums.UnmarshalBinary decode them; every
// decoding error wraps ErrFormat.
//
// # Test data
//
// testdata/golden.json is written by tests/rankbench/golden.py (scipy and
// scikit-learn reference values, the boston_ordinal splits);
// testdata/boston_ordinal.csv is a copy of the shared data set.
package rank
