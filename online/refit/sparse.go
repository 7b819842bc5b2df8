package refit

import (
	"errors"
	"fmt"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/rank"
)

// Hashed features (online.SparseParams): with features.hash the inputs are
// sparse rows of dimension 2^bits with at most features.max_features
// entries. svm and the exact solver of krr, lsrrank and mlsrrank keep
// their window sparse (Config.Sparse) and train on sparse rows; their
// fits score sparse inputs through an inverted index of their rows. The
// window is then bounded by window.events × max_features entries instead
// of window.events × dim values. The random-feature solver (solver
// features), lowrank and adaboost refuse hashed features.

// maxWindowEntries bounds window.events × features.max_features, the
// entries of a sparse window (12 bytes each: 192 MiB; the arena holds at
// most about twice what the window does).
const maxWindowEntries = 1 << 24

var (
	_ online.SparseParams = (*SVMParams)(nil)
	_ online.SparseParams = (*KRRParams)(nil)
	_ online.SparseParams = (*LSRRankParams)(nil)
	_ online.SparseParams = (*MLSRRankParams)(nil)
	_ online.SparseParams = (*LowRankParams)(nil)
	_ online.SparseParams = (*AdaBoostParams)(nil)
)

// checkSparseWindow adds the error of a sparse window too large for nnz
// entries per event to errs.
func checkSparseWindow(errs *[]error, w Window, nnz int) {
	if nnz < 1 || w.Events > maxWindowEntries/nnz {
		*errs = append(*errs, specErrorf("window.events", "with hashed features window.events × features.max_features must be ≤ %d (the entries the window keeps), got %d×%d: lower one of them", maxWindowEntries, w.Events, nnz))
	}
}

// joinErrs appends err (nil: nothing) to errs.
func joinErrs(errs *[]error, err error) {
	if err != nil {
		*errs = append(*errs, err)
	}
}

// ValidateSparse checks the parameters for hashed inputs of dimension dim
// with at most nnz entries (see online.SparseParams). The default gamma of
// LIBSVM, 1/dim, means nothing for hashed features (1/2^bits: every rbf
// kernel value about 1): it must be given.
func (p *SVMParams) ValidateSparse(dim, nnz int) error {
	var errs []error
	joinErrs(&errs, p.Validate(0))
	checkSparseWindow(&errs, p.Window, nnz)
	if k := p.Kernel; k.Type != "linear" && dim > 1 && k.Gamma == 1/float64(dim) {
		errs = append(errs, specErrorf("kernel.gamma", "the default 1/dim = 1/%d makes no sense for hashed features (‖x − x'‖² is at most about twice the entries of an event, not dim): set it, e.g. to 1/(2 × the entries of a typical event)", dim))
	}
	return errors.Join(errs...)
}

// NewSparse builds an svm of hashed features (see online.SparseParams).
func (p *SVMParams) NewSparse(dim, nnz int) (online.Model, error) {
	return newSVM(dim, nnz, p)
}

// validateSparse checks the keys every ranking type shares for hashed
// inputs: the random-feature solver maps each event's dense input.
func (p *RankParams) validateSparse(errs *[]error, nnz int) {
	if p.Solver == SolverFeatures {
		*errs = append(*errs, specErrorf("solver", "features (random features of the dense input, a features × dim projection) does not take hashed features yet: use solver exact"))
	}
	checkSparseWindow(errs, p.Window, nnz)
}

// ValidateSparse checks the parameters for hashed inputs (see
// online.SparseParams).
func (p *KRRParams) ValidateSparse(_, nnz int) error {
	var errs []error
	joinErrs(&errs, p.Validate(0))
	p.RankParams.validateSparse(&errs, nnz)
	return errors.Join(errs...)
}

// NewSparse builds a krr of hashed features.
func (p *KRRParams) NewSparse(dim, nnz int) (online.Model, error) {
	return newRankModel(KRRName, p, dim, nnz, &p.RankParams, p.Kernel.kernels(), rank.KRR, p.Kernel.Features, p.Kernel.Seed, 0)
}

// ValidateSparse checks the parameters for hashed inputs (see
// online.SparseParams).
func (p *LSRRankParams) ValidateSparse(_, nnz int) error {
	var errs []error
	joinErrs(&errs, p.Validate(0))
	p.RankParams.validateSparse(&errs, nnz)
	return errors.Join(errs...)
}

// NewSparse builds an lsrrank of hashed features.
func (p *LSRRankParams) NewSparse(dim, nnz int) (online.Model, error) {
	return newRankModel(LSRRankName, p, dim, nnz, &p.RankParams, p.Kernel.kernels(), rank.LSRRank, p.Kernel.Features, p.Kernel.Seed, p.Levels)
}

// ValidateSparse checks the parameters for hashed inputs (see
// online.SparseParams).
func (p *MLSRRankParams) ValidateSparse(_, nnz int) error {
	var errs []error
	joinErrs(&errs, p.Validate(0))
	p.RankParams.validateSparse(&errs, nnz)
	return errors.Join(errs...)
}

// NewSparse builds an mlsrrank of hashed features.
func (p *MLSRRankParams) NewSparse(dim, nnz int) (online.Model, error) {
	return newMLSRRankModel(dim, nnz, p)
}

// ValidateSparse refuses hashed features: lowrank's input is a matrix.
func (p *LowRankParams) ValidateSparse(int, int) error {
	return specErrorf("features.hash", "type lowrank takes matrix features (features.shape, rows × cols numbers), not hashed ones")
}

// NewSparse refuses hashed features (see ValidateSparse).
func (p *LowRankParams) NewSparse(int, int) (online.Model, error) { return nil, p.ValidateSparse(0, 0) }

// ValidateSparse refuses hashed features: adaboost's input is its
// members' predictions followed by the event's dense features (the
// decision stumps split single features).
func (p *AdaBoostParams) ValidateSparse(int, int) error {
	return specErrorf("features.hash", "type adaboost aggregates its members' predictions with dense features (its stumps split single coordinates): it does not take hashed features")
}

// NewSparse refuses hashed features (see ValidateSparse).
func (p *AdaBoostParams) NewSparse(int, int) (online.Model, error) {
	return nil, p.ValidateSparse(0, 0)
}

// sparseBound returns Config.Sparse from the state of a refitted model's
// encoding (after the envelope): 0 for a window of dense rows.
func sparseBound(state []byte) (int, error) {
	r := codec.NewReader(state, ErrFormat)
	r.I64()
	r.U32()
	r.U32()
	r.I64()
	r.Bytes()
	sc := r.Bytes()
	if err := r.Err(); err != nil {
		return 0, err
	}
	if len(sc) != 4 {
		return 0, nil
	}
	n := int(codec.NewReader(sc, ErrFormat).U32())
	if n < 1 {
		return 0, fmt.Errorf("%w: sparse window of at most %d entries per row", ErrFormat, n)
	}
	return n, nil
}
