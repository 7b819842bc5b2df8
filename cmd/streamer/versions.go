package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/engine"
)

// `streamer models list` and `streamer models rollback`: the versions of
// the global models (snapshot.versions) and rollbacks, on a running
// service over HTTP (--url: GET /v1/models, POST
// /v1/models/{model}/rollback, the admin group) or, with the service
// stopped, in its snapshot.dir (--config): list reads
// snapshot.dir/versions, rollback writes a request the service applies at
// its next start (docs/operations.md, "Model versions and rollback").

// modelsTarget is where a models command goes: a running service's URL,
// or a config whose snapshot.dir it reads.
type modelsTarget struct {
	url, tokenFile, caFile, config string
	json                           bool
}

func (m *modelsTarget) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&m.url, "url", "", "the running service's http.listen as a URL (http://127.0.0.1:9464, https://…)")
	cmd.Flags().StringVar(&m.tokenFile, "token-file", "", "with --url: a file whose first token (one a line, # comments) is sent as the bearer token (http.auth)")
	cmd.Flags().StringVar(&m.caFile, "ca-file", "", "with an https --url: the PEM CA bundle that signed the service's certificate (default: the system's)")
	configFlag(cmd, &m.config)
	cmd.Flags().BoolVar(&m.json, "json", false, "print JSON (GET /v1/models's answer, or the rollback's) instead of a table")
}

// offline returns the config of an offline command ("" with --url).
func (m *modelsTarget) offline() (string, error) {
	if m.url != "" {
		if m.config != "" {
			return "", errors.New("--url and --config: give one (--url: a running service; --config: its snapshot.dir, service stopped)")
		}
		return "", nil
	}
	if m.tokenFile != "" || m.caFile != "" {
		return "", errors.New("--token-file and --ca-file go with --url")
	}
	path, err := configPath(m.config)
	if err != nil {
		return "", fmt.Errorf("--url (a running service) or --config (its snapshot.dir, service stopped) is required")
	}
	return path, nil
}

func newModelsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "models",
		Short: "List model versions and roll a model back to one (snapshot.versions)",
		Long: `Every checkpoint records the state of each global model that changed as a new
version in snapshot.dir/versions; the newest snapshot.versions are kept.
With --url the commands ask a running service (the admin endpoints; a token
with --token-file); with --config, the service stopped, they read its
snapshot.dir: a rollback is then applied when the service starts.`,
	}
	var list modelsTarget
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List each model's versions, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return listModels(cmd.OutOrStdout(), &list)
		},
	}
	list.flags(listCmd)
	var rb modelsTarget
	var model string
	var to uint64
	rollbackCmd := &cobra.Command{
		Use:   "rollback --model M --to VERSION",
		Short: "Roll a global model back to one of its versions (recorded as a new version)",
		Long: `Rollback sets the model's state to the state of version VERSION: the events
learned since are dropped from that model's state (the other models keep
theirs; the stream is not rewound). It is recorded as a new version.
With --url the running service applies it at once and answers once the
checkpoint that saves it is durable; with --config (service stopped) it is
applied when the service starts, before it consumes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if model == "" || to == 0 {
				return errors.New("--model and --to (a version number: streamer models list) are required")
			}
			return rollbackModel(cmd.OutOrStdout(), &rb, model, to)
		},
	}
	rb.flags(rollbackCmd)
	rollbackCmd.Flags().StringVar(&model, "model", "", "the model's name")
	rollbackCmd.Flags().Uint64Var(&to, "to", 0, "the version to roll back to")
	cmd.AddCommand(listCmd, rollbackCmd)
	return cmd
}

// offlineStore opens snapshot.dir/versions of the config at path, and
// describes its models.
func offlineStore(path string) (*snapshot.VersionStore, config.Config, []engine.ModelInfo, error) {
	cfg, err := config.Load(path, os.Environ(), newModelTypes())
	if err != nil {
		return nil, cfg, nil, err
	}
	var infos []engine.ModelInfo
	for _, m := range cfg.Models {
		infos = append(infos, engine.ModelInfo{Name: m.Name, Type: m.Type, KeyScoped: m.Scope == "key"})
	}
	switch {
	case cfg.Snapshot.Dir == "":
		return nil, cfg, infos, errors.New("model versions are off: they need snapshot.dir (this config has none)")
	case cfg.Snapshot.Versions <= 0:
		return nil, cfg, infos, errors.New("model versions are off: snapshot.versions is 0")
	case cfg.Snapshot.Partitioned():
		return nil, cfg, infos, errors.New("model versions are kept in instance scope only (this config has snapshot.scope: partition)")
	}
	dir := filepath.Join(cfg.Snapshot.Dir, snapshot.VersionsDir)
	if _, err := os.Stat(dir); err != nil {
		return nil, cfg, infos, fmt.Errorf("no versions in %s: %w", cfg.Snapshot.Dir, err)
	}
	vs, err := snapshot.OpenVersionStore(dir, cfg.Snapshot.Versions)
	return vs, cfg, infos, err
}

func listModels(w io.Writer, t *modelsTarget) error {
	path, err := t.offline()
	if err != nil {
		return err
	}
	var list stream.ModelsListing
	if path == "" {
		body, err := t.call(http.MethodGet, "/v1/models", nil)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return fmt.Errorf("GET %s/v1/models: %w", t.url, err)
		}
	} else {
		vs, _, infos, err := offlineStore(path)
		if err != nil {
			return err
		}
		if list, err = stream.ListModels(vs, infos, ""); err != nil {
			return err
		}
	}
	if t.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	printModels(w, list)
	return nil
}

// printModels prints a listing as a table: a row per version.
func printModels(w io.Writer, list stream.ModelsListing) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tTYPE\tVERSION\tCREATED\tSEQ\tN\tORIGIN\tBYTES")
	for _, m := range list.Models {
		name, typ := m.Name, m.Type
		if !m.Configured {
			name += " (not configured)"
		}
		switch {
		case m.KeyScoped:
			fmt.Fprintf(tw, "%s\t%s\t-\tkey-scoped: no versions (its state is its keys')\n", name, m.Type)
			continue
		case len(m.Versions) == 0 && len(m.Corrupt) == 0:
			fmt.Fprintf(tw, "%s\t%s\t-\tno version yet\n", name, m.Type)
		}
		for _, v := range m.Versions {
			n := "?"
			if v.N != nil {
				n = strconv.FormatInt(*v.N, 10)
			}
			origin := v.Origin
			if v.Origin == snapshot.OriginRollback {
				origin = fmt.Sprintf("rollback to %d", v.From)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%d\n", name, typ, v.Version, v.CreatedAt.UTC().Format(time.RFC3339), v.Seq, n, origin, v.Bytes)
			name, typ = "", ""
		}
		for _, c := range m.Corrupt {
			fmt.Fprintf(tw, "%s\t%s\t%d\tCORRUPT: %s\n", name, typ, c.Version, c.Error)
			name, typ = "", ""
		}
		if m.PendingRollback != nil {
			fmt.Fprintf(tw, "%s\t%s\t-\trollback to %d requested: applied when the service starts\n", name, typ, *m.PendingRollback)
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "(the newest %d versions of each model are kept)\n", list.Keep)
}

func rollbackModel(w io.Writer, t *modelsTarget, model string, to uint64) error {
	path, err := t.offline()
	if err != nil {
		return err
	}
	if path == "" {
		body, _ := json.Marshal(map[string]uint64{"to": to})
		resp, err := t.call(http.MethodPost, "/v1/models/"+url.PathEscape(model)+"/rollback", body)
		if err != nil {
			return err
		}
		var r stream.RollbackResponse
		if err := json.Unmarshal(resp, &r); err != nil {
			return fmt.Errorf("POST %s/v1/models/%s/rollback: %w", t.url, model, err)
		}
		if t.json {
			_, err := w.Write(resp)
			return err
		}
		fmt.Fprintf(w, "model %s rolled back to the state of version %d: saved as version %d (snapshot %d)\n", r.Model, r.From, r.Version, r.Seq)
		return nil
	}
	vs, cfg, infos, err := offlineStore(path)
	if err != nil {
		return err
	}
	var info *engine.ModelInfo
	for i := range infos {
		if infos[i].Name == model {
			info = &infos[i]
		}
	}
	switch {
	case info == nil:
		return fmt.Errorf("no model %s is configured in %s", model, path)
	case info.KeyScoped:
		return fmt.Errorf("model %s is key-scoped: its state is its keys' in the key store, and it has no versions", model)
	}
	state, _, err := vs.Load(model, to)
	if err != nil {
		return err
	}
	// The check the service makes: the state of this configuration of
	// the model.
	models, err := engine.BuildModels(cfg, newModelTypes())
	if err != nil {
		return err
	}
	for _, m := range models {
		if m.Name == model && (m.Model.Type() != state.Type || m.Fingerprint != state.Fingerprint) {
			return fmt.Errorf("version %d of model %s was written by another configuration of the model (type %s, fingerprint %s); it is configured now as type %s, fingerprint %s",
				to, model, state.Type, state.Fingerprint, m.Model.Type(), m.Fingerprint)
		}
	}
	req, err := vs.RequestRollback(model, to)
	if err != nil {
		return err
	}
	if t.json {
		b, _ := json.Marshal(req)
		_, err := fmt.Fprintf(w, "%s\n", b)
		return err
	}
	fmt.Fprintf(w, "rollback of model %s to version %d requested (%s): the service applies it when it starts, before it consumes, and records it as a new version.\n"+
		"If the service is running, it is applied only at its next start: use --url to roll back a running service.\n",
		model, to, filepath.Join(vs.Dir(), model, snapshot.PendingRollbackFile))
	return nil
}

// call sends a request to the service at t.url and returns the body of a
// 2xx answer; another answer is an error with the service's reason and
// detail.
func (t *modelsTarget) call(method, path string, body []byte) ([]byte, error) {
	base, err := url.Parse(t.url)
	if err != nil || base.Host == "" || (base.Scheme != "http" && base.Scheme != "https") {
		return nil, fmt.Errorf("--url %q: want http://host:port or https://host:port", t.url)
	}
	tr := &http.Transport{}
	if t.caFile != "" {
		pem, err := os.ReadFile(t.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", t.caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(method, strings.TrimSuffix(t.url, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if t.tokenFile != "" {
		tok, err := readToken(t.tokenFile)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := (&http.Client{Transport: tr, Timeout: time.Minute}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Reason, Detail string }
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Reason != "" {
			return nil, fmt.Errorf("%s %s: %s (%s): %s", method, path, resp.Status, e.Error.Reason, e.Error.Detail)
		}
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

// readToken returns the first token of a tokens file (one a line, blank
// lines and # comments ignored).
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			return line, nil
		}
	}
	return "", fmt.Errorf("--token-file %s holds no token", path)
}
