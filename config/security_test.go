package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// writeFile writes content to a file in a fresh temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSecurityKeys(t *testing.T) {
	ca := writeFile(t, "ca.pem", "-----BEGIN CERTIFICATE-----\n")
	pwFile := writeFile(t, "pw", "from-file\n")
	got, err := Parse([]byte(minimal+`
kafka:
  tls: {enabled: true, ca_file: `+ca+`, cert_file: `+ca+`, key_file: `+ca+`, server_name: kafka.internal}
  sasl: {mechanism: scram-sha-256, username: alice, password_file: `+pwFile+`}
http: {read_timeout: 1s, write_timeout: 2s, idle_timeout: 3s, pprof: true}
`), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	want := TLS{Enabled: true, CAFile: ca, CertFile: ca, KeyFile: ca, ServerName: "kafka.internal"}
	if got.Kafka.TLS != want {
		t.Fatalf("tls %+v", got.Kafka.TLS)
	}
	if s := got.Kafka.SASL; s.Mechanism != SASLScramSHA256 || s.Username != "alice" || s.PasswordFile != pwFile || s.Password != "" {
		t.Fatalf("sasl %+v", s)
	}
	if h := got.HTTP; h.ReadTimeout.Seconds() != 1 || h.WriteTimeout.Seconds() != 2 || h.IdleTimeout.Seconds() != 3 || !h.PProf {
		t.Fatalf("http %+v", h)
	}
	def := Default()
	if def.HTTP.PProf || def.HTTP.Listen != "127.0.0.1:9464" || def.HTTP.ReadTimeout <= 0 || def.HTTP.WriteTimeout <= 0 ||
		def.HTTP.IdleTimeout <= 0 || def.Kafka.TLS.Enabled || def.Kafka.SASL.Enabled() {
		t.Fatalf("defaults %+v %+v", def.HTTP, def.Kafka)
	}
}

// TestPasswordSources: the password comes from the file, the environment
// or password_file (one trailing newline dropped), and only one of them.
func TestPasswordSources(t *testing.T) {
	const base = minimal + "kafka:\n  sasl:\n    mechanism: plain\n    username: alice\n"
	cases := []struct {
		name, yaml string
		env        []string
		want       string
	}{
		{"inline", base + "    password: in-yaml\n", nil, "in-yaml"},
		{"env", base, []string{"STREAMER_KAFKA_SASL_PASSWORD=from env "}, "from env "},
		{"file", base + "    password_file: " + writeFile(t, "pw", "in-file\n") + "\n", nil, "in-file"},
		{"file crlf", base + "    password_file: " + writeFile(t, "pw", "in-file\r\n") + "\n", nil, "in-file"},
		{"file no newline", base + "    password_file: " + writeFile(t, "pw", "  spaced  ") + "\n", nil, "  spaced  "},
		{"file from env", base, []string{"STREAMER_KAFKA_SASL_PASSWORD_FILE=" + writeFile(t, "pw", "env-file\n\n")}, "env-file\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml), tc.env, testTypes)
			if err != nil {
				t.Fatal(err)
			}
			pw, err := c.Kafka.SASL.ResolvePassword()
			if err != nil || pw != tc.want {
				t.Fatalf("password %q, %v; want %q", pw, err, tc.want)
			}
		})
	}
}

func TestSecurityErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	empty := writeFile(t, "empty", "\n")
	ca := writeFile(t, "ca.pem", "x")
	sasl := func(s string) string { return minimal + "kafka:\n  sasl: {" + s + "}\n" }
	tlsKeys := func(s string) string { return minimal + "kafka:\n  tls: {" + s + "}\n" }
	cases := []struct {
		name, yaml string
		env        []string
		want       string
	}{
		{"unknown mechanism", sasl("mechanism: foo, username: a, password: p"), nil,
			`config: kafka.sasl.mechanism: unknown "foo" (one of plain, scram-sha-256, scram-sha-512) (line 4)`},
		{"upper-case mechanism", sasl("mechanism: SCRAM-SHA-256, username: a, password: p"), nil,
			`config: kafka.sasl.mechanism: unknown "SCRAM-SHA-256" (one of plain, scram-sha-256, scram-sha-512)`},
		{"no username", sasl("mechanism: plain, password: p"), nil,
			"config: kafka.sasl.username: required with kafka.sasl.mechanism plain (line 4)"},
		{"no password", sasl("mechanism: scram-sha-512, username: a"), nil,
			"config: kafka.sasl.password: required with kafka.sasl.mechanism scram-sha-512: set kafka.sasl.password, STREAMER_KAFKA_SASL_PASSWORD or kafka.sasl.password_file"},
		{"password and file", sasl("mechanism: plain, username: a, password: p, password_file: " + ca), nil,
			"config: kafka.sasl.password: set together with kafka.sasl.password_file; give only one (line 4)"},
		{"env password and file", sasl("mechanism: plain, username: a, password_file: " + ca), []string{"STREAMER_KAFKA_SASL_PASSWORD=p"},
			"config: kafka.sasl.password: set together with kafka.sasl.password_file; give only one (from STREAMER_KAFKA_SASL_PASSWORD)"},
		{"password file missing", sasl("mechanism: plain, username: a, password_file: " + missing), nil,
			"config: kafka.sasl.password_file: cannot read " + missing + ": no such file or directory (line 4)"},
		{"password file is a directory", sasl("mechanism: plain, username: a, password_file: " + dir), nil,
			"config: kafka.sasl.password_file: cannot read " + dir + ": is a directory"},
		{"password file empty", sasl("mechanism: plain, username: a, password_file: " + empty), nil,
			"config: kafka.sasl.password_file: " + empty + " is empty"},
		{"username without mechanism", sasl("username: a"), nil,
			"config: kafka.sasl.username: set but kafka.sasl.mechanism is not (one of plain, scram-sha-256, scram-sha-512)"},
		{"password without mechanism", minimal, []string{"STREAMER_KAFKA_SASL_PASSWORD=p"},
			"config: kafka.sasl.password: set but kafka.sasl.mechanism is not"},
		{"cert without key", tlsKeys("enabled: true, cert_file: " + ca), nil,
			"config: kafka.tls.key_file: required with kafka.tls.cert_file (the client certificate's private key) (line 4)"},
		{"key without cert", tlsKeys("enabled: true, key_file: " + ca), nil,
			"config: kafka.tls.cert_file: required with kafka.tls.key_file (the client certificate)"},
		{"ca unreadable", tlsKeys("enabled: true, ca_file: " + missing), nil,
			"config: kafka.tls.ca_file: cannot read " + missing + ": no such file or directory (line 4)"},
		{"cert unreadable", tlsKeys("enabled: true, cert_file: " + missing + ", key_file: " + ca), nil,
			"config: kafka.tls.cert_file: cannot read " + missing},
		{"key unreadable", tlsKeys("enabled: true, cert_file: " + ca + ", key_file: " + missing), nil,
			"config: kafka.tls.key_file: cannot read " + missing},
		{"ca without enabled", tlsKeys("ca_file: " + ca), nil,
			"config: kafka.tls.ca_file: set but kafka.tls.enabled is false: enable TLS or remove the key (line 4)"},
		{"skip verify with ca", tlsKeys("enabled: true, insecure_skip_verify: true, ca_file: " + ca), nil,
			"config: kafka.tls.insecure_skip_verify: true makes kafka.tls.ca_file unused"},
		{"enabled not bool", tlsKeys("enabled: yes"), nil, `config: kafka.tls.enabled: "yes" is not a boolean (true or false) (line 4)`},
		{"enabled env not bool", minimal, []string{"STREAMER_KAFKA_TLS_ENABLED=maybe"},
			`config: kafka.tls.enabled: "maybe" is not a boolean (true or false) (from STREAMER_KAFKA_TLS_ENABLED)`},
		{"unknown tls key", tlsKeys("enabled: true, verify: false"), nil, `config: unknown key "kafka.tls.verify" (line 4)`},
		{"read timeout", minimal + "http: {read_timeout: 0s}\n", nil, "config: http.read_timeout: must be > 0, got 0s (line 3)"},
		{"write timeout", minimal, []string{"STREAMER_HTTP_WRITE_TIMEOUT=-1s"}, "config: http.write_timeout: must be > 0, got -1s (from STREAMER_HTTP_WRITE_TIMEOUT)"},
		{"pprof", minimal + "http: {pprof: on}\n", nil, `config: http.pprof: "on" is not a boolean`},
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

// TestPasswordNeverShown: whatever prints a config, or reports an error
// about it, never shows the password.
func TestPasswordNeverShown(t *testing.T) {
	const pw = "Tr0ub4dor&3-never-print-me"
	yml := minimal + "kafka:\n  sasl: {mechanism: scram-sha-512, username: alice, password: \"" + pw + "\"}\n"
	c, err := Parse([]byte(yml), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Kafka.SASL.ResolvePassword(); got != pw || c.Kafka.SASL.Password.Reveal() != pw {
		t.Fatalf("password lost: %q", got)
	}
	var shown []string
	for _, v := range []any{c, &c, c.Kafka, c.Kafka.SASL, c.Kafka.SASL.Password} {
		for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%T %[1]v"} {
			shown = append(shown, fmt.Sprintf(f, v))
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		y, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		shown = append(shown, string(j), string(y))
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "cfg", c, "sasl", c.Kafka.SASL)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "cfg", c, "sasl", c.Kafka.SASL, "password", c.Kafka.SASL.Password)
	shown = append(shown, logs.String(), c.Fingerprint(), c.Models[0].Fingerprint())
	for _, s := range shown {
		if strings.Contains(s, pw) || strings.Contains(s, fmt.Sprintf("%x", pw)) {
			t.Fatalf("password shown in %s", s)
		}
	}
	if !strings.Contains(fmt.Sprintf("%+v", c.Kafka.SASL), "Password:[redacted]") {
		t.Fatalf("%+v", c.Kafka.SASL)
	}
	if s := fmt.Sprint(Secret("")); s != "" {
		t.Fatalf("empty secret prints %q", s)
	}

	// Errors about a config holding the password, from the file and from
	// the environment, in every key the password could be misplaced in.
	bad := []struct {
		yaml string
		env  []string
	}{
		{strings.Replace(yml, "scram-sha-512", "scram-sha-999", 1), nil},
		{strings.Replace(yml, "username: alice, ", "", 1), nil},
		{yml + "http: {listen: nowhere}\n", nil},
		{strings.Replace(yml, "password: \""+pw+"\"", "password: ["+pw+"]", 1), nil},
		{strings.Replace(yml, "password: \""+pw+"\"", "password: {"+pw+": 1}", 1), nil},
		{strings.Replace(yml, "password: \""+pw+"\"", "password_file: "+writeFile(t, "pw", "x")+", password: \""+pw+"\"", 1), nil},
		{minimal, []string{"STREAMER_KAFKA_SASL_PASSWORD=" + pw}},
		{minimal + "kafka: {sasl: {mechanism: plain, username: a}}\n", []string{"STREAMER_KAFKA_SASL_PASSWORD=" + pw, "STREAMER_KAFKA_SASL_PASSWORD_FILE=/nonexistent"}},
		{minimal, []string{"STREAMER_KAFKA_SASL_PASSWORDS=" + pw}},
	}
	for i, b := range bad {
		_, err := Parse([]byte(b.yaml), b.env, testTypes)
		if err == nil {
			t.Fatalf("case %d: no error", i)
		}
		if strings.Contains(err.Error(), pw) {
			t.Fatalf("case %d: error shows the password: %v", i, err)
		}
	}
}
