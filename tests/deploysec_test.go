package tests

// The secure HTTP setup of deploy/: the compose file, the Kubernetes
// manifests and the Dockerfile serve http.listen over TLS with bearer
// tokens from mounted secrets, the probes and Prometheus reach what they
// need, and the real binary runs with those settings (runDeployed, with
// test files in place of the mounted ones).

import (
	"crypto/tls"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/streamer/streamer/internal/testpki"
)

// deployedHTTP is what a deployment's http section asks for, served by the
// test's own files.
type deployedHTTP struct {
	client  *http.Client
	scheme  string // http or https
	token   string // "" without http.auth.tokens_file
	protect []string
}

// The keys naming files a deployment mounts, by variable.
var deployedFileKeys = map[string]string{
	"STREAMER_HTTP_TLS_CERT_FILE":      "http.tls.cert_file",
	"STREAMER_HTTP_TLS_KEY_FILE":       "http.tls.key_file",
	"STREAMER_HTTP_TLS_CLIENT_CA_FILE": "http.tls.client_ca_file",
	"STREAMER_HTTP_AUTH_TOKENS_FILE":   "http.auth.tokens_file",
}

// deploySecrets replaces the files of http.tls and http.auth that the
// config at *cfgPath and env name (the paths of mounted secrets) by test
// files: a certificate for 127.0.0.1, its key, a client CA, a tokens file.
// *cfgPath becomes a rewritten copy when the config names any.
func deploySecrets(t *testing.T, cfgPath *string, env map[string]string) *deployedHTTP {
	t.Helper()
	raw, err := os.ReadFile(*cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	deployed := map[string]string{} // key → path in the deployment
	for _, k := range deployedFileKeys {
		parts := strings.Split(k, ".")
		if p := str(dig(doc, parts[0], parts[1], parts[2])); p != "" {
			deployed[k] = p
		}
	}
	for v, k := range deployedFileKeys {
		if p, ok := env[v]; ok {
			deployed[k] = p
		}
	}
	d := &deployedHTTP{scheme: "http", client: &http.Client{}}
	groups, _ := dig(doc, "http", "auth", "protect").([]any)
	for _, g := range groups {
		d.protect = append(d.protect, str(g))
	}
	if p, ok := env["STREAMER_HTTP_AUTH_PROTECT"]; ok {
		d.protect = strings.Split(p, ",")
	}

	pki := testpki.New(t)
	dir := t.TempDir()
	files := map[string]string{}
	if deployed["http.tls.cert_file"] != "" {
		c, k := pki.Issue(t, testpki.Leaf{Serial: 7, Name: "streamer"})
		files["http.tls.cert_file"], files["http.tls.key_file"] = string(c), string(k)
		d.scheme = "https"
		d.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.Pool}}}
	}
	if deployed["http.tls.client_ca_file"] != "" {
		ca, err := os.ReadFile(pki.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		files["http.tls.client_ca_file"] = string(ca)
		cert, err := tls.LoadX509KeyPair(pki.ClientCert, pki.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		d.client.Transport.(*http.Transport).TLSClientConfig.Certificates = []tls.Certificate{cert}
	}
	if deployed["http.auth.tokens_file"] != "" {
		d.token = "deployed-test-token-0123456789"
		files["http.auth.tokens_file"] = "# test\n" + d.token + "\n"
	}
	text := string(raw)
	for k, p := range deployed {
		if _, ok := files[k]; !ok {
			continue
		}
		local := filepath.Join(dir, path.Base(p))
		if err := os.WriteFile(local, []byte(files[k]), 0o600); err != nil {
			t.Fatal(err)
		}
		text = strings.ReplaceAll(text, p, local)
		for v, vk := range deployedFileKeys {
			if vk == k && env[v] != "" {
				env[v] = local
			}
		}
	}
	if text != string(raw) {
		*cfgPath = filepath.Join(dir, "streamer.yaml")
		if err := os.WriteFile(*cfgPath, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// get answers GET url on addr with the token if with, status 0 on error.
func (d *deployedHTTP) get(addr, path string, with bool) int {
	req, err := http.NewRequest("GET", d.scheme+"://"+addr+path, nil)
	if err != nil {
		return 0
	}
	if with && d.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// checkProtected checks, on a ready streamer, that the groups a
// deployment protects want the token and the probes' endpoints do not.
func (d *deployedHTTP) checkProtected(t *testing.T, addr string) {
	t.Helper()
	t.Logf("ready over %s; token: %v, protected: %v", d.scheme, d.token != "", d.protect)
	if d.token == "" {
		return
	}
	if slices.Contains(d.protect, "metrics") {
		if got := d.get(addr, "/metrics", false); got != http.StatusUnauthorized {
			t.Errorf("GET /metrics without the token: %d, want 401", got)
		}
		if got := d.get(addr, "/metrics", true); got != http.StatusOK {
			t.Errorf("GET /metrics with the token: %d, want 200", got)
		}
	}
	if slices.Contains(d.protect, "rank") {
		if got := d.get(addr, "/v1/rank", false); got != http.StatusUnauthorized {
			t.Errorf("GET /v1/rank without the token: %d, want 401", got)
		}
	}
	if slices.Contains(d.protect, "health") {
		t.Errorf("the deployment protects health: the probes send no token")
	}
}

// TestDeploySecureHTTP: the compose file, the Kubernetes manifests and the
// Dockerfile listen with TLS and tokens from mounted secrets; the files
// the config names are where the secrets are mounted; Prometheus scrapes
// with the CA and its token; the probes speak HTTPS without a token and
// without a client certificate.
func TestDeploySecureHTTP(t *testing.T) {
	// Compose: the streamer's files in the http-secrets volume, which the
	// http-secrets service fills and Prometheus mounts next to its config.
	c := readYAML(t, filepath.Join(deployDir, "docker-compose.yml"))
	services := dig(c, "services").(map[string]any)
	senv := map[string]string{}
	for k, v := range dig(services, "streamer", "environment").(map[string]any) {
		senv[k] = str(v)
	}
	mountOf := func(svc, dst string) string { // the volume mounted at (or above) dst
		for _, v := range dig(services, svc, "volumes").([]any) {
			src, rest, _ := strings.Cut(str(v), ":")
			at, _, _ := strings.Cut(rest, ":")
			if dst == at || strings.HasPrefix(dst, at+"/") {
				return src
			}
		}
		return ""
	}
	for _, v := range []string{"STREAMER_HTTP_TLS_CERT_FILE", "STREAMER_HTTP_TLS_KEY_FILE", "STREAMER_HTTP_AUTH_TOKENS_FILE"} {
		if senv[v] == "" {
			t.Errorf("compose: the streamer has no %s", v)
		} else if mountOf("streamer", senv[v]) != "http-secrets" {
			t.Errorf("compose: %s=%s is not in the http-secrets volume", v, senv[v])
		}
	}
	if mountOf("http-secrets", "/secrets") != "http-secrets" || !strings.Contains(str(dig(services, "streamer", "depends_on", "http-secrets", "condition")), "completed") {
		t.Errorf("compose: the http-secrets service does not fill the volume before the streamer starts")
	}
	script := str(dig(services, "http-secrets", "command", 0))
	for _, f := range []string{"tls.crt", "tls.key", "tokens", "ca.crt", "prometheus.token"} {
		if !strings.Contains(script, f) {
			t.Errorf("compose: http-secrets does not make %s", f)
		}
	}
	if !strings.Contains(senv["STREAMER_HTTP_AUTH_PROTECT"], "metrics") || !strings.Contains(senv["STREAMER_HTTP_AUTH_PROTECT"], "rank") {
		t.Errorf("compose: STREAMER_HTTP_AUTH_PROTECT=%q leaves rank or metrics open", senv["STREAMER_HTTP_AUTH_PROTECT"])
	}
	pcfg := readYAML(t, filepath.Join(deployDir, "prometheus", "prometheus.yml"))
	var job any
	for _, j := range pcfg["scrape_configs"].([]any) {
		if str(dig(j, "job_name")) == "streamer" {
			job = j
		}
	}
	if str(dig(job, "scheme")) != "https" || str(dig(job, "authorization", "type")) != "Bearer" {
		t.Errorf("prometheus.yml: the streamer job is not HTTPS with a bearer token: %v", job)
	}
	for _, f := range []string{str(dig(job, "authorization", "credentials_file")), str(dig(job, "tls_config", "ca_file"))} {
		if filepath.IsAbs(f) || mountOf("prometheus", path.Join("/etc/prometheus", f)) != "http-secrets" {
			t.Errorf("prometheus.yml: %q is not in the http-secrets volume mounted next to it", f)
		}
	}

	// Kubernetes: the ConfigMap's files are in the Secrets' projected
	// volume; the probes are HTTPS; no client certificate is asked (the
	// kubelet has none).
	cm := readYAMLDocs(t, filepath.Join(deployDir, "k8s", "configmap.yaml"))[0]
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(str(dig(cm, "data", "streamer.yaml"))), &cfg); err != nil {
		t.Fatal(err)
	}
	dep := readYAMLDocs(t, filepath.Join(deployDir, "k8s", "deployment.yaml"))[0]
	pod := dig(dep, "spec", "template", "spec")
	ctr := dig(pod, "containers", 0)
	secretVolume := map[string]bool{}
	for _, v := range dig(pod, "volumes").([]any) {
		if srcs, ok := dig(v, "projected", "sources").([]any); ok && len(srcs) > 0 && dig(srcs[0], "secret") != nil {
			secretVolume[str(dig(v, "name"))] = true
		}
		if dig(v, "secret") != nil {
			secretVolume[str(dig(v, "name"))] = true
		}
	}
	inSecret := func(file string) bool {
		for _, m := range dig(ctr, "volumeMounts").([]any) {
			if secretVolume[str(dig(m, "name"))] && strings.HasPrefix(file, str(dig(m, "mountPath"))+"/") && dig(m, "subPath") == nil {
				return true
			}
		}
		return false
	}
	for _, k := range [][]string{{"tls", "cert_file"}, {"tls", "key_file"}, {"auth", "tokens_file"}} {
		f := str(dig(cfg, "http", k[0], k[1]))
		if f == "" || !inSecret(f) {
			t.Errorf("k8s: http.%s.%s %q is not in a mounted Secret (without subPath, so that renewals arrive)", k[0], k[1], f)
		}
	}
	if dig(cfg, "http", "tls", "client_ca_file") != nil {
		t.Errorf("k8s: http.tls.client_ca_file refuses the kubelet's probes")
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
		if s := str(dig(ctr, probe, "httpGet", "scheme")); s != "HTTPS" {
			t.Errorf("k8s: %s scheme %q, want HTTPS", probe, s)
		}
	}
	svc := readYAMLDocs(t, filepath.Join(deployDir, "k8s", "service.yaml"))[0]
	for what, ann := range map[string]any{"Deployment": dig(dep, "spec", "template", "metadata", "annotations"), "Service": dig(svc, "metadata", "annotations")} {
		if str(dig(ann, "prometheus.io/scheme")) != "https" {
			t.Errorf("k8s: the %s's prometheus.io/scheme is not https", what)
		}
	}

	// The image: TLS and tokens from /run/secrets/streamer-http.
	df, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"STREAMER_HTTP_TLS_CERT_FILE=/run/secrets/", "STREAMER_HTTP_TLS_KEY_FILE=/run/secrets/", "STREAMER_HTTP_AUTH_TOKENS_FILE=/run/secrets/"} {
		if !strings.Contains(string(df), v) {
			t.Errorf("Dockerfile: no %s…", v)
		}
	}
}

// promConfigDir is a copy of deploy/prometheus with the files the compose
// stack mounts at secrets/ next to prometheus.yml (the http-secrets
// volume): stand-ins, so that promtool check config finds them.
func promConfigDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(deployDir, "prometheus")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if data, err := os.ReadFile(filepath.Join(src, e.Name())); err == nil && !e.IsDir() {
			if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	pki := testpki.New(t)
	ca, err := os.ReadFile(pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"ca.crt": string(ca), "prometheus.token": "stand-in-token-0123456789\n"} {
		if err := os.WriteFile(filepath.Join(dir, "secrets", name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
