package snapshot

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func scopedSnap(seq uint64, part int32, payload []byte) *Snapshot {
	return &Snapshot{
		Seq: seq, CreatedAt: time.Unix(int64(seq), 0).UTC(), Fingerprint: "fp",
		Offsets: []Offset{{Topic: "events", Partition: part, Offset: int64(seq) * 10}},
		Models:  []Model{{Name: "mam", Type: "mam", Fingerprint: "m", Data: payload}},
	}
}

// Scoped stores share one topic with each other and with an unscoped store
// without seeing or deleting each other's records; a Tail reads every
// scope's newest snapshot incrementally.
func TestScopedStoresShareATopic(t *testing.T) {
	c := newCluster(t)
	root := newChangelog(t, c)
	ctx := testCtx(t)
	p0, err := root.Scope("0")
	if err != nil {
		t.Fatal(err)
	}
	p1, _ := root.Scope("1")
	if _, err := root.Scope("a/b"); err == nil {
		t.Fatal("scope with a separator accepted")
	}
	tail := root.Tail()
	if _, err := tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tail.Latest("0"); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("empty topic: %v, want ErrNoSnapshot", err)
	}
	// Interleaved saves; p1's model shrinks (stale chunks get tombstones
	// in p1's scope only).
	for seq := uint64(1); seq <= 4; seq++ {
		if err := p0.Save(ctx, scopedSnap(seq, 0, randomBytes(seq, 3000))); err != nil {
			t.Fatal(err)
		}
		n := 3000
		if seq >= 3 {
			n = 100
		}
		if err := p1.Save(ctx, scopedSnap(seq, 1, randomBytes(100+seq, n))); err != nil {
			t.Fatal(err)
		}
		if err := root.Save(ctx, scopedSnap(seq, 5, randomBytes(200+seq, 10))); err != nil {
			t.Fatal(err)
		}
	}
	check := func(snap *Snapshot, seq uint64, part int32, payload []byte) {
		t.Helper()
		if snap.Seq != seq || snap.Offsets[0].Partition != part || !bytes.Equal(snap.Models[0].Data, payload) {
			t.Fatalf("got seq %d partition %d (%d bytes), want seq %d partition %d", snap.Seq, snap.Offsets[0].Partition, len(snap.Models[0].Data), seq, part)
		}
	}
	// Fresh stores (a new owner) load each scope's newest snapshot.
	for _, tc := range []struct {
		scope   string
		part    int32
		payload []byte
	}{{"0", 0, randomBytes(4, 3000)}, {"1", 1, randomBytes(104, 100)}, {"", 5, randomBytes(204, 10)}} {
		fresh := NewChangelogStore(c.ListenAddrs(), testTopic, "other")
		st := fresh
		if tc.scope != "" {
			st, _ = fresh.Scope(tc.scope)
		}
		snap, err := st.LoadLatest(ctx)
		if err != nil {
			t.Fatalf("scope %q: %v", tc.scope, err)
		}
		check(snap, 4, tc.part, tc.payload)
		// The same through a Tail, and the store can save after either.
		ft := fresh.Tail()
		if _, err := ft.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		snap, _, err = st.LoadFrom(ft)
		if err != nil {
			t.Fatalf("scope %q: LoadFrom: %v", tc.scope, err)
		}
		check(snap, 4, tc.part, tc.payload)
		fresh.Close()
	}
	n, err := tail.Poll(ctx)
	if err != nil || n == 0 {
		t.Fatalf("poll: %d records, %v", n, err)
	}
	if got := tail.Scopes(); !slices.Equal(got, []string{"0", "1"}) {
		t.Fatalf("scopes %v", got)
	}
	if got := tail.NewestSeq("1"); got != 4 {
		t.Fatalf("NewestSeq(1) = %d, want 4", got)
	}
	if got := tail.NewestSeq("7"); got != 0 {
		t.Fatalf("NewestSeq of an unknown scope = %d", got)
	}
	s0, err := tail.Latest("0")
	if err != nil {
		t.Fatal(err)
	}
	check(s0, 4, 0, randomBytes(4, 3000))
	// Incremental: one more save of scope 1 is one poll of a few records.
	if err := p1.Save(ctx, scopedSnap(5, 1, randomBytes(105, 100))); err != nil {
		t.Fatal(err)
	}
	if n, err = tail.Poll(ctx); err != nil || n == 0 || n > 4 {
		t.Fatalf("incremental poll read %d records (%v), want the few of one save", n, err)
	}
	s1, err := tail.Latest("1")
	if err != nil {
		t.Fatal(err)
	}
	check(s1, 5, 1, randomBytes(105, 100))
	if s, err := tail.Latest(""); err != nil {
		t.Fatal(err)
	} else {
		check(s, 4, 5, randomBytes(204, 10))
	}
	// After compaction every scope is still restorable.
	c.Compact()
	fresh := NewChangelogStore(c.ListenAddrs(), testTopic, "after-compaction")
	defer fresh.Close()
	ft := fresh.Tail()
	if _, err := ft.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	for scope, want := range map[string]uint64{"0": 4, "1": 5, "": 4} {
		s, err := ft.Latest(scope)
		if err != nil || s.Seq != want {
			t.Fatalf("after compaction, scope %q: %v, %v", scope, s, err)
		}
	}
}

// The caller's own records (PutRecords) live beside the snapshots without
// disturbing them: the snapshot readers and Tail keep none of them, and
// ScanRecords returns every version of those under a prefix in log order,
// verified.
func TestRecordsBesideSnapshots(t *testing.T) {
	c := newCluster(t)
	root := newChangelog(t, c)
	ctx := testCtx(t)
	p0, _ := root.Scope("0")
	if err := p0.Save(ctx, scopedSnap(1, 0, randomBytes(1, 500))); err != nil {
		t.Fatal(err)
	}
	if err := root.PutRecords(ctx, []string{"0/x"}, [][]byte{{1}}); err == nil {
		t.Fatal("a record key outside RecordsPrefix was accepted")
	}
	keys := []string{"k/0/m/aa", "k/0/m/bb", "k/1/m/aa", "k/0/m/aa"}
	values := [][]byte{[]byte("a1"), []byte("b1"), []byte("other scope"), []byte("a2")}
	if err := root.PutRecords(ctx, keys, values); err != nil {
		t.Fatal(err)
	}
	// A record whose frame does not verify is skipped.
	if err := root.writer.WriteMessages(ctx, kafka.Message{Key: []byte("k/0/m/cc"), Value: []byte("SREC\x00\x00\x00\x00bad")}); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := root.ScanRecords(ctx, "k/0/m/", func(k string, v []byte) { got = append(got, k+"="+string(v)) }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"k/0/m/aa=a1", "k/0/m/bb=b1", "k/0/m/aa=a2"}; !slices.Equal(got, want) {
		t.Fatalf("scan: %v, want %v", got, want)
	}
	if err := root.ScanRecords(ctx, "0/", func(string, []byte) {}); err == nil {
		t.Fatal("a scan outside RecordsPrefix was accepted")
	}
	tail := root.Tail()
	if _, err := tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	for k := range tail.recs {
		if bytes.HasPrefix([]byte(k), []byte(RecordsPrefix)) {
			t.Fatalf("the tail keeps record %q", k)
		}
	}
	if snap, err := tail.Latest("0"); err != nil || snap.Seq != 1 {
		t.Fatalf("partition 0's snapshot beside the records: %v, %v", snap, err)
	}
}
