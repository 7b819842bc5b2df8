package stream

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/snapshot"
)

// With the two newest snapshot files corrupt, a restart restores the
// newest valid one, moves the bad ones aside (kept, as *.corrupt) and
// numbers its next snapshots past every file it found, so saving and
// committing go on: before, every later save was refused as older than the
// corrupt newest file.
func TestCorruptSnapshotsMovedAside(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	open := func() *StateStore {
		s, err := OpenStateStore(ctx, config.Snapshot{Dir: dir, Every: time.Second, Keep: 5}, nil, "", "fp", nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	models := func(v string) []snapshot.Model {
		return []snapshot.Model{{Name: "m", Type: "mam", Fingerprint: "f", Data: []byte(v)}}
	}
	s := open()
	for i, v := range []string{"one", "two", "three"} {
		if err := s.Save(ctx, "", "events", map[int]int64{0: int64(10 * (i + 1))}, models(v)); err != nil {
			t.Fatal(err)
		}
	}
	for _, seq := range []uint64{2, 3} {
		p := filepath.Join(dir, snapshot.FileName(seq))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s = open()
	snap, err := s.Load(ctx)
	if err != nil || snap == nil || string(snap.Models[0].Data) != "one" {
		t.Fatalf("load: %v, %v; want the valid snapshot 1", snap, err)
	}
	for _, seq := range []uint64{2, 3} {
		if _, err := os.Stat(filepath.Join(dir, snapshot.FileName(seq)+".corrupt")); err != nil {
			t.Errorf("corrupt snapshot %d not moved aside: %v", seq, err)
		}
	}
	if err := s.Save(ctx, "", "events", map[int]int64{0: 40}, models("four")); err != nil {
		t.Fatalf("the next save after the fallback: %v", err)
	}
	again, err := open().Load(ctx)
	if err != nil || string(again.Models[0].Data) != "four" || again.Seq <= 3 {
		t.Fatalf("after a restart: %+v, %v; want the new snapshot, numbered past 3", again, err)
	}
}
