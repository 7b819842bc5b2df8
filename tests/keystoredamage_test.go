package tests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/holder"
)

// damageConfig: the key-scoped models of keyedCrashModels (max_keys 20),
// file snapshots (the last 3 kept), ranking requests on key_linear.
// %SNAPSHOT% adds to the snapshot section (a changelog, the cadence).
const damageConfig = `
kafka:
  brokers: [%BROKERS%]
  group: %GROUP%
  session_timeout: 1s
http:
  listen: "%HTTP%"
log:
  level: info
snapshot:
  dir: %DIR%
  keep: 3
%SNAPSHOT%
rank:
  model: key_linear
` + keyedCrashModels

func damageYAML(group, dir, snap string) string {
	return strings.NewReplacer("%GROUP%", group, "%DIR%", dir, "%SNAPSHOT%", snap).Replace(damageConfig)
}

const damageKeys = 100

// produceUsers writes n labelled events (ids <prefix>-i) keyed by the 100
// users user0 … user99 in turn, and returns each user's count.
func produceUsers(t *testing.T, b *stream.Broker, prefix string, n int, seed uint64) map[string]int64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 9))
	counts := map[string]int64{}
	msgs := make([]kafka.Message, 0, n)
	for i := range n {
		key := "user" + strconv.Itoa(i%damageKeys)
		x := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		label := -1
		if x[0]*x[1]+0.5*x[2] > 0.1 {
			label = 1
		}
		counts[key]++
		msgs = append(msgs, kafka.Message{Key: []byte(key), Value: eventJSON(prefix+"-"+strconv.Itoa(i), x, &label)})
	}
	produce(t, b, "events", msgs)
	return counts
}

// snapshotCmd runs `streamer snapshot <verb> <dir>`.
func snapshotCmd(verb, dir string) (string, error) {
	out, err := exec.Command(binary, "snapshot", verb, dir).CombinedOutput()
	return string(out), err
}

// waitExit waits for p to exit by itself and returns its error.
func waitExit(t *testing.T, p *proc, within time.Duration) error {
	t.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(within):
		t.Fatalf("still running %v after start:\n%s", within, p.logs.String())
		return nil
	}
}

// damageKeyStore writes 4 KB of random bytes inside one of the key store's
// table files (same size), at the first place, in steps of 4 KB, where
// bad reports the damage it wants, and returns what the key store then
// reads: every damaged key of each model, and whether a marker fails. The
// service must be stopped.
func damageKeyStore(t *testing.T, dir string, bad func(keys map[string][]string, marker bool) bool) (map[string][]string, bool) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	rng := rand.New(rand.NewPCG(5, 6))
	for _, f := range files {
		orig, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off+4096 <= len(orig); off += 4096 {
			b := bytes.Clone(orig)
			for i := off; i < off+4096; i++ {
				b[i] = byte(rng.UintN(256))
			}
			// Probed on a copy: opening a store may compact its files.
			probe := copyDir(t, dir)
			if err := os.WriteFile(filepath.Join(probe, filepath.Base(f)), b, 0o644); err != nil {
				t.Fatal(err)
			}
			keys, marker := readDamage(t, probe)
			if bad(keys, marker) {
				t.Logf("4 KB of random bytes at %d of %s (%d bytes): damaged keys %v, marker damaged %v", off, filepath.Base(f), len(b), keys, marker)
				if err := os.WriteFile(f, b, 0o644); err != nil {
					t.Fatal(err)
				}
				return keys, marker
			}
		}
	}
	t.Fatalf("no 4 KB window of %v damages the key store as wanted", files)
	return nil, false
}

// copyDir copies the files of dir into a new temporary directory.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// readDamage reads every key of both models in the key store in dir and
// returns the keys whose state cannot be read, by model, and whether a
// marker cannot be read.
func readDamage(t *testing.T, dir string) (map[string][]string, bool) {
	t.Helper()
	db, err := keystore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keys, marker := map[string][]string{}, false
	for _, model := range keyedCrashModelNames {
		tab := db.Table("", model)
		if _, err := tab.Marker(); err != nil {
			marker = true
		}
		for i := range damageKeys {
			key := "user" + strconv.Itoa(i)
			if _, _, err := tab.Get([]byte(key), nil); err != nil {
				if !errors.Is(err, keystore.ErrCorrupt) {
					t.Fatal(err)
				}
				keys[model] = append(keys[model], key)
			}
		}
	}
	return keys, marker
}

