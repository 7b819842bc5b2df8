package wire

import (
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestEntities: the decoder reports the id each entity's namespace gives
// (unescaped), the id feature's hash, and the namespace's object as the
// message has it; an event without the namespace reports none, and the
// next decode forgets the last one's.
func TestEntities(t *testing.T) {
	h := HashConfig{Bits: 18, Seed: 5, Namespaces: []string{"user", "item"}}
	d, _ := NewDecoder(1<<18, nil, 0)
	d, _ = d.WithHashing(h)
	d, err := d.WithEntities([]EntityRef{{"item", "id"}, {"user", "name"}})
	if err != nil {
		t.Fatal(err)
	}
	var ev Event
	src := `{"features":{"user":{"id":"u1","name":"ann\u00e9"},"item":{"genres":["a"],"id":"m\"7"}},"label":1}`
	if err := d.Decode([]byte(src), &ev); err != nil {
		t.Fatal(err)
	}
	if string(ev.Ent[0]) != `m"7` || string(ev.Ent[1]) != "anné" {
		t.Fatalf("ids %q %q", ev.Ent[0], ev.Ent[1])
	}
	if string(ev.EntObj[0]) != `{"genres":["a"],"id":"m\"7"}` || string(ev.EntObj[1]) != `{"id":"u1","name":"ann\u00e9"}` {
		t.Fatalf("objects %s %s", ev.EntObj[0], ev.EntObj[1])
	}
	want := xxhash.Sum64(append([]byte{5, 0, 0, 0, 0, 0, 0, 0}, "item\x00id=m\"7"...))
	if ev.EntHash[0] != want || ev.Idx[3] != int32(want&(1<<18-1)) {
		t.Fatalf("id hash %x, want %x (index %d)", ev.EntHash[0], want, ev.Idx[3])
	}
	if err := d.Decode([]byte(`{"features":{"user":{"id":"u1"}}}`), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Ent[0] != nil || ev.Ent[1] != nil || ev.EntObj[0] != nil || ev.EntObj[1] == nil {
		t.Fatalf("after an event without the item: %q %q %s", ev.Ent[0], ev.Ent[1], ev.EntObj[1])
	}
	if _, err := d.WithEntities([]EntityRef{{"item", "id"}, {"item", "sku"}}); err == nil {
		t.Fatal("two entities of one namespace accepted")
	}
}

// TestIDOnlyCandidates: with WithIDOnly a candidate may name only its
// item (its features are then the request's own), a candidate's features
// name no entity, and without it such a candidate is missing_features.
func TestIDOnlyCandidates(t *testing.T) {
	h := HashConfig{Bits: 18, Seed: 5, Namespaces: []string{"user", "item"}}
	base, _ := NewDecoder(1<<18, nil, 0)
	base, _ = base.WithHashing(h)
	base, _ = base.WithEntities([]EntityRef{{"item", "id"}})
	base = base.WithRequests(10)
	req := []byte(`{"id":"q","key":"u1","features":{"user":{"id":"u1"}},"candidates":[{"item":"m1"},{"item":"m2","features":{"item":{"id":"m2"}}}]}`)
	var ev Event
	err := base.Decode(req, &ev)
	if e, ok := err.(*Error); !ok || e.Reason != ReasonMissingFeatures {
		t.Fatalf("without WithIDOnly: %v", err)
	}
	d := base.WithIDOnly()
	if err := d.Decode(req, &ev); err != nil {
		t.Fatal(err)
	}
	if !ev.Cands[0].IDOnly || ev.Cands[1].IDOnly {
		t.Fatalf("id-only flags %v %v", ev.Cands[0].IDOnly, ev.Cands[1].IDOnly)
	}
	idx0, _, _, _ := ev.CandidateHashed(0)
	idx1, _, _, _ := ev.CandidateHashed(1)
	if len(idx0) != 1 || len(idx1) != 2 || idx0[0] != idx1[0] {
		t.Fatalf("candidate features %v %v: want the request's, and the request's with the item's", idx0, idx1)
	}
	if ev.Ent[0] != nil {
		t.Fatalf("a candidate's features named the entity: %q", ev.Ent[0])
	}
}

// TestDecodeFeatures: a features object decodes into the hashed features
// an event with it would have, past max_features with Fragments.
func TestDecodeFeatures(t *testing.T) {
	h := HashConfig{Bits: 18, Seed: 5, Namespaces: []string{"p"}, MaxFeatures: 1}
	d, _ := NewDecoder(1<<18, nil, 0)
	d, _ = d.WithHashing(h)
	obj := []byte(`{"p":{"r0":2.5,"r1":-1}}`)
	var ev Event
	if err := d.DecodeFeatures(obj, &ev); err == nil {
		t.Fatal("two features past max_features 1 accepted")
	}
	if err := d.Fragments().DecodeFeatures(obj, &ev); err != nil {
		t.Fatal(err)
	}
	for k, name := range []string{"r0", "r1"} {
		i, neg := h.Feature("p", name)
		v := []float64{2.5, -1}[k]
		if neg {
			v = -v
		}
		if ev.Idx[k] != i || ev.Val[k] != v || ev.Field[k] != 1 {
			t.Fatalf("feature %s: %d %v %d, want %d %v 1", name, ev.Idx[k], ev.Val[k], ev.Field[k], i, v)
		}
	}
	if err := d.Fragments().DecodeFeatures([]byte(`{"p":{"r0":1}} x`), &ev); err == nil {
		t.Fatal("trailing data accepted")
	}
}

// TestFeature: HashConfig.Feature gives the index and sign the decoder
// gives the numeric feature.
func TestFeature(t *testing.T) {
	h := HashConfig{Bits: 18, Seed: 3, Namespaces: []string{"p"}}
	d, _ := NewDecoder(1<<18, nil, 0)
	d, _ = d.WithHashing(h)
	var ev Event
	for _, name := range []string{"r17", "f0", "mean"} {
		if err := d.Decode([]byte(`{"features":{"p":{"`+name+`":2.5}}}`), &ev); err != nil {
			t.Fatal(err)
		}
		if i, neg := h.Feature("p", name); ev.Idx[0] != i || (ev.Val[0] < 0) != neg {
			t.Fatalf("%s: decoder %d %v, Feature %d %v", name, ev.Idx[0], ev.Val[0], i, neg)
		}
	}
}
