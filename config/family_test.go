package config

import (
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/refit"
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
`), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Models[0].Params.(*online.OMAMParams)
	l := cfg.Models[1].Params.(*online.LogisticParams)
	d := cfg.Models[2].Params.(*online.LDAParams)
	s := cfg.Models[3].Params.(*refit.SVMParams)
	e := cfg.Models[4].Params.(*online.MAMParams)
	autoK := online.DefaultKernel()
	autoK.Gamma = 0 // gamma auto, omam's default for rbf random features
	if !o.Normalize || o.Levels != 5 || o.Kernel != autoK || o.Budget != 0 || len(o.Edges) != 0 || !cfg.Models[0].Features.Standardize {
		t.Errorf("omam defaults: %+v", o)
	}
	if *l != (online.LogisticParams{LearningRate: online.DefaultLearningRate, L2: online.DefaultL2}) {
		t.Errorf("logistic defaults: %+v", l)
	}
	if *d != (online.LDAParams{Window: online.Window{Events: 500}}) {
		t.Errorf("lda: %+v", d)
	}
	if s.C != 1 || s.Kernel != (refit.SVMKernel{Type: "rbf", Gamma: 0.25}) || s.Window.Events != refit.DefaultWindow ||
		s.Refit.EveryEvents != refit.DefaultRefitEvery || s.Refit.Guard != 0.1 || s.Refit.GuardSlack != 0.02 || s.Delta != online.DefaultDelta {
		t.Errorf("svm defaults: %+v", s)
	}
	// The exact kernel mode has no random features; polynomial no gamma.
	if e.Kernel != (online.KernelSpec{Type: "polynomial", Degree: 2, Coef0: 1}) || e.Budget != 300 || !e.Balance || e.Delta != online.DefaultDelta {
		t.Errorf("polynomial exact mam: %+v", e)
	}
	if cfg.Labels.JoinWindow.Events != 1000 || cfg.Labels.JoinWindow.Time != 30*time.Second {
		t.Errorf("join window: %+v", cfg.Labels)
	}
	// Every parsed model builds.
	for _, m := range cfg.Models {
		if _, err := testTypes.New(m.Spec()); err != nil {
			t.Errorf("%s: %v", m.Name, err)
		}
	}
	// Each type's defaults are what NewParams gives (for keys that do not
	// depend on others).
	if cfg.Models[1].Fingerprint() != (Model{Name: "l", Type: "logistic", Features: Features{Dim: 4}, Params: online.LogisticType().NewParams()}).Fingerprint() {
		t.Error("logistic: parsed defaults differ from the type's")
	}
}

func TestModelFamilyBad(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`{name: o, type: omam, features: {dim: 2}}`, "models[0].levels: required: the number of levels m, in [2, 65536] (labels 1..m), got 0 (line 2)"},
		{`{name: o, type: omam, levels: 3, edges: [1], features: {dim: 2}}`, "models[0].edges: has 1 edges; levels 3 needs levels−1 = 2 (line 2)"},
		{`{name: o, type: omam, levels: 3, edges: [2, 1], features: {dim: 2}}`, "models[0].edges[1]: edges must be strictly increasing: 1 after 2 (line 2)"},
		{`{name: o, type: omam, levels: 3, balance: true, features: {dim: 2}}`, "models[0].balance: does not apply to model type omam (it takes: name, type, features, scope, max_keys, label, fallback, residual, kernel, levels, edges, normalize, budget, window, decay) (line 2)"},
		{`{name: l, type: logistic, kernel: {type: rbf}, features: {dim: 2}}`, "models[0].kernel: does not apply to model type logistic (it takes: name, type, features, scope, max_keys, label, fallback, residual, learning_rate, l2) (line 2)"},
		{`{name: l, type: logistic, learning_rate: 0, features: {dim: 2}}`, "models[0].learning_rate: must be > 0 and finite, got 0 (line 2)"},
		{`{name: m, type: mam, window: {events: 10}, decay: {half_life: 5}, features: {dim: 2}}`, "models[0].decay.half_life: cannot be combined with window.events (10): choose one way of forgetting (line 2)"},
		{`{name: m, type: mam, kernel: {type: polynomial}, features: {dim: 2}}`, `models[0].kernel.type: "polynomial" has no random-feature map: it needs budget > 0 (exact kernel mode) (line 2)`},
		{`{name: m, type: mam, window: {evnts: 3}, features: {dim: 2}}`, `unknown key "models[0].window.evnts" (line 2) (models[0].window takes: events)`},
		{`{name: s, type: svm, C: 0, features: {dim: 2}}`, "models[0].C: must be a finite number > 0, got 0 (line 2)"},
		{`{name: s, type: svm, refit: {guard: 0.7}, features: {dim: 2}}`, "models[0].refit.guard: must be in [0, 0.5), got 0.7 (line 2)"},
		{`{name: s, type: svm, probability: {levels: 1}, features: {dim: 2}}`, "models[0].probability.levels: must be in 2..100 (0 = off), got 1 (line 2)"},
		{`{name: s, type: svm, kernel: {type: sigmoid, degree: 3}, features: {dim: 2}}`, "models[0].kernel.degree: only for kernel type polynomial; remove it (kernel.type is sigmoid) (line 2)"},
		{`{name: d, type: lda, C: 1, features: {dim: 2}}`, "models[0].C: does not apply to model type lda (it takes: name, type, features, scope, max_keys, label, fallback, residual, window, decay) (line 2)"},
		// A key of no model type is a typo: an unknown key.
		{"{name: m, type: mam, kernell: {type: linear}, features: {dim: 2}}", `config: unknown key "models[0].kernell" (line 2) (model type mam takes: name, type, features, scope, max_keys, label, fallback, residual, kernel, balance, delta, budget, window, decay, bandwidths)`},
		{"{name: m, type: svm, C_pox: 2, features: {dim: 2}}", `config: unknown key "models[0].C_pox" (line 2) (model type svm takes: name, type, features, scope, max_keys, label, fallback, residual, kernel, C, C_pos, C_neg, delta, window, refit, probability)`},
	} {
		_, err := Parse([]byte("models:\n  - "+tc.yaml+"\n"), nil, testTypes)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant …%s…", tc.yaml, err, tc.want)
		}
	}
}

func TestAllShippedConfigsLoad(t *testing.T) {
	for _, name := range []string{"streamer.yaml", "demo.yaml", "eval-ripley.yaml", "recommendation.yaml", "clicks.yaml", "recommendation-categorical.yaml"} {
		c, err := Load("../configs/"+name, nil, testTypes)
		if err != nil {
			t.Errorf("configs/%s: %v", name, err)
			continue
		}
		for _, m := range c.Models {
			if _, err := testTypes.New(m.Spec()); err != nil {
				t.Errorf("configs/%s: model %s: %v", name, m.Name, err)
			}
		}
	}
}

func TestRankingKeys(t *testing.T) {
	cfg, err := Parse([]byte(`
models:
  - {name: r, type: mlsrrank, kernels: [{gamma: 0.1}, {gamma: 1, v: 2}], features: {dim: 3}}
  - {name: k, type: krr, lambda: 0.5, kernel: {type: rbf, gamma: 2}, features: {dim: 3}, scope: key, max_keys: 50}
  - {name: l, type: lsrrank, levels: 5, solver: features, kernel: {type: rbf, gamma: 1, features: 128}, features: {dim: 3}}
`), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Models[0].Params.(*refit.MLSRRankParams)
	k := cfg.Models[1].Params.(*refit.KRRParams)
	l := cfg.Models[2].Params.(*refit.LSRRankParams)
	if len(r.Kernels) != 2 || r.Kernels[0] != (refit.WeightedKernel{Type: "rbf", Gamma: 0.1, V: 1}) || r.Kernels[1] != (refit.WeightedKernel{Type: "rbf", Gamma: 1, V: 2}) ||
		r.Lambda != refit.DefaultLambda || r.Solver != refit.SolverExact || r.Window.Events != refit.DefaultWindow || r.Refit.EveryEvents != refit.DefaultRefitEvery || r.Levels != 0 {
		t.Errorf("mlsrrank: %+v", r)
	}
	// The exact solver has no random features.
	if m := cfg.Models[1]; k.Lambda != 0.5 || k.Kernel != (refit.RankKernel{Type: "rbf", Gamma: 2}) || m.Scope != ScopeKey || m.MaxKeys != 50 {
		t.Errorf("krr: %+v %+v", m, k)
	}
	if l.Levels != 5 || l.Solver != refit.SolverFeatures || l.Kernel != (refit.RankKernel{Type: "rbf", Gamma: 1, Features: 128, Seed: 1}) {
		t.Errorf("lsrrank with levels: %+v", l)
	}
	for _, m := range cfg.Models {
		if _, err := testTypes.New(m.Spec()); err != nil {
			t.Errorf("%s: %v", m.Name, err)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{`{name: r, type: mlsrrank, features: {dim: 2}}`, "models[0].kernels: required: a list of 1 to 64 {type: rbf, gamma, v}, got 0 (line 2)"},
		{`{name: r, type: mlsrrank, kernels: [{gamma: 1, v: 0.5}], features: {dim: 2}}`, "models[0].kernels[0].v: must be a finite weight ≥ 1, got 0.5 (line 2)"},
		{`{name: r, type: lsrrank, lambda: -1, features: {dim: 2}}`, "models[0].lambda: must be a finite number > 0, got -1 (line 2)"},
		{`{name: r, type: lsrrank, solver: magic, features: {dim: 2}}`, `models[0].solver: "magic" is not one of exact, features (line 2)`},
		{`{name: r, type: lsrrank, max_keys: 3, features: {dim: 2}}`, "models[0].max_keys: only with scope: key (line 2)"},
		{`{name: r, type: lsrrank, levels: 1, features: {dim: 2}}`, "models[0].levels: must be in 2..1000 (integer targets 1..m; 0 = off, any real target), got 1 (line 2)"},
		{`{name: r, type: mlsrrank, kernels: [{gamma: 1}], levels: 1001, features: {dim: 2}}`, "models[0].levels: must be in 2..1000"},
		{`{name: r, type: krr, levels: 5, features: {dim: 2}}`, "models[0].levels: does not apply to model type krr (it takes: name, type, features, scope, max_keys, label, fallback, residual, kernel, lambda, solver, window, refit) (line 2)"},
		{`{name: r, type: lsrrank, levels: 5, edges: [1, 2, 3, 4], features: {dim: 2}}`, "models[0].edges: does not apply to model type lsrrank"},
		{`{name: r, type: lsrrank, refit: {guard: 0.1}, features: {dim: 2}}`, `unknown key "models[0].refit.guard" (line 2) (models[0].refit takes: every_events, every, on_score)`},
	} {
		_, err := Parse([]byte("models:\n  - "+tc.yaml+"\n"), nil, testTypes)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant …%s…", tc.yaml, err, tc.want)
		}
	}
}
