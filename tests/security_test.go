package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/testpki"
	"github.com/streamer/streamer/stream"
)

// The streamer binary against kfake with SASL (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512) and TLS: scores arrive over the secured connections; a
// wrong password or an untrusted certificate stops `streamer run` at once
// with a clear message; the password never shows in its output.

const securePassword = "s3cret-Pa55word-do-not-print"

func startSecureBroker(t *testing.T, cfg stream.BrokerConfig) *stream.Broker {
	t.Helper()
	cfg.Topics = []stream.TopicSpec{{Name: "events", Partitions: 2}, {Name: "scores", Partitions: 2}, {Name: "events.dlq", Partitions: 1}}
	b, err := stream.StartBrokerWith(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// secureConfig is a streamer config with kafkaSec (YAML under kafka:),
// httpExtra (under http:) and extra top-level YAML.
func secureConfig(kafkaSec, httpExtra, extra string) string {
	return `
kafka:
  brokers: [%BROKERS%]
  group: secure
  commit_interval: 200ms
` + kafkaSec + `
http:
  listen: "%HTTP%"
` + httpExtra + `
log:
  level: debug
models:
  - name: mam
    type: mam
    kernel: {type: linear}
    features: {dim: 2}
` + extra
}

// produceAndScore writes n labelled events with the given credentials and
// waits until the n scores are on the output topic; it checks each.
func produceAndScore(t *testing.T, b *stream.Broker, sec *stream.KafkaSecurity, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Topic: "events", Balancer: &kafka.Murmur2Balancer{},
		BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll, Transport: sec.Transport("security-test")}
	defer w.Close()
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		label := 2*(i%2) - 1
		msgs[i] = kafka.Message{Key: fmt.Appendf(nil, "user-%d", i%3),
			Value: eventJSON(fmt.Sprintf("e-%d", i), []float64{float64(label), 0.5}, &label)}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	// The scores of the two partitions, read in turns until all are in.
	var readers []*kafka.Reader
	for p := range 2 {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Addrs(), Topic: "scores", Partition: p,
			MaxWait: 100 * time.Millisecond, Dialer: sec.Dialer("security-test")})
		defer r.Close()
		readers = append(readers, r)
	}
	seen := map[string]bool{}
	for i := 0; len(seen) < n && ctx.Err() == nil; i++ {
		rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		m, err := readers[i%2].ReadMessage(rctx)
		rcancel()
		if errors.Is(err, context.DeadlineExceeded) {
			continue
		}
		if err != nil {
			t.Fatalf("read scores (%d of %d): %v", len(seen), n, err)
		}
		var rec outRecord
		if err := json.Unmarshal(m.Value, &rec); err != nil || rec.Model != "mam" || !strings.HasPrefix(rec.ID, "e-") {
			t.Fatalf("score record %s: %v", m.Value, err)
		}
		seen[rec.ID] = true
	}
	if len(seen) != n {
		t.Fatalf("%d of %d events scored", len(seen), n)
	}
}

