package tests

import (
	"bytes"
	"context"
	"crypto/tls"
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

	"gopkg.in/yaml.v3"

	"github.com/streamer/streamer/internal/testpki"
)

// The real binary serving http.listen over TLS (http.tls), with mutual TLS
// (client_ca_file) and bearer tokens (http.auth): what is refused, what
// passes, and the certificate and the tokens replaced without a restart.

const (
	httpToken      = "client-token-0123456789abcdef"
	httpTokenNew   = "rotated-token-0123456789abcdef"
	httpSecTimeout = 30 * time.Second
)

// httpSecConfig ranks with a global linear mam over two features; httpYAML
// goes under http: (indented two spaces).
func httpSecConfig(httpYAML string) string {
	return `
shutdown_timeout: 5s
kafka:
  brokers: [%BROKERS%]
  group: httpsec
  commit_interval: 200ms
http:
  listen: "%HTTP%"
` + httpYAML + `
log:
  level: debug
rank:
  model: mam
models:
  - name: mam
    type: mam
    kernel: {type: linear}
    features: {dim: 2}
`
}

// httpsFiles are a server certificate, its key and a tokens file in a
// directory of their own, as an operator would keep them.
type httpsFiles struct {
	pki                *testpki.PKI
	cert, key, tokens  string
	clientCA           string
	clientCert, wrongC tls.Certificate // signed by the client CA; by another CA
}

func newHTTPSFiles(t *testing.T, serial int64) *httpsFiles {
	t.Helper()
	dir := t.TempDir()
	f := &httpsFiles{pki: testpki.New(t), cert: filepath.Join(dir, "tls.crt"), key: filepath.Join(dir, "tls.key"), tokens: filepath.Join(dir, "tokens")}
	f.rotateCert(t, serial)
	replaceFile(t, f.tokens, "# clients of /v1/rank and Prometheus\n"+httpToken+"\n")
	clients, other := testpki.New(t), testpki.New(t)
	f.clientCA = clients.CAFile
	f.clientCert = x509Pair(t, clients, 50)
	f.wrongC = x509Pair(t, other, 51)
	return f
}

func x509Pair(t *testing.T, p *testpki.PKI, serial int64) tls.Certificate {
	t.Helper()
	c, k := p.Issue(t, testpki.Leaf{Serial: serial, Name: "rank-client", Client: true})
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// rotateCert writes a new server certificate with serial, and its key, over
// the files (each by a rename, as a Secret update or cert-manager does).
func (f *httpsFiles) rotateCert(t *testing.T, serial int64) {
	t.Helper()
	c, k := f.pki.Issue(t, testpki.Leaf{Serial: serial, Name: "streamer"})
	replaceFile(t, f.cert, string(c))
	replaceFile(t, f.key, string(k))
}

func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// client is an HTTPS client trusting the server's CA, presenting cert
// (nil: none), on a new connection for every request.
func (f *httpsFiles) client(cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: f.pki.Pool}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
}

// httpsResult is the answer to one request.
type httpsResult struct {
	code   int
	body   string
	header http.Header
	serial int64 // of the server's certificate
	err    error
}

func do(c *http.Client, method, url, token string, body []byte) httpsResult {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return httpsResult{err: err}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return httpsResult{err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := httpsResult{code: resp.StatusCode, body: string(b), header: resp.Header}
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		r.serial = resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	return r
}

// startHTTPS starts the streamer on cfg and waits until GET /readyz over
// HTTPS (with client's certificate) answers 200.
func startHTTPS(t *testing.T, cfg string, c *http.Client, token string) *proc {
	t.Helper()
	b := startBroker(t, 2)
	p := spawnStreamer(t, strings.Join(b.Addrs(), ","), cfg)
	waitFor(t, httpSecTimeout, "streamer ready over HTTPS", func() bool {
		select {
		case err := <-p.done:
			t.Fatalf("streamer exited: %v\n%s", err, p.logs.String())
		default:
		}
		return do(c, "GET", "https://"+p.http+"/readyz", token, nil).code == http.StatusOK
	})
	return p
}

// metricIn reads one sample of the exposition text body (-1 if absent).
func metricIn(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			x, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return x
			}
		}
	}
	return -1
}

