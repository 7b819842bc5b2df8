// Package lowrank is a large-margin classifier on matrix features with a
// low-rank weight matrix (Pirsiavash, Ramanan & Fowlkes, "Bilinear
// classifiers for visual recognition", NIPS 2009; seed 002 §2–3;
// docs/math.md, "Low-rank classifier"). It is a pure solver: no I/O, no
// goroutines; the SVM of each block step is online/svm's SMO.
//
// # Problem
//
// An example is a matrix X ∈ ℝ^{d1×d2}, given as its d1·d2 entries in
// row-major order, with a label y ∈ {−1, +1}. The classifier is
//
//	f(X) = <U Vᵀ, X>_F + b,   U ∈ ℝ^{d1×r},  V ∈ ℝ^{d2×r},
//
// and Train minimises the soft-margin objective restricted to rank r,
//
//	J(U, V, b) = ½‖U Vᵀ‖²_F + Σ_i C_i · max(0, 1 − y_i f(X_i)),
//
// which is the seed's n⁻¹ Σ hinge + λ‖UVᵀ‖²_F times 1/(2λ), with
// C = 1/(2λn) as for svm; C_i = C, times a per-example weight in
// TrainWeighted. J is Objective (Model.Obj), with the primal's sign (it
// is ≥ 0, unlike svm's dual objective).
//
// # Algorithm
//
// Block coordinate descent (the seed's Algorithm 1). With V fixed, J is a
// convex problem in (U, b): write S = (VᵀV)^{-1/2} (a pseudo-inverse square
// root when VᵀV is singular) and Q = V S, whose columns are orthonormal.
// Since <U Vᵀ, X> = <U S⁻¹, X Q> and ‖U Vᵀ‖_F = ‖U S⁻¹‖_F, the substitution
// W = U S⁻¹ turns the U-step into a plain linear SVM on the transformed
// examples Z_i = X_i Q (d1·r numbers each): its dual has the kernel
//
//	<Z_i, Z_j> = <X_i, X_j V (VᵀV)⁻¹ Vᵀ>_F,
//
// the seed's, and its weights W = Σ α_i y_i Z_i give back
// U = W S = Σ α_i y_i X_i V (VᵀV)⁻¹, the seed's update. The V-step is the
// same with the roles swapped: Z_i = X_iᵀ U (UᵀU)^{-1/2} (d2·r numbers),
// V = W (UᵀU)^{-1/2}. Both steps are solved by svm.TrainWeighted with the
// linear kernel, so the solver is exactly the project's SMO; TestBlockStep
// checks the equivalence with the seed's kernel numerically.
//
// Each step solves its block exactly (to the SMO tolerance Params.Eps), so
// J does not increase from one iteration to the next beyond that tolerance.
// An iteration is a U-step followed by a V-step; after each, J is evaluated
// and the descent stops when it changed by at most Tol·|J| (default 1e-4),
// or after MaxIter iterations (default 50; Model.Converged is then false).
//
// # Initialisation
//
// V⁰ = the top-r right singular vectors of the difference of the class
// means, M = mean(X | y = +1) − mean(X | y = −1). At U Vᵀ = 0, b = 0 every
// example is inside the margin, so the loss's gradient there is
// −C Σ y_i X_i, which for balanced classes is −(Cn/2)·M: the first
// steepest-descent direction, whose best rank-r approximation spans the
// column space the first U-step should search. Class means rather than
// Σ y_i X_i make it blind to an offset shared by all examples (b absorbs
// that) when the classes are unbalanced. It costs one pass over the data
// and one d1×d2 SVD, and it is a deterministic function of the window, so
// a refit is reproducible. The alternative, the singular vectors of a
// full-rank linear SVM's weight matrix, costs the very fit on d1·d2
// features this model is meant to avoid, and that fit overfits when
// n ≲ d1·d2. The problem is not jointly convex: another start can end at
// another stationary point.
//
// # Warm starts
//
// The dual of the U-step at iteration k has the same examples and boxes as
// at iteration k − 1, only other features, so it starts from that step's α
// (svm.TrainWeighted's warm start); likewise the V-step. As V converges the
// U-step's problem stops changing and the warm start is already optimal.
// A new window is a new set of examples: Train starts cold
// (Start lets a caller pass a V and α, as TrainProbability does).
//
// Finally U and V are rebalanced to U = P Σ^{1/2}, V = R Σ^{1/2} from the
// thin SVD U Vᵀ = P Σ Rᵀ (the same product, orthogonal columns, equal
// column norms), so that the stored factors do not depend on the path.
package lowrank
