package engine

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/snapshot"
)

const versionsYAML = `
models:
  - name: g
    type: mam
    kernel: {type: linear}
    features: {dim: 3}
  - name: other
    type: logistic
    features: {dim: 3}
  - name: k
    type: mam
    scope: key
    kernel: {type: linear}
    features: {dim: 3}
`

// versionEvents are n labelled events of keys u0 … u4, ids prefix-i.
func versionEvents(n int, prefix string) []kafka.Message {
	out := make([]kafka.Message, n)
	for i := range n {
		x := []float64{float64(i%7) - 3, float64(i%5)/2 - 1, float64(i%11)/5 - 1}
		y := 1
		if x[0]+0.5*x[1]-x[2] < 0 {
			y = -1
		}
		out[i] = kafka.Message{Key: fmt.Appendf(nil, "u%d", i%5),
			Value: fmt.Appendf(nil, `{"id":"%s-%d","features":[%g,%g,%g],"label":%d}`, prefix, i, x[0], x[1], x[2], y)}
	}
	return out
}

func savedModel(t *testing.T, s *Shard, name string) snapshot.Model {
	t.Helper()
	c, err := s.Capture()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Models {
		if m.Name == name {
			m.Data = bytes.Clone(m.Data)
			return m
		}
	}
	t.Fatalf("no model %s captured", name)
	return snapshot.Model{}
}

// TestSetModel: SetModel sets one global model's state to a state it
// saved before, byte for byte, and leaves the other models alone; the
// model then learns the events after it exactly as a model restored from
// that state does. A key-scoped model, an unknown one, another
// configuration's state and a state that does not decode are refused,
// changing nothing.
func TestSetModel(t *testing.T) {
	keys, err := keystore.Open("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	e := configEngine(t, keys, versionsYAML)
	s := instanceShard(t, e)
	sink := &memSink{}
	feed := func(s *Shard, msgs []kafka.Message) {
		for i := range msgs {
			s.Process(&msgs[i], sink)
		}
	}
	events := versionEvents(900, "e")
	feed(s, events[:300])
	v1 := savedModel(t, s, "g")
	feed(s, events[300:600])
	other := savedModel(t, s, "other")
	before := savedModel(t, s, "g")
	if bytes.Equal(before.Data, v1.Data) {
		t.Fatal("the model learned nothing")
	}

	k := savedModel(t, s, "k")
	bad := v1
	bad.Data = []byte("not a state")
	otherFP, otherType := v1, v1
	otherFP.Fingerprint = "0123"
	otherType.Type = "omam"
	var mismatch *StateMismatchError
	for _, c := range []struct {
		saved snapshot.Model
		is    func(error) bool
	}{
		{k, func(err error) bool { return errors.Is(err, ErrKeyScopedModel) }},
		{snapshot.Model{Name: "nope", Type: "mam", Data: v1.Data}, func(err error) bool { return errors.Is(err, ErrUnknownModel) }},
		{otherFP, func(err error) bool { return errors.As(err, &mismatch) && mismatch.SavedFingerprint == "0123" }},
		{otherType, func(err error) bool {
			return errors.As(err, &mismatch) && mismatch.SavedType == "omam" && mismatch.Type == "mam"
		}},
		{bad, func(err error) bool { return err != nil }},
	} {
		if err := s.SetModel(c.saved); !c.is(err) {
			t.Errorf("SetModel(%s, type %s, fingerprint %.8s…): %v", c.saved.Name, c.saved.Type, c.saved.Fingerprint, err)
		}
	}
	if got := savedModel(t, s, "g"); !bytes.Equal(got.Data, before.Data) {
		t.Fatal("a refused SetModel changed the model")
	}

	if err := s.SetModel(v1); err != nil {
		t.Fatal(err)
	}
	if got := savedModel(t, s, "g"); !bytes.Equal(got.Data, v1.Data) {
		t.Fatal("after SetModel the model's state is not the state set")
	}
	if got := savedModel(t, s, "other"); !bytes.Equal(got.Data, other.Data) {
		t.Fatal("SetModel of g changed another model")
	}
	if n := s.ModelExamples()[0]; n != 300 {
		t.Fatalf("examples after SetModel: %d, want 300", n)
	}
	feed(s, events[600:])

	// A reference restored from v1 learns the same events.
	re := configEngine(t, nil, `
models:
  - name: g
    type: mam
    kernel: {type: linear}
    features: {dim: 3}
`)
	r := instanceShard(t, re)
	if _, _, err := r.Restore([]snapshot.Model{v1}, nil); err != nil {
		t.Fatal(err)
	}
	feed(r, events[600:])
	if got, want := savedModel(t, s, "g"), savedModel(t, r, "g"); !bytes.Equal(got.Data, want.Data) {
		t.Fatal("the model rolled back learned the events after it differently from a model restored from the version")
	}
	if n := s.ModelExamples()[0]; n != 600 {
		t.Fatalf("examples at the end: %d, want 600", n)
	}
}
