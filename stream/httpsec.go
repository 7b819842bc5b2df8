package stream

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/config"
)

// The security of http.listen (the http.tls and http.auth keys): HTTPS,
// mutual TLS, bearer tokens per endpoint group, and the reload of their
// files without a restart.
//
// Metrics:
//
//	streamer_http_auth_failures_total{group}                 requests of a protected group refused (401)
//	streamer_http_reloads_total{file, result}                reads of the files after start-up: file certificate |
//	                                                         client_ca | tokens, result ok | error (the previous
//	                                                         content stays in use)
//	streamer_http_tls_certificate_expiry_timestamp_seconds   when the certificate served expires (Unix time)

// httpReloadEvery is how often the files of http.tls and http.auth are
// looked at (modification time and size); a change is read once it has
// held for one more look, so that a certificate and its key replaced one
// after the other are read together.
const httpReloadEvery = 2 * time.Second

// WithReloadSignal reloads the files of http.tls and http.auth at once on
// every value received on c (cmd/streamer passes SIGHUP), whether or not
// they changed. Without it they are still reloaded when they change.
func WithReloadSignal(c <-chan os.Signal) Option {
	return func(o *options) { o.reload = c }
}

// httpSec guards http.listen. newHTTPSec reads its files (an error stops
// start-up, naming the key); its reload loop (start, stop) reads them again
// when they change and on the reload signal. A file that does not load
// then leaves the previous content in use: the error is logged and counted.
type httpSec struct {
	cfg     config.HTTP
	log     *slog.Logger
	protect map[string]bool // the groups that need a token; empty without http.auth.tokens_file

	conf   atomic.Pointer[tls.Config] // what a new connection gets; nil: plain HTTP
	tokens atomic.Pointer[[]tokenSum]

	// Owned by the reload loop once started.
	cert  *tls.Certificate
	pool  *x509.CertPool
	files []*watched

	failures *prometheus.CounterVec
	reloads  *prometheus.CounterVec
	expiry   prometheus.Gauge

	stopc, donec chan struct{}
}

// tokenSum is the SHA-256 of a token: only these are kept, and a presented
// token is compared by its sum, so that the comparison takes the same time
// whatever the token's length.
type tokenSum [sha256.Size]byte

// watched is files read together (a certificate and its key) and what
// they were when last read.
type watched struct {
	name    string // the file label: certificate, client_ca, tokens
	paths   []string
	seen    []stamp // when last read
	pending []stamp // a change waiting to hold for one more look
	load    func() error
}

type stamp struct {
	mod  time.Time
	size int64
	err  string
}

func stamps(paths []string) []stamp {
	out := make([]stamp, len(paths))
	for i, p := range paths {
		fi, err := os.Stat(p) // follows symbolic links: a Kubernetes Secret's ..data swap is a change
		if err != nil {
			out[i].err = err.Error()
			continue
		}
		out[i] = stamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return out
}

// newHTTPSec reads the files of cfg and registers the metrics on reg (nil:
// none); log nil logs nothing.
func newHTTPSec(cfg config.HTTP, reg prometheus.Registerer, log *slog.Logger) (*httpSec, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &httpSec{cfg: cfg, log: log, protect: map[string]bool{},
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamer_http_auth_failures_total",
			Help: "Requests to a protected endpoint group (http.auth.protect) refused with 401: no bearer token, or not one of http.auth.tokens_file."}, []string{"group"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamer_http_reloads_total",
			Help: "Reads of the files of http.tls and http.auth after start-up (on a change or SIGHUP); result error: the previous content stays in use."}, []string{"file", "result"}),
		expiry: prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamer_http_tls_certificate_expiry_timestamp_seconds",
			Help: "When the certificate served on http.listen expires (Unix time); 0 without http.tls."}),
	}
	if t := cfg.TLS; t.Enabled() {
		s.files = append(s.files, &watched{name: "certificate", paths: []string{t.CertFile, t.KeyFile}, load: s.loadCert})
		if t.ClientCAFile != "" {
			s.files = append(s.files, &watched{name: "client_ca", paths: []string{t.ClientCAFile}, load: s.loadClientCAs})
		}
	}
	if cfg.Auth.Enabled() {
		for _, g := range cfg.Auth.Protect {
			s.protect[g] = true
			s.failures.WithLabelValues(g)
		}
		s.files = append(s.files, &watched{name: "tokens", paths: []string{cfg.Auth.TokensFile}, load: s.loadTokens})
	}
	for _, w := range s.files {
		w.seen = stamps(w.paths)
		if err := w.load(); err != nil {
			return nil, err
		}
		for _, r := range []string{"ok", "error"} {
			s.reloads.WithLabelValues(w.name, r)
		}
	}
	s.publishTLS()
	if reg != nil {
		reg.MustRegister(s.failures, s.reloads, s.expiry)
	}
	s.announce()
	return s, nil
}

