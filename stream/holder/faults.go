package holder

import (
	"errors"
	"sync/atomic"

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
// (a table's marker or undo records) stops start-up instead (the service explains it).

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

// FaultsLogged is how many failed keys of a model are logged one by one;
// after them, one line at every tenfold count.
const FaultsLogged = 10

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
		if n := k.faults.n.Add(1); n <= FaultsLogged || isPow10(n) {
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