// TestKeyStoreDamaged: 4 KB of random bytes inside a table file of a
// stopped service's key store (no changelog), where they damage some keys'
// states. The service starts and stays up (it used to panic on the first
// event or ranking request of such a key, at every restart): those keys
// are failed (streamer_model_keys_failed, /readyz "degraded", their events
// scored and counted in streamer_model_key_errors_total, not learned), the
// others learn every event. `snapshot verify` exits non-zero naming the
// damage; following its advice — the key store moved aside, then
// --allow-empty-state (refused without) — starts the service with the keys
// of the newest snapshot and every other key's state lost, as the log
// says. Before the damage, `snapshot inspect` counts the 100 stored keys,
// not the 100 000 lookups of unknown keys.
func TestKeyStoreDamaged(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	useFastBinary(t)
	b := crashBroker(t)
	dir := t.TempDir()
	cfg := damageYAML("damaged", dir, "  every: 500ms\n")
	p := startStreamer(t, b, cfg)
	const first, strangers = 3000, 100_000
	produceUsers(t, b, "a", first, 1)
	msgs := make([]kafka.Message, strangers)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: fmt.Appendf(nil, "stranger%d", i), Value: []byte(`{"features":[1,2,3,4]}`)}
	}
	produce(t, b, "events", msgs)
	waitFor(t, 60*time.Second, "every event consumed", func() bool {
		return p.metric(t, "streamer_events_consumed_total", "") >= first+strangers
	})
	waitKeyedExactly(t, p, first, 30*time.Second)
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}

	// inspect counts keys, not lookups.
	out, err := snapshotCmd("inspect", dir)
	if err != nil {
		t.Fatalf("snapshot inspect: %v\n%s", err, out)
	}
	counts := regexp.MustCompile(`keys=(\d+)`).FindAllStringSubmatch(out, -1)
	for _, m := range counts {
		if n, _ := strconv.Atoi(m[1]); n > damageKeys {
			t.Fatalf("snapshot inspect counts %d keys, there are %d:\n%s", n, damageKeys, out)
		}
	}
	for _, model := range keyedCrashModelNames {
		if !regexp.MustCompile(`table ""/` + model + ` +checkpoint \d+  keys=100\n`).MatchString(out) {
			t.Fatalf("snapshot inspect does not count the key store's 100 keys of %s:\n%s", model, out)
		}
	}
	if out, err := snapshotCmd("verify", dir); err != nil || !strings.Contains(out, "keystore: ok") {
		t.Fatalf("snapshot verify of a sound store: %v\n%s", err, out)
	}

	ks := filepath.Join(dir, "keystore")
	bad, _ := damageKeyStore(t, ks, func(keys map[string][]string, marker bool) bool {
		return !marker && len(keys["key_linear"]) > 0 && len(keys["key_linear"]) < damageKeys/2 && len(keys["key_rbf"]) < damageKeys/2
	})

	// The service starts, serves and learns the other keys, fails the
	// damaged ones, and stays up.
	p = startStreamer(t, b, cfg)
	const second = 1000 // 10 per user
	produceUsers(t, b, "b", second, 2)
	waitFor(t, 60*time.Second, "the new events consumed", func() bool {
		return p.metric(t, "streamer_events_consumed_total", "") >= second
	})
	for _, model := range keyedCrashModelNames {
		n := len(bad[model])
		want := float64(first + second/damageKeys*(damageKeys-n))
		waitFor(t, 30*time.Second, model+" learning the undamaged keys' events", func() bool {
			return p.metric(t, "streamer_model_examples", `model="`+model+`"`) >= want
		})
		if v := p.metric(t, "streamer_model_examples", `model="`+model+`"`); v != want {
			t.Errorf("%s: %v examples, want %v (the damaged keys learn nothing)", model, v, want)
		}
		if v := p.metric(t, "streamer_model_keys_failed", `model="`+model+`"`); v != float64(n) {
			t.Errorf("%s: streamer_model_keys_failed %v, want %d", model, v, n)
		}
		if v := p.metric(t, "streamer_model_key_errors_total", `model="`+model+`"`); v != float64(n*second/damageKeys) {
			t.Errorf("%s: streamer_model_key_errors_total %v, want %d", model, v, n*second/damageKeys)
		}
	}
	code, body := p.readyzBody()
	if code != http.StatusOK || !strings.Contains(body, fmt.Sprintf("degraded: model key_linear: %d keys failed", len(bad["key_linear"]))) {
		t.Errorf("/readyz: %d %q, want 200 saying the service is degraded", code, body)
	}
	// A ranking request for a damaged key is answered (a fresh instance).
	req := rankRequestJSON("r-1", bad["key_linear"][0], [][]float64{{1, 0, 0, 0}, {0, 1, 0, 0}}, 2)
	resp, err := http.Post("http://"+p.http+"/v1/rank", "application/json", bytes.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST /v1/rank for a damaged key: %d %s", resp.StatusCode, rb)
	}
	if !strings.Contains(p.logs.String(), "the key is failed") {
		t.Errorf("the failed keys are not logged")
	}
	time.Sleep(time.Second)
	select {
	case err := <-p.done:
		t.Fatalf("the service stopped by itself: %v", err)
	default:
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}

	out, err = snapshotCmd("verify", dir)
	if err == nil || !strings.Contains(out, "keystore: DAMAGED") || !strings.Contains(out, "checksum mismatch") || !strings.Contains(out, "what to do") {
		t.Fatalf("snapshot verify of the damaged store: %v\n%s", err, out)
	}

	// The advice: move it aside, then --allow-empty-state.
	if err := os.Rename(ks, ks+".damaged"); err != nil {
		t.Fatal(err)
	}
	p = spawnStreamer(t, strings.Join(b.Addrs(), ","), cfg)
	if err := waitExit(t, p, 30*time.Second); err == nil || !strings.Contains(p.logs.String(), "--allow-empty-state") {
		t.Fatalf("start with the key store moved aside: %v, want a refusal naming --allow-empty-state:\n%s", err, p.logs.String())
	}
	fs, err := snapshot.OpenFileStore(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	snap, _, err := fs.LoadLatest()
	if err != nil {
		t.Fatal(err)
	}
	p = startStreamerArgs(t, b, cfg, "--allow-empty-state")
	for _, model := range keyedCrashModelNames {
		keys, states, err := holder.DecodeKeyed(modelData(t, snap, model))
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, st := range states {
			m, err := testTypes.Restore(st)
			if err != nil {
				t.Fatal(err)
			}
			sum += m.Examples()
		}
		if v := p.metric(t, "streamer_model_examples", `model="`+model+`"`); v != float64(sum) {
			t.Errorf("%s after --allow-empty-state: %v examples, want the %d of the snapshot's %d keys", model, v, sum, len(keys))
		}
		if v := p.metric(t, "streamer_model_keys_stored", `model="`+model+`"`); v != float64(len(keys)) {
			t.Errorf("%s after --allow-empty-state: %v keys stored, want the snapshot's %d", model, v, len(keys))
		}
		if !regexp.MustCompile(`model=` + model + ` .*keys_kept=` + strconv.Itoa(len(keys)) + ` examples_kept=` + strconv.FormatInt(sum, 10) + ` keys_lost=\d+`).MatchString(p.logs.String()) {
			t.Errorf("%s: the log does not state the loss:\n%s", model, p.logs.String())
		}
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// TestKeyStoreMarkerDamaged: random bytes where a key store's markers are
// (a service with a changelog). Start-up stops, naming the damaged store
// and the way out; `snapshot verify` exits non-zero; with the store moved
// aside as advised, the service rebuilds every key from the changelog
// exactly as it was.
func TestKeyStoreMarkerDamaged(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	useFastBinary(t)
	b := crashBroker(t)
	dir := t.TempDir()
	cfg := damageYAML("marker", dir, "  every: 500ms\n  changelog_topic: marker.state\n")
	p := startStreamer(t, b, cfg)
	const n = 3000
	produceUsers(t, b, "a", n, 3)
	waitKeyedExactly(t, p, n, 60*time.Second)
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
	ks := filepath.Join(dir, "keystore")
	want := keystoreStates(t, ks)
	damageKeyStore(t, ks, func(_ map[string][]string, marker bool) bool { return marker })

	p = spawnStreamer(t, strings.Join(b.Addrs(), ","), cfg)
	err := waitExit(t, p, 30*time.Second)
	logs := p.logs.String()
	if err == nil || strings.Contains(logs, "panic") || !strings.Contains(logs, "the key store "+ks+" is damaged") ||
		!strings.Contains(logs, "move "+ks+" aside") || !strings.Contains(logs, "rebuilt from snapshot.changelog_topic marker.state, losing nothing") {
		t.Fatalf("start with a damaged marker: %v, want exit 1 naming the store and the way out:\n%s", err, logs)
	}
	if out, err := snapshotCmd("verify", dir); err == nil || !strings.Contains(out, "DAMAGED") {
		t.Fatalf("snapshot verify: %v\n%s", err, out)
	}

	if err := os.Rename(ks, ks+".damaged"); err != nil {
		t.Fatal(err)
	}
	p = startStreamer(t, b, cfg)
	for _, model := range keyedCrashModelNames {
		if v := p.metric(t, "streamer_model_examples", `model="`+model+`"`); v != n {
			t.Errorf("%s rebuilt with %v examples, want %d", model, v, n)
		}
		if v := p.metric(t, "streamer_model_keys_stored", `model="`+model+`"`); v != damageKeys {
			t.Errorf("%s rebuilt with %v keys, want %d", model, v, damageKeys)
		}
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
	got := keystoreStates(t, ks)
	for _, model := range keyedCrashModelNames {
		if len(got[model]) != damageKeys || len(want[model]) != damageKeys {
			t.Fatalf("%s: %d keys rebuilt, %d before, want %d", model, len(got[model]), len(want[model]), damageKeys)
		}
		for key, w := range want[model] {
			if err := online.StateClose(got[model][key], w, 0); err != nil {
				t.Errorf("%s: key %s rebuilt differs: %v", model, key, err)
			}
		}
	}
}

// TestKeyedOlderSnapshotRestored: the two newest of three snapshots of a
// key-scoped service are corrupt. The service restores the oldest, takes
// its key store back two checkpoints to it (refused before: the key store
// kept one step of undo) and replays the events after it: every key ends
// exactly as in an independent uninterrupted run, with its count of
// examples.
func TestKeyedOlderSnapshotRestored(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	useFastBinary(t)
	b := crashBroker(t)
	const n = 5000
	counts := produceUsers(t, b, "a", n, 4)
	snap := "  every: 1h\n  every_events: 1000\n"

	refDir := t.TempDir()
	ref := startStreamer(t, b, damageYAML("older-ref", refDir, snap))
	waitKeyedExactly(t, ref, n, 60*time.Second)
	if err := ref.stop(t); err != nil {
		t.Fatalf("reference exit: %v", err)
	}
	want := keystoreStates(t, filepath.Join(refDir, "keystore"))

	dir := t.TempDir()
	cfg := damageYAML("older", dir, snap)
	p := startStreamer(t, b, cfg)
	waitKeyedExactly(t, p, n, 60*time.Second)
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
	slices.Sort(files)
	if len(files) != 3 {
		t.Fatalf("%d snapshot files, want 3 (keep: 3)", len(files))
	}
	for _, f := range files[1:] {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0x5a
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	older, err := snapshot.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var behind int64
	for _, o := range older.Offsets {
		behind += o.Offset
	}
	behind = n - behind

	p = startStreamer(t, b, cfg)
	if v := p.metric(t, "streamer_snapshot_corrupt_total", ""); v != 2 {
		t.Fatalf("streamer_snapshot_corrupt_total = %v, want 2", v)
	}
	if !strings.Contains(p.logs.String(), "the key store taken back to the restored snapshot's checkpoint") {
		t.Errorf("the log does not say the key store was taken back")
	}
	waitKeyedExactly(t, p, n, 60*time.Second)
	time.Sleep(500 * time.Millisecond)
	for i, v := range keyedExamples(t, p) {
		if v != n {
			t.Fatalf("%s: %v examples after the replay of %d events, want exactly %d", keyedCrashModelNames[i], v, behind, n)
		}
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
	t.Logf("restored the snapshot %d events behind", behind)
	got := keystoreStates(t, filepath.Join(dir, "keystore"))
	for _, model := range keyedCrashModelNames {
		if len(got[model]) != damageKeys {
			t.Errorf("%s: %d keys, want %d", model, len(got[model]), damageKeys)
		}
		for key, w := range want[model] {
			g := got[model][key]
			switch {
			case g == nil:
				t.Errorf("%s: key %s missing", model, key)
			case g.Examples() != counts[key] || w.Examples() != counts[key]:
				t.Errorf("%s: key %s: %d examples (reference %d), want %d", model, key, g.Examples(), w.Examples(), counts[key])
			default:
				if err := online.StateClose(g, w, 1e-9); err != nil {
					t.Errorf("%s: key %s differs from the uninterrupted run: %v", model, key, err)
				}
			}
		}
	}
}

// TestKeyStoreFilesRefused: a key store whose files were truncated,
// deleted or overwritten, or whose MANIFEST is garbage, stops start-up
// with exit 1 naming the key store and the way out, never a panic or a
// start with the keys lost.
func TestKeyStoreFilesRefused(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	useFastBinary(t)
	b := crashBroker(t)
	dir := t.TempDir()
	cfg := damageYAML("files", dir, "  every: 500ms\n")
	p := startStreamer(t, b, cfg)
	produceUsers(t, b, "a", 2000, 7)
	waitKeyedExactly(t, p, 2000, 60*time.Second)
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
	ks := filepath.Join(dir, "keystore")
	pristine := copyDir(t, ks)
	largest := func(pattern string) string {
		files, _ := filepath.Glob(filepath.Join(ks, pattern))
		var best string
		var size int64
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.Size() >= size {
				best, size = f, st.Size()
			}
		}
		if best == "" {
			t.Fatalf("no %s in %s", pattern, ks)
		}
		return best
	}
	for _, tc := range []struct {
		name   string
		damage func()
	}{
		{"truncated table file", func() {
			f := largest("*.sst")
			st, _ := os.Stat(f)
			if err := os.Truncate(f, st.Size()/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"deleted table file", func() {
			if err := os.Remove(largest("*.sst")); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage table file", func() {
			f := largest("*.sst")
			st, _ := os.Stat(f)
			if err := os.WriteFile(f, bytes.Repeat([]byte("garbage!"), int(st.Size()/8)), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage MANIFEST", func() {
			f := largest("MANIFEST-*")
			st, _ := os.Stat(f)
			if err := os.WriteFile(f, bytes.Repeat([]byte("garbage!"), int(st.Size()/8)+1), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		if err := os.RemoveAll(ks); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(ks, os.DirFS(pristine)); err != nil {
			t.Fatal(err)
		}
		tc.damage()
		p := spawnStreamer(t, strings.Join(b.Addrs(), ","), cfg)
		err := waitExit(t, p, 30*time.Second)
		logs := p.logs.String()
		if err == nil || strings.Contains(logs, "panic") || !strings.Contains(logs, "key store") || !strings.Contains(logs, "move "+ks+" aside") {
			t.Errorf("%s: exit %v, want exit 1 naming the key store and the way out:\n%s", tc.name, err, logs)
			continue
		}
		t.Logf("%s: %s", tc.name, lastLine(logs))
	}
}

// lastLine is the last line of s.
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}
