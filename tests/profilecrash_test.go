package tests

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/holder"
	"github.com/streamer/streamer/stream/profile"
)

// profileCrashModels keep profiles of items (named by features.item.id,
// with the global fm's factors for them) and of users (the message key),
// at most 20 and 10 of each in memory so that they churn through the key
// store; a per-user fm learns on the items' profiles alone.
const profileCrashModels = `
profiles:
  - entity: item
    id: item.id
    factors: rating
    half_life: 1h
    max_keys: 20
  - entity: user
    id: key
    max_keys: 10
models:
  - name: rating
    type: fm
    loss: squared
    factors: 4
    features: {hash: {bits: 18, seed: 1}, namespaces: [user, item, item_profile, user_profile], max_features: 32}
  - name: per_user
    type: fm
    loss: squared
    factors: 0
    scope: key
    max_keys: 20
    features: {hash: {bits: 18, seed: 1}, namespaces: [user, item, item_profile, user_profile], max_features: 32, use: [item_profile]}
`

// profileRunHeader is the part of the profile tests' configs their two
// scopes share.
const profileRunHeader = `
kafka:
  brokers: [%BROKERS%]
  group: %GROUP%
  output_topic: %OUTPUT%
  session_timeout: 1s
http:
  listen: "%HTTP%"
`

// profileCrashConfig: instance scope, file snapshots every second and
// every 3 000 events.
const profileCrashConfig = profileRunHeader + `
snapshot:
  dir: %DIR%
  every: 1s
  every_events: 3000
  keep: 3
` + profileCrashModels

// profilePartitionConfig: partition scope, the profiles in the changelog.
const profilePartitionConfig = profileRunHeader + `
snapshot:
  every: 1s
  every_events: 5000
  changelog_topic: %CHANGELOG%
  scope: partition
  remote_refresh: 200ms
` + profileCrashModels

const (
	profileCrashEvents = 60_000 * e2eScale
	profileItems       = 80
	profileUsers       = 60
)

// entityTotals is what the stream says of an entity: its events, and the
// sum and sum of squares of its labels.
type entityTotals struct {
	n          int64
	sum, sumSq float64
}

// produceRatings writes n ratings (ids p-0 …) of 60 users on 80 items,
// keyed by user, and returns each item's and user's totals ("item/m3",
// "user/u5").
func produceRatings(t *testing.T, b *stream.Broker, n int) map[string]*entityTotals {
	t.Helper()
	msgs, totals := ratingMessages(n)
	produce(t, b, "events", msgs)
	return totals
}

// ratingMessages are produceRatings's messages and totals.
func ratingMessages(n int) ([]kafka.Message, map[string]*entityTotals) {
	rng := rand.New(rand.NewPCG(9, 10))
	totals := map[string]*entityTotals{}
	add := func(k string, y float64) {
		e := totals[k]
		if e == nil {
			e = &entityTotals{}
			totals[k] = e
		}
		e.n++
		e.sum += y
		e.sumSq += y * y
	}
	msgs := make([]kafka.Message, 0, n)
	for i := range n {
		u, m := rng.IntN(profileUsers), rng.IntN(profileItems)
		y := math.Min(5, math.Max(0.5, math.Round(2*(3+math.Cos(float64(u+2*m))+0.5*rng.NormFloat64()))/2))
		add("item/m"+strconv.Itoa(m), y)
		add("user/u"+strconv.Itoa(u), y)
		v := fmt.Sprintf(`{"id":"p-%d","features":{"user":{"id":"u%d"},"item":{"id":"m%d","tags":["t%d"]}},"label":%g}`, i, u, m, m%5, y)
		msgs = append(msgs, kafka.Message{Key: []byte("u" + strconv.Itoa(u)), Value: []byte(v)})
	}
	return msgs, totals
}

