package engine

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/holder"
	"github.com/streamer/streamer/stream/profile"
	"github.com/streamer/streamer/stream/wire"
)

// Entity profiles (package profile): each shard keeps, per configured
// entity, a key table of profiles (holder.Keyed, with the key store,
// checkpoints and restores of a key-scoped model) and, for a reference
// vector, a second one of the reference keys' labels. An event's profile
// values are joined before the models see it (joinProfiles: rendered as a
// features object and hashed as if the event had carried it), and the
// event is learned into the profiles after the models learned it
// (learnProfiles). A ranking request's candidates are joined likewise,
// and a candidate named only by its id takes the item's namespace as its
// profile kept it (candidateProfiles).

// ProfileConfig is one entity's profile in the engine.
type ProfileConfig struct {
	profile.Config
	MaxKeys int // profiles in memory per shard (a second-chance sweep out to the key store); default 100 000
}

// defaultProfileKeys is ProfileConfig.MaxKeys's default.
const defaultProfileKeys = 100_000

// profileDef is a configured profile as the engine sees it.
type profileDef struct {
	cfg         *profile.Config
	maxKeys     int
	name        string // "profile.<entity>": its snapshot entry and key table
	refName     string // "profile.<entity>.reference"
	fingerprint string
	ent         int   // its index in the decoder's entities; -1: the message key names it
	outField    uint8 // the field of cfg.Out (an event or candidate that carries it keeps its own)
	// The hashed index of each value (cfg.Names), and its sign as the
	// bit XORed into the value (wire.HashConfig.Feature).
	valIdx    []int32
	valSign   []uint64
	factors   int // the fm model's index in the engine's models (-1: none)
	refs      map[string]int
	joined    prometheus.Counter
	cold      prometheus.Counter
	keyErrors prometheus.Counter
}

// shardProfile is a profile's state in a shard (shared by its lanes).
type shardProfile struct {
	def  *profileDef
	h    *holder.Keyed
	ref  *holder.Keyed   // nil: no reference keys
	med  profile.Medians // the reference keys' median labels
	figs [2]holder.Figures
}

// profileScratch is a shard's (or lane's) scratch of the profile joins.
type profileScratch struct {
	frag  []byte     // the features object rendered
	ev    wire.Event // its hashed features
	idx   []int32    // the event's or candidate's features with the profiles'
	val   []float64
	field []uint8
	nums  []float64 // a profile's values
	up    profile.EventUpdate
	ru    profile.LabelUpdate
	fac   []float64
}