func (s *httpSec) loadCert() error {
	pair, err := config.LoadHTTPCertificate(s.cfg.TLS.CertFile, s.cfg.TLS.KeyFile)
	if err != nil {
		return err
	}
	s.cert = &pair
	s.expiry.Set(float64(pair.Leaf.NotAfter.Unix()))
	return nil
}

func (s *httpSec) loadClientCAs() error {
	pool, err := config.LoadClientCAs(s.cfg.TLS.ClientCAFile)
	if err != nil {
		return err
	}
	s.pool = pool
	return nil
}

func (s *httpSec) loadTokens() error {
	toks, err := config.LoadTokens(s.cfg.Auth.TokensFile)
	if err != nil {
		return err
	}
	sums := make([]tokenSum, len(toks))
	for i, t := range toks {
		sums[i] = sha256.Sum256([]byte(t.Reveal()))
	}
	s.tokens.Store(&sums)
	return nil
}

// publishTLS makes the current certificate and client CAs what new
// connections get.
func (s *httpSec) publishTLS() {
	if s.cert == nil {
		return
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*s.cert}, NextProtos: []string{"h2", "http/1.1"}}
	if s.pool != nil {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, s.pool
	}
	s.conf.Store(c)
}

// serverTLS is the http.Server's TLS configuration, nil for plain HTTP:
// each handshake gets the configuration current at that moment.
func (s *httpSec) serverTLS() *tls.Config {
	if s.conf.Load() == nil {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.conf.Load(), nil }}
}

// start runs the reload loop until stop. reload (nil: none) forces a
// reload of every file.
func (s *httpSec) start(reload <-chan os.Signal) {
	if len(s.files) == 0 && reload == nil {
		return
	}
	s.stopc, s.donec = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.donec)
		t := time.NewTicker(httpReloadEvery)
		defer t.Stop()
		for {
			select {
			case <-s.stopc:
				return
			case <-t.C:
				s.check(false)
			case sig := <-reload:
				if len(s.files) == 0 {
					s.log.Info("http: nothing to reload (no http.tls, no http.auth.tokens_file)", "signal", sig.String())
				}
				s.check(true)
			}
		}
	}()
}

// stop ends the reload loop and waits for it.
func (s *httpSec) stop() {
	if s == nil || s.stopc == nil {
		return
	}
	close(s.stopc)
	<-s.donec
	s.stopc = nil
}

// check reads again the files that changed (all of them if force).
func (s *httpSec) check(force bool) {
	for _, w := range s.files {
		now := stamps(w.paths)
		switch {
		case force:
		case slices.Equal(now, w.seen):
			w.pending = nil
			continue
		case !slices.Equal(now, w.pending): // changed: read once it holds
			w.pending = now
			continue
		}
		w.seen, w.pending = now, nil
		if err := w.load(); err != nil {
			s.reloads.WithLabelValues(w.name, "error").Inc()
			s.log.Error("http: keeping the previous "+w.name+": the new one does not load", "err", err)
			continue
		}
		s.reloads.WithLabelValues(w.name, "ok").Inc()
		attrs := []any{"file", w.name, "paths", w.paths}
		if w.name == "certificate" {
			attrs = append(attrs, "serial", s.cert.Leaf.SerialNumber.String(), "not_after", s.cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		s.log.Info("http: reloaded", attrs...)
		s.publishTLS()
	}
}

// guard answers 401 to the requests of a protected group without one of
// the tokens, and passes the others to next.
func (s *httpSec) guard(next http.Handler) http.Handler {
	if len(s.protect) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := endpointGroup(r.URL.Path)
		if !s.protect[g] {
			next.ServeHTTP(w, r)
			return
		}
		detail, challenge := s.authorize(r)
		if detail == "" {
			next.ServeHTTP(w, r)
			return
		}
		s.failures.WithLabelValues(g).Inc()
		s.log.Debug("http: unauthorized", "group", g, "path", r.URL.Path, "remote", r.RemoteAddr, "why", detail)
		h := w.Header()
		h.Set("WWW-Authenticate", challenge)
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusUnauthorized)
		// The body of every error of the API (rankhttp.go).
		_, _ = w.Write(errorJSON("unauthorized", detail))
	})
}

