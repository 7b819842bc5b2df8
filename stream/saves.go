package stream

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/streamer/streamer/internal/keystore"
)

// saveHealth is what the checkpoints' saves have been doing: when the last
// checkpoint whose state all became durable ended, and, while they fail,
// since when and why. /readyz reports the failures (NotReady), the
// checkpoint loop spaces its attempts by backoff while they last (wait),
// and a stop that could not save says what was lost (unsaved).
//
// A failure is that of any store the checkpoint writes: the snapshot (file
// or changelog), the key store, the changelog's key records. The offsets
// are committed only as far as a durable snapshot reaches (Pipeline.save),
// whatever the other stores did.
type saveHealth struct {
	mu       sync.Mutex
	start    time.Time // the pipeline's
	lastGood time.Time // the end of the last checkpoint saved in full (zero: none yet)
	since    time.Time // the first of the failures in a row (zero: not failing)
	failures int       // in a row
	err      error     // the last failure
	lost     bool      // it left state not durable (a snapshot failed, not only the key store)
	retryAt  time.Time // no checkpoint attempt before (the loop's)
	wait     *backoff
	logged   repeats
	// committed is the last offsets committed, per partition, copied
	// from the pipeline's (which its checkpoint lock guards, held by a
	// checkpoint that may never return).
	committed map[int]int64
}

func newSaveHealth(every time.Duration) *saveHealth {
	return &saveHealth{start: time.Now(), wait: newBackoff(every, max(every, maxSaveBackoff))}
}

// maxSaveBackoff bounds the wait between two attempts while saves fail:
// how late, at most, saving resumes after the disk has room again.
const maxSaveBackoff = 30 * time.Second

// failed records a checkpoint whose saves failed, and when the loop tries
// again. lost: a snapshot failed (or a capture): state is not durable;
// otherwise only the key store or the changelog's key records did, after
// a durable snapshot, from which a restart redoes them.
func (h *saveHealth) failed(err error, lost bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if h.failures == 0 {
		h.since = now
	}
	h.failures++
	h.err, h.lost = err, lost
	h.retryAt = now.Add(h.wait.next())
}

// saved records a checkpoint saved in full. It reports how long and how
// many times saves had failed before it (0, 0 when they had not).
func (h *saveHealth) saved() (failedFor time.Duration, failures int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if h.failures > 0 {
		failedFor, failures = now.Sub(h.since), h.failures
	}
	h.lastGood, h.since, h.failures, h.err, h.lost, h.retryAt = now, time.Time{}, 0, nil, false, time.Time{}
	h.wait.reset()
	return failedFor, failures
}

// failing reports whether the last checkpoint's saves failed.
func (h *saveHealth) failing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failures > 0
}

// backingOff reports whether the checkpoint loop is to skip an attempt:
// saves failed and the backoff has not passed.
func (h *saveHealth) backingOff() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failures > 0 && time.Now().Before(h.retryAt)
}

// setCommitted records the offsets committed.
func (h *saveHealth) setCommitted(c map[int]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.committed = maps.Clone(c)
}

// NotReady says why the service is not ready because of its saves ("" when
// it is): they fail, for any time when the disk refuses them (a file
// system error: a full disk, a read-only one), and for at least grace when
// they fail otherwise (the changelog's brokers, whose outages /readyz
// reports after the same time). "snapshots failing" when a snapshot
// failed, "key store failing" when only the key store (or the changelog's
// key records) did, after durable snapshots.
func (h *saveHealth) NotReady(grace time.Duration) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failures == 0 {
		return ""
	}
	now := time.Now()
	if !isDiskError(h.err) && now.Sub(h.since) < grace {
		return ""
	}
	if !h.lost {
		return fmt.Sprintf("key store failing for %s: %s (the snapshots are durable: a restart redoes their keys; %s)", roundDur(now.Sub(h.since)), saveErrorText(h.err), h.lastGoodLocked(now))
	}
	return fmt.Sprintf("snapshots failing for %s: %s (%s)", roundDur(now.Sub(h.since)), saveErrorText(h.err), h.lastGoodLocked(now))
}

