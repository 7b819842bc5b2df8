package stream

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/testpki"
)

const (
	tokenA = "token-a-0123456789abcdef"
	tokenB = "token-b-0123456789abcdef"
)

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestEndpointGroup(t *testing.T) {
	for p, want := range map[string]string{
		"/v1/rank": "rank", "/v1/": "rank", "/v1": "rank", "//v1/rank": "rank", "/x/../v1/rank": "rank", "/v1/other": "rank",
		"/metrics": "metrics", "/metrics/": "metrics", "/./metrics": "metrics", "/debug/../metrics": "metrics",
		"/debug/pprof/": "pprof", "/debug/pprof/profile": "pprof", "/debug/pprof": "pprof", "/debug//pprof/heap": "pprof",
		"/healthz": "health", "/readyz": "health",
		"/v1/models": "admin", "/v1/models/": "admin", "/v1/models/m/rollback": "admin", "//v1/models/m/rollback": "admin",
		"/v1/x/../models/m/rollback": "admin", "/v1/modelsx": "rank",
		"/": "", "": "", "/v1x": "", "/metricsz": "", "/Metrics": "",
	} {
		if got := endpointGroup(p); got != want {
			t.Errorf("endpointGroup(%q) = %q, want %q", p, got, want)
		}
	}
}

// TestHTTPGuard: the protected groups answer 401 with a JSON body and a
// Bearer challenge without one of the tokens, the others pass; failures
// are counted per group; a changed tokens file takes effect.
func TestHTTPGuard(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	writeTestFile(t, tokens, "# the one token\n"+tokenA+"\n")
	reg := prometheus.NewRegistry()
	s, err := newHTTPSec(config.HTTP{Listen: "127.0.0.1:0", Auth: config.HTTPAuth{TokensFile: tokens, Protect: []string{"rank", "metrics"}}}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := s.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "served") }))
	do := func(path, auth string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", path, nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, c := range []struct {
		path, auth string
		code       int
		detail     string
	}{
		{"/v1/rank", "", 401, "no Authorization header"},
		{"/v1/rank", "Bearer " + tokenB, 401, "the bearer token is not one of http.auth.tokens_file"},
		{"/v1/rank", "Bearer " + tokenA[:len(tokenA)-1], 401, "not one of"},
		{"/v1/rank", "Basic " + tokenA, 401, "not a bearer token"},
		{"/v1/rank", tokenA, 401, "not a bearer token"},
		{"/v1/rank", "Bearer " + tokenA, 200, ""},
		{"/v1/rank", "bearer  " + tokenA + " ", 200, ""},
		{"//v1/rank", "", 401, "no Authorization header"},
		{"/metrics", "", 401, "no Authorization header"},
		{"/metrics", "Bearer " + tokenA, 200, ""},
		{"/healthz", "", 200, ""},
		{"/readyz", "Bearer wrong-token-0123456789", 200, ""},
		{"/debug/pprof/", "", 200, ""},
	} {
		w := do(c.path, c.auth)
		if w.Code != c.code {
			t.Errorf("%s %q: %d, want %d", c.path, c.auth, w.Code, c.code)
			continue
		}
		if c.code != 401 {
			continue
		}
		var body rankErrorBody
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error.Reason != "unauthorized" || !strings.Contains(body.Error.Detail, c.detail) {
			t.Errorf("%s %q: body %s, want error unauthorized, detail %q", c.path, c.auth, w.Body, c.detail)
		}
		if ch := w.Header().Get("WWW-Authenticate"); !strings.HasPrefix(ch, `Bearer realm="streamer"`) || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: headers %v", c.path, w.Header())
		}
		if strings.Contains(w.Body.String(), tokenA) {
			t.Errorf("the body shows the token: %s", w.Body)
		}
		if strings.Contains(w.Body.String(), `\u003c`) || c.detail == "no Authorization header" && !strings.Contains(w.Body.String(), "Bearer <token>") {
			t.Errorf("%s: the body escapes the detail's <token> for HTML: %s", c.path, w.Body)
		}
	}
	if got := testutil.ToFloat64(s.failures.WithLabelValues("rank")); got != 6 {
		t.Errorf("rank failures %v, want 6", got)
	}
	if got := testutil.ToFloat64(s.failures.WithLabelValues("metrics")); got != 1 {
		t.Errorf("metrics failures %v, want 1", got)
	}

	// A new tokens file: read once the change held for one look.
	writeTestFile(t, tokens, tokenB+"\n\n# rotated\n")
	s.check(false)
	if do("/v1/rank", "Bearer "+tokenB).Code != 401 {
		t.Fatal("read before the change held")
	}
	s.check(false)
	if do("/v1/rank", "Bearer "+tokenB).Code != 200 || do("/v1/rank", "Bearer "+tokenA).Code != 401 {
		t.Fatal("the rotated tokens file is not in use")
	}
	// A bad one keeps the previous tokens, counted.
	writeTestFile(t, tokens, "# none\n")
	s.check(true)
	if do("/v1/rank", "Bearer "+tokenB).Code != 200 {
		t.Fatal("an empty tokens file replaced the tokens")
	}
	if e, ok := testutil.ToFloat64(s.reloads.WithLabelValues("tokens", "error")), testutil.ToFloat64(s.reloads.WithLabelValues("tokens", "ok")); e != 1 || ok != 1 {
		t.Errorf("reloads: %v error, %v ok; want 1, 1", e, ok)
	}
}

// TestHTTPReloadCertificate: a new certificate goes to new connections
// after a reload; a key that does not match keeps the old one.
func TestHTTPReloadCertificate(t *testing.T) {
	pki := testpki.New(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(serial int64) {
		c, k := pki.Issue(t, testpki.Leaf{Serial: serial, Name: "streamer"})
		writeTestFile(t, certFile, string(c))
		writeTestFile(t, keyFile, string(k))
	}
	write(100)
	s, err := newHTTPSec(config.HTTP{Listen: "127.0.0.1:0", TLS: config.HTTPTLS{CertFile: certFile, KeyFile: keyFile}}, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), TLSConfig: s.serverTLS(), ErrorLog: errorLog(s.log)}
	go srv.ServeTLS(ln, "", "")
	defer srv.Close()
	served := func() int64 {
		t.Helper()
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pki.Pool, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		st := conn.ConnectionState()
		if st.Version < tls.VersionTLS12 {
			t.Fatalf("TLS version %x", st.Version)
		}
		return st.PeerCertificates[0].SerialNumber.Int64()
	}
	if got := served(); got != 100 {
		t.Fatalf("serial %d, want 100", got)
	}
	if _, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pki.Pool, MaxVersion: tls.VersionTLS11}); err == nil {
		t.Fatal("TLS 1.1 accepted")
	}
	write(101)
	s.check(true)
	if got := served(); got != 101 {
		t.Fatalf("serial %d after the reload, want 101", got)
	}
	if exp := testutil.ToFloat64(s.expiry); exp < float64(time.Now().Unix()) {
		t.Errorf("expiry %v", exp)
	}
	// Only the certificate replaced: its key is the old one's.
	c, _ := pki.Issue(t, testpki.Leaf{Serial: 102, Name: "streamer"})
	writeTestFile(t, certFile, string(c))
	s.check(true)
	if got := served(); got != 101 {
		t.Fatalf("serial %d after a bad reload, want 101 still", got)
	}
	if e := testutil.ToFloat64(s.reloads.WithLabelValues("certificate", "error")); e != 1 {
		t.Errorf("certificate reload errors %v, want 1", e)
	}
}
