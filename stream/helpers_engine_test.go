package stream

import (
	"testing"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/stream/holder"
	"github.com/streamer/streamer/stream/internal/testkit"
	"github.com/streamer/streamer/stream/wire"
)

// Copies of the engine package's test helpers that the pipeline's tests
// use too (a package's test files are not importable).

// memSink keeps what it is given (testkit.MemSink).
type memSink = testkit.MemSink

// instanceShard is e's instance-scope shard with empty models, as a
// pipeline without a snapshot starts it.
func instanceShard(t testing.TB, e *engine.Engine) *engine.Shard {
	t.Helper()
	s, err := e.NewShard("")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Restore(nil, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// exploreEngine is exploreShard's engine.
func exploreEngine(t testing.TB, dim, max int, keys *keystore.DB, policy string, alpha float64) *engine.Engine {
	t.Helper()
	factory := func() (online.Model, error) {
		return online.NewMAM(dim, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
	}
	m, _ := factory()
	e, err := engine.New(engine.Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim, KeyStore: keys, MaxMessageBytes: 1 << 20,
		Rank: engine.RankConfig{Model: "k", Policy: policy, Alpha: alpha, Seed: 3}},
		[]engine.NamedModel{{Name: "k", Model: m, Fingerprint: "k-fp", Factory: factory, MaxKeys: max, New: factory}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// deltaKeys is the keys of a key-scoped model's delta.
func deltaKeys(d *holder.Delta) [][]byte {
	keys, _ := d.States()
	return keys
}

// rankEngine is an engine whose linear mam (d = dim) ranks requests.
func rankEngine(t testing.TB, dim int, policy string, eps float64) *engine.Engine {
	t.Helper()
	return rankEngineLanes(t, dim, policy, eps, engine.MergeLanesAuto)
}

// rankEngineLanes is rankEngine with lanes as merge says.
func rankEngineLanes(t testing.TB, dim int, policy string, eps float64, merge engine.MergeLanes) *engine.Engine {
	t.Helper()
	m, err := online.NewMAM(dim, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim, MaxMessageBytes: 1 << 20,
		JoinEvents: 1000, MergeLanes: merge, Rank: engine.RankConfig{Model: "mam", Policy: policy, Epsilon: eps, Seed: 7}},
		[]engine.NamedModel{{Name: "mam", Model: m}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// trainFirstAxis teaches s's model that a positive first feature is the
// positive class.
func trainFirstAxis(s *engine.Shard, dim int) {
	sink := &memSink{}
	for _, m := range testkit.FirstAxisEvents(dim) {
		s.Process(&m, sink)
	}
}

// hashedRankEngine ranks with a key-scoped linear mam ("prefs") of hashed
// features; a global logistic regression ("ctr") learns from the same
// labels.
func hashedRankEngine(t testing.TB, policy string, eps float64) *engine.Engine {
	t.Helper()
	proto, _ := testkit.HashedMAM()
	lg, _ := testkit.HashedLogistic()
	hc := testkit.HashedConfig
	e, err := engine.New(engine.Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 1 << testkit.HashedBits, MaxMessageBytes: 1 << 20,
		JoinEvents: 10000, Hash: &hc, Rank: engine.RankConfig{Model: "prefs", Policy: policy, Epsilon: eps, Seed: 3}},
		[]engine.NamedModel{{Name: "prefs", Model: proto, Factory: testkit.HashedMAM, MaxKeys: 100}, {Name: "ctr", Model: lg}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// hashedRankGlobal is an engine whose global linear mam of hashed features
// (2^18 indices, the user × item interaction) ranks requests greedily,
// with delayed labels on.
func hashedRankGlobal(t testing.TB) *engine.Engine {
	t.Helper()
	const bits = 18
	m, err := online.NewMAM(1<<bits, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelLinear}, Balance: true, Delta: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	hc := wire.HashConfig{Bits: bits, Seed: 1, MaxFeatures: 64, Interactions: [][2]string{{"user", "item"}}}
	e, err := engine.New(engine.Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 1 << bits, MaxMessageBytes: 1 << 20,
		JoinEvents: 1000, Hash: &hc, Rank: engine.RankConfig{Model: "mam", Policy: engine.PolicyGreedy}},
		[]engine.NamedModel{{Name: "mam", Model: m}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// trainHashed teaches s's model clicks of the hashed world of testkit.World.
func trainHashed(s *engine.Shard) {
	sink := &memSink{}
	for _, m := range testkit.HashedClicks() {
		s.Process(&m, sink)
	}
}