func want401(t *testing.T, what string, r httpsResult) {
	t.Helper()
	if r.err != nil || r.code != http.StatusUnauthorized {
		t.Fatalf("%s: %d %v %s, want 401", what, r.code, r.err, r.body)
	}
	var body apiError
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || body.Error.Reason != "unauthorized" || body.Error.Detail == "" {
		t.Fatalf("%s: body %q, want {\"error\":{\"reason\":\"unauthorized\",\"detail\":…}}", what, r.body)
	}
	if ch := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, "Bearer") {
		t.Fatalf("%s: WWW-Authenticate %q", what, ch)
	}
}

// TestHTTPSTokens: HTTPS with bearer tokens, the default groups (rank and
// pprof protected; metrics and health open). POST /v1/rank is 401 with the
// JSON body without the token and 200 with it; plain HTTP gets no answer
// from an endpoint; a rotated certificate is served to new connections,
// after the change is noticed and at once on SIGHUP; a certificate whose key
// does not match keeps the old one; a rotated tokens file takes effect.
func TestHTTPSTokens(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	f := newHTTPSFiles(t, 20)
	c := f.client(nil)
	p := startHTTPS(t, httpSecConfig(fmt.Sprintf("  pprof: true\n  tls: {cert_file: %s, key_file: %s}\n  auth: {tokens_file: %s}", f.cert, f.key, f.tokens)), c, "")
	base := "https://" + p.http
	rankReq := rankRequestJSON("r-1", "u0", [][]float64{{1, 0}, {0, 1}}, 2)

	want401(t, "POST /v1/rank without a token", do(c, "POST", base+"/v1/rank", "", rankReq))
	want401(t, "POST /v1/rank with a wrong token", do(c, "POST", base+"/v1/rank", httpTokenNew, rankReq))
	want401(t, "GET /v1/rank without a token", do(c, "GET", base+"/v1/rank", "", nil))
	want401(t, "GET /debug/pprof/ without a token", do(c, "GET", base+"/debug/pprof/", "", nil))
	if r := do(c, "POST", base+"/v1/rank", httpToken, rankReq); r.code != http.StatusOK || !strings.Contains(r.body, `"ranked"`) {
		t.Fatalf("POST /v1/rank with the token: %d %v %s", r.code, r.err, r.body)
	}
	if r := do(c, "GET", base+"/debug/pprof/", httpToken, nil); r.code != http.StatusOK {
		t.Fatalf("GET /debug/pprof/ with the token: %d %v", r.code, r.err)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := do(c, "GET", base+path, "", nil); r.code != http.StatusOK || r.serial != 20 {
			t.Fatalf("GET %s without a token: %d %v, serial %d", path, r.code, r.err, r.serial)
		}
	}
	m := do(c, "GET", base+"/metrics", "", nil).body
	if v := metricIn(m, `streamer_http_auth_failures_total{group="rank"}`); v != 3 {
		t.Errorf("rank auth failures %v, want 3", v)
	}
	if v := metricIn(m, `streamer_http_auth_failures_total{group="pprof"}`); v != 1 {
		t.Errorf("pprof auth failures %v, want 1", v)
	}
	// Plain HTTP on the TLS port: no endpoint answers.
	if resp, err := http.Get("http://" + p.http + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP served /metrics")
		}
	}

	// The certificate renewed: served to new connections once noticed.
	f.rotateCert(t, 21)
	waitFor(t, 15*time.Second, "the renewed certificate (serial 21)", func() bool {
		return do(c, "GET", base+"/healthz", "", nil).serial == 21
	})
	// Renewed again, and SIGHUP: at once, well before the files are polled twice.
	f.rotateCert(t, 22)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 1500*time.Millisecond, "the certificate of SIGHUP (serial 22)", func() bool {
		return do(c, "GET", base+"/healthz", "", nil).serial == 22
	})
	// A certificate without its key: the old pair stays, the error is counted.
	bad, _ := f.pki.Issue(t, testpki.Leaf{Serial: 23, Name: "streamer"})
	replaceFile(t, f.cert, string(bad))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the failed reload counted", func() bool {
		return metricIn(do(c, "GET", base+"/metrics", "", nil).body, `streamer_http_reloads_total{file="certificate",result="error"}`) >= 1
	})
	if r := do(c, "GET", base+"/healthz", "", nil); r.code != http.StatusOK || r.serial != 22 {
		t.Fatalf("after a bad certificate: %d %v, serial %d; want 200 with serial 22", r.code, r.err, r.serial)
	}
	if !strings.Contains(p.logs.String(), "http.tls.key_file") {
		t.Errorf("the log does not name http.tls.key_file:\n%s", p.logs.String())
	}

	// The tokens rotated: the new one works, the old one no longer.
	replaceFile(t, f.tokens, httpTokenNew+"\n")
	waitFor(t, 15*time.Second, "the rotated tokens file", func() bool {
		return do(c, "POST", base+"/v1/rank", httpTokenNew, rankReq).code == http.StatusOK
	})
	want401(t, "POST /v1/rank with the old token", do(c, "POST", base+"/v1/rank", httpToken, rankReq))
	if strings.Contains(p.logs.String(), httpToken) || strings.Contains(p.logs.String(), httpTokenNew) {
		t.Fatal("a token shows in the log")
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("streamer exit: %v", err)
	}
}

