package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPrometheusScrapesStreamer: a real Prometheus server (the Debian
// package's binary) scrapes the real streamer every second with the alert
// rules of deploy/prometheus loaded. Its query API must return the counts
// that were produced, every rule must evaluate without error, and every
// expression of the Grafana dashboard must be valid PromQL to it.
func TestPrometheusScrapesStreamer(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not on PATH (Debian package prometheus): scrape test skipped")
	}
	o := startObserved(t)

	rules, err := filepath.Abs(filepath.Join(deployDir, "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: streamer
    static_configs:
      - targets: [%q]
`, rules, o.p.http)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(promBin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	logs := &logBuf{}
	cmd.Stdout, cmd.Stderr = logWriter{logs}, logWriter{logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})

	api := "http://" + addr + "/api/v1/"
	query := func(q string) (status, errMsg string, result []promSample) {
		resp, err := http.Get(api + "query?query=" + url.QueryEscape(q))
		if err != nil {
			return "", err.Error(), nil
		}
		defer resp.Body.Close()
		var r struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []promSample `json:"result"`
			} `json:"data"`
		}
		body, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(body, &r); err != nil {
			return "", fmt.Sprintf("%v: %s", err, body), nil
		}
		return r.Status, r.Error, r.Data.Result
	}
	value := func(q string) (float64, bool) {
		status, _, res := query(q)
		if status != "success" || len(res) != 1 {
			return 0, false
		}
		v, err := strconv.ParseFloat(fmt.Sprint(res[0].Value[1]), 64)
		return v, err == nil
	}

	checks := []struct {
		q    string
		want float64
	}{
		{`up{job="streamer"}`, 1},
		{`streamer_events_consumed_total{job="streamer"}`, float64(o.consumed)},
		{`streamer_model_examples{job="streamer", model="mam"}`, float64(o.labelled)},
		{`sum(streamer_events_rejected_total{job="streamer"})`, float64(o.invalid)},
		{`streamer_events_scored_total{job="streamer", model="mam"}`, float64(o.consumed - o.invalid - o.unscored)},
	}
	waitFor(t, 15*time.Second, "prometheus to scrape the streamer", func() bool {
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("prometheus exited: %v", err)
		default:
		}
		for _, c := range checks {
			if v, ok := value(c.q); !ok || v != c.want {
				return false
			}
		}
		return true
	})
	for _, c := range checks {
		v, _ := value(c.q)
		t.Logf("%s = %v", c.q, v)
	}

	// Every alert rule loads and evaluates without error.
	waitFor(t, 10*time.Second, "the alert rules to be evaluated", func() bool {
		resp, err := http.Get(api + "rules")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var r struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name           string `json:"name"`
						Health         string `json:"health"`
						LastError      string `json:"lastError"`
						LastEvaluation string `json:"lastEvaluation"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&r) != nil || len(r.Data.Groups) == 0 {
			return false
		}
		n := 0
		for _, g := range r.Data.Groups {
			for _, rule := range g.Rules {
				if rule.Health == "err" {
					t.Fatalf("rule %s: %s", rule.Name, rule.LastError)
				}
				if rule.Health != "ok" {
					return false
				}
				n++
			}
		}
		return n >= 9
	})

	// The dashboard's expressions, with its variables at "all", are PromQL
	// this server accepts; the ones over metrics this stream has produced
	// return data.
	// Rates need two samples in their window: wait for three scrapes.
	waitFor(t, 10*time.Second, "three scrapes", func() bool {
		v, ok := value(`count_over_time(up{job="streamer"}[1m])`)
		return ok && v >= 3
	})
	vars := strings.NewReplacer("$__rate_interval", "1m", "$job", ".*", "$instance", ".*", "$model", ".*", "$rho", "0")
	_, exprs, _ := readDashboard(t)
	empty := 0
	for _, e := range exprs {
		q := vars.Replace(e)
		status, msg, res := query(q)
		if status != "success" {
			t.Errorf("dashboard query %s: %s %s", q, status, msg)
		}
		if len(res) == 0 {
			empty++
			t.Logf("no data: %s", q)
		}
	}
	t.Logf("%d dashboard queries valid, %d of them without data on this stream", len(exprs), empty)
	if empty > 6 { // the ordinal models, a rebalance annotation and a few more may be empty
		t.Errorf("%d of %d dashboard queries return no data", empty, len(exprs))
	}

	// Stop Prometheus cleanly.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Errorf("prometheus exit: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Error("prometheus did not stop within 15s of SIGTERM")
	}
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// logWriter appends a subprocess's output to a logBuf.
type logWriter struct{ l *logBuf }

func (w logWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	return w.l.b.Write(p)
}
