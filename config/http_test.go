package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/internal/testpki"
)

// httpFiles are the files of a valid http.tls and http.auth section.
type httpFiles struct {
	cert, key, otherKey, expired, expiredKey, ca, tokens string
}

func newHTTPFiles(t *testing.T) httpFiles {
	t.Helper()
	pki := testpki.New(t)
	cert, key := pki.Issue(t, testpki.Leaf{Serial: 10, Name: "streamer"})
	_, otherKey := pki.Issue(t, testpki.Leaf{Serial: 11, Name: "other"})
	expired, expiredKey := pki.Issue(t, testpki.Leaf{Serial: 12, Name: "old", NotAfter: time.Now().Add(-time.Minute)})
	return httpFiles{
		cert: writeFile(t, "tls.crt", string(cert)), key: writeFile(t, "tls.key", string(key)),
		otherKey: writeFile(t, "other.key", string(otherKey)),
		expired:  writeFile(t, "expired.crt", string(expired)), expiredKey: writeFile(t, "expired.key", string(expiredKey)),
		ca:     pki.CAFile,
		tokens: writeFile(t, "tokens", "# prometheus\n  0123456789abcdef0123  \n\n# clients\nABCDEFGHIJKLMNOP-._~+/==\n0123456789abcdef0123\n"),
	}
}