// lastGoodLocked says how old the last checkpoint saved in full is.
func (h *saveHealth) lastGoodLocked(now time.Time) string {
	if h.lastGood.IsZero() {
		return "no checkpoint saved since the start, " + roundDur(now.Sub(h.start)) + " ago"
	}
	return "last good checkpoint " + roundDur(now.Sub(h.lastGood)) + " ago"
}

// unsaved says what a stop leaves unsaved when the last checkpoint failed,
// or did not finish (stuck), "" otherwise: the events after the committed
// offsets are processed again after the restart.
func (h *saveHealth) unsaved(stuck bool) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	why := "a store did not answer"
	switch {
	case h.failures > 0 && h.lost:
		why = saveErrorText(h.err)
	case !stuck:
		return ""
	}
	return fmt.Sprintf("the state learned since the last durable checkpoint was not saved (%s; %s); its events are processed again after the restart, from the committed offsets (partition@offset: %s)",
		why, h.lastGoodLocked(time.Now()), offsetList(h.committed))
}

// offsetList writes offsets as "p@o p@o …" in partition order ("none" for
// none).
func offsetList(offsets map[int]int64) string {
	if len(offsets) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, p := range slices.Sorted(maps.Keys(offsets)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d@%d", p, offsets[p])
	}
	return b.String()
}

// roundDur rounds d for messages: to seconds from 10 s, else to 100 ms.
func roundDur(d time.Duration) string {
	if d >= 10*time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// isDiskError reports whether err is a file system's error (a full disk, a
// read-only or failing one), not a broker's.
func isDiskError(err error) bool {
	var pe *fs.PathError
	return keystore.IsNoSpace(err) || errors.As(err, &pe)
}

// saveErrorText says why a save failed in a few words: the system's
// message for a full disk or another file system error ("no space left on
// device"), else the error's first line, at most 300 bytes.
func saveErrorText(err error) string {
	if err == nil {
		return ""
	}
	var errno syscall.Errno
	var pe *fs.PathError
	if errors.As(err, &pe) && errors.As(pe.Err, &errno) {
		return errno.Error()
	}
	if keystore.IsNoSpace(err) && errors.As(err, &errno) {
		return errno.Error()
	}
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// logFailure logs a failed save of shard scope at Error level, each kind
// at most once a minute (saves are retried with backoff, and a full disk
// fails every one of them), counting those held back.
func (h *saveHealth) logFailure(log *slog.Logger, scope, msg string, err error) {
	ok, n := h.logged.pass(msg + "\x00" + scope)
	if !ok {
		return
	}
	args := []any{"shard", scope, "err", err}
	if n > 0 {
		args = append(args, "repeated_since_last_logged", n)
	}
	log.Error(msg, args...)
}

// retryDisk runs fn until it succeeds, returns an error that is not a full
// disk's, or ctx ends, waiting with backoff between attempts while the
// disk is full; status (may be nil) is told why it waits ("" once it does
// not). For start-up steps that write the state (opening the key store,
// bringing it to the restored snapshot): they wait for room on the disk,
// /readyz saying so, as they wait for the brokers.
func retryDisk(ctx context.Context, log *slog.Logger, what string, status func(string), fn func() error) error {
	wait := newBackoff(time.Second, maxSaveBackoff)
	var logged repeats
	for {
		err := fn()
		if err == nil || !keystore.IsNoSpace(err) {
			if status != nil {
				status("")
			}
			return err
		}
		d := wait.next()
		if status != nil {
			status(saveErrorText(err) + "; retrying")
		}
		if ok, n := logged.pass(what); ok {
			log.Error(what+": the disk is full: retrying (free space, or grow the volume of snapshot.dir)", "err", err, "in", d.String(), "repeated_since_last_logged", n)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %w)", what, ctx.Err(), err)
		case <-time.After(d):
		}
	}
}
