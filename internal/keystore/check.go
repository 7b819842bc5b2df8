package keystore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// CheckReport is what Check read of a store.
type CheckReport struct {
	Files  int          // table files whose every block was read
	Bytes  int64        // their size
	Tables []TableCheck // every table with a marker or states, by scope and model
	// Problems says what is damaged, one line each, in the order found;
	// empty when every block and record read back and agreed.
	Problems []string
}

// TableCheck is what Check found of one table.
type TableCheck struct {
	Scope, Model string
	Marker       Marker // its marker (the zero Marker when it has none)
	Keys         int64  // states read (Marker.Keys when the table is sound)
	Undo         int    // undo records kept
}

// maxProblems bounds CheckReport.Problems; one more line says how many
// were left out.
const maxProblems = 100

// Check opens the store in dir read-only and reads all of it: every block of
// every table file against its checksum (the data, index, filter and
// metadata blocks, some of which reads of keys never touch), then every key
// through one iterator, decoding each table's marker and undo records and
// counting its states against the marker. state (nil: none) is called with
// every state read, to decode it; its error is reported as a problem of
// that key. Damage goes to the report's Problems; the error is for a store
// that cannot be opened (none in dir, one in use by a running service, a
// damaged MANIFEST or log).
func Check(dir string, state func(scope, model string, key, state []byte) error) (*CheckReport, error) {
	p, err := openReadOnly(dir)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	r := &CheckReport{}
	c := &checker{r: r, tables: map[string]*TableCheck{}}
	c.files(dir, p, readOnlyOptions().MakeReaderOptions())
	c.keys(p, state)
	for _, tc := range c.tables {
		if c.complete && tc.Keys != tc.Marker.Keys {
			c.problem(fmt.Sprintf("table %q/%q: its marker counts %d keys, %d are stored", tc.Scope, tc.Model, tc.Marker.Keys, tc.Keys))
		}
		r.Tables = append(r.Tables, *tc)
	}
	slices.SortFunc(r.Tables, func(a, b TableCheck) int {
		if c := strings.Compare(a.Scope, b.Scope); c != 0 {
			return c
		}
		return strings.Compare(a.Model, b.Model)
	})
	if c.left > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("… and %d more problems", c.left))
	}
	return r, nil
}

// readOnlyOptions are the Pebble options of Check and Summary: read-only,
// Pebble's messages discarded (what is damaged goes to the report), its
// corruption events not fatal.
func readOnlyOptions() *pebble.Options {
	opts := &pebble.Options{ReadOnly: true, Logger: pebbleLogger{slog.New(slog.DiscardHandler)}}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(bloomBitsPerKey)
	}
	listenCorruption(opts, nil)
	opts.EnsureDefaults()
	return opts
}

// openReadOnly opens the store in dir read-only: a running service's store
// is refused (its lock), naming the way to check it.
func openReadOnly(dir string) (*pebble.DB, error) {
	if m, err := filepath.Glob(filepath.Join(dir, "MANIFEST-*")); err != nil || len(m) == 0 {
		return nil, fmt.Errorf("keystore: %s: no key store there (no MANIFEST)", dir)
	}
	p, err := pebble.Open(dir, readOnlyOptions())
	if err != nil {
		if strings.Contains(err.Error(), "lock") {
			return nil, fmt.Errorf("keystore: %s: %w (a running service holds the store: stop it, or check a copy)", dir, err)
		}
		return nil, fmt.Errorf("keystore: open %s: %w", dir, err)
	}
	return p, nil
}

type checker struct {
	r        *CheckReport
	tables   map[string]*TableCheck // by table id
	complete bool                   // the iteration read every key
	left     int                    // problems beyond maxProblems
}

func (c *checker) problem(s string) {
	if len(c.r.Problems) < maxProblems {
		c.r.Problems = append(c.r.Problems, s)
		return
	}
	c.left++
}

// files reads every block of every live table file of p.
func (c *checker) files(dir string, p *pebble.DB, ropts sstable.ReaderOptions) {
	levels, err := p.SSTables()
	if err != nil {
		c.problem(fmt.Sprintf("list the table files: %v", err))
		return
	}
	seen := map[string]bool{}
	for level, tables := range levels {
		for _, t := range tables {
			name := t.BackingSSTNum.String() + ".sst"
			if seen[name] {
				continue
			}
			seen[name] = true
			if err := checkFile(filepath.Join(dir, name), ropts); err != nil {
				c.problem(fmt.Sprintf("file %s (level %d, %s … %s): %s", name, level,
					describeKey(t.Smallest.UserKey), describeKey(t.Largest.UserKey),
					// The reader opened here does not know the file's number.
					strings.Replace(firstLine(err.Error()), "pebble: file 000000: ", "", 1)))
				continue
			}
			c.r.Files++
			c.r.Bytes += int64(t.Size)
		}
	}
}

// checkFile reads every block of the table file at path against its
// checksum.
func checkFile(path string, ropts sstable.ReaderOptions) error {
	f, err := vfs.Default.Open(path)
	if err != nil {
		return err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		return errors.Join(err, f.Close())
	}
	r, err := sstable.NewReader(context.Background(), readable, ropts)
	if err != nil {
		return errors.Join(err, readable.Close())
	}
	return errors.Join(r.ValidateBlockChecksums(), r.Close())
}

