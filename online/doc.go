// Package online is the learning core of the streamer service: scorers /
// learners that see one event at a time, the certainty they publish with
// each prediction, and how their quality is judged. It has no Kafka, no
// Prometheus, no goroutines and no I/O; a Model is owned by one goroutine
// at a time. The formulas are those of docs/math.md (sections cited as §n).
//
// # Model types
//
// A model type is one file: its parameter struct (whose yaml tags are the
// type's configuration keys), defaults, a Validate method that names the
// key at fault, construction, restore, traits (Kind, bound, probability)
// and example configurations, assembled by Define into a *Type. A Registry,
// built explicitly by the program (cmd/streamer registers the service's
// types, one line each), is the only place that knows them all: the
// configuration decodes a model's keys into its type's parameters, the
// service builds models with Registry.New, restores them with
// Registry.Restore, and judges them by their Traits. The types of this
// package:
//
//   - MAMType: the maximal-average-margin classifier (§3) on a random
//     feature map (FeatureMap: linear, rbf, laplacian; §2), or, with a
//     budget, on the exact kernel over the last examples (ExactMAM; also
//     polynomial). It publishes the Theorem 2 certainty bound (§4), and
//     forgets by an exact sliding window or exponential decay.
//   - OMAMType: the ordinal MAM ranker over levels 1..m (§5), raw or
//     Nadaraya–Watson normalised, with levels from refitted thresholds;
//     random features or the exact kernel.
//   - LogisticType, LDAType: baselines on the raw features (§6), with a
//     probability and no bound.
//
// The refitted types (kernel SVM, kernel ranking and regression) live in
// online/refit.
//
// # The Model contract
//
// Observe scores x with the current state and then, if labelled, learns;
// it does not allocate, and it panics on an input of the wrong dimension
// (a programmer error: the service validates events first). Label maps a
// wire label into the model's label set, refusing anything else. A model
// encodes its complete state with MarshalBinary — the envelope (magic,
// format version, type name, the canonical encoding of its parameters,
// input dimension; header.go) followed by the type's state — so that
// Registry.Restore rebuilds it from its bytes alone, bit-identically:
// derived values are recomputed by the code that maintains them, and the
// random frequencies are redrawn from the seed. Decoding refuses truncated,
// over-long, invalid or inconsistent input with an error wrapping
// ErrFormat and leaves the receiver unchanged. Encodings of format version
// 1 (the spec every type shared before the registry) keep decoding.
// Package online/onlinetest checks all of this for every registered type.
//
// # Standardisation
//
// Standardize wraps a model of any type: running Welford means and
// variances of every observed event, in the wrapper's state (§9). Online
// models get each event standardised with the statistics before it;
// refitted models (RawInput) keep raw events and standardise each refit's
// window with the statistics as of that refit.
//
// # Judging
//
// Judge is the prequential quality of a model over a window of its recent
// labelled events, by its Kind (§10): accuracy for classifiers; mean
// absolute error, zero-one error and Kendall's τ-b (KendallTauB, O(n log n))
// for ordinal models; τ-b for ranking and, with the root mean squared error,
// regression models; and, for models with a bound, the live check of the
// bound against the observed rate of confident mistakes (BoundMonitor).
// The service exports a Judge to Prometheus and `streamer eval` writes it
// to its report.
package online
