package config

import (
	"strings"
	"testing"
	"time"
)

func TestModelFamilyDefaults(t *testing.T) {
	cfg, err := Parse([]byte(`
models:
  - {name: o, type: omam, levels: 5, features: {dim: 4, standardize: true}}
  - {name: l, type: logistic, features: {dim: 4}}
  - {name: d, type: lda, window: {events: 500}, features: {dim: 4}}
  - {name: s, type: svm, features: {dim: 4}}
  - {name: e, type: mam, budget: 300, kernel: {type: polynomial}, features: {dim: 4}}
labels:
  join_window: {events: 1000, time: 30s}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	o, l, d, s, e := cfg.Models[0], cfg.Models[1], cfg.Models[2], cfg.Models[3], cfg.Models[4]
	if !o.Normalize || o.Levels != 5 || o.Balance || o.Delta != 0 || o.Kernel.Type != KernelRBF || !o.Features.Standardize {
		t.Errorf("omam defaults: %+v", o)
	}
	if l.LearningRate != DefaultLearningRate || l.L2 != DefaultL2 || l.Kernel.Type != "" || l.Delta != 0 {
		t.Errorf("logistic defaults: %+v", l)
	}
	if d.Window.Events != 500 || d.Kernel.Type != "" {
		t.Errorf("lda: %+v", d)
	}
	if s.C != 1 || s.Kernel.Gamma != 0.25 || s.Kernel.Features != 0 || s.Window.Events != DefaultSVMWindow ||
		s.Refit.EveryEvents != DefaultRefitEvery || s.Refit.Guard != 0.1 || s.Delta != DefaultDelta {
		t.Errorf("svm defaults: %+v", s)
	}
	if e.Kernel.Degree != 2 || e.Kernel.Coef0 != 1 || e.Budget != 300 {
		t.Errorf("polynomial exact mam: %+v", e)
	}
	if cfg.Labels.JoinWindow.Events != 1000 || cfg.Labels.JoinWindow.Time != 30*time.Second {
		t.Errorf("join window: %+v", cfg.Labels)
	}
	// The new keys leave an unchanged model's fingerprint unchanged.
	m := DefaultModel()
	m.Name, m.Type, m.Features.Dim = "mam", "mam", 2
	if m.Fingerprint() == "" {
		t.Fatal("empty fingerprint")
	}
}

func TestModelFamilyBad(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`{name: o, type: omam, features: {dim: 2}}`, "models[0].levels: required for omam"},
		{`{name: o, type: omam, levels: 3, edges: [1], features: {dim: 2}}`, "models[0].edges: has 1 edges"},
		{`{name: o, type: omam, levels: 3, edges: [2, 1], features: {dim: 2}}`, "models[0].edges[1]: edges must be strictly increasing"},
		{`{name: o, type: omam, levels: 3, balance: true, features: {dim: 2}}`, "models[0].balance: does not apply to model type omam"},
		{`{name: l, type: logistic, kernel: {type: rbf}, features: {dim: 2}}`, "models[0].kernel: does not apply to model type logistic"},
		{`{name: l, type: logistic, learning_rate: 0, features: {dim: 2}}`, "models[0].learning_rate: must be a finite number > 0"},
		{`{name: m, type: mam, window: {events: 10}, decay: {half_life: 5}, features: {dim: 2}}`, "set either models[0].window or models[0].decay"},
		{`{name: m, type: mam, kernel: {type: polynomial}, features: {dim: 2}}`, "models[0].budget: required with kernel type polynomial"},
		{`{name: m, type: mam, window: {evnts: 3}, features: {dim: 2}}`, `unknown key "models[0].window.evnts"`},
		{`{name: s, type: svm, C: 0, features: {dim: 2}}`, "models[0].C: must be a finite number > 0"},
		{`{name: s, type: svm, refit: {guard: 0.7}, features: {dim: 2}}`, "models[0].refit.guard: must be in [0, 0.5)"},
		{`{name: s, type: svm, probability: {levels: 1}, features: {dim: 2}}`, "models[0].probability.levels: must be in 2..100"},
		{`{name: s, type: svm, kernel: {type: sigmoid, degree: 3}, features: {dim: 2}}`, "models[0].kernel.degree: not used by the sigmoid kernel"},
		{`{name: d, type: lda, C: 1, features: {dim: 2}}`, "models[0].C: does not apply to model type lda"},
	} {
		_, err := Parse([]byte("models:\n  - "+tc.yaml+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant …%s…", tc.yaml, err, tc.want)
		}
	}
}

func TestAllShippedConfigsLoad(t *testing.T) {
	for _, name := range []string{"streamer.yaml", "demo.yaml", "eval-ripley.yaml", "recommendation.yaml"} {
		if _, err := Load("../../configs/"+name, nil); err != nil {
			t.Errorf("configs/%s: %v", name, err)
		}
	}
}

func TestRankingKeys(t *testing.T) {
	cfg, err := Parse([]byte(`
models:
  - {name: r, type: mlsrrank, kernels: [{gamma: 0.1}, {gamma: 1, v: 2}], features: {dim: 3}}
  - {name: k, type: krr, lambda: 0.5, kernel: {type: rbf, gamma: 2}, features: {dim: 3}, scope: key, max_keys: 50}
  - {name: l, type: lsrrank, levels: 5, solver: features, kernel: {type: rbf, gamma: 1, features: 128}, features: {dim: 3}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, k := cfg.Models[0], cfg.Models[1]
	if len(r.Kernels) != 2 || r.Kernels[0].V != 1 || r.Kernels[1].V != 2 || r.Lambda != DefaultLambda || r.Solver != SolverExact || r.Window.Events != DefaultSVMWindow {
		t.Errorf("mlsrrank: %+v", r)
	}
	if k.Lambda != 0.5 || k.Kernel.Features != 0 || k.Scope != ScopeKey || k.MaxKeys != 50 || k.Levels != 0 {
		t.Errorf("krr: %+v", k)
	}
	if l := cfg.Models[2]; l.Levels != 5 || l.Solver != SolverFeatures || l.Kernel.Features != 128 {
		t.Errorf("lsrrank with levels: %+v", l)
	}
	for _, tc := range []struct{ yaml, want string }{
		{`{name: r, type: mlsrrank, features: {dim: 2}}`, "models[0].kernels: required for mlsrrank"},
		{`{name: r, type: mlsrrank, kernels: [{gamma: 1, v: 0.5}], features: {dim: 2}}`, "models[0].kernels[0].v: must be a finite weight >= 1"},
		{`{name: r, type: lsrrank, lambda: -1, features: {dim: 2}}`, "models[0].lambda: must be a finite number > 0"},
		{`{name: r, type: lsrrank, solver: magic, features: {dim: 2}}`, "models[0].solver"},
		{`{name: r, type: lsrrank, max_keys: 3, features: {dim: 2}}`, "models[0].max_keys: only with scope: key"},
		{`{name: r, type: lsrrank, levels: 1, features: {dim: 2}}`, "models[0].levels: must be in 2..1000"},
		{`{name: r, type: mlsrrank, kernels: [{gamma: 1}], levels: 1001, features: {dim: 2}}`, "models[0].levels: must be in 2..1000"},
		{`{name: r, type: krr, levels: 5, features: {dim: 2}}`, "models[0].levels: does not apply to model type krr"},
		{`{name: r, type: lsrrank, levels: 5, edges: [1, 2, 3, 4], features: {dim: 2}}`, "models[0].edges: does not apply to model type lsrrank"},
		{`{name: r, type: lsrrank, refit: {guard: 0.1}, features: {dim: 2}}`, "models[0].refit.guard: not used by lsrrank"},
	} {
		_, err := Parse([]byte("models:\n  - "+tc.yaml+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant …%s…", tc.yaml, err, tc.want)
		}
	}
}
