package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/engine"
)

// runModels runs `streamer models` with args and returns its stdout and
// error.
func runModels(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"models"}, args...))
	err := root.Execute()
	t.Logf("streamer models %s:\n%s%s(err %v)", strings.Join(args, " "), out.String(), errOut.String(), err)
	return out.String(), err
}

const modelsCLIConfig = `
snapshot:
  dir: %DIR%
  versions: 3
models:
  - name: global
    type: mam
    kernel: {type: linear}
    features: {dim: 2}
  - name: per_key
    type: mam
    scope: key
    kernel: {type: linear}
    features: {dim: 2}
`

// TestModelsCommandOffline: with --config (the service stopped), list
// prints the versions in snapshot.dir/versions, newest first, as a table
// or JSON; rollback checks the version (there, of this configuration of
// a global model) and writes the request the service applies at start,
// which list then shows.
func TestModelsCommandOffline(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "streamer.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(modelsCLIConfig, "%DIR%", filepath.Join(dir, "state"))), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil, newModelTypes())
	if err != nil {
		t.Fatal(err)
	}
	models, err := engine.BuildModels(cfg, newModelTypes())
	if err != nil {
		t.Fatal(err)
	}
	data, err := models[0].Model.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	vs, err := snapshot.OpenVersionStore(filepath.Join(dir, "state", snapshot.VersionsDir), 3)
	if err != nil {
		t.Fatal(err)
	}
	state := snapshot.Model{Name: "global", Type: "mam", Fingerprint: models[0].Fingerprint, Data: data}
	for i := range 2 {
		if _, err := vs.Add(state, snapshot.Version{Seq: uint64(10 + i), N: int64(100 * i), Origin: snapshot.OriginCheckpoint}); err != nil {
			t.Fatal(err)
		}
	}
	foreign := state
	foreign.Fingerprint = "feedface"
	if _, err := vs.Add(foreign, snapshot.Version{Seq: 12, N: 300, Origin: snapshot.OriginCheckpoint}); err != nil {
		t.Fatal(err)
	}

	out, err := runModels(t, "list", "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"MODEL", "global", "per_key", "key-scoped: no versions", "checkpoint", "(the newest 3 versions of each model are kept)"} {
		if !strings.Contains(out, want) {
			t.Errorf("list does not say %q", want)
		}
	}
	if i, j := strings.Index(out, "  3  "), strings.Index(out, "  1  "); i < 0 || j < 0 || i > j {
		t.Errorf("versions not newest first:\n%s", out)
	}
	out, err = runModels(t, "list", "--config", path, "--json")
	var list stream.ModelsListing
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Models) != 2 || len(list.Models[0].Versions) != 3 || list.Models[0].Versions[0].Version != 3 {
		t.Fatalf("list --json: %v %s", err, out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "per_key", "--to", "1"}, "key-scoped"},
		{[]string{"--model", "nope", "--to", "1"}, "no model nope"},
		{[]string{"--model", "global", "--to", "9"}, "no version 9"},
		{[]string{"--model", "global", "--to", "3"}, "fingerprint feedface"},
		{[]string{"--model", "global"}, "--model and --to"},
		{[]string{"--model", "global", "--to", "1", "--url", "http://127.0.0.1:1"}, "--url and --config"},
	} {
		if _, err := runModels(t, append(append([]string{"rollback"}, c.args...), "--config", path)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rollback %v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	if ps, _ := vs.PendingRollbacks(); len(ps) != 0 {
		t.Fatalf("a refused rollback left a request: %+v", ps)
	}
	out, err = runModels(t, "rollback", "--model", "global", "--to", "1", "--config", path)
	if err != nil || !strings.Contains(out, "applies it when it starts") {
		t.Fatalf("rollback: %v %s", err, out)
	}
	ps, err := vs.PendingRollbacks()
	if err != nil || len(ps) != 1 || ps[0].Model != "global" || ps[0].To != 1 {
		t.Fatalf("the request: %+v %v", ps, err)
	}
	if out, _ := runModels(t, "list", "--config", path); !strings.Contains(out, "rollback to 1 requested") {
		t.Errorf("list does not show the pending rollback:\n%s", out)
	}
}

// TestModelsCommandURL: with --url, list and rollback call the running
// service's endpoints with the bearer token of --token-file, and an error
// answer is an error naming its reason and detail.
func TestModelsCommandURL(t *testing.T) {
	const token = "cli-token-0123456789abcdef"
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		calls = append(calls, r.Method+" "+r.URL.Path+" "+string(body))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Header.Get("Authorization") != "Bearer "+token:
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"reason":"unauthorized","detail":"no token"}}`)
		case r.Method == "GET" && r.URL.Path == "/v1/models":
			io.WriteString(w, `{"keep":5,"models":[{"name":"global","type":"mam","key_scoped":false,"configured":true,"versions":[{"version":4,"created_at":"2026-12-01T10:00:00Z","seq":9,"n":1200,"origin":"rollback","from":2,"bytes":88}]}]}`)
		case r.Method == "POST" && r.URL.Path == "/v1/models/global/rollback" && string(body) == `{"to":2}`:
			io.WriteString(w, `{"model":"global","version":5,"from":2,"seq":10}`)
		default:
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"reason":"unknown_version","detail":"model global has no version 7"}}`)
		}
	}))
	defer srv.Close()
	tokens := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokens, []byte("# the operator\n"+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runModels(t, "list", "--url", srv.URL, "--token-file", tokens)
	if err != nil || !strings.Contains(out, "rollback to 2") || !strings.Contains(out, "1200") || !strings.Contains(out, "2026-12-01T10:00:00Z") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	out, err = runModels(t, "rollback", "--model", "global", "--to", "2", "--url", srv.URL, "--token-file", tokens)
	if err != nil || !strings.Contains(out, "saved as version 5") {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	if _, err := runModels(t, "rollback", "--model", "global", "--to", "7", "--url", srv.URL, "--token-file", tokens); err == nil ||
		!strings.Contains(err.Error(), "unknown_version") || !strings.Contains(err.Error(), "no version 7") {
		t.Fatalf("rollback to a missing version: %v", err)
	}
	if _, err := runModels(t, "list", "--url", srv.URL); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("list without the token: %v", err)
	}
	if len(calls) != 4 {
		t.Errorf("calls: %q", calls)
	}
}
