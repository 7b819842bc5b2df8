package eval

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/streamer/streamer/stream/wire"
)

// The input formats.
const (
	FormatCSV    = "csv"    // header row, numeric features, label last (empty = unlabelled)
	FormatJSONL  = "jsonl"  // one wire-format event per line (stream/wire)
	FormatLIBSVM = "libsvm" // "label idx:val …", 1-based indices, missing = 0
)

// FormatFromPath picks the format from a file name's extension: .csv;
// .jsonl, .ndjson or .json; .libsvm, .svm or .txt.
func FormatFromPath(path string) (string, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		return FormatCSV, nil
	case ".jsonl", ".ndjson", ".json":
		return FormatJSONL, nil
	case ".libsvm", ".svm", ".txt":
		return FormatLIBSVM, nil
	}
	return "", fmt.Errorf("eval: %s: cannot tell the format from the extension (give one of %s, %s, %s)",
		path, FormatCSV, FormatJSONL, FormatLIBSVM)
}

// Row is one input row. X has the configured dimension.
type Row struct {
	X []float64
	// Idx and Val are a hashed row's features (JSON Lines read with
	// features.hash): x is all zero but x[Idx[k]] += Val[k]; X is then
	// empty. Field[k] is entry k's field (wire.Event.Field: its
	// namespace's place in features.namespaces), for the models that read
	// fields (online.FieldModel); nil means every field is 0.
	Idx      []int32
	Val      []float64
	Field    []uint8
	Label    float64 // wire value (true/false arrive as 1/0); only when HasLabel
	HasLabel bool
}

// RowError is a row that cannot be used (it is skipped and counted, like a
// dead-lettered event): the reader can go on after it.
type RowError struct {
	Line   int    // 1-based line number
	Reason string // e.g. "not_json", "bad_number", "wrong_dimension", "non_finite"
	Detail string
}

func (e *RowError) Error() string {
	return fmt.Sprintf("line %d: %s: %s", e.Line, e.Reason, e.Detail)
}

// Reasons of RowError beyond the wire package's.
const (
	ReasonBadNumber = "bad_number" // a field that is not a number
	ReasonBadIndex  = "bad_index"  // a LIBSVM index that is not in 1..dim
)

// Reader reads rows one at a time.
type Reader interface {
	// Next reads the next row into r, reusing r.X. It returns io.EOF at
	// the end, a *RowError for a bad row (call Next again to go on) and
	// any other error for a fatal problem.
	Next(r *Row) error
}

// offsetter is implemented by the readers: offset is the number of bytes
// of the input consumed by the rows returned so far (read-ahead excluded).
type offsetter interface{ offset() int64 }

// NewReader returns a reader of the given format over src for rows of dim
// features. names (the configured feature names, or nil) let a JSON Lines
// event send its features as an object and let a CSV header put the columns
// in any order; maxBytes limits a JSON Lines event (0 = no limit).
func NewReader(format string, src io.Reader, dim int, names []string, maxBytes int) (Reader, error) {
	if dim < 1 {
		return nil, fmt.Errorf("eval: dimension %d < 1", dim)
	}
	switch format {
	case FormatCSV:
		return newCSVReader(src, dim, names)
	case FormatJSONL:
		dec, err := wire.NewDecoder(dim, names, maxBytes)
		if err != nil {
			return nil, err
		}
		return &jsonlReader{lines: newLines(src), dec: dec}, nil
	case FormatLIBSVM:
		return &libsvmReader{lines: newLines(src), dim: dim}, nil
	}
	return nil, fmt.Errorf("eval: unknown format %q (one of %s, %s, %s)", format, FormatCSV, FormatJSONL, FormatLIBSVM)
}

func resize(x []float64, dim int) []float64 {
	if cap(x) < dim {
		return make([]float64, dim)
	}
	x = x[:dim]
	clear(x)
	return x
}

// parseNumber parses a finite number.
func parseNumber(s []byte, line int) (float64, error) {
	v, err := strconv.ParseFloat(string(bytes.TrimSpace(s)), 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, &RowError{Line: line, Reason: ReasonBadNumber, Detail: fmt.Sprintf("%q is not a number", s)}
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, &RowError{Line: line, Reason: string(wire.ReasonNonFinite), Detail: fmt.Sprintf("%q is not finite", s)}
	}
	return v, nil
}

// csvReader reads a CSV file with a header row and the label last.
type csvReader struct {
	r    *csv.Reader
	dim  int
	perm []int // perm[j] = position in X of CSV column j < dim
}

func newCSVReader(src io.Reader, dim int, names []string) (*csvReader, error) {
	r := csv.NewReader(src)
	r.ReuseRecord = true
	r.FieldsPerRecord = dim + 1
	r.TrimLeadingSpace = true
	header, err := r.Read()
	switch {
	case err == io.EOF:
		return nil, errors.New("eval: csv: empty file (no header row)")
	case err != nil:
		var pe *csv.ParseError
		if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
			return nil, fmt.Errorf("eval: csv: the header has %d columns; features.dim %d needs %d (features, then the label)", len(header), dim, dim+1)
		}
		return nil, fmt.Errorf("eval: csv: %w", err)
	}
	c := &csvReader{r: r, dim: dim, perm: make([]int, dim)}
	for j := range c.perm {
		c.perm[j] = j
	}
	// With configured names, a header naming the same features in another
	// order maps them by name.
	if names != nil {
		index := make(map[string]int, len(names))
		for i, n := range names {
			index[n] = i
		}
		perm := make([]int, dim)
		ok := true
		for j, h := range header[:dim] {
			h = strings.TrimSpace(h)
			i, found := index[h]
			if !found {
				ok = false
				break
			}
			perm[j] = i
			delete(index, h) // a repeated name does not map twice
		}
		if ok {
			c.perm = perm
		}
	}
	return c, nil
}