// newProfileDefs checks the configured profiles against the engine's
// hashing and models and makes their definitions.
func newProfileDefs(cfg *Config, models []NamedModel, met *engineMetrics) ([]*profileDef, error) {
	if len(cfg.Profiles) == 0 {
		return nil, nil
	}
	if cfg.Hash == nil {
		return nil, errors.New("stream: profiles need hashed features (features.hash)")
	}
	field := func(ns string) uint8 {
		if i := slices.Index(cfg.Hash.Namespaces, ns); i >= 0 {
			return uint8(i + 1)
		}
		return 0
	}
	inInteraction := func(ns string) bool {
		for _, p := range cfg.Hash.Interactions {
			if p[0] == ns || p[1] == ns {
				return true
			}
		}
		return false
	}
	var out []*profileDef
	ents := 0
	cands := 0
	for i := range cfg.Profiles {
		pc := &cfg.Profiles[i]
		c := &pc.Config
		d := &profileDef{cfg: c, maxKeys: pc.MaxKeys, name: profileTablePrefix + c.Entity, refName: profileTablePrefix + c.Entity + ".reference", ent: -1, factors: -1}
		if d.maxKeys <= 0 {
			d.maxKeys = defaultProfileKeys
		}
		if !c.Key {
			d.ent = ents
			ents++
		}
		if c.Candidates {
			cands++
			if c.Key {
				return nil, fmt.Errorf("stream: profile %s: candidates name items by id; the entity's id is the message key", c.Entity)
			}
		}
		if c.Out != "" {
			if d.outField = field(c.Out); d.outField == 0 {
				return nil, fmt.Errorf("stream: profile %s: its namespace %q is not in the hashed features' namespaces", c.Entity, c.Out)
			}
			if inInteraction(c.Out) {
				return nil, fmt.Errorf("stream: profile %s: its namespace %q is in an interaction (a profile's values are joined after the event's interactions are crossed)", c.Entity, c.Out)
			}
		}
		if c.Candidates && inInteraction(c.Namespace) {
			return nil, fmt.Errorf("stream: profile %s: namespace %q is in an interaction: an id-only candidate's item namespace is joined after the request's interactions are crossed", c.Entity, c.Namespace)
		}
		if c.Factors != "" {
			j := slices.IndexFunc(models, func(nm NamedModel) bool { return nm.Name == c.Factors })
			if j < 0 {
				return nil, fmt.Errorf("stream: profile %s: factors: no model %q", c.Entity, c.Factors)
			}
			fm, ok := models[j].Model.(*online.FM)
			if !ok || models[j].Factory != nil {
				return nil, fmt.Errorf("stream: profile %s: factors: model %q is not a global fm", c.Entity, c.Factors)
			}
			if c.Key {
				return nil, fmt.Errorf("stream: profile %s: factors need the entity's id feature (not the message key)", c.Entity)
			}
			if c.K == 0 {
				c.K = fm.K()
			} else if fm.K() != c.K {
				return nil, fmt.Errorf("stream: profile %s: factors: model %q has %d factors, the profile %d", c.Entity, c.Factors, fm.K(), c.K)
			}
			d.factors = j
		}
		if len(c.Reference) > 0 {
			d.refs = make(map[string]int, len(c.Reference))
			for j, k := range c.Reference {
				if _, dup := d.refs[string(k)]; dup {
					return nil, fmt.Errorf("stream: profile %s: reference key %q listed twice", c.Entity, k)
				}
				d.refs[string(k)] = j
			}
			if c.MaxLabels <= 0 {
				c.MaxLabels = 1000
			}
		}
		if c.Out != "" {
			// Two of the profile's values at one index would be summed
			// there: its vector would not be the one it keeps.
			seen := map[int32]string{}
			for _, name := range c.Names() {
				i, neg := cfg.Hash.Feature(c.Out, name)
				d.valIdx = append(d.valIdx, i)
				d.valSign = append(d.valSign, 0)
				if neg {
					d.valSign[len(d.valSign)-1] = 1 << 63
				}
				if other, ok := seen[i]; ok {
					return nil, fmt.Errorf("stream: profile %s: values %q and %q of namespace %q hash to the same index %d: change features.hash.seed or add bits", c.Entity, other, name, c.Out, i)
				}
				seen[i] = name
			}
		}
		d.fingerprint = profileFingerprint(c)
		d.joined = met.profileJoins.WithLabelValues(c.Entity, "joined")
		d.cold = met.profileJoins.WithLabelValues(c.Entity, "cold")
		d.keyErrors = met.profileKeyErrors.WithLabelValues(c.Entity)
		out = append(out, d)
	}
	if cands > 1 {
		return nil, errors.New("stream: at most one profile names the candidates of ranking requests")
	}
	return out, nil
}

