package engine

import (
	"fmt"
	"slices"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/profile"
	"github.com/streamer/streamer/stream/wire"
)

// The engine's configuration and models from the service's configuration.

// BuildModels constructs the configured models from the model types of
// reg.
func BuildModels(cfg config.Config, reg *online.Registry) ([]NamedModel, error) {
	var out []NamedModel
	for i, mc := range cfg.Models {
		spec := mc.Spec()
		t, err := reg.Type(mc.Type)
		if err != nil {
			return nil, fmt.Errorf("models[%d] (%s): %w", i, mc.Name, err)
		}
		build := func() (online.Model, error) { return reg.New(spec) }
		m, err := build()
		if err != nil {
			return nil, fmt.Errorf("models[%d] (%s): %w", i, mc.Name, err)
		}
		nm := NamedModel{Name: mc.Name, Model: m, Fingerprint: mc.Fingerprint(), Traits: t.Traits(mc.Params), New: build,
			Label: mc.LabelMap(), Fallback: mc.Fallback, Residual: mc.Residual, Use: mc.Features.Use}
		for _, name := range mc.Members() {
			j := slices.IndexFunc(cfg.Models[:i], func(o config.Model) bool { return o.Name == name })
			if j < 0 {
				return nil, fmt.Errorf("models[%d] (%s): member %q is not a model before it", i, mc.Name, name)
			}
			nm.Members = append(nm.Members, j)
		}
		if mc.KeyScoped() {
			nm.Factory = build // heavy instances are not started: key-scoped refits run inline
			nm.MaxKeys = mc.MaxKeys
		}
		out = append(out, nm)
	}
	return out, nil
}

// ConfigFrom is the engine's configuration from cfg (without the key
// store, opened later).
func ConfigFrom(cfg config.Config) Config {
	m0 := cfg.Models[0]
	return Config{
		OutputTopic:     cfg.Kafka.OutputTopic,
		DLQTopic:        cfg.Kafka.DLQTopic,
		Dim:             m0.Features.Dim,
		FeatureNames:    m0.Features.Names,
		Rows:            rows(m0.Features),
		MaxMessageBytes: cfg.Kafka.MaxMessageBytes,
		MaxFeatureAbs:   cfg.Kafka.MaxFeatureAbs,
		AccuracyWindow:  cfg.Metrics.AccuracyWindow,
		JoinEvents:      joinEvents(cfg.Labels.JoinWindow),
		JoinTime:        cfg.Labels.JoinWindow.Time,
		JoinPerKey:      cfg.Labels.JoinWindow.PerKey,
		Hash:            HashConfig(cfg),
		Calibration:     CalibrationConfig{Window: cfg.Calibration.Window, Every: cfg.Calibration.Every, Delta: cfg.Calibration.Delta, MinInterval: cfg.Calibration.MinInterval},
		Rank: RankConfig{Model: cfg.Rank.Model, MaxCandidates: cfg.Rank.MaxCandidates, ResponseTopic: cfg.Rank.ResponseTopic,
			Policy: cfg.Rank.Explore.Policy, Epsilon: cfg.Rank.Explore.Epsilon, Alpha: cfg.Rank.Explore.Alpha,
			Samples: cfg.Rank.Explore.Samples, Seed: uint64(cfg.Rank.Explore.Seed),
			JoinEvents: rankJoinEvents(cfg.Rank.Join), JoinTime: cfg.Rank.Join.Time, JoinPerKey: cfg.Rank.Join.PerKey, JoinEntries: cfg.Rank.Join.Entries,
			JoinLabelled: 1 - cfg.Rank.Join.NewKeys,
			Challenger:   cfg.Rank.Challenger.Model, Promote: cfg.Rank.Challenger.Promote, Estimator: cfg.Rank.Challenger.Estimator,
			Confidence: cfg.Rank.Challenger.Confidence, Hold: cfg.Rank.Challenger.Hold},
	}
}

// ProfilesFrom is the engine's profiles (Config.Profiles) from cfg's
// profiles section, the reference keys read from their files.
func ProfilesFrom(cfg config.Config) ([]ProfileConfig, error) {
	var out []ProfileConfig
	for i, p := range cfg.Profiles {
		ns, name := p.IDParts()
		pc := ProfileConfig{MaxKeys: p.MaxKeys, Config: profile.Config{
			Entity: p.Entity, Key: p.ID == "key", Namespace: ns, Name: name, Out: p.Out(), Values: p.PublishedValues(),
			HalfLife: p.HalfLife, Factors: p.Factors, MaxLabels: p.Reference.MaxLabels, Prior: p.Prior, Candidates: p.Candidates,
		}}
		keys, err := p.Reference.AllKeys()
		if err != nil {
			return nil, fmt.Errorf("profiles[%d].reference.keys_file: %w", i, err)
		}
		for _, k := range keys {
			pc.Reference = append(pc.Reference, []byte(k))
		}
		out = append(out, pc)
	}
	return out, nil
}

// defaultJoinEvents bounds the join buffer when only a time is configured.
const defaultJoinEvents = 100_000

func joinEvents(j config.JoinWindow) int {
	switch {
	case !j.Enabled():
		return 0
	case j.Events > 0:
		return j.Events
	default:
		return defaultJoinEvents
	}
}

// rankJoinEvents is the engine's RankConfig.JoinEvents for rank.join:
// events 0 (shown items not kept) is the engine's −1.
func rankJoinEvents(j config.RankJoin) int {
	if j.Events == 0 {
		return -1
	}
	return j.Events
}

// rows is the number of rows of a matrix input (features.shape), 0 for a
// vector.
func rows(f config.Features) int {
	if len(f.Shape) == 2 {
		return f.Shape[0]
	}
	return 0
}

// HashConfig is the hashing the service's engine decodes cfg's events with
// (Config.Hash): models[0]'s features.hash, namespaces, interactions
// and max_features, shared by every model; nil for dense features. cfg
// must have a model.
func HashConfig(cfg config.Config) *wire.HashConfig { return hashConfig(cfg.Models[0].Features) }

// hashConfig is the decoder's hashing of features f (nil: dense features).
func hashConfig(f config.Features) *wire.HashConfig {
	if f.Hash == nil {
		return nil
	}
	h := &wire.HashConfig{Bits: f.Hash.Bits, Seed: uint64(f.Hash.Seed), MaxFeatures: f.MaxFeatures, Namespaces: f.Namespaces}
	for _, p := range f.Interactions {
		h.Interactions = append(h.Interactions, [2]string{p[0], p[1]})
	}
	return h
}

// FromConfig is what the service builds from its configuration before it
// connects: the models (BuildModels) and the engine's configuration
// (ConfigFrom, with the entities' profiles, ProfilesFrom).
func FromConfig(cfg config.Config, reg *online.Registry) (Config, []NamedModel, error) {
	models, err := BuildModels(cfg, reg)
	if err != nil {
		return Config{}, nil, err
	}
	ecfg := ConfigFrom(cfg)
	if ecfg.Profiles, err = ProfilesFrom(cfg); err != nil {
		return Config{}, nil, err
	}
	return ecfg, models, nil
}
