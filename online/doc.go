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
//	       balanced: S₊, comp(S₊), S₋, comp(S₋)).
//
// Derived values and the random frequencies are rebuilt from the spec and
// the sums by the same code that updates them, so a restored model predicts
// bit-identically and stays identical under further learning. Decoding
// rejects a wrong magic or version, truncated or trailing bytes, an invalid
// spec, and inconsistent state (counts, traces or sums that no sequence of
// updates produces) with an error wrapping ErrFormat.
package online