// profileFingerprint identifies what a profile keeps: a saved table is
// restored only into the same.
func profileFingerprint(c *profile.Config) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%v|%s.%s|%s|%v|%d|%s|%d|%d|%g", c.Entity, c.Key, c.Namespace, c.Name, c.Out, c.Values, c.HalfLife, c.Factors, c.K, c.MaxLabels, c.Prior)
	for _, k := range c.Reference {
		h.Write(k)
		h.Write([]byte{0})
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// entities is the decoder's entities of the profiles (those named by a
// feature).
func entities(defs []*profileDef) []wire.EntityRef {
	var out []wire.EntityRef
	for _, d := range defs {
		if d.ent >= 0 {
			out = append(out, wire.EntityRef{Namespace: d.cfg.Namespace, Name: d.cfg.Name})
		}
	}
	return out
}

// newShardProfiles builds a shard's empty profile tables.
func (e *Engine) newShardProfiles(s *Shard) ([]*shardProfile, error) {
	var out []*shardProfile
	for _, d := range e.profiles {
		p := &shardProfile{def: d}
		table := func(name string, max int, factory func() (online.Model, error), fig *holder.Figures) (*holder.Keyed, error) {
			spec := &holder.Spec{Name: name, Factory: factory, KeyErrors: d.keyErrors}
			c := holder.KeyedConfig{Table: e.keys.Table(s.scope, name), MaxKeys: max, Stripes: 1, Hold: e.cfg.KeyHold, Want: &e.wantCkpt, Log: e.cfg.Log}
			if s.scope == "" {
				c.Stripes = holder.KeyStripes(max)
			}
			h, err := holder.NewKeyed(spec, fig, c)
			if err == nil && s.scope == "" {
				h.Share() // the lanes share it
			}
			return h, err
		}
		var err error
		if p.h, err = table(d.name, d.maxKeys, profile.NewState, &p.figs[0]); err != nil {
			return nil, fmt.Errorf("stream: profile %s: %w", d.cfg.Entity, err)
		}
		if len(d.cfg.Reference) > 0 {
			if p.ref, err = table(d.refName, len(d.cfg.Reference), profile.NewRefState, &p.figs[1]); err != nil {
				return nil, fmt.Errorf("stream: profile %s: %w", d.cfg.Entity, err)
			}
			p.med = profile.NewMedians(len(d.cfg.Reference), d.cfg.Prior)
		}
		out = append(out, p)
	}
	return out, nil
}

// loadMedians reads every reference key's median from its table (after a
// restore).
func (p *shardProfile) loadMedians() error {
	p.med.Reset(p.def.cfg.Prior)
	for j, k := range p.def.cfg.Reference {
		m, err := p.ref.Lookup(k)
		if err != nil {
			return fmt.Errorf("stream: profile %s: reference key %q: %w", p.def.cfg.Entity, k, err)
		}
		if r, ok := m.(*profile.RefState); ok && len(r.Sorted) > 0 {
			p.med.Set(j, r.Median())
		}
	}
	return nil
}

// id is the entity's id in event ev of message key key (nil: the event
// does not name it).
func (p *shardProfile) id(ev *wire.Event, key []byte) []byte {
	if p.def.ent < 0 {
		return key
	}
	if p.def.ent < len(ev.Ent) {
		return ev.Ent[p.def.ent]
	}
	return nil
}

// join appends to ps's features those of id's profile: with obj, the
// entity's namespace as its profile kept it ({"<name>": id} when it has
// none), and with values its values (the namespace cfg.Out), each as the
// decoder hashes it, so that a client that spells them out sends the same
// features. Cold ids are counted.
func (p *shardProfile) join(e *Engine, ps *profileScratch, id []byte, values, obj bool) {
	mu := p.h.Mutex(id)
	if mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	st, _ := p.h.Find(id).(*profile.State)
	if st == nil || st.Events == 0 {
		p.def.cold.Inc()
		st = nil
	} else {
		p.def.joined.Inc()
	}
	d := p.def
	if obj {
		switch h, ok := (*profile.Hashed)(nil), false; {
		case st != nil && len(st.Attrs) > 0:
			if h, ok = st.HashedAttrs(); !ok {
				ps.frag = append(wire.AppendString(append(ps.frag[:0], '{'), []byte(d.cfg.Namespace)), ':')
				ps.frag = append(append(ps.frag, st.Attrs...), '}')
				if e.decodeFragment(ps) {
					st.SetHashedAttrs(ps.ev.Idx, ps.ev.Val, ps.ev.Field)
				}
				h, _ = st.HashedAttrs()
			}
			ps.idx, ps.val, ps.field = append(ps.idx, h.Idx...), append(ps.val, h.Val...), append(ps.field, h.Field...)
		default:
			ps.frag = append(wire.AppendString(append(ps.frag[:0], '{'), []byte(d.cfg.Namespace)), ":{"...)
			ps.frag = append(wire.AppendString(append(wire.AppendString(ps.frag, []byte(d.cfg.Name)), ':'), id), "}}"...)
			if e.decodeFragment(ps) {
				ps.idx, ps.val, ps.field = append(ps.idx, ps.ev.Idx...), append(ps.val, ps.ev.Val...), append(ps.field, ps.ev.Field...)
			}
		}
	}
	if values {
		ps.nums = d.cfg.Numbers(ps.nums[:0], st, p.med)
		for k, v := range ps.nums {
			ps.idx = append(ps.idx, d.valIdx[k])
			ps.val = append(ps.val, math.Float64frombits(math.Float64bits(v)^d.valSign[k]))
			ps.field = append(ps.field, d.outField)
		}
	}
}

// decodeFragment hashes ps.frag, a features object, into ps.ev; false
// (logged) if it does not decode: an entity's kept namespace decoded in
// the event it came from, and an id is quoted here.
func (e *Engine) decodeFragment(ps *profileScratch) bool {
	if err := e.fragDec.DecodeFeatures(ps.frag, &ps.ev); err != nil {
		if e.cfg.Log != nil {
			e.cfg.Log.Error("profile join: an entity's namespace does not decode", "err", err)
		}
		return false
	}
	return true
}

// joinProfiles returns in, the event's (or a candidate's) hashed features
// idx, val, field, with the profile values of every entity it names that
// publishes values and that it does not carry itself appended (item: a
// candidate's item, the id of the candidates' entity; idOnly: the
// candidate came without features, and takes that entity's namespace
// from its profile too).
func (s *Shard) joinProfiles(in *holder.Input, idx []int32, val []float64, field []uint8, ev *wire.Event, key, item []byte, idOnly bool) *holder.Input {
	ps := &s.ps
	joined := false
	for _, p := range s.profiles {
		c := p.def.cfg
		id := p.id(ev, key)
		if item != nil && c.Candidates {
			id = item
		}
		obj := idOnly && c.Candidates
		values := c.Out != "" && !slices.Contains(field, p.def.outField)
		if id == nil || (!values && !obj) {
			continue
		}
		if !joined {
			ps.idx, ps.val, ps.field = append(ps.idx[:0], idx...), append(ps.val[:0], val...), append(ps.field[:0], field...)
			joined = true
		}
		p.join(s.e, ps, id, values, obj)
	}
	if !joined {
		in.SetHashed(idx, val, field)
		return in
	}
	in.SetHashed(ps.idx, ps.val, ps.field)
	return in
}

// maxClockSkew is how far ahead of the service's clock an event's Kafka
// timestamp may be for a profile (a producer's clock a little ahead); a
// timestamp further ahead counts as the clock plus maxClockSkew.
const maxClockSkew = time.Minute

// learnProfiles learns the event ev (message key key, at unix ms, its raw
// label when labelled) into the profiles of the entities it names, after
// the models learned it (an fm's factors for the id are as it left them).
func (s *Shard) learnProfiles(ev *wire.Event, key []byte, at int64) {
	ps := &s.ps
	for _, p := range s.profiles {
		d := p.def
		id := p.id(ev, key)
		if id == nil {
			continue
		}
		u := &ps.up
		u.Cfg = d.cfg
		u.Ev = profile.Event{At: at, Label: ev.Label, Labelled: ev.HasLabel, Ref: -1}
		if d.ent >= 0 {
			u.Ev.Attrs = ev.EntObj[d.ent]
			if d.factors >= 0 {
				u.Ev.Bias, u.Ev.Factors = s.factorsOf(d.factors, ev.EntHash[d.ent])
			}
		}
		if j, ok := d.refs[string(key)]; ok && ev.HasLabel && p.ref != nil {
			u.Ev.Ref = j
			ps.ru = profile.LabelUpdate{Y: ev.Label, Max: d.cfg.MaxLabels}
			mu := p.ref.Mutex(key)
			if mu != nil {
				mu.Lock()
			}
			if p.ref.Update(key, &ps.ru) == nil {
				p.med.Set(j, ps.ru.Median)
			}
			if mu != nil {
				mu.Unlock()
			}
		}
		mu := p.h.Mutex(id)
		if mu != nil {
			mu.Lock()
		}
		_ = p.h.Update(id, u) // an unreadable stored profile is counted (keyErrors) and not changed
		if mu != nil {
			mu.Unlock()
		}
	}
}

// factorsOf is the fm model i's weight and factors for the feature of
// 64-bit hash h (zeros when it has not learned it), signed as the feature
// enters.
func (s *Shard) factorsOf(i int, h uint64) (float64, []float64) {
	m := s.models[i]
	mu := m.lock(nil)
	fm := m.h.Instance().(*online.FM) // newProfileDefs: a global fm
	w, f, _ := fm.Factors(s.ps.fac, int32(h&uint64(s.e.cfg.Dim-1)))
	unlock(mu)
	if h&(1<<63) != 0 {
		w = -w
		for j := range f {
			f[j] = -f[j]
		}
	}
	s.ps.fac = f
	return w, f
}

// captureProfiles appends the shard's profile tables to c.
func (s *Shard) captureProfiles(c *Checkpoint) error {
	for _, p := range s.profiles {
		for k, h := range []*holder.Keyed{p.h, p.ref} {
			if h == nil {
				continue
			}
			data, d, err := h.Capture()
			if err != nil {
				return fmt.Errorf("stream: capture profile %s: %w", p.def.cfg.Entity, err)
			}
			name, typ := p.def.name, profile.TypeName
			if k == 1 {
				name, typ = p.def.refName, profile.RefTypeName
			}
			c.Models = append(c.Models, snapshot.Model{Name: name, Type: typ, Fingerprint: p.def.fingerprint, Data: data})
			c.deltas = append(c.deltas, d)
			c.holders = append(c.holders, h)
		}
	}
	return nil
}

// restoreProfiles restores the profile tables from saved (by name); a
// table saved with another configuration, or not saved, starts empty.
func (s *Shard) restoreProfiles(byName map[string]snapshot.Model, src KeySource) (fresh []string, err error) {
	for _, p := range s.profiles {
		for k, h := range []*holder.Keyed{p.h, p.ref} {
			if h == nil {
				continue
			}
			name := p.def.name
			if k == 1 {
				name = p.def.refName
			}
			sv, ok := byName[name]
			delete(byName, name)
			if !ok || sv.Fingerprint != p.def.fingerprint {
				fresh = append(fresh, name)
				if err := h.Reset(); err != nil {
					return nil, fmt.Errorf("stream: profile %s: %w", name, err)
				}
				continue
			}
			d, err := h.Decode(sv.Data)
			if err != nil {
				return nil, fmt.Errorf("stream: restore profile %s: %w", name, err)
			}
			if err := h.Restore(sv.Data, d, src, s.e.cfg.AllowKeyLoss); err != nil {
				return nil, fmt.Errorf("stream: restore profile %s: %w", name, err)
			}
		}
		if p.ref != nil {
			if err := p.loadMedians(); err != nil {
				return nil, err
			}
		}
	}
	return fresh, nil
}

// Profile returns entity's profile of id as the shard keeps it (nil: none
// kept; false: no such entity), rendered values included: for GET
// /v1/profiles and tests, the shard paused.
func (s *Shard) Profile(entity string, id []byte) (st *profile.State, values []byte, ok bool) {
	for _, p := range s.profiles {
		if p.def.cfg.Entity != entity {
			continue
		}
		mu := p.h.Mutex(id)
		if mu != nil {
			mu.Lock()
		}
		m, err := p.h.Lookup(id)
		if err == nil && m != nil {
			st, _ = m.(*profile.State)
		}
		values = []byte("{}") // values: [] joins no namespace of numbers
		if len(p.def.cfg.Names()) > 0 {
			values = append([]byte{'{'}, p.def.cfg.Render(nil, st, p.med)...)
			values = append(values, '}')
		}
		if mu != nil {
			mu.Unlock()
		}
		return st, values, true
	}
	return nil, nil, false
}

// withProfiles is dec with the profiles' entities, and id-only
// candidates when a profile names the candidates.
func (e *Engine) withProfiles(dec *wire.Decoder) *wire.Decoder {
	if len(e.profiles) == 0 {
		return dec
	}
	if ents := entities(e.profiles); len(ents) > 0 {
		dec, _ = dec.WithEntities(ents) // distinct namespaces: the configuration's check
	}
	if slices.ContainsFunc(e.profiles, func(d *profileDef) bool { return d.cfg.Candidates }) {
		dec = dec.WithIDOnly()
	}
	return dec
}

// profileTablePrefix starts the names of the profiles' tables (key store
// and snapshots): profile.<entity>, profile.<entity>.reference.
const profileTablePrefix = "profile."

// profileState decodes a state of a profile table (DecodeKeyState).
func profileState(table string, b []byte) (online.Model, error) {
	if strings.HasSuffix(table, ".reference") {
		r := &profile.RefState{}
		return r, r.UnmarshalBinary(b)
	}
	s := &profile.State{}
	return s, s.UnmarshalBinary(b)
}
