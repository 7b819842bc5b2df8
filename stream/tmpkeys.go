package stream

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Without snapshot.dir, a service with key-scoped models keeps the key
// store (the keys evicted from memory) in a directory of its own under the
// system's temporary directory, removed when it stops. A process killed
// (SIGKILL, the OOM killer, a crash) leaves it behind: the evicted models
// of every key, one directory per crash. At start-up a service removes
// those whose store nobody holds open any more: Pebble holds a lock on
// its LOCK file while the store is open (an fcntl lock, released by the
// kernel when the process dies), so a LOCK file that this process can
// lock, and that is older than staleKeyStoreAge, is a stopped instance's.

// tmpKeyStorePrefix names the key stores' temporary directories.
const tmpKeyStorePrefix = "streamer-keystore-"

// staleKeyStoreAge is how old a LOCK file must be for its store to be
// removed: Pebble creates the file, then locks it, and a store being
// opened by another process between the two is not to be taken for a
// stopped one. A store left less than this ago goes at a later start.
const staleKeyStoreAge = time.Minute

// tmpKeyStores are the temporary key stores this process has open: fcntl
// locks do not conflict within one process, so they are skipped by name.
var tmpKeyStores struct {
	mu   sync.Mutex
	dirs map[string]bool
}

func holdTmpKeyStore(dir string, open bool) {
	dir = filepath.Clean(dir) // as removeStaleKeyStores names it
	tmpKeyStores.mu.Lock()
	defer tmpKeyStores.mu.Unlock()
	if tmpKeyStores.dirs == nil {
		tmpKeyStores.dirs = map[string]bool{}
	}
	if open {
		tmpKeyStores.dirs[dir] = true
	} else {
		delete(tmpKeyStores.dirs, dir)
	}
}

// removeStaleKeyStores removes the temporary key stores under root that
// no process has open, and logs each. It holds tmpKeyStores' lock
// throughout, so that no store of this process opens meanwhile.
func removeStaleKeyStores(root string, log *slog.Logger) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	tmpKeyStores.mu.Lock()
	defer tmpKeyStores.mu.Unlock()
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), tmpKeyStorePrefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if tmpKeyStores.dirs[dir] {
			continue
		}
		lock := filepath.Join(dir, "LOCK")
		if fi, err := os.Stat(lock); err != nil || time.Since(fi.ModTime()) < staleKeyStoreAge {
			continue // not opened yet, or being opened now (or not a store): left alone
		}
		l, err := vfs.Default.Lock(lock)
		if err != nil {
			continue // open: another process's, or this one's under another name
		}
		size := dirSize(dir)
		err = os.RemoveAll(dir) // holding the lock (Unix)
		_ = l.Close()
		if err != nil {
			err = os.RemoveAll(dir) // not while open (Windows)
		}
		if err != nil {
			log.Warn("could not remove the temporary key store of an instance that did not stop cleanly", "dir", dir, "err", err)
			continue
		}
		log.Info("removed the temporary key store of an instance that did not stop cleanly", "dir", dir, "bytes", size)
	}
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
