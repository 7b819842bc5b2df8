// Package testkit holds the test inputs that the engine's tests and the
// pipeline's share: a sink that keeps records, ranking requests, a small
// world of users and items with hashed features, its models, and a reader
// of a registry's samples.
// (A package's test files cannot be imported, and the engine's own tests
// cannot import a package that imports the engine: what is here needs
// neither.)
package testkit

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/wire"
)

// MemSink is a sink (engine.Sink) that keeps the records it is given
// when Keep is set, and otherwise recycles their buffers.
type MemSink struct {
	Msgs []kafka.Message
	Keep bool
	free [][]byte
}

// Buffer returns an empty buffer to encode a record into.
func (s *MemSink) Buffer() []byte {
	if n := len(s.free); n > 0 {
		b := s.free[n-1]
		s.free = s.free[:n-1]
		return b
	}
	return make([]byte, 0, 512)
}

// Publish keeps m (Keep) or its buffer for reuse.
func (s *MemSink) Publish(m kafka.Message) {
	if s.Keep {
		s.Msgs = append(s.Msgs, m)
		return
	}
	if m.Headers == nil {
		s.free = append(s.free, m.Value[:0])
	}
}

// Request32 is a request of n candidates of dim features, candidate i at
// i/n along the first axis.
func Request32(n, dim, k int) []byte {
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

// FirstAxisEvents are 200 labelled events of dim features whose class
// is the sign of the first (the second varies), for a model to learn
// before it ranks Request32's candidates.
func FirstAxisEvents(dim int) []kafka.Message {
	out := make([]kafka.Message, 200)
	for i := range out {
		x := make([]float64, dim)
		y := 1
		x[0] = 1
		if i%2 == 1 {
			x[0], y = -1, -1
		}
		x[1] = float64(i%7) / 7
		v, _ := json.Marshal(map[string]any{"features": x, "label": y})
		out[i] = kafka.Message{Topic: "events", Offset: int64(i), Value: v}
	}
	return out
}

// HashedClicks are 300 labelled events of World with hashed features: a
// user's click (+1) on an item it likes, −1 on the others, the users and
// items named and categorised as in HashedRequest100.
func HashedClicks() []kafka.Message {
	out := make([]kafka.Message, 300)
	for i := range out {
		u, it := i%7, (i*13)%50
		y := -1
		if (World{}).Likes(u, it) {
			y = 1
		}
		out[i] = kafka.Message{Topic: "events", Offset: int64(i), Value: fmt.Appendf(nil,
			`{"features":{"user":{"id":"user-%d"},"item":{"id":"item-%d","category":"c%d"}},"label":%d}`, u, it, it%17, y)}
	}
	return out
}

// HashedBits is the hashed models' index bits (HashedConfig).
const HashedBits = 12

// HashedConfig is the hashing of World's events: 2^HashedBits indices,
// the user × item interaction.
var HashedConfig = wire.HashConfig{Bits: HashedBits, Seed: 1, MaxFeatures: 64, Interactions: [][2]string{{"user", "item"}}}

// HashedMAM is a linear mam of HashedConfig's features.
func HashedMAM() (online.Model, error) {
	return online.NewMAM(1<<HashedBits, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelLinear}, Balance: true, Delta: 0.05})
}

// HashedLogistic is a logistic regression of HashedConfig's features.
func HashedLogistic() (online.Model, error) {
	return online.NewLogistic(1<<HashedBits, online.LogisticParams{LearningRate: online.DefaultLearningRate, L2: online.DefaultL2})
}

// World: user u likes an item when the user's taste (u mod 3) is the
// item's category (i mod 3); item and user ids are categorical features.
type World struct{ Items int }

// Likes reports whether user u likes item i.
func (World) Likes(u, i int) bool { return u%3 == i%3 }

// Request is a ranking request for user u of the candidates items, k
// shown: the user's namespace in the request's features, each item's in
// its candidate.
func (World) Request(id string, u int, items []int, k int) []byte {
	b := fmt.Appendf(nil, `{"id":%q,"key":"u%d","k":%d,"features":{"user":{"id":"u%d"},"hour":%d},"candidates":[`, id, u, k, u, u%24)
	for j, i := range items {
		if j > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"item":"i%d","features":{"item":{"id":"i%d","cat":"c%d","tags":["t%d"]}}}`, i, i, i%3, i%7)
	}
	return append(b, "]}"...)
}

// Ranked is an item of a ranking response.
type Ranked struct {
	Item       string
	Score      float64
	Propensity float64
}

// HashedRequest100 is a request of n candidates for one user: the user's
// namespace (id, country, device) and the hour in the request's features,
// each candidate an item (id, category, two tags); with the user × item
// interaction, 4 + 4 + 3·4 = 20 hashed features per candidate.
func HashedRequest100(n, k int) []byte {
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

// Samples returns the samples of the named counters and gauges of reg,
// one a line, as the text exposition writes them.
func Samples(t testing.TB, reg *prometheus.Registry, names ...string) string {
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