// TestHTTPSMutualTLS: with client_ca_file a client without a certificate,
// or with one from another CA, is refused in the handshake; with one the
// CA signed, the tokens apply too (rank and metrics protected, health
// open).
func TestHTTPSMutualTLS(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	f := newHTTPSFiles(t, 30)
	c := f.client(&f.clientCert)
	p := startHTTPS(t, httpSecConfig(fmt.Sprintf("  tls: {cert_file: %s, key_file: %s, client_ca_file: %s}\n  auth: {tokens_file: %s, protect: [rank, metrics]}",
		f.cert, f.key, f.clientCA, f.tokens)), c, "")
	base := "https://" + p.http
	for name, cl := range map[string]*http.Client{"no client certificate": f.client(nil), "a certificate of another CA": f.client(&f.wrongC)} {
		r := do(cl, "GET", base+"/healthz", "", nil)
		if r.err == nil {
			t.Fatalf("%s: %d, want a failed handshake", name, r.code)
		}
		if !strings.Contains(r.err.Error(), "tls:") && !strings.Contains(r.err.Error(), "remote error") {
			t.Fatalf("%s: %v, want a TLS alert", name, r.err)
		}
		t.Logf("%s: %v", name, r.err)
	}
	rankReq := rankRequestJSON("r-1", "u0", [][]float64{{1, 0}, {0, 1}}, 1)
	want401(t, "POST /v1/rank with a certificate, without a token", do(c, "POST", base+"/v1/rank", "", rankReq))
	want401(t, "GET /metrics with a certificate, without a token", do(c, "GET", base+"/metrics", "", nil))
	if r := do(c, "POST", base+"/v1/rank", httpToken, rankReq); r.code != http.StatusOK || r.serial != 30 {
		t.Fatalf("POST /v1/rank with both: %d %v %s", r.code, r.err, r.body)
	}
	r := do(c, "GET", base+"/metrics", httpToken, nil)
	if r.code != http.StatusOK || metricIn(r.body, `streamer_http_auth_failures_total{group="metrics"}`) != 1 {
		t.Fatalf("GET /metrics with both: %d %v", r.code, r.err)
	}
	if r := do(c, "GET", base+"/healthz", "", nil); r.code != http.StatusOK {
		t.Fatalf("GET /healthz with a certificate: %d %v", r.code, r.err)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("streamer exit: %v", err)
	}
}

