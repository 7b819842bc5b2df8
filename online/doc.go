// Package online is the learning core of the streamer service: online
// scorers/learners that see one event at a time, and the certainty bound
// they publish with each prediction. It has no Kafka, no Prometheus, no
// goroutines and no I/O; a Model is owned by one goroutine at a time.
//
// The formulas are those of /work/shared/MATH.md (referred to as MATH.md
// below), which is authoritative.
//
// # Feature maps (MATH.md §3)
//
// Every model works on an explicit feature map φ with ‖φ(x)‖ ≤ 1, so that
// B = sup ‖φ‖ = 1 in the bound holds exactly and every per-event cost is
// O(dim φ), independent of the number of examples n:
//
//   - "linear": φ(x) = x/‖x‖₂ (φ(0) = 0), dim φ = d. Inputs are normalised
//     because the linear kernel's B is otherwise unbounded.
//   - "rbf": random Fourier features for K(x, x') = exp(−gamma‖x − x'‖²)
//     (the parameter is named gamma): ω_k ~ N(0, 2·gamma·I_d), k = 1..D,
//     drawn from PCG seeded with KernelSpec.Seed, and
//     φ(x) = sqrt(1/D)[cos(ω_k·x), sin(ω_k·x)], dim φ = 2D, ‖φ(x)‖ = 1.
//     The products ω_k·x are one matrix–vector product; sin and cos come
//     from a branch-free Cody–Waite/Cephes sincos that agrees with
//     math.Sincos to 1e-15.
//   - "laplacian": the same pair form for K(x, x') = exp(−gamma‖x − x'‖₂)
//     (gamma = 1/σ of MATH.md §3), with ω_k from the kernel's spectral
//     density, the multivariate Cauchy: ω_k = gamma·z/|u|, z ~ N(0, I_d),
//     u ~ N(0, 1).
//
// The exact kernel mode of mam (below) has no feature map and also offers
// "polynomial", (<x, x'> + coef0)^degree.
//
// # MAM classifier (MATH.md §1)
//
// MAM keeps compensated (Neumaier) running sums. Plain (Spec.Balance
// false), the paper's maximal-average-margin solution: s = Σ y_i φ(x_i),
// f(x) = <s, φ(x)>/‖s‖ = Σ y_i K(x_i, x)/sqrt(yᵀΩy), average margin
// M̂ = ‖s‖/n, Rademacher term R̂ = (2/n)·sqrt(tr Ω).
//
// Balanced (Spec.Balance true, MATH.md §1 "Variants"; the better default):
// w = μ₊ − μ₋ with class means μ± = S±/n±, offset b = (‖μ₋‖² − ‖μ₊‖²)/2.
// The offset is absorbed by a constant coordinate, φ̃(x) = [φ(x); 1]/√2, so
// that ‖φ̃‖ ≤ 1 and B stays 1; with w̃ = [w; b],
//
//	f(x) = <w̃, φ̃(x)>/‖w̃‖ = (<w, φ(x)> + b) / (√2·sqrt(‖w‖² + b²)).
//
// Its bound uses its own average margin (Lemma 2 holds uniformly over
// ‖w̃‖ ≤ 1): with s̃ = Σ y_i φ̃(x_i) = [s; n₊ − n₋]/√2,
//
//	M̂_w = <w̃, s̃>/(n‖w̃‖) = (<w, s> + b·(n₊ − n₋)) / (√2·n·sqrt(‖w‖² + b²)),
//	R̂ = (2/n)·sqrt(tr Ω̃),  tr Ω̃ = (tr Ω + n)/2  (= n for unit-norm φ).
//
// While one class is still empty the balanced model uses the plain sum in
// the augmented space (w = s, b = n₊ − n₋) instead.
//
// f(x) = 0 (an empty model, for instance) is "no decision": Label 0.
//
// # Certainty bound (MATH.md §1, Theorem 2 with corrected signs)
//
// Each prediction carries MistakeBound(B, M̂, R̂, n, δ, ρ) at ρ = |f(x)|:
// with probability ≥ 1 − δ over the sample, P(Y f(X) ≤ −ρ) is at most
// (B − M̂ + R̂ + 3B·sqrt(2 ln(2/δ)/n)) / (B + ρ), clipped to [0, 1]. It is
// loose (Markov's inequality) and often 1 on small n; vacuous cases publish
// 1, never a tighter figure.
//
// # Exact kernel mode of mam (MATH.md §1)
//
// Spec.Budget = N > 0 selects ExactMAM (New dispatches on it; Type() is
// still "mam"): the last N labelled examples are stored in a ring buffer
// and the exact kernel (Kernel: linear on normalised inputs, rbf, laplacian,
// polynomial) is summed over them, O(N·d) per event, one kernel row per
// event used for both the score and the update. The oldest example leaves
// when a new one arrives, so Budget is also an exact sliding window
// (Window and HalfLife must be 0). Plain and balanced forms, M̂, R̂ and the
// bound are those of MAM with n = the stored examples. yᵀΩy, the class-pair
// sums Σ₊₊, Σ₋₋, Σ₊₋ and tr Ω are compensated running sums, updated in
// O(N) per added example; each stored example also keeps its kernel sums
// A_i^± with the later examples of each class, which makes removing the
// oldest O(1), and from which the pair sums are re-accumulated every N
// events. rbf and laplacian rows are computed shifted by the nearest
// distance, so large gamma does not underflow to "no decision". The
// polynomial kernel's B is unbounded: no certainty bound (HasBound false).
// Its encoding has its own type tag, "mam_exact": header, spec, counts,
// sums, then the ring's slots (label, K(x_i, x_i), A_i^± with their
// compensations, input).
//
// # Forgetting (MATH.md §1, "Variants")
//
// Spec.Window = N > 0 keeps an exact sliding window: the model stores the
// last N labelled inputs and labels (N·d floats) and, once the window is
// full, maps the example that leaves it again with the same deterministic
// feature map and subtracts it from the compensated sums, counts and tr Ω,
// so its state is that of a model trained on the window alone (two feature
// maps per event, O(dim φ) otherwise). The bound then uses the window's n.
// Spec.HalfLife = h > 0 decays instead: before each labelled example every
// sum and weight is multiplied by λ = 2^(−1/h) (example i weighs
// w_i = λ^age), in the same O(dim φ) pass as the update, with the product's
// exact rounding error (FMA) kept in the compensation; values under 2⁻⁶⁰⁰
// are flushed to 0 so nothing becomes subnormal. With p_i = w_i/W,
// W = Σ w_i, Q = Σ w_i², McDiarmid's bounded differences are 2B·p_i, so the
// deviation term uses n_eff = W²/Q in place of n; M̂ = Σ p_i y_i f(x_i)
// (‖s‖/W plain) and R̂ = (2/W)·sqrt(Σ w_i² K(x_i, x_i)) (MAM.learnDecay has
// the derivation). Prediction.N is the window's n, or n_eff rounded under
// decay (so "n" means n_eff there); Examples counts every labelled example
// learned. Window and HalfLife are mutually exclusive.
//
// # Baselines: logistic regression and LDA
//
// Two models on the raw inputs (Kernel.Type "" or "linear", no feature
// map, no certainty bound: HasBound false, Delta must be 0), to compare the
// kernel models against. "logistic" (Logistic): f(x) = <w, x> + b, trained
// by AdaGrad on the log-loss with an L2 penalty (LearningRate > 0, L2 ≥ 0),
// O(d) per event, Probability = σ(f); no Window or HalfLife, the step size
// already follows drift. "lda" (LDA): linear discriminant analysis (seed
// 003, §3) from per-class compensated sums of x − c and (x − c)(x − c)ᵀ,
// O(d²) per labelled event, w = (Σ + ε·diag Σ)⁻¹(μ₊ − μ₋) re-solved with
// gonum's Cholesky after each of the first 64 labelled events and then
// every 32nd; Window and HalfLife work as for mam. Both estimate
// P(y = +1 | x) = σ(f) (HasProbability).
//
// # Standardisation
//
// Spec.Standardize makes New return a Standardized wrapper around the
// model of Spec.Type built from the same spec: it keeps per-feature Welford
// means and variances over every observed event, labelled or not, and
// passes (x − mean)/sd, computed with the statistics before the event, to
// the inner model (features with variance < 1e-12 are only centred). Its
// encoding has its own type tag "std": the shared header and spec, the
// statistics, then the inner model's complete encoding; Restore handles it.
//
// # Ordinal MAM, "omam" (MATH.md §2)
//
// OMAM ranks levels 1..m (Spec.Levels; Spec.Edges bin real targets into
// levels 1 + #{e ≤ y}). Per level it keeps compensated sums S_ℓ = Σ φ(x_i)
// and counts N_ℓ; the score direction is w = Σ_ℓ c(ℓ) S_ℓ with the centred
// rank c(ℓ) = N_{<ℓ} − N_{>ℓ}, recomputed in the O(m·dim φ) pass that adds
// each example. Scores: raw <w, φ(x)>/‖w‖, or (Spec.Normalize, the better
// ranker) the Nadaraya–Watson form <w, φ(x)>/(W·<Σ_ℓ S_ℓ, φ(x)>), W = Σ N_ℓ.
// Levels come from thresholds refitted every 64 labelled events so that
// the predicted level frequencies on the last 1024 (score before learning,
// level) pairs match the observed ones. No certainty bound: Theorem 2 is a
// binary classification bound. Window and HalfLife forget as for mam.
// KendallTauB (O(n log n), Knight's algorithm), MeanAbsError, ZeroOneError
// and the prequential OrdinalWindow measure ranking quality.
//
// Spec.Budget > 0 selects the exact-kernel omam (ExactOMAM, encoding tag
// "omam_exact"): the last Budget examples are stored, one pass over them
// builds per-level kernel sums for the score, and the level-pair kernel sums
// G (for ‖w‖ of the raw form) are updated in O(Budget) per example. Random
// features cannot follow the peaked kernel the normalised form wants
// (Kendall τ-b 0.666 at D = 2048 on boston_ordinal against 0.742 exact).
//
// # Prequential accuracy
//
// Prequential keeps the test-then-train accuracy over a sliding window of
// outcomes in a ring buffer.
//
// # Serialisation
//
// Models implement encoding.BinaryMarshaler/BinaryUnmarshaler (and
// BinaryAppender); Restore builds the right model type from the bytes. The
// little-endian format, version 1:
//
//	magic "OLNM", format version uint16, model type (uint8 length + bytes),
//	spec:  dim uint32, kernel type (uint8 length + bytes), gamma float64,
//	       features uint32, seed uint64, balance uint8, delta float64,
//	state: n, n₊, n₋ int64; tr Ω and its compensation float64;
//	       dim φ uint32; the sum vectors as float64 (plain: s, comp(s);
//	       balanced: S₊, comp(S₊), S₋, comp(S₋));
//	       window: examples learned in all int64, the window's labels
//	       (uint8 each) and inputs (d float64 each) in slot order;
//	       half-life: W, Q, W₊, W₋ float64, each with its compensation.
//
// Derived values and the random frequencies are rebuilt from the spec and
// the sums by the same code that updates them, so a restored model predicts
// bit-identically and stays identical under further learning. Decoding
// rejects a wrong magic or version, truncated or trailing bytes, an invalid
// spec, and inconsistent state (counts, traces or sums that no sequence of
// updates produces) with an error wrapping ErrFormat.
package online
