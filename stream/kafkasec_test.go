package stream

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/testpki"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/snapshot"
)

func startSecureBroker(t *testing.T, cfg BrokerConfig) *Broker {
	t.Helper()
	b, err := StartBrokerWith(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func mustSecurity(t *testing.T, k config.Kafka) *KafkaSecurity {
	t.Helper()
	sec, err := NewKafkaSecurity(k)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

func TestKafkaSecurityOff(t *testing.T) {
	sec := mustSecurity(t, config.Default().Kafka)
	if sec != nil {
		t.Fatalf("security %+v with TLS and SASL off", sec)
	}
	d, tr := sec.Dialer("c"), sec.Transport("c")
	if d.TLS != nil || d.SASLMechanism != nil || tr.TLS != nil || tr.SASL != nil || d.ClientID != "c" || tr.ClientID != "c" {
		t.Fatalf("plain dialer %+v / transport %+v", d, tr)
	}
	if (PipelineConfig{ClientID: "x"}).dialer().ClientID != "x" {
		t.Fatal("PipelineConfig without a Dialer does not dial as its client id")
	}
	own := &kafka.Dialer{}
	if (PipelineConfig{Dialer: own}).dialer() != own {
		t.Fatal("PipelineConfig.Dialer not used")
	}
}

func TestKafkaSecurityBuild(t *testing.T) {
	pki := testpki.New(t)
	k := config.Default().Kafka
	k.TLS = config.TLS{Enabled: true, CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey, ServerName: "kafka.example"}
	k.SASL = config.SASL{Mechanism: config.SASLScramSHA512, Username: "alice", Password: "pw"}
	sec := mustSecurity(t, k)
	tc := sec.TLSConfig()
	if tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "kafka.example" || tc.MinVersion != tls.VersionTLS12 || tc.InsecureSkipVerify {
		t.Fatalf("tls config %+v", tc)
	}
	if m := sec.SASLMechanism(); m == nil || m.Name() != "SCRAM-SHA-512" {
		t.Fatalf("mechanism %v", m)
	}
	d, tr := sec.Dialer("c"), sec.Transport("c")
	if d.TLS != tc || d.SASLMechanism == nil || tr.TLS != tc || tr.SASL == nil {
		t.Fatal("dialer or transport without the security settings")
	}
	for mech, name := range map[string]string{config.SASLPlain: "PLAIN", config.SASLScramSHA256: "SCRAM-SHA-256"} {
		k := config.Default().Kafka
		k.SASL = config.SASL{Mechanism: mech, Username: "u", Password: "p"}
		if m := mustSecurity(t, k).SASLMechanism(); m.Name() != name || mustSecurity(t, k).TLSConfig() != nil {
			t.Fatalf("%s: mechanism %s", mech, m.Name())
		}
	}
}

func TestKafkaSecurityErrors(t *testing.T) {
	pki := testpki.New(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "Secret\u0007Pass" // a control character: SASLprep refuses it
	cases := []struct {
		name string
		k    func(*config.Kafka)
		want string
	}{
		{"ca not PEM", func(k *config.Kafka) { k.TLS = config.TLS{Enabled: true, CAFile: garbage} },
			"config: kafka.tls.ca_file: no PEM certificate in " + garbage},
		{"ca missing", func(k *config.Kafka) { k.TLS = config.TLS{Enabled: true, CAFile: filepath.Join(dir, "none.pem")} },
			"config: kafka.tls.ca_file: open " + filepath.Join(dir, "none.pem")},
		{"key of another cert", func(k *config.Kafka) {
			k.TLS = config.TLS{Enabled: true, CertFile: pki.ClientCert, KeyFile: garbage}
		}, "config: kafka.tls.cert_file: client certificate " + pki.ClientCert + " with key " + garbage},
		{"password SASLprep", func(k *config.Kafka) {
			k.SASL = config.SASL{Mechanism: config.SASLScramSHA256, Username: "alice", Password: secret}
		}, "config: kafka.sasl.password: not valid for SCRAM"},
		{"password file missing", func(k *config.Kafka) {
			k.SASL = config.SASL{Mechanism: config.SASLPlain, Username: "alice", PasswordFile: filepath.Join(dir, "nope")}
		}, "config: kafka.sasl.password_file: cannot read " + filepath.Join(dir, "nope")},
		{"mechanism", func(k *config.Kafka) { k.SASL = config.SASL{Mechanism: "gssapi", Username: "a", Password: secret} },
			`config: kafka.sasl.mechanism: unknown "gssapi" (one of plain, scram-sha-256, scram-sha-512)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := config.Default().Kafka
			tc.k(&k)
			_, err := NewKafkaSecurity(k)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want prefix %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "Secret") {
				t.Fatalf("error shows the password: %v", err)
			}
		})
	}
}

// TestCheckBrokers: a wrong password, an unknown user, a certificate from
// another CA and TLS against a plaintext listener fail at once with
// *KafkaAuthError; the right credentials pass; an unreachable broker or a
// listener that wants what the client does not offer is only a warning.
func TestCheckBrokers(t *testing.T) {
	pki := testpki.New(t)
	other := testpki.New(t)
	const pw = "correct horse battery staple"
	users := []SASLUser{{config.SASLScramSHA256, "alice", pw}, {config.SASLScramSHA512, "bob", pw}, {config.SASLPlain, "carol", pw}}
	saslTLS := startSecureBroker(t, BrokerConfig{SASL: users, TLS: pki.ServerTLS})
	plainBroker := startSecureBroker(t, BrokerConfig{})
	tlsOnly := startSecureBroker(t, BrokerConfig{TLS: pki.ServerTLS})
	saslOnly := startSecureBroker(t, BrokerConfig{SASL: users})
	mtlsConf := pki.ServerTLS.Clone()
	mtlsConf.ClientAuth, mtlsConf.ClientCAs = tls.RequireAndVerifyClientCert, pki.Pool
	adminCert, err := tls.LoadX509KeyPair(pki.ClientCert, pki.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	mtls := startSecureBroker(t, BrokerConfig{TLS: mtlsConf, SASL: users[:1],
		AdminTLS: &tls.Config{Certificates: []tls.Certificate{adminCert}, RootCAs: pki.Pool, MinVersion: tls.VersionTLS12}})

	tlsOn := config.TLS{Enabled: true, CAFile: pki.CAFile}
	cases := []struct {
		name    string
		b       *Broker
		tls     config.TLS
		sasl    config.SASL
		wantErr string // "" = nil
		warn    bool
	}{
		{"scram-sha-256", saslTLS, tlsOn, config.SASL{Mechanism: config.SASLScramSHA256, Username: "alice", Password: pw}, "", false},
		{"scram-sha-512", saslTLS, tlsOn, config.SASL{Mechanism: config.SASLScramSHA512, Username: "bob", Password: pw}, "", false},
		{"plain", saslTLS, tlsOn, config.SASL{Mechanism: config.SASLPlain, Username: "carol", Password: pw}, "", false},
		{"wrong password", saslTLS, tlsOn, config.SASL{Mechanism: config.SASLScramSHA256, Username: "alice", Password: "wrong-Pa55"},
			`kafka: SASL authentication failed (mechanism scram-sha-256, user "alice"): broker ` + saslTLS.Addrs()[0], false},
		{"wrong password plain", saslOnly, config.TLS{}, config.SASL{Mechanism: config.SASLPlain, Username: "carol", Password: "wrong-Pa55"},
			`kafka: SASL authentication failed (mechanism plain, user "carol")`, false},
		{"unknown user", saslTLS, tlsOn, config.SASL{Mechanism: config.SASLScramSHA512, Username: "mallory", Password: pw},
			`kafka: SASL authentication failed (mechanism scram-sha-512, user "mallory")`, false},
		{"wrong mechanism for user", saslOnly, config.TLS{}, config.SASL{Mechanism: config.SASLScramSHA512, Username: "alice", Password: pw},
			`kafka: SASL authentication failed (mechanism scram-sha-512, user "alice")`, false},
		{"tls ok", tlsOnly, tlsOn, config.SASL{}, "", false},
		{"client cert", mtls, config.TLS{Enabled: true, CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey},
			config.SASL{Mechanism: config.SASLScramSHA256, Username: "alice", Password: pw}, "", false},
		{"no client cert", mtls, tlsOn, config.SASL{Mechanism: config.SASLScramSHA256, Username: "alice", Password: pw},
			"kafka: TLS with broker " + mtls.Addrs()[0] + " failed: ", false},
		{"client cert of another CA", mtls, config.TLS{Enabled: true, CAFile: pki.CAFile, CertFile: other.ClientCert, KeyFile: other.ClientKey},
			config.SASL{Mechanism: config.SASLScramSHA256, Username: "alice", Password: pw}, "kafka: TLS with broker " + mtls.Addrs()[0] + " failed: ", false},
		{"other CA", tlsOnly, config.TLS{Enabled: true, CAFile: other.CAFile}, config.SASL{},
			"kafka: TLS with broker " + tlsOnly.Addrs()[0] + " failed: tls: failed to verify certificate", false},
		{"wrong server name", tlsOnly, config.TLS{Enabled: true, CAFile: pki.CAFile, ServerName: "kafka.example"}, config.SASL{},
			"kafka: TLS with broker " + tlsOnly.Addrs()[0] + " failed: tls: failed to verify certificate", false},
		// kfake waits for the rest of a "request" as long as the TLS
		// ClientHello says (a real broker closes at once: fatal).
		{"tls to plaintext", plainBroker, tlsOn, config.SASL{}, "", true},
		{"insecure skip verify", tlsOnly, config.TLS{Enabled: true, InsecureSkipVerify: true}, config.SASL{}, "", false},
		{"plaintext to tls", tlsOnly, config.TLS{}, config.SASL{}, "", true},
		{"no sasl to sasl", saslOnly, config.TLS{}, config.SASL{}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := config.Default().Kafka
			k.TLS, k.SASL = tc.tls, tc.sasl
			sec := mustSecurity(t, k)
			var logs bytes.Buffer
			start := time.Now()
			timeout := 5 * time.Second
			if tc.warn {
				timeout = time.Second // nothing to wait for
			}
			_, err := sec.CheckBrokers(context.Background(), tc.b.Addrs(), "test", timeout, slog.New(slog.NewTextHandler(&logs, nil)))
			took := time.Since(start)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want prefix %s", err, tc.wantErr)
			}
			if err != nil {
				t.Log(err)
				if _, ok := errors.AsType[*KafkaAuthError](err); !ok {
					t.Fatalf("%v is not a *KafkaAuthError", err)
				}
				if took > 2*time.Second {
					t.Fatalf("failing took %v; a refused credential must fail at once", took)
				}
			}
			if got := strings.Contains(logs.String(), "no broker answered"); got != tc.warn {
				t.Fatalf("warning logged: %v, want %v; logs:\n%s", got, tc.warn, logs.String())
			}
			if strings.Contains(logs.String()+errString(err), pw) {
				t.Fatal("the password shows in the error or the logs")
			}
		})
	}

	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		var logs bytes.Buffer
		start := time.Now()
		if _, err := (*KafkaSecurity)(nil).CheckBrokers(context.Background(), []string{addr}, "test", 5*time.Second, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatalf("unreachable broker is fatal: %v", err)
		}
		if time.Since(start) > 2*time.Second || !strings.Contains(logs.String(), "no broker answered") {
			t.Fatalf("took %v; logs %s", time.Since(start), logs.String())
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestSecurePublisherAndChangelog: the publisher (Transport) and the
// changelog store (WithDialer: writer, admin client and leader reader) work
// against a broker that requires SCRAM over TLS, and a reader with the
// Dialer reads what was published.
func TestSecurePublisherAndChangelog(t *testing.T) {
	pki := testpki.New(t)
	const pw = "s3cret"
	b := startSecureBroker(t, BrokerConfig{
		Topics: []TopicSpec{{Name: "scores", Partitions: 2}},
		SASL:   []SASLUser{{config.SASLScramSHA512, "svc", pw}},
		TLS:    pki.ServerTLS,
	})
	k := config.Default().Kafka
	k.TLS = config.TLS{Enabled: true, CAFile: pki.CAFile}
	k.SASL = config.SASL{Mechanism: config.SASLScramSHA512, Username: "svc", Password: pw}
	sec := mustSecurity(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	pub := NewPublisher(PublisherConfig{Brokers: b.Addrs(), ClientID: "t", BatchSize: 10, BatchTimeout: time.Millisecond,
		BatchBytes: 1 << 20, RequiredAcks: kafka.RequireAll, Transport: sec.Transport("t")}, nil, nil, nil)
	for i := range 5 {
		pub.Publish(kafka.Message{Topic: "scores", Key: []byte{byte('a' + i)}, Value: []byte{byte('0' + i)}})
	}
	if err := pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := 0
	for p := range 2 {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Addrs(), Topic: "scores", Partition: p, Dialer: sec.Dialer("t"), MaxWait: 100 * time.Millisecond})
		conn, err := sec.Dialer("t").DialLeader(ctx, "tcp", b.Addrs()[0], "scores", p)
		if err != nil {
			t.Fatal(err)
		}
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		for range last {
			if _, err := r.ReadMessage(ctx); err != nil {
				t.Fatal(err)
			}
			got++
		}
		r.Close()
	}
	if got != 5 {
		t.Fatalf("read %d of 5 published records", got)
	}

	st := snapshot.NewChangelogStore(b.Addrs(), "state", "t", sec.ChangelogOption("t"))
	defer st.Close()
	if err := st.EnsureTopic(ctx); err != nil {
		t.Fatal(err)
	}
	snap := &snapshot.Snapshot{Seq: 1, CreatedAt: time.Unix(1, 0).UTC(), Fingerprint: "f",
		Offsets: []snapshot.Offset{{Topic: "events", Partition: 0, Offset: 7}},
		Models:  []snapshot.Model{{Name: "m", Type: "mam", Fingerprint: "mf", Data: []byte("state")}}}
	if err := st.Save(ctx, snap); err != nil {
		t.Fatal(err)
	}
	fresh := snapshot.NewChangelogStore(b.Addrs(), "state", "t2", sec.ChangelogOption("t2"))
	defer fresh.Close()
	loaded, _, err := fresh.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Seq != 1 || string(loaded.Models[0].Data) != "state" || loaded.Offsets[0].Offset != 7 {
		t.Fatalf("loaded %+v", loaded)
	}

	// The same store without credentials cannot reach the topic.
	anon := snapshot.NewChangelogStore(b.Addrs(), "state", "anon")
	defer anon.Close()
	actx, acancel := context.WithTimeout(ctx, 2*time.Second)
	defer acancel()
	if err := anon.EnsureTopic(actx); err == nil {
		t.Fatal("a client without TLS and SASL reached the secured broker")
	}
}

// TestHTTPServerSettings: timeouts from the config, and /debug/pprof/ only
// when http.pprof is true.
func TestHTTPServerSettings(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String() // no broker: start-up only warns
	ln.Close()
	for _, on := range []bool{false, true} {
		cfg := config.Default()
		cfg.Kafka.Brokers = []string{dead}
		cfg.HTTP.Listen = "127.0.0.1:0"
		cfg.HTTP.PProf = on
		cfg.HTTP.ReadTimeout, cfg.HTTP.WriteTimeout, cfg.HTTP.IdleTimeout = 3*time.Second, 7*time.Second, 11*time.Second
		p := online.DefaultMAMParams()
		cfg.Models = []config.Model{{Name: "m", Type: online.MAMName, Features: config.Features{Dim: 2}, Params: &p}}
		if err := cfg.Validate(testTypes); err != nil {
			t.Fatal(err)
		}
		s, err := NewService(context.Background(), cfg, testTypes, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := s.srv
		if srv.ReadTimeout != 3*time.Second || srv.WriteTimeout != 7*time.Second || srv.IdleTimeout != 11*time.Second ||
			srv.ReadHeaderTimeout != 3*time.Second {
			t.Fatalf("server timeouts %v %v %v %v", srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.ReadHeaderTimeout)
		}
		for path, wantOn := range map[string]int{"/debug/pprof/": 200, "/debug/pprof/cmdline": 200, "/debug/pprof/heap": 200, "/metrics": 200} {
			rec := httptest.NewRecorder()
			srv.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			want := wantOn
			if !on && strings.HasPrefix(path, "/debug/") {
				want = http.StatusNotFound
			}
			if rec.Code != want {
				t.Errorf("pprof %v: GET %s = %d, want %d", on, path, rec.Code, want)
			}
		}
		// Any other path: a 404 with the API's JSON error body naming the
		// endpoints; another method than GET or HEAD on /metrics, /healthz,
		// /readyz: a 405 with one; each counted.
		refused := func(code string) float64 {
			reason := map[string]string{"404": "not_found", "405": "method_not_allowed"}[code]
			return counterValue(t, s.httpRefused, code, reason)
		}
		before := refused("404")
		for i, path := range []string{"/v1/ranks", "/", "/v1/rank/extra", "/x/" + strings.Repeat("y", 500)} {
			rec := httptest.NewRecorder()
			srv.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			var body rankErrorBody
			if rec.Code != http.StatusNotFound || rec.Header().Get("Content-Type") != "application/json" ||
				json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error.Reason != "not_found" ||
				!strings.Contains(body.Error.Detail, "POST /v1/rank") || len(body.Error.Detail) > 600 {
				t.Errorf("GET %.40s: %d %v %s, want 404, a JSON body, not_found, naming the endpoints", path, rec.Code, rec.Header(), rec.Body)
			}
			if got := refused("404"); got != before+float64(i+1) {
				t.Errorf("after GET %.40s streamer_http_refused_total{code=404} = %v, want %v", path, got, before+float64(i+1))
			}
		}
		for i, c := range []struct{ method, path string }{{"DELETE", "/metrics"}, {"POST", "/healthz"}, {"PUT", "/readyz"}, {"FOO", "/metrics"}} {
			rec := httptest.NewRecorder()
			srv.Handler.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
			var body rankErrorBody
			if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" ||
				json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error.Reason != "method_not_allowed" {
				t.Errorf("%s %s: %d %v %s, want 405, Allow: GET, HEAD, method_not_allowed", c.method, c.path, rec.Code, rec.Header(), rec.Body)
			}
			if got := refused("405"); got != float64(i+1) {
				t.Errorf("after %s %s streamer_http_refused_total{code=405} = %v, want %d", c.method, c.path, got, i+1)
			}
		}
		for _, m := range []string{"GET", "HEAD"} {
			rec := httptest.NewRecorder()
			srv.Handler.ServeHTTP(rec, httptest.NewRequest(m, "/healthz", nil))
			if rec.Code != 200 {
				t.Errorf("%s /healthz: %d", m, rec.Code)
			}
		}
		_ = s.pub.Close(context.Background())
		_ = s.ln.Close()
	}
}