// keys iterates over every key of p: markers, undo records and states.
func (c *checker) keys(p *pebble.DB, state func(scope, model string, key, state []byte) error) {
	it, err := p.NewIter(nil)
	if err != nil {
		c.problem(fmt.Sprintf("read the keys: %v", err))
		return
	}
	var last []byte
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		last = append(last[:0], k...)
		v, err := it.ValueAndErr()
		if err != nil {
			break // it.Close reports it
		}
		if len(k) == 0 {
			c.problem("an empty key")
			continue
		}
		id, rest, ok := splitTableID(k[1:])
		if !ok {
			c.problem(fmt.Sprintf("key %q belongs to no table", k))
			continue
		}
		tc := c.table(id)
		switch k[0] {
		case nsMarker:
			if len(rest) != 0 {
				c.problem(fmt.Sprintf("key %q belongs to no table", k))
				continue
			}
			m, err := decodeMarker(v)
			if err != nil {
				c.problem(fmt.Sprintf("table %q/%q: marker: %v", tc.Scope, tc.Model, err))
			}
			tc.Marker = m
		case nsUndo:
			tc.Undo++
			if err := checkUndo(v); err != nil {
				c.problem(fmt.Sprintf("table %q/%q: undo record %x: %v", tc.Scope, tc.Model, rest, err))
			}
		case nsData:
			tc.Keys++
			if state != nil {
				if err := state(tc.Scope, tc.Model, rest, v); err != nil {
					c.problem(fmt.Sprintf("table %q/%q: key %q: %v", tc.Scope, tc.Model, rest, err))
				}
			}
		default:
			c.problem(fmt.Sprintf("key %q is in no namespace of the store", k))
		}
	}
	if err := it.Close(); err != nil {
		c.problem(fmt.Sprintf("the keys after %s could not be read: %s", describeKey(last), firstLine(err.Error())))
		return
	}
	c.complete = true
}

// table returns the check of the table with id, adding it.
func (c *checker) table(id []byte) *TableCheck {
	if tc := c.tables[string(id)]; tc != nil {
		return tc
	}
	scope, model, _ := parseTableID(id)
	tc := &TableCheck{Scope: scope, Model: model}
	c.tables[string(id)] = tc
	return tc
}

// checkUndo decodes every entry of an undo record.
func checkUndo(rec []byte) error {
	if _, err := undoMarker(rec); err != nil {
		return err
	}
	_, _, rest, _ := undoValue(rec[1:])
	for len(rest) > 0 {
		var ok bool
		if _, rest, ok = undoBytes(rest); !ok {
			return errors.New("corrupt undo record: key")
		}
		if _, _, rest, ok = undoValue(rest); !ok {
			return errors.New("corrupt undo record: state")
		}
	}
	return nil
}

// splitTableID splits b into a table id (tableID's encoding) and the rest.
func splitTableID(b []byte) (id, rest []byte, ok bool) {
	n := 0
	for range 2 {
		l, w := binary.Uvarint(b[n:])
		if w <= 0 || l > uint64(len(b)-n-w) {
			return nil, nil, false
		}
		n += w + int(l)
	}
	return b[:n], b[n:], true
}

// describeKey names a Pebble key of the store for messages: its namespace,
// table and entity key.
func describeKey(k []byte) string {
	if len(k) == 0 {
		return "the start"
	}
	id, rest, ok := splitTableID(k[1:])
	if !ok {
		return fmt.Sprintf("%q", k)
	}
	scope, model, _ := parseTableID(id)
	table := fmt.Sprintf("table %q/%q", scope, model)
	switch k[0] {
	case nsMarker:
		return table + " marker"
	case nsUndo:
		return table + " undo record"
	case nsData:
		return fmt.Sprintf("%s key %q", table, bytes.Clone(rest))
	}
	return fmt.Sprintf("%q", k)
}

// Summary opens the store in dir read-only and returns every table's
// marker: what it reflects and its count of distinct stored keys. It reads
// markers only, whatever the number of keys; Check reads everything.
func Summary(dir string) ([]TableCheck, error) {
	p, err := openReadOnly(dir)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	it, err := p.NewIter(&pebble.IterOptions{LowerBound: []byte{nsMarker}, UpperBound: []byte{nsMarker + 1}})
	if err != nil {
		return nil, fmt.Errorf("keystore: %s: %w", dir, err)
	}
	var out []TableCheck
	for ok := it.First(); ok; ok = it.Next() {
		scope, model, ok := parseTableID(it.Key()[1:])
		v, err := it.ValueAndErr()
		if err != nil {
			break // it.Close reports it
		}
		m, derr := decodeMarker(v)
		if !ok || derr != nil {
			it.Close()
			return nil, &CorruptError{Op: "read the markers of", Table: dir, Err: fmt.Errorf("marker %q: %v", it.Key(), derr)}
		}
		out = append(out, TableCheck{Scope: scope, Model: model, Marker: m, Keys: m.Keys})
	}
	if err := it.Close(); err != nil {
		if ce := corruptErr("read the markers of", dir, err); ce != nil {
			return nil, ce
		}
		return nil, fmt.Errorf("keystore: %s: %w", dir, err)
	}
	return out, nil
}
