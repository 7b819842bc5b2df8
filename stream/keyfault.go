package stream

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/keystore"
)

// A fault in one key's data is that key's problem. When a key-scoped
// model's key store cannot give a key's state back — a damaged block of one
// of its files (keystore.ErrCorrupt), a stored state that does not decode —
// the key is failed: it is not read again, its events are scored by a fresh
// instance (so by the model's fallback when it has one) and counted in
// streamer_model_key_errors_total, and it never learns: a model that lost
// its state does not go on as if it had it. Every other key is served and
// learns as before. streamer_model_keys_failed counts the failed keys,
// /readyz (still 200) names them by model, and the first ones are logged.
// A key stays failed until its table is restored again (a restart reads it
// again, and fails it again while the damage is there): the way out is in
// docs/operations.md ("Key store damage"). Damage where a restore reads
// (a table's marker or undo records) stops start-up instead (explainKeyStore).

// keyFaults are the failed keys of one key-scoped model in one shard.
type keyFaults struct {
	errs map[string]error // by key: why it failed (the shard's lock)
	n    atomic.Int64     // len(errs), for the scrape and /readyz
}

func newKeyFaults() *keyFaults { return &keyFaults{errs: map[string]error{}} }

// get returns why key failed (nil: it did not).
func (f *keyFaults) get(key []byte) error { return f.errs[string(key)] }

// clear forgets every failed key: its table was restored again.
func (f *keyFaults) clear() {
	clear(f.errs)
	f.n.Store(0)
}

// keyFaultsLogged is how many failed keys of a model are logged one by one;
// after them, one line at every tenfold count.
const keyFaultsLogged = 10

// fail handles err, a failed read of key's stored state, and returns it.
// A read that cannot succeed later — damaged data (keystore.ErrCorrupt),
// or with decode a state that does not decode — fails the key (see above);
// any other error (I/O) is only returned: the key's next event reads it
// again.
func (k *keyedModels) fail(key string, err error, decode bool) error {
	if !decode && !errors.Is(err, keystore.ErrCorrupt) {
		return err
	}
	if _, ok := k.faults.errs[key]; !ok {
		k.faults.errs[key] = err
		if n := k.faults.n.Add(1); n <= keyFaultsLogged || isPow10(n) {
			k.log.Error("key-scoped model: a key's stored state cannot be read: the key is failed: its events are scored without its state (by the model's fallback when it has one) and not learned, until the key store is repaired (docs/operations.md, \"Key store damage\"; `streamer snapshot verify` lists the damage)",
				"model", k.name, "key", key, "failed_keys", n, "err", err)
		}
	}
	return err
}

func isPow10(n int64) bool {
	for n >= 10 && n%10 == 0 {
		n /= 10
	}
	return n == 1
}

var keysFailedDesc = prometheus.NewDesc("streamer_model_keys_failed",
	"Key-scoped models: keys whose stored state cannot be read (a damaged key store): scored without it and not learned; streamer_model_key_errors_total counts their events.",
	[]string{"model"}, nil)

// keyFaultCollector exports streamer_model_keys_failed, summed over the
// shards at scrape time.
type keyFaultCollector struct{ e *Engine }

func (c *keyFaultCollector) Describe(ch chan<- *prometheus.Desc) { ch <- keysFailedDesc }

func (c *keyFaultCollector) Collect(ch chan<- prometheus.Metric) {
	for name, n := range c.e.keyFaults() {
		ch <- prometheus.MustNewConstMetric(keysFailedDesc, prometheus.GaugeValue, float64(n), name)
	}
}

// keyFaults returns the failed keys of every key-scoped model, by name,
// over the shards.
func (e *Engine) keyFaults() map[string]int64 {
	e.mu.Lock()
	shards := make([]*Shard, 0, len(e.shards))
	for s := range e.shards {
		shards = append(shards, s)
	}
	e.mu.Unlock()
	out := map[string]int64{}
	for i, d := range e.defs {
		if d.keyFactory == nil {
			continue
		}
		var n int64
		for _, s := range shards {
			if h, ok := s.models[i].h.(interface{ Faults() int64 }); ok {
				n += h.Faults()
			}
		}
		out[d.name] = n
	}
	return out
}

// KeyFaults says which key-scoped models have failed keys ("" when none),
// for /readyz: the service is ready, its other keys served and learning,
// but degraded.
func (e *Engine) KeyFaults() string {
	var out []string
	for name, n := range e.keyFaults() {
		if n > 0 {
			out = append(out, fmt.Sprintf("model %s: %d keys failed (their stored state cannot be read: the key store is damaged; they are scored without it and do not learn)", name, n))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// explainKeyStore adds to err, a start-up error, what to do when it is
// damage to the key store of cfg (keystore.ErrCorrupt: a table's marker or
// undo records unreadable): one line, naming the directory, the damage and
// the way out, which loses nothing with a changelog and, without one, what
// --allow-empty-state says it loses.
func explainKeyStore(cfg config.Config, err error) error {
	if err == nil || !errors.Is(err, keystore.ErrCorrupt) || cfg.Snapshot.Dir == "" {
		return err
	}
	dir := filepath.Join(cfg.Snapshot.Dir, "keystore")
	return fmt.Errorf("%w: the key store %s is damaged (`streamer snapshot verify %s` lists the damage); nothing was changed. To start: %s",
		err, dir, cfg.Snapshot.Dir, keyStoreWayOut(cfg, dir))
}

// explainKeyStoreOpen adds the way out to err, a key store of cfg that
// does not open: damaged or lost files (a MANIFEST that does not decode, a
// table file missing or of the wrong size) are the usual cause.
func explainKeyStoreOpen(cfg config.Config, err error) error {
	if cfg.Snapshot.Dir == "" || strings.Contains(err.Error(), "lock") { // in use: another process has it
		return err
	}
	dir := filepath.Join(cfg.Snapshot.Dir, "keystore")
	return fmt.Errorf("%w: nothing was changed. If the key store's files were damaged or lost, to start: %s", err, keyStoreWayOut(cfg, dir))
}

// keyStoreWayOut says how to start with the key store dir of cfg moved
// aside, and what that loses.
func keyStoreWayOut(cfg config.Config, dir string) string {
	then := "start it with --allow-empty-state: each key-scoped model's key store is rebuilt from the newest snapshot, which holds the keys its checkpoint changed; every other key's state is lost (the log says how many keys and examples) and starts empty on its next event; the global models are restored as usual"
	if t := cfg.Snapshot.ChangelogTopic; t != "" {
		then = "start it again: the key-scoped models' key stores are rebuilt from snapshot.changelog_topic " + t + ", losing nothing"
	}
	return fmt.Sprintf("stop the service, move %s aside (mv %s %s.damaged), then %s", dir, dir, dir, then)
}
