package bench

import (
	"fmt"
	"strings"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/stream/wire"
)

// Models is what the score pipelines run: the built-in MAM (BuiltinMAM) or
// the models of a configuration file (FromConfig).
type Models struct {
	Name string // for the report: "linear MAM", or the configured models
	Dim  int    // input dimension of every model
	// Levels > 0 makes the preloaded labels the levels 1..Levels (equally
	// likely bins of the events' latent score) instead of ±1 (its sign):
	// for configurations with an ordinal model.
	Levels int
	// Hash, for a configuration with features.hash, is the hashing the
	// service's engine would decode with (engine.HashConfig): the bench
	// then preloads hashed categorical events (users rating items) and
	// gives every score run's engine this hashing. nil: dense events of
	// Dim numbers.
	Hash *wire.HashConfig
	// Ratings makes the labels of hashed events ratings 0.5..5 in half
	// stars (the latent score shifted to a mean of 3.5, rounded, clipped):
	// set when every model accepts them through its label mapping or its
	// kind (regression, ranking, a classifier with label.positive, an
	// ordinal model with label.edges).
	Ratings bool
	// Keys > 0 gives dense events a message key, one of Keys ("k0" …),
	// drawn uniformly: FromConfig sets DenseKeys when a model is
	// key-scoped, so that its instances are many (one per key) as in
	// service, not one for every event's empty key. Hashed events carry
	// their user's id as the key whatever Keys says.
	Keys int
	// New builds fresh, empty models; every run of a score pipeline gets
	// its own.
	New func() ([]engine.NamedModel, error)
}

// Labels describes the preloaded labels: "±1", "1..m" or "0.5..5 (ratings)".
func (m *Models) Labels() string {
	switch {
	case m.Ratings:
		return fmt.Sprintf("%g..%g (ratings)", minRating, maxRating)
	case m.Levels > 0:
		return fmt.Sprintf("1..%d", m.Levels)
	}
	return "±1"
}

// input names the events the bench preloads for m: "d=32", or
// "hashed events in 2^20".
func (m *Models) input() string {
	if m.Hash != nil {
		return fmt.Sprintf("hashed events in 2^%d", m.Hash.Bits)
	}
	return fmt.Sprintf("d=%d", m.Dim)
}

// labelValues are every label the events can carry.
func (m *Models) labelValues() []float64 {
	switch {
	case m.Ratings:
		return ratingValues()
	case m.Levels > 0:
		var out []float64
		for l := 1; l <= m.Levels; l++ {
			out = append(out, float64(l))
		}
		return out
	}
	return []float64{-1, 1}
}

// accepts reports whether every model takes every label of ys through its
// label mapping, as the service reads it.
func accepts(models []engine.NamedModel, ys []float64) bool {
	for _, nm := range models {
		for _, y := range ys {
			if _, ok := nm.Model.Label(nm.Label.Map(y)); !ok {
				return false
			}
		}
	}
	return true
}

// DenseKeys is the number of distinct message keys of dense events when a
// configuration has a key-scoped model.
const DenseKeys = 10000

// BuiltinMAM is the bench's own model: a class-balanced MAM with kernel.
func BuiltinMAM(dim int, kernel online.KernelSpec) *Models {
	params := online.MAMParams{Kernel: kernel, Balance: true, Delta: online.DefaultDelta}
	newModel := func() (online.Model, error) { return online.NewMAM(dim, params) }
	return &Models{
		Name: kernel.Type + " MAM",
		Dim:  dim,
		New: func() ([]engine.NamedModel, error) {
			m, err := newModel()
			if err != nil {
				return nil, err
			}
			return []engine.NamedModel{{Name: "bench", Model: m, New: newModel}}, nil
		},
	}
}

// FromConfig benchmarks the models of a loaded configuration (the
// service's, as engine.BuildModels builds them, with the service's hashing
// of features, engine.HashConfig; the other sections of the file are not
// used: the bench has its own broker, topics, producer settings and
// snapshot directory). The events get labels every model accepts: with
// features.hash, ratings 0.5..5 when every model takes them through its
// label mapping or kind; otherwise ±1 unless a model is ordinal (omam, or
// a ranking model with levels), then the levels 1..m with m the fewest
// levels of the ordinal models. A configuration whose models accept no
// common labels (a classifier and an ordinal model) is refused.
func FromConfig(cfg config.Config, types *online.Registry) (*Models, error) {
	if len(cfg.Models) == 0 {
		return nil, fmt.Errorf("bench: the configuration has no models")
	}
	// Key-scoped models evict to snapshot.dir/keys: never into the user's
	// directory from a bench.
	cfg.Snapshot.Dir = ""
	m := &Models{Dim: cfg.Models[0].Features.Dim, Hash: engine.HashConfig(cfg)}
	var names []string
	for i, mc := range cfg.Models {
		if mc.Features.Dim != m.Dim {
			return nil, fmt.Errorf("bench: models[%d] (%s): features.dim %d, but models[0] has %d", i, mc.Name, mc.Features.Dim, m.Dim)
		}
		t, err := types.Type(mc.Type)
		if err != nil {
			return nil, fmt.Errorf("bench: models[%d] (%s): %w", i, mc.Name, err)
		}
		if tr := t.Traits(mc.Params); tr.Kind == online.Ordinal && tr.Levels > 0 && (m.Levels == 0 || tr.Levels < m.Levels) {
			m.Levels = tr.Levels
		}
		names = append(names, fmt.Sprintf("%s (%s)", mc.Name, mc.Type))
	}
	m.Name = strings.Join(names, ", ")
	m.New = func() ([]engine.NamedModel, error) { return engine.BuildModels(cfg, types) }
	models, err := m.New()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	for _, nm := range models {
		if nm.Factory != nil {
			m.Keys = DenseKeys
		}
	}
	if m.Hash != nil && accepts(models, ratingValues()) {
		m.Ratings, m.Levels = true, 0
	}
	labels := m.labelValues()
	for i, nm := range models {
		for _, y := range labels {
			if _, ok := nm.Model.Label(nm.Label.Map(y)); !ok { // through models[i].label, as the service reads it
				kind := types.Lookup(cfg.Models[i].Type).Traits(cfg.Models[i].Params).Kind
				why := ""
				if m.Levels > 0 {
					why = " (the levels of the configuration's ordinal models; a classifier and an ordinal model accept no common labels: benchmark them in separate configurations)"
				}
				return nil, fmt.Errorf("bench: model %s (%s, %s) does not accept label %v: the bench's events carry the labels %s%s",
					nm.Name, cfg.Models[i].Type, kind, y, m.Labels(), why)
			}
		}
	}
	return m, nil
}