// TestHTTPSBadMaterial: bad TLS or token files stop `streamer run` at once
// with the key at fault, before it connects to any broker (there is none).
func TestHTTPSBadMaterial(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	f := newHTTPSFiles(t, 40)
	_, otherKey := f.pki.Issue(t, testpki.Leaf{Serial: 41, Name: "other"})
	keyFile := filepath.Join(t.TempDir(), "other.key")
	replaceFile(t, keyFile, string(otherKey))
	empty := filepath.Join(t.TempDir(), "tokens")
	replaceFile(t, empty, "# no tokens yet\n")
	for _, c := range []struct{ http, want string }{
		{fmt.Sprintf("  tls: {cert_file: %s, key_file: %s}", f.cert, keyFile),
			"config: http.tls.key_file: " + keyFile + " is not the private key of the certificate in http.tls.cert_file"},
		{fmt.Sprintf("  tls: {cert_file: %s, key_file: %s, client_ca_file: %s}", f.cert, f.key, f.tokens),
			"config: http.tls.client_ca_file: " + f.tokens + " holds no PEM certificate"},
		{fmt.Sprintf("  auth: {tokens_file: %s}", empty), "config: http.auth.tokens_file: " + empty + " holds no token"},
		{"  tls: {cert_file: x, key_file: y}\n  auth: {protect: [rank, root]}", `config: http.auth.protect[1]: "root" is not an endpoint group`},
	} {
		cfg := strings.ReplaceAll(strings.ReplaceAll(httpSecConfig(c.http), "%BROKERS%", "127.0.0.1:1"), "%HTTP%", freeAddr(t))
		path := filepath.Join(t.TempDir(), "streamer.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, binary, "run", "--config", path).CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || timedOut || !strings.Contains(string(out), c.want) {
			t.Errorf("exit %v, output:\n%s\nwant a non-zero exit and %q", err, out, c.want)
		}
		if strings.Contains(string(out), "127.0.0.1:1") {
			t.Errorf("it got as far as the brokers:\n%s", out)
		}
	}
}

// TestPrometheusScrapesOverTLS: a real Prometheus server scrapes the real
// streamer with the streamer job of deploy/prometheus/prometheus.yml (its
// scheme, bearer token file and tls_config: the CA and the server name),
// its files where the compose stack mounts them; /metrics is protected.
func TestPrometheusScrapesOverTLS(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not on PATH (Debian package prometheus): scrape test skipped")
	}
	pcfg := readYAML(t, filepath.Join(deployDir, "prometheus", "prometheus.yml"))
	var job map[string]any
	for _, j := range pcfg["scrape_configs"].([]any) {
		if str(dig(j, "job_name")) == "streamer" {
			job = j.(map[string]any)
		}
	}
	if job == nil {
		t.Fatal("prometheus.yml: no streamer job")
	}
	server := str(dig(job, "tls_config", "server_name"))
	f := newHTTPSFiles(t, 60)
	c, k := f.pki.Issue(t, testpki.Leaf{Serial: 61, Name: server, DNS: []string{server}})
	replaceFile(t, f.cert, string(c))
	replaceFile(t, f.key, string(k))
	const promToken = "prometheus-token-0123456789abcdef"
	replaceFile(t, f.tokens, "# prometheus\n"+promToken+"\n# clients\n"+httpToken+"\n")
	p := startHTTPS(t, httpSecConfig(fmt.Sprintf("  tls: {cert_file: %s, key_file: %s}\n  auth: {tokens_file: %s, protect: [rank, metrics]}", f.cert, f.key, f.tokens)), f.client(nil), "")

	// The job as deployed, on the test's streamer, every second.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(f.pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	for rel, content := range map[string]string{str(dig(job, "tls_config", "ca_file")): string(ca), str(dig(job, "authorization", "credentials_file")): promToken + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(content), 0o600); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
	}
	delete(job, "dns_sd_configs")
	job["static_configs"] = []any{map[string]any{"targets": []any{p.http}}}
	job["scrape_interval"] = "1s"
	out, err := yaml.Marshal(map[string]any{"scrape_configs": []any{job}})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, out, 0o644); err != nil {
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
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus config:\n%s\nprometheus log:\n%s", out, logs.String())
		}
	})
	query := func(q string) string {
		resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	waitFor(t, 20*time.Second, "prometheus to scrape the streamer over TLS with its token", func() bool {
		return strings.Contains(query(`up{job="streamer"} == 1 and on() streamer_http_tls_certificate_expiry_timestamp_seconds > 0`), `"value"`)
	})
	if got := query(`streamer_http_auth_failures_total{group="metrics"}`); !strings.Contains(got, `"0"]`) {
		t.Errorf("Prometheus's scrapes were refused: %s", got)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("streamer exit: %v", err)
	}
}
