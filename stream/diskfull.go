package stream

// A full disk: the start-up steps that wait for room on it, the stop that
// does not wait for a store past shutdown_timeout, and the file systems
// tests put in its place.

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/engine"
)

// stateFS are the file systems the state is written through instead of the
// operating system's (WithStateFS).
type stateFS struct {
	snap snapshot.FS
	keys vfs.FS
}

// WithStateFS makes the snapshot files (snapshot.dir) and the key store
// (snapshot.dir/keystore) write through snap and keys instead of the
// operating system's file system (either may be nil: the operating
// system's). It exists for fault-injection tests (a full disk).
func WithStateFS(snap snapshot.FS, keys vfs.FS) Option {
	return func(o *options) { o.stateFS = &stateFS{snap: snap, keys: keys} }
}

// phaseDetail returns a function that sets the start-up phase to phase,
// followed by a detail when there is one.
func (s *Service) phaseDetail(phase string) func(detail string) {
	return func(detail string) {
		if detail != "" {
			phase := phase + ": " + detail
			s.phase.Store(&phase)
			return
		}
		s.phase.Store(&phase)
	}
}

// openKeys opens the key store of the key-scoped models (openKeyStore),
// /readyz saying so meanwhile: a store on a full disk opens read-only, and
// one that cannot open at all for lack of room is waited for (retryDisk),
// as is a Pebble open that waits for a flush the disk refuses (the log of
// an earlier version, replayed), with the flush's error in /readyz. It
// returns when ctx ends, leaving such an open behind (the process ends).
func (s *Service) openKeys(ctx context.Context, cfg config.Config, models []engine.NamedModel, fsys *stateFS) (*keyStore, error) {
	const phase = "opening the key store"
	status := s.phaseDetail(phase)
	status("")
	var opening atomic.Bool // the hook is the open's only while it lasts
	opening.Store(true)
	opts := []keystore.Option{keystore.WithErrorHook(func(err error) {
		if opening.Load() {
			status(saveErrorText(err) + "; retrying")
		}
	})}
	if fsys != nil && fsys.keys != nil {
		opts = append(opts, keystore.WithFS(fsys.keys))
	}
	type opened struct {
		k   *keyStore
		err error
	}
	done := make(chan opened, 1)
	go func() {
		var k *keyStore
		err := retryDisk(ctx, s.log, phase, status, func() error {
			var err error
			k, err = openKeyStore(cfg, models, s.log, opts...)
			return err
		})
		opening.Store(false)
		done <- opened{k, err}
	}()
	select {
	case r := <-done:
		return r.k, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.err == nil {
				r.k.close()
			}
		}()
		return nil, fmt.Errorf("%s: %w", phase, ctx.Err())
	}
}

// useFileFS makes the file store write through fsys (WithStateFS).
func (s *StateStore) useFileFS(cfg config.Snapshot, fsys snapshot.FS) error {
	if s.file == nil || fsys == nil {
		return nil
	}
	fs, err := snapshot.OpenFileStoreFS(cfg.Dir, cfg.Keep, fsys)
	if err != nil {
		return fmt.Errorf("snapshot.dir: %w", err)
	}
	s.file = fs
	return nil
}

// runPipeline runs the pipeline until it returns or, once late is closed
// (the stop took longer than shutdown_timeout), no longer: a final
// checkpoint can wait without end on a store that does not answer (a hung
// disk), and the stop must not. stuck reports the latter; the pipeline's
// goroutines are then left behind (the process ends).
func (s *Service) runPipeline(ctx context.Context, late <-chan struct{}) (stuck bool, err error) {
	done := make(chan error, 1)
	go func() { done <- s.pipeline.Run(ctx) }()
	select {
	case err := <-done:
		return false, err
	case <-late:
		select {
		case err := <-done:
			return false, err
		default:
			return true, nil
		}
	}
}

// closeKeys closes the key store, if there is one, waiting for it until
// late is closed and then keyCloseGrace more: every write of the store is
// durable when it returns, so one left open loses nothing (the process
// ends). The grace is the close's own: a stop that ran past
// shutdown_timeout elsewhere (deliveries, a checkpoint) gets here with
// late closed already, and the store must not be blamed for it.
func (s *Service) closeKeys(late <-chan struct{}) error {
	if s.keys == nil || s.keys.db == nil {
		return nil
	}
	done := make(chan struct{})
	go func() {
		s.keys.close()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-late:
	}
	grace := time.NewTimer(keyCloseGrace)
	defer grace.Stop()
	select {
	case <-done:
		return nil
	case <-grace.C:
		return fmt.Errorf("the key store did not close within %v once the stop had run past shutdown_timeout: it was left closing in the background (what it holds was durable already)", keyCloseGrace)
	}
}

// keyCloseGrace is how long a stop past shutdown_timeout still waits for
// the key store to close: long enough for a store that closes at once, short
// enough that the stop still returns within about shutdown_timeout (a
// hung disk: TestStopOnHungDisk).
const keyCloseGrace = 250 * time.Millisecond

// stopLoss says what a stop leaves unsaved ("" when nothing): the final
// checkpoint failed, or did not finish (stuck).
func (s *Service) stopLoss(stuck bool) string {
	u := s.pipeline.Unsaved(stuck)
	if u == "" {
		return ""
	}
	if stuck {
		return "the final checkpoint did not finish: " + u
	}
	return "the final checkpoint failed: " + u
}

// logStopLoss logs what the stop leaves unsaved, if anything.
func logStopLoss(log *slog.Logger, loss string) {
	if loss != "" {
		log.Error("stopping with state not saved", "lost", loss)
	}
}

// noteKeysUnwritable makes a key store that opened read-only (a full disk)
// a failure of the saves from the start: /readyz says so, and checkpoints
// try again with backoff, even while no event comes, until the store takes
// writes.
func (s *Service) noteKeysUnwritable() {
	if s.keys == nil || s.keys.db == nil {
		return
	}
	if err := s.keys.db.Writable(); err != nil {
		s.pipeline.saves.failed(err, false)
	}
}
