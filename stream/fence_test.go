package stream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/snapshot"
)

// A partition's state is written by one instance at a time: an instance
// that was cut off while another took its partition over cannot replace
// the new owner's state with its stale one.
func TestPartitionStateIsFenced(t *testing.T) {
	b, err := StartBroker(0, TopicSpec{Name: "events", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func() *StateStore {
		s, err := OpenStateStore(ctx, config.Snapshot{ChangelogTopic: "state", Every: time.Second, Keep: 1}, b.Addrs(), "fence-test", "fp", nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	models := func(v string) []snapshot.Model {
		return []snapshot.Model{{Name: "m", Type: "mam", Fingerprint: "f", Data: []byte(v)}}
	}
	a, other := open(), open()
	if snap, err := a.LoadPartition(ctx, 1); err != nil || snap != nil {
		t.Fatalf("empty changelog: %v, %v", snap, err)
	}
	if err := a.Save(ctx, "1", "events", map[int]int64{1: 10}, models("a1")); err != nil {
		t.Fatal(err)
	}
	// The other instance takes partition 1 over and saves twice.
	snap, err := other.LoadPartition(ctx, 1)
	if err != nil || snap == nil || snap.Seq != 1 {
		t.Fatalf("takeover load: %v, %v", snap, err)
	}
	for off := int64(20); off <= 30; off += 10 {
		if err := other.Save(ctx, "1", "events", map[int]int64{1: off}, models("b")); err != nil {
			t.Fatal(err)
		}
	}
	// The old owner's stale save is refused once it has read the changelog,
	// and the new owner's state stays.
	if err := a.RefreshChangelog(ctx); err != nil {
		t.Fatal(err)
	}
	err = a.Save(ctx, "1", "events", map[int]int64{1: 15}, models("a2"))
	if !errors.Is(err, ErrPartitionTakenOver) {
		t.Fatalf("stale save: %v, want ErrPartitionTakenOver", err)
	}
	fresh := open()
	snap, err = fresh.LoadPartition(ctx, 1)
	if err != nil || snap.Seq != 3 || snap.Offsets[0].Offset != 30 || string(snap.Models[0].Data) != "b" {
		t.Fatalf("after the stale save: %+v, %v", snap, err)
	}
	// Partition 0 is independent: a saves it freely.
	if err := a.Save(ctx, "0", "events", map[int]int64{0: 5}, models("a0")); err != nil {
		t.Fatal(err)
	}
}
