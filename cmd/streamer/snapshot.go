package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/spf13/cobra"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/stream/holder"
)

func newSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Inspect and verify snapshot files",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "inspect PATH",
		Short: "Print what a snapshot holds (a file, or every snapshot in a directory, and its key store's tables)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return inspectSnapshots(cmd.OutOrStdout(), newModelTypes(), args[0], true)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "verify PATH",
		Short: "Check snapshot files and read every block of the key store in PATH/keystore; exit non-zero if anything is corrupt",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return inspectSnapshots(cmd.OutOrStdout(), newModelTypes(), args[0], false)
		},
	})
	var brokers []string
	changelog := &cobra.Command{
		Use:   "changelog TOPIC",
		Short: "Print the newest state of every scope in a changelog topic (per partition with snapshot.scope: partition) and the merged mergeable models",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return inspectChangelog(cmd.Context(), cmd.OutOrStdout(), newModelTypes(), brokers, args[0])
		},
	}
	changelog.Flags().StringSliceVar(&brokers, "brokers", []string{"127.0.0.1:9092"}, "Kafka bootstrap brokers")
	cmd.AddCommand(changelog)
	return cmd
}

// inspectChangelog prints every scope's newest snapshot in a changelog
// topic and, for mam models whose statistics merge, the merge over all
// partitions: what every instance of a scaled-out group scores with.
func inspectChangelog(ctx context.Context, w io.Writer, types *online.Registry, brokers []string, topic string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// The topic first: reading one that does not exist waits for its
	// leader until the deadline, then says only that.
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	if md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}}); err == nil {
		for _, t := range md.Topics {
			if t.Name == topic && errors.Is(t.Error, kafka.UnknownTopicOrPartition) {
				return fmt.Errorf("%s: no such topic on %s (the changelog is snapshot.changelog_topic's)", topic, strings.Join(brokers, ","))
			}
		}
	}
	cl := snapshot.NewChangelogStore(brokers, topic, "streamer-inspect")
	defer cl.Close()
	tail := cl.Tail()
	if _, err := tail.Poll(ctx); err != nil {
		return err
	}
	scopes := append([]string{""}, tail.Scopes()...)
	merged := map[string][]*online.MAM{}
	var order []string
	found := 0
	for _, scope := range scopes {
		snap, err := tail.Latest(scope)
		if errors.Is(err, snapshot.ErrNoSnapshot) && scope == "" {
			continue
		}
		name := "instance state"
		if scope != "" {
			name = "partition " + scope
		}
		if err != nil {
			fmt.Fprintf(w, "%s: BAD: %v\n", name, err)
			continue
		}
		found++
		fmt.Fprintf(w, "%s: seq %d, created %s (%s ago), offsets", name, snap.Seq,
			snap.CreatedAt.Format(time.RFC3339), time.Since(snap.CreatedAt).Round(time.Second))
		for _, o := range snap.Offsets {
			fmt.Fprintf(w, " %s/%d@%d", o.Topic, o.Partition, o.Offset)
		}
		fmt.Fprintln(w)
		for _, m := range snap.Models {
			st := describeModel(types, m)
			fmt.Fprintf(w, "    %s\n", st)
			if st.err == nil {
				if mam, ok := st.model.(*online.MAM); ok && mam.Mergeable() && scope != "" {
					if _, seen := merged[m.Name]; !seen {
						order = append(order, m.Name)
					}
					merged[m.Name] = append(merged[m.Name], mam)
				}
			}
		}
	}
	if found == 0 {
		return fmt.Errorf("%s: no snapshot in the changelog", topic)
	}
	for _, name := range order {
		parts := merged[name]
		g, err := online.NewMAM(parts[0].Dim(), parts[0].Params())
		if err != nil {
			return err
		}
		if err := g.MergeAll(parts...); err != nil {
			fmt.Fprintf(w, "merged %s: %v\n", name, err)
			continue
		}
		pos, neg := g.ClassCounts()
		fmt.Fprintf(w, "merged %-16s over %d partitions: n=%d (+1: %d, -1: %d)\n", name, len(parts), g.Examples(), pos, neg)
	}
	return nil
}

func snapshotFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	files, err := filepath.Glob(filepath.Join(path, "*.snap"))
	if err != nil {
		return nil, err
	}
	sort.Sort(sort.Reverse(sort.StringSlice(files)))
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no snapshot files", path)
	}
	return files, nil
}

// modelState is what a snapshot says about one model.
type modelState struct {
	name, typ string
	bytes     int
	model     online.Model // restored (nil: keyed, legacy or bad)
	n         int64        // examples (-1: unknown)
	keys      int          // key-scoped: instances (-1: not key-scoped)
	note      string
	err       error
}

func (s modelState) String() string {
	out := fmt.Sprintf("%-16s %-8s %10d bytes", s.name, s.typ, s.bytes)
	switch {
	case s.err != nil:
		return out + "  BAD: " + s.err.Error()
	case s.keys >= 0:
		out += fmt.Sprintf("  keys=%d", s.keys)
	}
	if s.n >= 0 {
		out += fmt.Sprintf("  n=%d", s.n)
	}
	if s.note != "" {
		out += "  (" + s.note + ")"
	}
	return out
}

// describeModel restores one model's saved state through the registry, so
// that every registered type (key-scoped models included) is checked by
// decoding it fully, as a restore at start-up would.
func describeModel(types *online.Registry, m snapshot.Model) modelState {
	st := modelState{name: m.Name, typ: m.Type, bytes: len(m.Data), n: -1, keys: -1}
	// checked is a decoded state, of the type the snapshot records.
	checked := func(mod online.Model, err error) (online.Model, error) {
		if err != nil {
			return nil, err
		}
		if mod.Type() != m.Type {
			return nil, fmt.Errorf("state of a %s model recorded as %s", mod.Type(), m.Type)
		}
		return mod, nil
	}
	if m.Type == engine.RankStateType {
		st.note = fmt.Sprintf("the model that ranks: %s", m.Data)
		return st
	}
	if m.Type == engine.CalibrationStateType {
		pairs, added, err := engine.CalibrationSummary(m.Data)
		if err != nil {
			st.err = err
			return st
		}
		st.note = fmt.Sprintf("calibration window: %d pairs (of %d given)", pairs, added)
		return st
	}
	if holder.IsKeyed(m.Data) {
		// The checkpoint's changed keys are in the snapshot (each is
		// decoded); the others are in the key store.
		keys, states, err := holder.DecodeKeyed(m.Data)
		if err != nil {
			st.err = err
			return st
		}
		examples, known, err := holder.KeyedSummary(m.Data)
		if err != nil {
			st.err = err
			return st
		}
		st.keys, st.n = int(known), examples
		legacy := examples < 0
		if legacy {
			st.keys, st.n = len(keys), 0
		}
		st.note = fmt.Sprintf("%d keys changed in this checkpoint", len(keys))
		for i, b := range states {
			mod, err := checked(engine.DecodeKeyState(types, m.Name, b))
			switch {
			case errors.Is(err, online.ErrNeedsConfig):
				st.n, st.note = -1, "earlier encoding: decodes only with its configuration"
			case err != nil:
				st.err = fmt.Errorf("key %q: %w", keys[i], err)
				return st
			case legacy && st.n >= 0:
				st.n += mod.Examples()
			}
		}
		return st
	}
	mod, err := checked(types.Restore(m.Data))
	switch {
	case errors.Is(err, online.ErrNeedsConfig):
		st.note = "earlier encoding: decodes only with its configuration"
	case err != nil:
		st.err = err
	default:
		st.model, st.n = mod, mod.Examples()
	}
	return st
}

