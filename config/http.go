package config

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// HTTPTLS is the http.tls section: HTTPS on http.listen. The files are read
// at start-up and read again, without a restart, when they change (and on
// SIGHUP): a renewed certificate is served to new connections.
type HTTPTLS struct {
	CertFile string `yaml:"cert_file"` // PEM certificate (chain, leaf first) served; with KeyFile. "" = plain HTTP
	KeyFile  string `yaml:"key_file"`  // its private key (PEM)
	// ClientCAFile is a PEM bundle of CAs: every connection must present a
	// client certificate one of them signed (mutual TLS). "" = none asked.
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether http.listen serves HTTPS.
func (t HTTPTLS) Enabled() bool { return t.CertFile != "" }

// HTTPAuth is the http.auth section: bearer tokens. A request to an
// endpoint of a group in Protect must carry "Authorization: Bearer T" with
// T one of the tokens of TokensFile (read again when it changes and on
// SIGHUP). Without TokensFile nothing is authenticated and Protect is
// unused.
type HTTPAuth struct {
	TokensFile string   `yaml:"tokens_file"` // one token a line; blank lines and # comments ignored
	Protect    []string `yaml:"protect"`     // endpoint groups: rank, metrics, pprof, health, admin
}

// Enabled reports whether requests to the protected groups need a token.
func (a HTTPAuth) Enabled() bool { return a.TokensFile != "" }

// Endpoint groups of http.auth.protect: rank is /v1/* (but admin's),
// metrics /metrics, pprof /debug/pprof/*, health /healthz and /readyz,
// admin /v1/models and /v1/models/* (model versions and rollback).
const (
	GroupRank    = "rank"
	GroupMetrics = "metrics"
	GroupPProf   = "pprof"
	GroupHealth  = "health"
	GroupAdmin   = "admin"
)

// HTTPGroups lists the endpoint groups http.auth.protect may name.
func HTTPGroups() []string {
	return []string{GroupRank, GroupMetrics, GroupPProf, GroupHealth, GroupAdmin}
}

// DefaultProtect is the default http.auth.protect.
func DefaultProtect() []string { return []string{GroupRank, GroupPProf, GroupAdmin} }

// MinTokenLen is the shortest token http.auth.tokens_file may hold.
const MinTokenLen = 16

// LoadHTTPCertificate reads the certificate and key of http.tls. Errors
// are *[Error] naming http.tls.cert_file or http.tls.key_file; they never
// show the key.
func LoadHTTPCertificate(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := readSmall("http.tls.cert_file", certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := readSmall("http.tls.key_file", keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := firstCertificate(certPEM)
	if err != nil {
		return tls.Certificate{}, &Error{Key: "http.tls.cert_file", Msg: fmt.Sprintf("%s: %v", certFile, err)}
	}
	if now := time.Now(); now.After(leaf.NotAfter) {
		return tls.Certificate{}, &Error{Key: "http.tls.cert_file", Msg: fmt.Sprintf("%s: the certificate (serial %s) expired at %s",
			certFile, leaf.SerialNumber, leaf.NotAfter.UTC().Format(time.RFC3339))}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	switch {
	case err != nil && strings.Contains(err.Error(), "does not match"):
		return tls.Certificate{}, &Error{Key: "http.tls.key_file", Msg: fmt.Sprintf("%s is not the private key of the certificate in http.tls.cert_file (%s)", keyFile, certFile)}
	case err != nil:
		return tls.Certificate{}, &Error{Key: "http.tls.key_file", Msg: fmt.Sprintf("%s holds no usable PEM private key (%s)", keyFile, strings.TrimPrefix(err.Error(), "tls: "))}
	}
	if pair.Leaf == nil { // GODEBUG x509keypairleaf=0
		pair.Leaf = leaf
	}
	return pair, nil
}

// maxHTTPFile bounds the files of http.tls and http.auth: a path such as
// /dev/zero must not hang start-up.
const maxHTTPFile = 4 << 20

// readSmall reads the file of key at path, at most maxHTTPFile bytes.
func readSmall(key, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{Key: key, Msg: fileError(err)}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxHTTPFile+1))
	switch {
	case err != nil:
		return nil, &Error{Key: key, Msg: fileError(err)}
	case len(data) > maxHTTPFile:
		return nil, &Error{Key: key, Msg: fmt.Sprintf("%s is larger than %d MiB", path, maxHTTPFile>>20)}
	}
	return data, nil
}

// firstCertificate parses the first CERTIFICATE block of a PEM file.
func firstCertificate(data []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, fmt.Errorf("holds no PEM certificate")
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("the certificate does not parse: %v", err)
		}
		return c, nil
	}
}