// authorize returns "" when r carries one of the tokens; else why not,
// and the WWW-Authenticate challenge (RFC 6750).
func (s *httpSec) authorize(r *http.Request) (detail, challenge string) {
	const realm = `Bearer realm="streamer"`
	h := r.Header.Get("Authorization")
	if h == "" {
		return "no Authorization header: send Authorization: Bearer <token>", realm
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "the Authorization header is not a bearer token: send Authorization: Bearer <token>", realm + `, error="invalid_request"`
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	match := 0
	for _, t := range *s.tokens.Load() { // every token, whatever matched
		match |= subtle.ConstantTimeCompare(sum[:], t[:])
	}
	if match != 1 {
		return "the bearer token is not one of http.auth.tokens_file", realm + `, error="invalid_token"`
	}
	return "", ""
}

// endpointGroup is the group of http.auth.protect a request path belongs
// to ("" = none), by the cleaned path, so that no spelling of a path the
// mux routes to a protected handler escapes it.
func endpointGroup(p string) string {
	c := path.Clean("/" + p)
	switch {
	case c == "/v1/models" || strings.HasPrefix(c, "/v1/models/"):
		return config.GroupAdmin
	case c == "/v1" || strings.HasPrefix(c, "/v1/"):
		return config.GroupRank
	case c == "/metrics":
		return config.GroupMetrics
	case c == "/debug/pprof" || strings.HasPrefix(c, "/debug/pprof/"):
		return config.GroupPProf
	case c == "/healthz" || c == "/readyz":
		return config.GroupHealth
	}
	return ""
}

// announce says at start-up how http.listen is served, with a warning for
// what is open to whoever reaches an address beyond loopback.
func (s *httpSec) announce() {
	var protect []string
	if s.cfg.Auth.Enabled() {
		protect = s.cfg.Auth.Protect
	}
	attrs := []any{"listen", s.cfg.Listen, "tls", s.cfg.TLS.Enabled(), "client_certificates", s.cfg.TLS.ClientCAFile != "", "token_groups", protect}
	if s.cert != nil {
		attrs = append(attrs, "serial", s.cert.Leaf.SerialNumber.String(), "not_after", s.cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	s.log.Info("http endpoints", attrs...)
	host, _, _ := net.SplitHostPort(s.cfg.Listen)
	ip := net.ParseIP(host)
	if host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return
	}
	switch {
	case !s.cfg.Auth.Enabled():
		s.log.Warn("http: no http.auth.tokens_file: POST /v1/rank, /metrics (and /debug/pprof/ when on) answer whoever reaches http.listen", "listen", s.cfg.Listen)
	case !s.cfg.TLS.Enabled():
		s.log.Warn("http: http.auth without http.tls: bearer tokens cross the network in clear text", "listen", s.cfg.Listen)
	}
}

// errorLog is the http.Server's log: failed TLS handshakes (scanners,
// clients without a certificate) at debug, the rest as warnings.
func errorLog(l *slog.Logger) *log.Logger {
	return log.New(logFunc(func(msg string) {
		level := slog.LevelWarn
		if strings.Contains(msg, "TLS handshake error") {
			level = slog.LevelDebug
		}
		l.Log(context.Background(), level, "http server: "+msg)
	}), "", 0)
}

type logFunc func(string)

func (f logFunc) Write(p []byte) (int, error) {
	f(strings.TrimSpace(string(p)))
	return len(p), nil
}