func TestHTTPSecurityKeys(t *testing.T) {
	f := newHTTPFiles(t)
	c, err := Parse([]byte(minimal+`http:
  listen: ":8443"
  tls: {cert_file: `+f.cert+`, key_file: `+f.key+`, client_ca_file: `+f.ca+`}
  auth: {tokens_file: `+f.tokens+`, protect: [rank, metrics]}
`), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if want := (HTTPTLS{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.ca}); c.HTTP.TLS != want || !c.HTTP.TLS.Enabled() {
		t.Errorf("tls %+v", c.HTTP.TLS)
	}
	if a := c.HTTP.Auth; a.TokensFile != f.tokens || !slices.Equal(a.Protect, []string{"rank", "metrics"}) || !a.Enabled() {
		t.Errorf("auth %+v", a)
	}

	// The defaults: plain HTTP, no tokens, [rank, pprof, admin] once a tokens file is given.
	def := Default().HTTP
	if def.TLS.Enabled() || def.Auth.Enabled() || !slices.Equal(def.Auth.Protect, []string{"rank", "pprof", "admin"}) {
		t.Errorf("defaults %+v", def)
	}
	c, err = Parse([]byte(minimal+"http: {auth: {tokens_file: "+f.tokens+"}}\n"), nil, testTypes)
	if err != nil || !slices.Equal(c.HTTP.Auth.Protect, []string{"rank", "pprof", "admin"}) {
		t.Fatalf("protect %v, %v", c.HTTP.Auth.Protect, err)
	}

	// From the environment.
	c, err = Parse([]byte(minimal), []string{
		"STREAMER_HTTP_TLS_CERT_FILE=" + f.cert, "STREAMER_HTTP_TLS_KEY_FILE=" + f.key, "STREAMER_HTTP_TLS_CLIENT_CA_FILE=" + f.ca,
		"STREAMER_HTTP_AUTH_TOKENS_FILE=" + f.tokens, "STREAMER_HTTP_AUTH_PROTECT=rank, metrics,pprof,health,admin"}, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.TLS.ClientCAFile != f.ca || c.HTTP.Auth.TokensFile != f.tokens || !slices.Equal(c.HTTP.Auth.Protect, HTTPGroups()) {
		t.Errorf("from the environment: %+v", c.HTTP)
	}

	// The tokens: trimmed, comments and blank lines out, repeats once.
	toks, err := LoadTokens(f.tokens)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Secret{"0123456789abcdef0123", "ABCDEFGHIJKLMNOP-._~+/=="}; !slices.Equal(toks, want) {
		t.Errorf("tokens %d, want %d", len(toks), len(want))
	}
	// The certificate loads with its leaf.
	pair, err := LoadHTTPCertificate(f.cert, f.key)
	if err != nil || pair.Leaf == nil || pair.Leaf.SerialNumber.Int64() != 10 {
		t.Fatalf("certificate %+v, %v", pair.Leaf, err)
	}
}

func TestHTTPSecurityErrors(t *testing.T) {
	f := newHTTPFiles(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	short := writeFile(t, "short", "tooshort\n")
	spaced := writeFile(t, "spaced", "# ok\n0123456789abcdef0123\ntwo words in a line here\n")
	onlyComments := writeFile(t, "comments", "# nothing\n\n   \n")
	notPEM := writeFile(t, "not.pem", "hello\n")
	tlsKeys := func(s string) string { return minimal + "http:\n  tls: {" + s + "}\n" }
	auth := func(s string) string { return minimal + "http:\n  auth: {" + s + "}\n" }
	cases := []struct {
		name, yaml string
		env        []string
		want       string
	}{
		{"unknown http key", minimal + "http:\n  tls_cert: x\n", nil,
			`config: unknown key "http.tls_cert" (line 4) (http takes: listen, read_timeout, write_timeout, idle_timeout, pprof, tls, auth)`},
		{"unknown tls key", tlsKeys("cert: x"), nil,
			`config: unknown key "http.tls.cert" (line 4) (http.tls takes: cert_file, key_file, client_ca_file)`},
		{"unknown auth key", auth("token: x"), nil,
			`config: unknown key "http.auth.token" (line 4) (http.auth takes: tokens_file, protect)`},
		{"unknown top-level key", "htttp: {}\n" + minimal, nil,
			`config: unknown key "htttp" (line 1) (the top level takes: shutdown_timeout, kafka, http, log, metrics, labels, snapshot, rank, calibration, profiles, models)`},
		{"cert without key", tlsKeys("cert_file: " + f.cert), nil,
			"config: http.tls.key_file: required with http.tls.cert_file (the certificate's private key) (line 4)"},
		{"key without cert", tlsKeys("key_file: " + f.key), nil,
			"config: http.tls.cert_file: required with http.tls.key_file (the certificate served) (line 4)"},
		{"cert missing", tlsKeys("cert_file: " + missing + ", key_file: " + f.key), nil,
			"config: http.tls.cert_file: cannot read " + missing + ": no such file or directory (line 4)"},
		{"key missing", tlsKeys("cert_file: " + f.cert + ", key_file: " + missing), nil,
			"config: http.tls.key_file: cannot read " + missing + ": no such file or directory (line 4)"},
		{"cert a directory", tlsKeys("cert_file: " + dir + ", key_file: " + f.key), nil,
			"config: http.tls.cert_file: cannot read " + dir + ": is a directory"},
		{"cert not PEM", tlsKeys("cert_file: " + notPEM + ", key_file: " + f.key), nil,
			"config: http.tls.cert_file: " + notPEM + ": holds no PEM certificate (line 4)"},
		{"key and cert swapped", tlsKeys("cert_file: " + f.key + ", key_file: " + f.cert), nil,
			"config: http.tls.cert_file: " + f.key + ": holds no PEM certificate"},
		{"key not PEM", tlsKeys("cert_file: " + f.cert + ", key_file: " + notPEM), nil,
			"config: http.tls.key_file: " + notPEM + " holds no usable PEM private key"},
		{"key of another certificate", tlsKeys("cert_file: " + f.cert + ", key_file: " + f.otherKey), nil,
			"config: http.tls.key_file: " + f.otherKey + " is not the private key of the certificate in http.tls.cert_file (" + f.cert + ") (line 4)"},
		{"expired certificate", tlsKeys("cert_file: " + f.expired + ", key_file: " + f.expiredKey), nil,
			"config: http.tls.cert_file: " + f.expired + ": the certificate (serial 12) expired at "},
		{"client CA missing", tlsKeys("cert_file: " + f.cert + ", key_file: " + f.key + ", client_ca_file: " + missing), nil,
			"config: http.tls.client_ca_file: cannot read " + missing + ": no such file or directory (line 4)"},
		{"client CA not PEM", tlsKeys("cert_file: " + f.cert + ", key_file: " + f.key + ", client_ca_file: " + notPEM), nil,
			"config: http.tls.client_ca_file: " + notPEM + " holds no PEM certificate"},
		{"client CA without cert", tlsKeys("client_ca_file: " + f.ca), nil,
			"config: http.tls.client_ca_file: needs http.tls.cert_file and http.tls.key_file"},
		{"cert from the environment", minimal, []string{"STREAMER_HTTP_TLS_CERT_FILE=" + missing, "STREAMER_HTTP_TLS_KEY_FILE=" + f.key},
			"config: http.tls.cert_file: cannot read " + missing + ": no such file or directory (from STREAMER_HTTP_TLS_CERT_FILE)"},
		{"tokens from a device", auth("tokens_file: /dev/zero"), nil,
			"config: http.auth.tokens_file: /dev/zero is larger than 4 MiB (line 4)"},
		{"tokens a directory", auth("tokens_file: " + dir), nil,
			"config: http.auth.tokens_file: cannot read " + dir + ": is a directory (line 4)"},
		{"tokens missing", auth("tokens_file: " + missing), nil,
			"config: http.auth.tokens_file: cannot read " + missing + ": no such file or directory (line 4)"},
		{"tokens empty", auth("tokens_file: " + onlyComments), nil,
			"config: http.auth.tokens_file: " + onlyComments + " holds no token (one a line; blank lines and # comments are ignored) (line 4)"},
		{"token too short", auth("tokens_file: " + short), nil,
			"config: http.auth.tokens_file: " + short + " line 1: a token of 8 characters; use at least 16"},
		{"token with blanks", auth("tokens_file: " + spaced), nil,
			"config: http.auth.tokens_file: " + spaced + " line 3: a token may hold only letters, digits, -._~+/ and trailing = (one token a line)"},
		{"unknown group", auth("tokens_file: " + f.tokens + ", protect: [rank, root]"), nil,
			`config: http.auth.protect[1]: "root" is not an endpoint group (one of rank, metrics, pprof, health, admin) (line 4)`},
		{"unknown group from the environment", minimal, []string{"STREAMER_HTTP_AUTH_PROTECT=rank,Metrics"},
			`config: http.auth.protect[1]: "Metrics" is not an endpoint group (one of rank, metrics, pprof, health, admin) (from STREAMER_HTTP_AUTH_PROTECT)`},
		{"repeated group", auth("tokens_file: " + f.tokens + ", protect: [rank, metrics, rank]"), nil,
			`config: http.auth.protect[2]: "rank" repeats http.auth.protect[0] (line 4)`},
		{"nothing protected", auth("tokens_file: " + f.tokens + ", protect: []"), nil,
			"config: http.auth.protect: empty: list the endpoint groups that need a token (rank, metrics, pprof, health, admin), or remove http.auth.tokens_file (line 4)"},
		{"protect not a list", auth("tokens_file: " + f.tokens + ", protect: rank"), nil,
			`config: http.auth.protect: must be a list, got "rank" (line 4)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), tc.env, testTypes)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error\n  %v\ndoes not contain\n  %s", err, tc.want)
			}
		})
	}
}

// TestTokensNeverShown: no error about a tokens file shows a token.
func TestTokensNeverShown(t *testing.T) {
	const tok = "Zq9xK7-never-print-this-token-01"
	for i, content := range []string{
		tok + " and more\n",      // not one token
		"x" + tok[:6] + "\n",     // too short
		tok + "\n" + tok + "$\n", // a bad character
	} {
		path := writeFile(t, "tokens", content)
		_, err := LoadTokens(path)
		if err == nil {
			t.Fatalf("case %d: no error", i)
		}
		if strings.Contains(err.Error(), tok) || strings.Contains(err.Error(), tok[:6]) {
			t.Fatalf("case %d: the error shows the token: %v", i, err)
		}
	}
	path := writeFile(t, "tokens", tok+"\n")
	toks, err := LoadTokens(path)
	if err != nil || len(toks) != 1 || toks[0].Reveal() != tok {
		t.Fatalf("%d tokens, %v", len(toks), err)
	}
	if s := fmt.Sprint(toks); strings.Contains(s, tok) {
		t.Fatalf("printed: %s", s)
	}
}
