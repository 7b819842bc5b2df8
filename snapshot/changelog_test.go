package snapshot

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

const testTopic = "streamer-snapshots"

func newCluster(t *testing.T) *kfake.Cluster { return newClusterB(t) }

func newClusterB(t testing.TB) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newChangelog(t *testing.T, c *kfake.Cluster) *ChangelogStore {
	t.Helper()
	s := NewChangelogStore(c.ListenAddrs(), testTopic, "snapshot-test")
	t.Cleanup(func() { s.Close() })
	ctx := testCtx(t)
	if err := s.EnsureTopic(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// bigSnapshot has a model spanning several chunks plus small ones.
func bigSnapshot(seq uint64) *Snapshot {
	s := testSnapshot(seq)
	s.Models = append(s.Models, Model{Name: "rank@v2#x", Type: "kernel_rank", Data: randomBytes(seq, 3<<20+12345)})
	return s
}

func mustLoadChangelog(t *testing.T, s *ChangelogStore, want *Snapshot) {
	t.Helper()
	got, skipped, err := s.Load(testCtx(t))
	if err != nil {
		t.Fatalf("Load: %v (skipped %v)", err, skipped)
	}
	equalSnap(t, got, want)
}

func TestChangelogRoundTrip(t *testing.T) {
	c := newCluster(t)
	s := newChangelog(t, c)
	ctx := testCtx(t)
	if err := s.EnsureTopic(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, err := s.LoadLatest(ctx); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("empty topic: err = %v", err)
	}
	want := bigSnapshot(5)
	if err := s.Save(ctx, want); err != nil {
		t.Fatal(err)
	}
	mustLoadChangelog(t, s, want)

	// A fresh store (a new pod) restores the same content as the file store.
	fresh := NewChangelogStore(c.ListenAddrs(), testTopic, "other")
	defer fresh.Close()
	got, err := fresh.LoadLatest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fs := openStore(t, 2)
	mustSave(t, fs, want)
	fromFile, _ := mustLoad(t, fs, 5, 0)
	equalSnap(t, got, fromFile)
}

func TestChangelogCompaction(t *testing.T) {
	c := newCluster(t)
	s := newChangelog(t, c)
	ctx := testCtx(t)
	var last *Snapshot
	for seq := uint64(1); seq <= 5; seq++ {
		last = bigSnapshot(seq)
		if seq == 4 { // the big model goes away; its chunks get tombstones
			last.Models = last.Models[:3]
		}
		if err := s.Save(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	_, before, err := s.readFrom(ctx, map[string]record{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.Compact()
	recs := map[string]record{}
	_, after, err := s.readFrom(ctx, recs, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Two generations of 2 small models and the 7-chunk one (gone from
	// generation 1, where 7 tombstones are left), plus two manifests.
	if after >= before || len(recs) != 13 {
		t.Fatalf("compaction left %d of %d records, %d keys", after, before, len(recs))
	}
	fresh := NewChangelogStore(c.ListenAddrs(), testTopic, "other")
	defer fresh.Close()
	mustLoadChangelog(t, fresh, last)
	if err := fresh.Save(ctx, bigSnapshot(3)); err == nil {
		t.Fatal("saving an older seq succeeded")
	}

	// The latest records per key: both generations, nothing stale.
	var keys []string
	for k := range recs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if strings.HasPrefix(k, "rank@v2#x@1#") { // seq 4 (generation 1) dropped the model
			t.Errorf("stale chunk %q survived", k)
		}
	}
	if !slices.Contains(keys, "_manifest@0") || !slices.Contains(keys, "_manifest@1") {
		t.Errorf("keys %v", keys)
	}
}

var errCrash = errors.New("simulated crash")

// TestChangelogCrashMidSave writes the model records of seq n+1 without its
// manifest, compacts, and expects a new pod to restore seq n intact.
func TestChangelogCrashMidSave(t *testing.T) {
	c := newCluster(t)
	s := newChangelog(t, c)
	ctx := testCtx(t)
	for seq := uint64(1); seq <= 3; seq++ {
		if err := s.Save(ctx, bigSnapshot(seq)); err != nil {
			t.Fatal(err)
		}
	}
	want := bigSnapshot(4)
	if err := s.Save(ctx, want); err != nil {
		t.Fatal(err)
	}
	s.afterChunks = func() error { return errCrash }
	if err := s.Save(ctx, bigSnapshot(5)); !errors.Is(err, errCrash) {
		t.Fatalf("Save = %v", err)
	}
	c.Compact()

	fresh := NewChangelogStore(c.ListenAddrs(), testTopic, "restarted")
	defer fresh.Close()
	got, skipped, err := fresh.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	equalSnap(t, got, want)
	if len(skipped) != 0 { // seq 3's broken manifest is older than seq 4
		t.Fatalf("skipped %v", skipped)
	}

	// The restarted pod carries on.
	next := bigSnapshot(5)
	if err := fresh.Save(ctx, next); err != nil {
		t.Fatal(err)
	}
	c.Compact()
	mustLoadChangelog(t, s, next)
}

// TestChangelogUnacknowledgedManifest covers a manifest that became durable
// although its Save reported an error, followed by a crash in the next Save:
// the store must not have touched the last snapshot it knows to be durable.
func TestChangelogUnacknowledgedManifest(t *testing.T) {
	c := newCluster(t)
	s := newChangelog(t, c)
	ctx := testCtx(t)
	want := bigSnapshot(1)
	if err := s.Save(ctx, want); err != nil {
		t.Fatal(err)
	}
	confirmed := *s.last
	if err := s.Save(ctx, bigSnapshot(2)); err != nil {
		t.Fatal(err)
	}
	*s.last = confirmed // as if seq 2's acknowledgement had been lost
	s.afterChunks = func() error { return errCrash }
	if err := s.Save(ctx, bigSnapshot(3)); !errors.Is(err, errCrash) {
		t.Fatalf("Save = %v", err)
	}
	c.Compact()
	fresh := NewChangelogStore(c.ListenAddrs(), testTopic, "restarted")
	defer fresh.Close()
	got, skipped, err := fresh.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	equalSnap(t, got, want)
	// Seq 2's manifest survives but its chunks now belong to seq 3.
	if len(skipped) != 1 || !errors.Is(skipped[0].Err, ErrCorrupt) || !strings.Contains(skipped[0].Err.Error(), "belongs to seq 3") {
		t.Fatalf("skipped %v", skipped)
	}
}

func TestChangelogEnsureTopicRefusesDeletePolicy(t *testing.T) {
	c := newCluster(t)
	if err := c.CreateTopic(testTopic, 1, map[string]string{"cleanup.policy": "compact,delete"}); err != nil {
		t.Fatal(err)
	}
	s := NewChangelogStore(c.ListenAddrs(), testTopic, "snapshot-test")
	defer s.Close()
	if err := s.EnsureTopic(testCtx(t)); err == nil || !strings.Contains(err.Error(), "cleanup.policy") {
		t.Fatalf("EnsureTopic = %v", err)
	}
}

func TestChangelogKeys(t *testing.T) {
	for _, name := range []string{"m", "a@1#2", "x#", "@"} {
		for gen := range 2 {
			m, g, i, ok := parseChunkKey(chunkKey(name, gen, 17))
			if !ok || m != name || g != gen || i != 17 {
				t.Errorf("parse(%q) = %q %d %d %v", chunkKey(name, gen, 17), m, g, i, ok)
			}
		}
	}
	for _, k := range []string{"_manifest@0", "m@2#1", "m@0#", "@0#1", "m@0#-1"} {
		if _, _, _, ok := parseChunkKey(k); ok {
			t.Errorf("parse(%q) ok", k)
		}
	}
}

func TestManifestCodec(t *testing.T) {
	m := &manifest{gen: 1, seq: 9, createdAt: time.Unix(100, 5).UTC(), fingerprint: "ab",
		offsets: []Offset{{"events", 3, 7}},
		models:  []manifestModel{{name: "m", typ: "t", chunks: 2, length: 600 << 10, crc: 0xdeadbeef}}}
	b := appendManifest(nil, m)
	got, err := decodeManifest(b)
	if err != nil || got.gen != 1 || got.seq != 9 || !got.createdAt.Equal(m.createdAt) ||
		got.fingerprint != "ab" || len(got.offsets) != 1 || got.models[0] != m.models[0] {
		t.Fatalf("decodeManifest = %+v, %v", got, err)
	}
	for i := range b {
		c := slices.Clone(b)
		c[i] ^= 4
		if _, err := decodeManifest(c); err == nil {
			t.Fatalf("flip at %d not detected", i)
		}
	}
	ch := appendChunk(nil, 3, 1, 2, []byte("payload"))
	for i := range ch {
		c := slices.Clone(ch)
		c[i] ^= 4
		if _, _, _, _, err := decodeChunk(c); err == nil {
			t.Fatalf("chunk flip at %d not detected", i)
		}
	}
}

func FuzzDecodeRecords(f *testing.F) {
	f.Add(appendManifest(nil, &manifest{gen: 1, seq: 2, offsets: []Offset{{"t", 0, 1}},
		models: []manifestModel{{name: "m", chunks: 1, length: 3}}}))
	f.Add(appendChunk(nil, 1, 0, 1, []byte("abc")))
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := decodeManifest(b); err == nil {
			if re := appendManifest(nil, m); !slices.Equal(re, b) {
				t.Fatal("manifest re-encoding differs")
			}
		}
		if seq, idx, n, p, err := decodeChunk(b); err == nil {
			if re := appendChunk(nil, seq, idx, n, p); !slices.Equal(re, b) {
				t.Fatal("chunk re-encoding differs")
			}
		}
	})
}
