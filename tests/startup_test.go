package tests

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHealthWhileBrokersAreDown: with the brokers unreachable at start,
// in every configuration (a changelog topic to create and read, snapshot
// files, none), /healthz, /readyz and /metrics answer from the first
// second, /readyz says what start-up waits for, and SIGTERM in that phase
// exits 0 within the grace period.
func TestHealthWhileBrokersAreDown(t *testing.T) {
	for _, tc := range []struct{ name, snapshot string }{
		{"changelog", "snapshot:\n  changelog_topic: streamer.state\n  every: 1s\n"},
		{"files", "snapshot:\n  dir: %DIR%\n  every: 1s\n"},
		{"none", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := `
shutdown_timeout: 5s
kafka:
  brokers: [%BROKERS%]
  group: startup
http:
  listen: "%HTTP%"
log:
  level: info
` + strings.ReplaceAll(tc.snapshot, "%DIR%", t.TempDir()) + `
models:
  - name: mam
    type: mam
    kernel: {type: linear}
    features: {dim: 2}
`
			down := freeAddr(t) // nothing listens there
			start := time.Now()
			p := spawnStreamer(t, down, cfg)
			get := func(path string) (int, string) {
				c := http.Client{Timeout: 500 * time.Millisecond}
				resp, err := c.Get("http://" + p.http + path)
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(body)
			}
			waitFor(t, 5*time.Second, "/healthz answering", func() bool { code, _ := get("/healthz"); return code == 200 })
			if took := time.Since(start); took > 3*time.Second {
				t.Logf("note: /healthz first answered after %v (process start included)", took)
			}
			// Several seconds into the outage, past the start-up's broker
			// check, every endpoint still answers.
			time.Sleep(3 * time.Second)
			for range 3 {
				if code, body := get("/healthz"); code != 200 {
					t.Fatalf("/healthz = %d %q, want 200", code, body)
				}
				code, body := get("/readyz")
				if code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready: ") {
					t.Fatalf("/readyz = %d %q, want 503 with the reason", code, body)
				}
				t.Logf("/readyz: %s", strings.TrimSpace(body))
				if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "streamer_broker_refusals_total") {
					t.Fatalf("/metrics = %d (%d bytes), want 200 with the metrics", code, len(body))
				}
				time.Sleep(700 * time.Millisecond)
			}
			// The same warnings repeat while the brokers are away: they
			// are logged once, then held back (about once a minute).
			if n := strings.Count(p.logs.String(), "\n"); n > 15 {
				t.Errorf("%d log lines in %v with the brokers down, want the repeats held back:\n%s", n, time.Since(start).Round(time.Second), p.logs.String())
			}
			t.Logf("%d log lines in %v", strings.Count(p.logs.String(), "\n"), time.Since(start).Round(time.Second))
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-p.done:
				if err != nil {
					t.Fatalf("SIGTERM while the brokers are down: %v, want exit 0\n%s", err, p.logs.String())
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("still running 15s after SIGTERM\n%s", p.logs.String())
			}
		})
	}
}