func pprofStatus(t *testing.T, p *proc) int {
	t.Helper()
	resp, err := http.Get("http://" + p.http + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// stopClean stops the streamer, expects exit 0 and no password in its log.
func stopClean(t *testing.T, p *proc) {
	t.Helper()
	if err := p.stop(t); err != nil {
		t.Fatalf("streamer exit: %v", err)
	}
	if strings.Contains(p.logs.String(), securePassword) {
		t.Fatalf("the password shows in the streamer's log:\n%s", p.logs.String())
	}
}

func mustSecurity(t *testing.T, k config.Kafka) *stream.KafkaSecurity {
	t.Helper()
	sec, err := stream.NewKafkaSecurity(k)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

// TestSecureSASLPlainEnv: PLAIN without TLS, the password from
// STREAMER_KAFKA_SASL_PASSWORD; /debug/pprof/ is 404 by default.
func TestSecureSASLPlainEnv(t *testing.T) {
	b := startSecureBroker(t, stream.BrokerConfig{SASL: []stream.SASLUser{{Mechanism: config.SASLPlain, User: "carol", Password: securePassword}}})
	t.Setenv(config.EnvName("kafka.sasl.password"), securePassword)
	p := startStreamer(t, b, secureConfig("  sasl: {mechanism: plain, username: carol}", "", ""))
	produceAndScore(t, b, mustSecurity(t, config.Kafka{SASL: config.SASL{Mechanism: config.SASLPlain, Username: "carol", Password: securePassword}}), 20)
	if code := pprofStatus(t, p); code != http.StatusNotFound {
		t.Fatalf("GET /debug/pprof/ with http.pprof off: %d, want 404", code)
	}
	stopClean(t, p)
}

// TestSecureSCRAM256File: SCRAM-SHA-256, the password from password_file;
// http.pprof: true serves /debug/pprof/.
func TestSecureSCRAM256File(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	b := startSecureBroker(t, stream.BrokerConfig{SASL: []stream.SASLUser{{Mechanism: config.SASLScramSHA256, User: "alice", Password: securePassword}}})
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(securePassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startStreamer(t, b, secureConfig("  sasl: {mechanism: scram-sha-256, username: alice, password_file: "+pwFile+"}", "  pprof: true", ""))
	produceAndScore(t, b, mustSecurity(t, config.Kafka{SASL: config.SASL{Mechanism: config.SASLScramSHA256, Username: "alice", Password: securePassword}}), 20)
	if code := pprofStatus(t, p); code != http.StatusOK {
		t.Fatalf("GET /debug/pprof/ with http.pprof on: %d, want 200", code)
	}
	stopClean(t, p)
}

// TestSecureSCRAM512TLS: SCRAM-SHA-512 over TLS (the CA from ca_file), with
// the state in a changelog topic on the same secured broker.
func TestSecureSCRAM512TLS(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	pki := testpki.New(t)
	b := startSecureBroker(t, stream.BrokerConfig{TLS: pki.ServerTLS,
		SASL: []stream.SASLUser{{Mechanism: config.SASLScramSHA512, User: "bob", Password: securePassword}}})
	p := startStreamer(t, b, secureConfig(`  tls: {enabled: true, ca_file: `+pki.CAFile+`}
  sasl: {mechanism: scram-sha-512, username: bob, password: "`+securePassword+`"}`, "",
		"snapshot: {changelog_topic: streamer.state, every: 200ms}\n"))
	produceAndScore(t, b, mustSecurity(t, config.Kafka{TLS: config.TLS{Enabled: true, CAFile: pki.CAFile},
		SASL: config.SASL{Mechanism: config.SASLScramSHA512, Username: "bob", Password: securePassword}}), 20)
	waitFor(t, 10*time.Second, "a snapshot in the changelog", func() bool { return p.metric(t, "streamer_snapshots_total", "") > 0 })
	stopClean(t, p)
}

// TestSecureTLSOnly: TLS without SASL.
func TestSecureTLSOnly(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	pki := testpki.New(t)
	b := startSecureBroker(t, stream.BrokerConfig{TLS: pki.ServerTLS})
	p := startStreamer(t, b, secureConfig("  tls: {enabled: true, ca_file: "+pki.CAFile+"}", "", ""))
	produceAndScore(t, b, mustSecurity(t, config.Kafka{TLS: config.TLS{Enabled: true, CAFile: pki.CAFile}}), 20)
	stopClean(t, p)
}

// runFailing runs `streamer run` on cfgYAML and returns its exit code, its
// output and how long it ran; it fails the test after 20 s.
func runFailing(t *testing.T, b *stream.Broker, cfgYAML string) (int, string, time.Duration) {
	t.Helper()
	cfgYAML = strings.ReplaceAll(cfgYAML, "%BROKERS%", strings.Join(b.Addrs(), ","))
	cfgYAML = strings.ReplaceAll(cfgYAML, "%HTTP%", freeAddr(t))
	path := filepath.Join(t.TempDir(), "streamer.yaml")
	if err := os.WriteFile(path, []byte(cfgYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "--config", path)
	cmd.Env = os.Environ()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("streamer run did not exit within 20s; output:\n%s", out.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), took
}

// TestSecureWrongPassword: a wrong password stops `streamer run` with a
// non-zero exit and a message naming the mechanism and user, without
// retrying and without printing the password.
func TestSecureWrongPassword(t *testing.T) {
	b := startSecureBroker(t, stream.BrokerConfig{SASL: []stream.SASLUser{{Mechanism: config.SASLScramSHA256, User: "alice", Password: securePassword}}})
	const wrong = "wrong-" + securePassword
	code, out, took := runFailing(t, b, secureConfig(`  sasl: {mechanism: scram-sha-256, username: alice, password: "`+wrong+`"}`, "", ""))
	want := `streamer: kafka: SASL authentication failed (mechanism scram-sha-256, user "alice"): broker ` + b.Addrs()[0]
	if code == 0 || !strings.Contains(out, want) {
		t.Fatalf("exit %d, output:\n%s\nwant a non-zero exit and %q", code, out, want)
	}
	if took > 15*time.Second {
		t.Fatalf("took %v to fail", took)
	}
	if strings.Contains(out, wrong) || strings.Contains(out, securePassword) {
		t.Fatalf("the password shows in the output:\n%s", out)
	}
	t.Logf("exit %d after %v: %s", code, took.Round(time.Millisecond), strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]))
}

// TestSecureUntrustedCertificate: a broker certificate from a CA the
// streamer does not trust stops start-up the same way.
func TestSecureUntrustedCertificate(t *testing.T) {
	pki, other := testpki.New(t), testpki.New(t)
	b := startSecureBroker(t, stream.BrokerConfig{TLS: pki.ServerTLS})
	code, out, took := runFailing(t, b, secureConfig("  tls: {enabled: true, ca_file: "+other.CAFile+"}", "", ""))
	want := "streamer: kafka: TLS with broker " + b.Addrs()[0] + " failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"
	if code == 0 || !strings.Contains(out, want) || took > 15*time.Second {
		t.Fatalf("exit %d after %v, output:\n%s\nwant a non-zero exit and %q", code, took, out, want)
	}
}
