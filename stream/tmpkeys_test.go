package stream

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/internal/keystore"
)

// TestStaleKeyStoresRemoved checks the start-up clean-up of the temporary
// key stores left by killed instances: a store whose LOCK nobody holds is
// removed (and logged); one held open by another process (a child running
// this test binary), one open in this process, one whose LOCK is less than
// staleKeyStoreAge old, a directory not opened as a store yet and another
// program's directory are left alone; the other
// process's goes once that process is killed.
func TestStaleKeyStoresRemoved(t *testing.T) {
	if dir := os.Getenv("STREAMER_TEST_HOLD_KEYSTORE"); dir != "" {
		db, err := keystore.Open(dir, nil) // held until stdin closes
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("held\n")
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = db.Close()
		return
	}
	root := t.TempDir()
	path := func(name string) string { return filepath.Join(root, name) }
	open := func(name string) *keystore.DB {
		t.Helper()
		db, err := keystore.Open(path(name), nil)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	stale := open(tmpKeyStorePrefix + "stale")
	if err := stale.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(path(tmpKeyStorePrefix+"stale"), "LOCK")); err != nil {
		t.Fatalf("a closed store has no LOCK file, which the clean-up looks for: %v", err)
	}
	recent := open(tmpKeyStorePrefix + "recent") // stopped, but its LOCK was made just now
	if err := recent.Close(); err != nil {
		t.Fatal(err)
	}
	mine := open(tmpKeyStorePrefix + "mine")
	holdTmpKeyStore(path(tmpKeyStorePrefix+"mine"), true)
	t.Cleanup(func() {
		holdTmpKeyStore(path(tmpKeyStorePrefix+"mine"), false)
		_ = mine.Close()
	})
	if err := os.Mkdir(path(tmpKeyStorePrefix+"new"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path("another-program"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path("another-program"), "LOCK"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	child := exec.Command(os.Args[0], "-test.run=^TestStaleKeyStoresRemoved$")
	child.Env = append(os.Environ(), "STREAMER_TEST_HOLD_KEYSTORE="+path(tmpKeyStorePrefix+"other"))
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = child.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("the child process did not open its store: %q, %v", line, err)
	}

	long := time.Now().Add(-2 * staleKeyStoreAge)
	for _, name := range []string{"stale", "other", "mine"} {
		if err := os.Chtimes(filepath.Join(path(tmpKeyStorePrefix+name), "LOCK"), long, long); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	removeStaleKeyStores(root, slog.New(slog.NewTextHandler(&logs, nil)))
	exists := func(name string) bool { _, err := os.Stat(path(name)); return err == nil }
	if exists(tmpKeyStorePrefix + "stale") {
		t.Error("the stopped instance's store was not removed")
	}
	if !strings.Contains(logs.String(), "removed the temporary key store") || !strings.Contains(logs.String(), tmpKeyStorePrefix+"stale") {
		t.Errorf("the removal was not logged: %s", logs.String())
	}
	for _, name := range []string{tmpKeyStorePrefix + "other", tmpKeyStorePrefix + "mine", tmpKeyStorePrefix + "recent", tmpKeyStorePrefix + "new", "another-program"} {
		if !exists(name) {
			t.Errorf("%s was removed", name)
		}
	}

	if err := child.Process.Kill(); err != nil { // as the OOM killer would: the kernel drops its lock
		t.Fatal(err)
	}
	_ = child.Wait()
	// (Probing a LOCK file, Pebble's vfs.Lock creates it anew: the first
	// pass made it recent.)
	if err := os.Chtimes(filepath.Join(path(tmpKeyStorePrefix+"other"), "LOCK"), long, long); err != nil {
		t.Fatal(err)
	}
	removeStaleKeyStores(root, slog.New(slog.DiscardHandler))
	if exists(tmpKeyStorePrefix + "other") {
		t.Error("the store of the process that has exited was not removed")
	}
	if !exists(tmpKeyStorePrefix + "mine") {
		t.Error("the store open in this process was removed")
	}
}