// LoadClientCAs reads the CA bundle of http.tls.client_ca_file. Errors are
// *[Error] naming the key.
func LoadClientCAs(path string) (*x509.CertPool, error) {
	data, err := readSmall("http.tls.client_ca_file", path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, &Error{Key: "http.tls.client_ca_file", Msg: fmt.Sprintf("%s: certificate %d does not parse: %v", path, n+1, err)}
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, &Error{Key: "http.tls.client_ca_file", Msg: fmt.Sprintf("%s holds no PEM certificate", path)}
	}
	return pool, nil
}

// LoadTokens reads the tokens of http.auth.tokens_file: one a line,
// surrounding blanks dropped, blank lines and lines starting with # ignored.
// A token is at least [MinTokenLen] characters of the RFC 6750 token
// alphabet (letters, digits, -._~+/ and trailing =). Errors are *[Error]
// naming the key and the line; they never show a token.
func LoadTokens(path string) ([]Secret, error) {
	data, err := readSmall("http.auth.tokens_file", path)
	if err != nil {
		return nil, err
	}
	var out []Secret
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		tok := strings.TrimSpace(sc.Text())
		if tok == "" || strings.HasPrefix(tok, "#") {
			continue
		}
		switch {
		case !isToken68(tok):
			return nil, &Error{Key: "http.auth.tokens_file", Msg: fmt.Sprintf("%s line %d: a token may hold only letters, digits, -._~+/ and trailing = (one token a line)", path, line)}
		case len(tok) < MinTokenLen:
			return nil, &Error{Key: "http.auth.tokens_file", Msg: fmt.Sprintf("%s line %d: a token of %d characters; use at least %d (e.g. openssl rand -hex 32)", path, line, len(tok), MinTokenLen)}
		}
		if !slices.Contains(out, Secret(tok)) {
			out = append(out, Secret(tok))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &Error{Key: "http.auth.tokens_file", Msg: fmt.Sprintf("%s: %v", path, err)}
	}
	if len(out) == 0 {
		return nil, &Error{Key: "http.auth.tokens_file", Msg: fmt.Sprintf("%s holds no token (one a line; blank lines and # comments are ignored)", path)}
	}
	return out, nil
}

// isToken68 reports whether s is an RFC 7235 token68: the characters of
// a bearer token.
func isToken68(s string) bool {
	t := strings.TrimRight(s, "=")
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~+/", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// http checks the http.tls and http.auth keys; their files must load now.
func (v *validator) http(h HTTP) {
	t := h.TLS
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		v.errorf("http.tls.key_file", "required with http.tls.cert_file (the certificate's private key)")
	case t.CertFile == "" && t.KeyFile != "":
		v.errorf("http.tls.cert_file", "required with http.tls.key_file (the certificate served)")
	case t.CertFile != "":
		if _, err := LoadHTTPCertificate(t.CertFile, t.KeyFile); err != nil {
			v.keyed(err)
		}
	}
	if t.ClientCAFile != "" {
		if t.CertFile == "" && t.KeyFile == "" {
			v.errorf("http.tls.client_ca_file", "needs http.tls.cert_file and http.tls.key_file: client certificates are asked for in the TLS handshake")
		}
		if _, err := LoadClientCAs(t.ClientCAFile); err != nil {
			v.keyed(err)
		}
	}

	a := h.Auth
	groups := HTTPGroups()
	seen := map[string]int{}
	for i, g := range a.Protect {
		p := fmt.Sprintf("http.auth.protect[%d]", i)
		if !slices.Contains(groups, g) {
			v.errorf(p, "%q is not an endpoint group (one of %s)", g, strings.Join(groups, ", "))
			continue
		}
		if j, ok := seen[g]; ok {
			v.errorf(p, "%q repeats http.auth.protect[%d]", g, j)
			continue
		}
		seen[g] = i
	}
	if a.TokensFile != "" {
		if len(a.Protect) == 0 {
			v.errorf("http.auth.protect", "empty: list the endpoint groups that need a token (%s), or remove http.auth.tokens_file", strings.Join(groups, ", "))
		}
		if _, err := LoadTokens(a.TokensFile); err != nil {
			v.keyed(err)
		}
	}
}

// keyed records err, an *Error from a loader, on its key (located by
// where the key was set); any other error on http.
func (v *validator) keyed(err error) {
	if e, ok := err.(*Error); ok {
		v.errorf(e.Key, "%s", e.Msg)
		return
	}
	v.errorf("http", "%v", err)
}
