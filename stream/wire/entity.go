package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// Entities and profiles (a hashing Decoder WithEntities). An entity is a
// thing the stream describes, named in an event by a string member of a
// namespace of its hashed features — an item by features.item.id. The
// decoder reports, per entity, the id an event gives it (Event.Ent), the
// id feature's hash (Event.EntHash) and the namespace's object as it
// appears in the message (Event.EntObj), so that the service can keep a
// profile of the entity and join it to later events and to ranking
// requests that name the entity only by its id (WithIDOnly).

// EntityRef names an entity's id in the hashed features: the string
// member Name of namespace Namespace.
type EntityRef struct{ Namespace, Name string }

// WithEntities returns a copy of d, a hashing Decoder, that reports the
// entities ents named in an event's features: Event.Ent[i] is the
// unescaped string value of member ents[i].Name of namespace
// ents[i].Namespace (nil when the event has none; the last one when
// repeated), Event.EntHash[i] the 64-bit hash of that feature (its index
// and sign as WithHashing says), and Event.EntObj[i] the namespace's
// object as the message has it (raw JSON aliasing the message; nil when
// absent). Candidates' features are not searched (a candidate's "item" is
// its id). Entities must name distinct namespaces.
func (d *Decoder) WithEntities(ents []EntityRef) (*Decoder, error) {
	if d.hash == nil {
		return nil, errors.New("wire: WithEntities: entities need hashed features (WithHashing first)")
	}
	for i, e := range ents {
		if e.Namespace == "" || e.Name == "" {
			return nil, fmt.Errorf("wire: WithEntities: entity %d: empty namespace or name", i)
		}
		for _, f := range ents[:i] {
			if f.Namespace == e.Namespace {
				return nil, fmt.Errorf("wire: WithEntities: namespace %q named twice", e.Namespace)
			}
		}
	}
	c := *d
	h := *d.hash
	h.ents = append([]EntityRef(nil), ents...)
	c.hash = &h
	return &c, nil
}

// WithIDOnly returns a copy of d that accepts ranking request candidates
// with an "item" and no "features": Candidate.IDOnly; their hashed
// features are then the request's own only, and the caller adds the
// item's (its profile).
func (d *Decoder) WithIDOnly() *Decoder {
	c := *d
	c.idOnly = true
	return &c
}

// Fragments returns a copy of d, a hashing Decoder, for DecodeFeatures:
// no limit on the number of features, no entities.
func (d *Decoder) Fragments() *Decoder {
	c := *d
	h := *d.hash
	h.max, h.ents = 0, nil
	c.hash = &h
	return &c
}

// entityOf returns the index of the entity of namespace ns, -1 if none.
func (h *hashing) entityOf(ns []byte) int {
	for i, e := range h.ents {
		if e.Namespace == string(ns) {
			return i
		}
	}
	return -1
}

// resetEntities makes room for every entity's report, all absent.
func (ev *Event) resetEntities(n int) {
	ev.Ent, ev.EntHash, ev.EntObj = ev.Ent[:0], ev.EntHash[:0], ev.EntObj[:0]
	for range n {
		ev.Ent, ev.EntHash, ev.EntObj = append(ev.Ent, nil), append(ev.EntHash, 0), append(ev.EntObj, nil)
	}
}

// entityMember records, in a namespace of entity s.ent, the categorical
// member whose hashed bytes are hk (its name=value from name, value from
// vstart) when it is the entity's id.
func (s *scanner) entityMember(hk []byte, name, vstart int) {
	ref := &s.d.hash.ents[s.ent]
	if vstart-1-name != len(ref.Name) || !bytes.Equal(hk[name:vstart-1], []byte(ref.Name)) {
		return
	}
	ev := s.ev
	mark := len(ev.buf)
	ev.buf = append(ev.buf, hk[vstart:]...)
	ev.Ent[s.ent] = ev.buf[mark:len(ev.buf):len(ev.buf)]
	ev.EntHash[s.ent] = xxhash.Sum64(hk)
}

// Feature is the index, and whether the sign is negative, of the numeric
// feature name of namespace ns ("" for the top level) under hashing h.
func (h HashConfig) Feature(ns, name string) (idx int32, negative bool) {
	var seed [8]byte
	binary.LittleEndian.PutUint64(seed[:], h.Seed)
	b := append(append(append(seed[:], ns...), 0), name...)
	x := xxhash.Sum64(b)
	return int32(x & (1<<h.Bits - 1)), x>>63 == 1
}
