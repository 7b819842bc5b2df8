package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/stream/holder"
)

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
			if h, ok := s.models[i].h.(*holder.Keyed); ok {
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

// ExplainKeyStore adds to err, a start-up error, what to do when it is
// damage to the key store of cfg (keystore.ErrCorrupt: a table's marker or
// undo records unreadable): one line, naming the directory, the damage and
// the way out, which loses nothing with a changelog and, without one, what
// --allow-empty-state says it loses.
func ExplainKeyStore(cfg config.Config, err error) error {
	if err == nil || !errors.Is(err, keystore.ErrCorrupt) || cfg.Snapshot.Dir == "" {
		return err
	}
	dir := filepath.Join(cfg.Snapshot.Dir, "keystore")
	return fmt.Errorf("%w: the key store %s is damaged (`streamer snapshot verify %s` lists the damage); nothing was changed. To start: %s",
		err, dir, cfg.Snapshot.Dir, keyStoreWayOut(cfg, dir))
}

// ExplainKeyStoreOpen adds the way out to err, a key store of cfg that
// does not open: damaged or lost files (a MANIFEST that does not decode, a
// table file missing or of the wrong size) are the usual cause.
func ExplainKeyStoreOpen(cfg config.Config, err error) error {
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