// profileStoreStates reads every profile from the key store in dir
// (instance scope) once the streamer stopped: "item/m3" → state.
func profileStoreStates(t *testing.T, dir string) map[string]*profile.State {
	t.Helper()
	db, err := keystore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]*profile.State{}
	for _, ent := range []string{"item", "user"} {
		if err := db.Table("", "profile."+ent).Scan(func(key, state []byte) error {
			st := &profile.State{}
			if err := st.UnmarshalBinary(bytes.Clone(state)); err != nil {
				return fmt.Errorf("%s %q: %w", ent, key, err)
			}
			out[ent+"/"+string(key)] = st
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// compareProfiles checks that got holds a profile of every entity of
// totals with its exact counts, a mean and variance equal to the stream's
// and to want's (to rounding: in instance scope the partitions' events
// reach an item in the order they are applied).
func compareProfiles(t *testing.T, got, want map[string]*profile.State, totals map[string]*entityTotals) {
	t.Helper()
	if len(got) != len(totals) || len(want) != len(totals) {
		t.Errorf("%d profiles (reference %d), want %d", len(got), len(want), len(totals))
	}
	for k, tot := range totals {
		g, w := got[k], want[k]
		if g == nil || w == nil {
			t.Errorf("%s: profile missing (got %v, reference %v)", k, g != nil, w != nil)
			continue
		}
		mean := tot.sum / float64(tot.n)
		variance := tot.sumSq/float64(tot.n) - mean*mean
		switch {
		case g.Events != tot.n || g.Labels != tot.n || w.Events != tot.n:
			t.Errorf("%s: %d events, %d labels (reference %d), want exactly %d", k, g.Events, g.Labels, w.Events, tot.n)
		case math.Abs(g.Mean-mean) > 1e-9 || math.Abs(g.Mean-w.Mean) > 1e-12:
			t.Errorf("%s: mean %v (reference %v), the stream's %v", k, g.Mean, w.Mean, mean)
		case math.Abs(g.Variance()-variance) > 1e-9 || math.Abs(g.Variance()-w.Variance()) > 1e-12:
			t.Errorf("%s: variance %v (reference %v), the stream's %v", k, g.Variance(), w.Variance(), variance)
		}
	}
}

// waitRated waits until the global fm has learned exactly n events.
func waitRated(t *testing.T, p *proc, n int, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "every event learned", func() bool {
		v := p.metric(t, "streamer_model_examples", `model="rating"`)
		if v > float64(n) {
			t.Fatalf("streamer_model_examples %v, more than the %d events", v, n)
		}
		return v == float64(n)
	})
}

// TestProfileCrashRecovery: entity profiles in instance scope (items by a
// feature id, users by the message key; fewer in memory than there are,
// so they churn through the key store) with snapshots every second; the
// real binary is SIGKILLed at three random moments while it works through
// 60 k ratings, produced a quarter before each start (so that each kill
// comes with events still to apply). Afterwards every profile has exactly
// the stream's count of events and labels, and the mean and variance of
// its labels, as an uninterrupted run's.
func TestProfileCrashRecovery(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	const n = profileCrashEvents
	useFastBinary(t)
	b := crashBroker(t)
	msgs, totals := ratingMessages(n)
	yaml := func(group, output, dir string) string {
		return strings.NewReplacer("%GROUP%", group, "%OUTPUT%", output, "%DIR%", dir).Replace(profileCrashConfig)
	}
	dir := t.TempDir()
	cfg := yaml("profile-crashy", "scores", dir)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
	for kill := 1; kill <= 3; kill++ {
		produce(t, b, "events", msgs[(kill-1)*n/4:kill*n/4])
		p := startStreamer(t, b, cfg)
		// Kill somewhere in the second half of this quarter.
		target := float64(kill*n/4 - n/8 + rng.IntN(n/8))
		waitFor(t, 60*time.Second, "this run's progress", func() bool {
			return p.metric(t, "streamer_model_examples", `model="rating"`) >= target
		})
		ex := p.metric(t, "streamer_model_examples", `model="rating"`)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.done
		t.Logf("kill %d: SIGKILL at about %v events", kill, ex)
	}
	produce(t, b, "events", msgs[3*n/4:])
	p := startStreamer(t, b, cfg)
	waitRated(t, p, n, 120*time.Second)
	time.Sleep(1500 * time.Millisecond) // once there, it stays there
	waitRated(t, p, n, time.Second)
	if err := p.stop(t); err != nil {
		t.Fatalf("final run exit: %v", err)
	}
	refDir := t.TempDir()
	ref := startStreamer(t, b, yaml("profile-ref", "scores.ref", refDir))
	waitRated(t, ref, n, 120*time.Second)
	if err := ref.stop(t); err != nil {
		t.Fatalf("reference run exit: %v", err)
	}
	want := profileStoreStates(t, filepath.Join(refDir, "keystore"))
	compareProfiles(t, profileStoreStates(t, filepath.Join(dir, "keystore")), want, totals)
	// The snapshot tools read the profiles' tables.
	for _, cmd := range []string{"verify", "inspect"} {
		if out, err := snapshotCmd(cmd, dir); err != nil || !strings.Contains(out, "profile.item") && cmd == "inspect" {
			t.Errorf("streamer snapshot %s: %v\n%s", cmd, err, out)
		}
	}
}

// TestProfileScaleOut: the same profiles in partition scope (each
// partition keeps its part of an item's profile; a user's is whole in its
// partition) with two instances, one SIGKILLed and another added, so that
// partitions move and their profiles are restored from the changelog.
// Every partition's profiles (its key records, then its newest snapshot's
// delta) are bit for bit those of a single instance's run, and summed over
// the partitions they hold exactly the stream's counts.
func TestProfileScaleOut(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	const n, parts = profileCrashEvents, 3
	useFastBinary(t)
	b := crashBroker(t)
	totals := produceRatings(t, b, n)
	yaml := func(group, output, changelog string) string {
		return strings.NewReplacer("%GROUP%", group, "%OUTPUT%", output, "%CHANGELOG%", changelog).Replace(profilePartitionConfig)
	}
	ends := topicEnds(t, b, "events", parts)
	ref := startStreamer(t, b, yaml("profile-single", "scores.ref", "state.profile-single"))
	waitPartitionStates(t, b, "state.profile-single", ends, 120*time.Second)
	if err := ref.stop(t); err != nil {
		t.Fatalf("reference exit: %v", err)
	}

	cfg := yaml("profile-scaled", "scores", "state.profile-scaled")
	procs := []*proc{startStreamer(t, b, cfg), startStreamer(t, b, cfg)}
	victim := procs[1]
	waitFor(t, 60*time.Second, "a snapshot by the instance to kill", func() bool {
		return victim.metric(t, "streamer_snapshots_total", "") >= 1
	})
	time.Sleep(time.Duration(rand.IntN(800)) * time.Millisecond)
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done
	procs = append(procs[:1], startStreamer(t, b, cfg))
	waitPartitionStates(t, b, "state.profile-scaled", ends, 120*time.Second)
	for _, p := range procs {
		if err := p.stop(t); err != nil {
			t.Fatalf("instance exit: %v", err)
		}
	}
	for _, ent := range []string{"item", "user"} {
		got := durableProfiles(t, b, "state.profile-scaled", ent, parts)
		want := durableProfiles(t, b, "state.profile-single", ent, parts)
		sums := map[string]*entityTotals{}
		for part := range parts {
			if len(got[part]) != len(want[part]) {
				t.Errorf("%s, partition %d: %d profiles, the single run's %d", ent, part, len(got[part]), len(want[part]))
			}
			for id, w := range want[part] {
				g := got[part][id]
				gb, _ := g.MarshalBinary()
				wb, _ := w.MarshalBinary()
				if !bytes.Equal(gb, wb) {
					t.Errorf("%s %s, partition %d: profile differs from the single run's: %+v, want %+v", ent, id, part, g, w)
				}
				s := sums[ent+"/"+id]
				if s == nil {
					s = &entityTotals{}
					sums[ent+"/"+id] = s
				}
				s.n += g.Events
			}
		}
		for k, tot := range totals {
			if strings.HasPrefix(k, ent+"/") && (sums[k] == nil || sums[k].n != tot.n) {
				t.Errorf("%s: the partitions' profiles count %v events, want %d", k, sums[k], tot.n)
			}
		}
	}
}

// durableProfiles is every profile of entity that a restore of each
// partition rebuilds from the changelog: its key records, then the delta
// in its newest snapshot (durableKeyStates).
func durableProfiles(t *testing.T, b *stream.Broker, changelog, entity string, parts int) map[int]map[string]*profile.State {
	t.Helper()
	name := "profile." + entity
	cl := snapshot.NewChangelogStore(b.Addrs(), changelog, "profile-test")
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[int]map[string]*profile.State{}
	put := func(part int, key string, state []byte) {
		st := &profile.State{}
		if err := st.UnmarshalBinary(state); err != nil {
			t.Fatalf("%s: partition %d, %s %q: %v", changelog, part, entity, key, err)
		}
		if out[part] == nil {
			out[part] = map[string]*profile.State{}
		}
		out[part][key] = st
	}
	for part := range parts {
		prefix := "k/" + strconv.Itoa(part) + "/" + name + "/"
		if err := cl.ScanRecords(ctx, prefix, func(k string, v []byte) {
			key, err := hex.DecodeString(strings.TrimPrefix(k, prefix))
			if err != nil {
				t.Errorf("changelog record %q: %v", k, err)
				return
			}
			put(part, string(key), v)
		}); err != nil {
			t.Fatal(err)
		}
	}
	for part, snap := range partitionStatesErr(b, changelog) {
		keys, states, err := holder.DecodeKeyed(modelData(t, snap, name))
		if err != nil {
			t.Fatalf("%s: partition %d's %s delta: %v", changelog, part, name, err)
		}
		for i, key := range keys {
			put(part, key, states[i])
		}
	}
	return out
}
