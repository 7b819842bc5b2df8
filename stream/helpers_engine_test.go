package stream

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/stream/holder"
	"github.com/streamer/streamer/stream/wire"
)

// Copies of the engine package's test helpers that the pipeline's tests
// use too (a package's test files are not importable).

// memSink keeps what it is given; buffers are recycled when reset.
type memSink struct {
	msgs []kafka.Message
	free [][]byte
	keep bool
}

func (s *memSink) Buffer() []byte {
	if n := len(s.free); n > 0 {
		b := s.free[n-1]
		s.free = s.free[:n-1]
		return b
	}
	return make([]byte, 0, 512)
}

func (s *memSink) Publish(m kafka.Message) {
	if s.keep {
		s.msgs = append(s.msgs, m)
		return
	}
	if m.Headers == nil {
		s.free = append(s.free, m.Value[:0])
	}
}

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

// samples returns the samples of the named counters and gauges of reg,
// one a line, as the text exposition writes them.
func samples(t *testing.T, reg *prometheus.Registry, names ...string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if !slices.Contains(names, mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			b.WriteString(mf.GetName())
			for i, l := range m.GetLabel() {
				sep := ","
				if i == 0 {
					sep = "{"
				}
				fmt.Fprintf(&b, "%s%s=%q", sep, l.GetName(), l.GetValue())
			}
			if len(m.GetLabel()) > 0 {
				b.WriteByte('}')
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			fmt.Fprintf(&b, " %v\n", v)
		}
	}
	return b.String()
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

// request32 is a request of n candidates of dim features, candidate i at
// i/n along the first axis.
func request32(n, dim, k int) []byte {
	b := []byte(`{"id":"r-1","key":"u","k":` + strconv.Itoa(k) + `,"candidates":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"item":"i`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","features":[`...)
		for j := range dim {
			if j > 0 {
				b = append(b, ',')
			}
			v := 0.0
			if j == 0 {
				v = float64(i)/float64(n) - 0.5
			} else if j == 1 {
				v = 0.3
			}
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...)
}

// trainFirstAxis teaches s's model that a positive first feature is the
// positive class.
func trainFirstAxis(s *engine.Shard, dim int) {
	sink := &memSink{}
	for i := range 200 {
		x := make([]float64, dim)
		y := 1
		x[0] = 1
		if i%2 == 1 {
			x[0], y = -1, -1
		}
		x[1] = float64(i%7) / 7
		v, _ := json.Marshal(map[string]any{"features": x, "label": y})
		s.Process(&kafka.Message{Topic: "events", Offset: int64(i), Value: v}, sink)
	}
}

const hrBits = 12

var hrHash = wire.HashConfig{Bits: hrBits, Seed: 1, MaxFeatures: 64, Interactions: [][2]string{{"user", "item"}}}

func hrMAM() (online.Model, error) {
	return online.NewMAM(1<<hrBits, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelLinear}, Balance: true, Delta: 0.05})
}

func hrLogistic() (online.Model, error) {
	return online.NewLogistic(1<<hrBits, online.LogisticParams{LearningRate: online.DefaultLearningRate, L2: online.DefaultL2})
}

// hashedRankEngine ranks with a key-scoped linear mam ("prefs") of hashed
// features; a global logistic regression ("ctr") learns from the same
// labels.
func hashedRankEngine(t testing.TB, policy string, eps float64) *engine.Engine {
	t.Helper()
	proto, _ := hrMAM()
	lg, _ := hrLogistic()
	hc := hrHash
	e, err := engine.New(engine.Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 1 << hrBits, MaxMessageBytes: 1 << 20,
		JoinEvents: 10000, Hash: &hc, Rank: engine.RankConfig{Model: "prefs", Policy: policy, Epsilon: eps, Seed: 3}},
		[]engine.NamedModel{{Name: "prefs", Model: proto, Factory: hrMAM, MaxKeys: 100}, {Name: "ctr", Model: lg}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// hrWorld: user u likes an item when the user's taste (u mod 3) is the
// item's category (i mod 3); item and user ids are categorical features.
type hrWorld struct{ items int }

func (hrWorld) likes(u, i int) bool { return u%3 == i%3 }

// request is a ranking request for user u of the candidates items, k
// shown: the user's namespace in the request's features, each item's in
// its candidate.
func (hrWorld) request(id string, u int, items []int, k int) []byte {
	b := fmt.Appendf(nil, `{"id":%q,"key":"u%d","k":%d,"features":{"user":{"id":"u%d"},"hour":%d},"candidates":[`, id, u, k, u, u%24)
	for j, i := range items {
		if j > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"item":"i%d","features":{"item":{"id":"i%d","cat":"c%d","tags":["t%d"]}}}`, i, i, i%3, i%7)
	}
	return append(b, "]}"...)
}

type hrRanked struct {
	Item       string
	Score      float64
	Propensity float64
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

// hashedRequest100 is a request of n candidates for one user: the user's
// namespace (id, country, device) and the hour in the request's features,
// each candidate an item (id, category, two tags); with the user × item
// interaction, 4 + 4 + 3·4 = 20 hashed features per candidate.
func hashedRequest100(n, k int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"id":"req-1","key":"user-42","k":%d,"features":{"user":{"id":"user-42","country":"fr","device":"ios"},"hour":14},"candidates":[`, k)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"item":"item-%d","features":{"item":{"id":"item-%d","category":"c%d","tags":["t%d","t%d"]}}}`, i, i, i%17, i%5, i%11)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// trainHashed teaches s's model clicks of the hashed world of hrWorld.
func trainHashed(s *engine.Shard) {
	sink := &memSink{}
	for i := range 300 {
		u, it := i%7, (i*13)%50
		y := -1
		if hrWorld.likes(hrWorld{}, u, it) {
			y = 1
		}
		s.Process(&kafka.Message{Topic: "events", Offset: int64(i), Value: fmt.Appendf(nil,
			`{"features":{"user":{"id":"user-%d"},"item":{"id":"item-%d","category":"c%d"}},"label":%d}`, u, it, it%17, y)}, sink)
	}
}