func inspectSnapshots(w io.Writer, types *online.Registry, path string, detail bool) error {
	files, err := snapshotFiles(path)
	if err != nil {
		return err
	}
	bad := 0
	for _, f := range files {
		snap, err := snapshot.ReadFile(f)
		if err != nil {
			bad++
			fmt.Fprintf(w, "%s: CORRUPT: %v\n", f, err)
			continue
		}
		// A snapshot is only good if every model's state restores.
		var rows []modelState
		var firstBad *modelState
		for _, m := range snap.Models {
			r := describeModel(types, m)
			rows = append(rows, r)
			if r.err != nil && firstBad == nil {
				firstBad = &rows[len(rows)-1]
			}
		}
		if firstBad != nil {
			bad++
		}
		if !detail {
			status := "ok"
			if firstBad != nil {
				status = fmt.Sprintf("BAD: model %s: %v", firstBad.name, firstBad.err)
			}
			fmt.Fprintf(w, "%s: %s (seq %d, format %d, %d models)\n", f, status, snap.Seq, snap.Format, len(snap.Models))
			continue
		}
		fmt.Fprintf(w, "%s\n  format version  %d\n  checksum        ok (CRC-32C)\n  seq             %d\n", f, snap.Format, snap.Seq)
		fmt.Fprintf(w, "  created         %s (%s ago)\n  fingerprint     %s\n",
			snap.CreatedAt.Format(time.RFC3339), time.Since(snap.CreatedAt).Round(time.Second), snap.Fingerprint)
		fmt.Fprintf(w, "  offsets (next offset to process):\n")
		for _, o := range snap.Offsets {
			fmt.Fprintf(w, "    %s/%d  %d\n", o.Topic, o.Partition, o.Offset)
		}
		fmt.Fprintf(w, "  models:\n")
		for _, r := range rows {
			fmt.Fprintf(w, "    %s\n", r)
		}
	}
	var errs []error
	if bad > 0 {
		errs = append(errs, fmt.Errorf("%d of %d snapshots are bad", bad, len(files)))
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		if dir := filepath.Join(path, "keystore"); dirExists(dir) {
			errs = append(errs, inspectKeyStore(w, types, dir, detail))
		}
	}
	return errors.Join(errs...)
}

func dirExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// inspectKeyStore prints the key store of key-scoped models in dir: with
// detail (inspect) each table's marker, its checkpoint and count of
// distinct keys stored (markers only); without (verify) it reads every
// block of every file and every key, decoding each state through the
// model registry, and reports damage with what to do.
func inspectKeyStore(w io.Writer, types *online.Registry, dir string, detail bool) error {
	if detail {
		tables, err := keystore.Summary(dir)
		if err != nil {
			fmt.Fprintf(w, "%s: %v\n", dir, err)
			return nil // inspect shows what it can; verify judges
		}
		fmt.Fprintf(w, "%s (the key store of key-scoped models: every key's state as of the table's checkpoint)\n", dir)
		for _, t := range tables {
			fmt.Fprintf(w, "  table %-24s checkpoint %d  keys=%d\n", fmt.Sprintf("%q/%s", t.Scope, t.Model), t.Marker.Seq, t.Marker.Keys)
		}
		return nil
	}
	r, err := keystore.Check(dir, func(_, model string, _, state []byte) error {
		_, err := engine.DecodeKeyState(types, model, state)
		if errors.Is(err, online.ErrNeedsConfig) {
			return nil
		}
		return err
	})
	if err != nil {
		fmt.Fprintf(w, "%s: NOT CHECKED: %v\n", dir, err)
		return fmt.Errorf("the key store %s could not be checked: %w", dir, err)
	}
	if len(r.Problems) == 0 {
		fmt.Fprintf(w, "%s: ok (%d table files, %d bytes, every block and key read)\n", dir, r.Files, r.Bytes)
		for _, t := range r.Tables {
			fmt.Fprintf(w, "  table %-24s checkpoint %d  keys=%d  undo=%d\n", fmt.Sprintf("%q/%s", t.Scope, t.Model), t.Marker.Seq, t.Keys, t.Undo)
		}
		return nil
	}
	fmt.Fprintf(w, "%s: DAMAGED:\n", dir)
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
	fmt.Fprintf(w, "  what to do: the service serves the other keys and fails the damaged ones (not learning; streamer_model_keys_failed), or refuses to start when a table's marker is damaged. "+
		"To repair: stop the service, move %s aside and start it again: with snapshot.changelog_topic every key is rebuilt from the changelog, losing nothing; "+
		"without one, start it with --allow-empty-state: each key-scoped model keeps the keys its newest snapshot's checkpoint changed, and every other key's state is lost "+
		"(docs/operations.md, \"Key store damage\")\n", dir)
	return fmt.Errorf("the key store %s is damaged", dir)
}