func (c *csvReader) offset() int64 { return c.r.InputOffset() }

func (c *csvReader) Next(r *Row) error {
	rec, err := c.r.Read()
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
			return &RowError{Line: pe.Line, Reason: string(wire.ReasonWrongDimension),
				Detail: fmt.Sprintf("%d columns, want %d", len(rec), c.dim+1)}
		}
		if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrQuote) && pe.StartLine != pe.Line {
			// A quote opened a field that ran on over the next lines: the
			// rows there were read as that one field, not skipped one by one.
			return fmt.Errorf("eval: csv: line %d: a quoted field is not closed before line %d; the rows between were read as one field (fix the quote; none of them is evaluated)", pe.StartLine, pe.Line)
		}
		if errors.As(err, &pe) {
			return &RowError{Line: pe.Line, Reason: ReasonBadNumber, Detail: pe.Err.Error()}
		}
		return err
	}
	line, _ := c.r.FieldPos(0)
	r.X = resize(r.X, c.dim)
	for j, s := range rec[:c.dim] {
		v, err := parseNumber([]byte(s), line)
		if err != nil {
			return err
		}
		r.X[c.perm[j]] = v
	}
	r.HasLabel, r.Label = false, 0
	if s := strings.TrimSpace(rec[c.dim]); s != "" {
		v, err := parseNumber([]byte(s), line)
		if err != nil {
			return err
		}
		r.Label, r.HasLabel = v, true
	}
	return nil
}

// lines reads non-blank lines of any length.
type lines struct {
	r    *bufio.Reader
	line int
	off  int64 // bytes consumed
	buf  []byte
}

func newLines(src io.Reader) *lines { return &lines{r: bufio.NewReaderSize(src, 64<<10)} }

// next returns the next line that is not blank (trimmed), io.EOF at the end.
func (l *lines) next() ([]byte, error) {
	for {
		l.buf = l.buf[:0]
		var err error
		for {
			var chunk []byte
			chunk, err = l.r.ReadSlice('\n')
			l.buf = append(l.buf, chunk...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if len(l.buf) == 0 && err == io.EOF {
			return nil, io.EOF
		}
		l.off += int64(len(l.buf))
		l.line++
		if s := bytes.TrimSpace(l.buf); len(s) > 0 {
			return s, nil
		}
		if err == io.EOF {
			return nil, io.EOF
		}
	}
}

// jsonlReader decodes wire-format events, one per line.
type jsonlReader struct {
	lines  *lines
	dec    *wire.Decoder
	ev     wire.Event
	hashed bool
}

// NewHashedReader returns a reader of JSON Lines events whose features are
// hashed as the service hashes them (features.hash): the rows are sparse
// (Row.Idx, Row.Val, Row.Field).
func NewHashedReader(src io.Reader, h wire.HashConfig, maxBytes int) (Reader, error) {
	dec, err := wire.NewDecoder(1, nil, maxBytes) // WithHashing sets the dimension, 2^Bits
	if err != nil {
		return nil, err
	}
	if dec, err = dec.WithHashing(h); err != nil {
		return nil, err
	}
	return &jsonlReader{lines: newLines(src), dec: dec, hashed: true}, nil
}

func (j *jsonlReader) offset() int64 { return j.lines.off }

func (j *jsonlReader) Next(r *Row) error {
	b, err := j.lines.next()
	if err != nil {
		return err
	}
	if err := j.dec.Decode(b, &j.ev); err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			return &RowError{Line: j.lines.line, Reason: string(we.Reason), Detail: we.Error()}
		}
		return &RowError{Line: j.lines.line, Reason: string(wire.ReasonNotJSON), Detail: err.Error()}
	}
	if j.hashed {
		r.X = r.X[:0]
		r.Idx = append(r.Idx[:0], j.ev.Idx...)
		r.Val = append(r.Val[:0], j.ev.Val...)
		r.Field = append(r.Field[:0], j.ev.Field...)
	} else {
		r.X = resize(r.X, j.dec.Dim())
		copy(r.X, j.ev.Features)
	}
	r.Label, r.HasLabel = j.ev.Label, j.ev.HasLabel
	return nil
}

// libsvmReader reads "label idx:val …" lines (1-based indices in any order,
// missing = 0; a line starting with '#' is a comment).
type libsvmReader struct {
	lines *lines
	dim   int
}

func (l *libsvmReader) offset() int64 { return l.lines.off }

func (l *libsvmReader) Next(r *Row) error {
	var b []byte
	for {
		var err error
		if b, err = l.lines.next(); err != nil {
			return err
		}
		if b[0] != '#' {
			break
		}
	}
	if i := bytes.IndexByte(b, '#'); i >= 0 { // trailing comment
		b = b[:i]
	}
	line := l.lines.line
	r.X = resize(r.X, l.dim)
	fields := bytes.Fields(b)
	y, err := parseNumber(fields[0], line)
	if err != nil {
		return err
	}
	r.Label, r.HasLabel = y, true
	for _, f := range fields[1:] {
		k := bytes.IndexByte(f, ':')
		if k < 0 {
			return &RowError{Line: line, Reason: ReasonBadNumber, Detail: fmt.Sprintf("%q is not idx:value", f)}
		}
		idx, err := strconv.Atoi(string(f[:k]))
		if err != nil || idx < 1 || idx > l.dim {
			return &RowError{Line: line, Reason: ReasonBadIndex, Detail: fmt.Sprintf("index %q is not in 1..%d", f[:k], l.dim)}
		}
		v, err := parseNumber(f[k+1:], line)
		if err != nil {
			return err
		}
		r.X[idx-1] = v
	}
	return nil
}
