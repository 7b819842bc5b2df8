package snapshot

import (
	"errors"
	"fmt"
	"time"
)

// FormatVersion is the version of the snapshot file format that Encode and
// AppendEncode write. Decode reads this version and every older one.
const FormatVersion = 1

// Limits enforced by Validate (and therefore by both stores' Save) and by
// Decode. They keep names usable as Kafka record keys and bound the work a
// hostile input can cause.
const (
	MaxNameLen        = 255 // model name and type, in bytes
	MaxTopicLen       = 249 // Kafka's own limit on topic names
	MaxFingerprintLen = 1024
)

var (
	// ErrCorrupt is wrapped by every error that reports bytes which are not a
	// valid snapshot: bad magic, checksum mismatch, truncation, bad lengths.
	// Use errors.As with *CorruptError for the part that is bad.
	ErrCorrupt = errors.New("snapshot: corrupt")

	// ErrNoSnapshot is returned by the stores' LoadLatest when there is no
	// usable snapshot.
	ErrNoSnapshot = errors.New("snapshot: none found")

	// ErrUnsupportedVersion is wrapped when the bytes carry a format version
	// newer than FormatVersion (written by a newer binary). It is not
	// ErrCorrupt: the data may be fine, this binary cannot read it.
	ErrUnsupportedVersion = errors.New("snapshot: unsupported format version")

	// ErrInvalid is wrapped by Validate: the snapshot cannot be stored as is.
	ErrInvalid = errors.New("snapshot: invalid")
)

// Offset is the position of one input partition that a snapshot's state
// includes: Offset is the next offset to process, so a restore seeks the
// partition to exactly this offset.
type Offset struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Model is the serialised state of one configured model. The package does not
// interpret Type or Data.
type Model struct {
	Name string // unique within a snapshot, 1..MaxNameLen bytes
	Type string // model type as configured, 0..MaxNameLen bytes
	// Fingerprint of the model's configuration, 0..MaxFingerprintLen bytes:
	// the caller restores Data only into an identically configured model.
	Fingerprint string
	Data        []byte
}

// Snapshot is the durable state of the service: every model's bytes together
// with the input offsets that state includes.
type Snapshot struct {
	Format      uint32    // format version the snapshot was read with / written as
	Seq         uint64    // increasing snapshot number (the caller sets it)
	CreatedAt   time.Time // stored with nanosecond precision, restored in UTC
	Fingerprint string    // config fingerprint (hex string)
	Offsets     []Offset
	Models      []Model
}

// Size returns the total number of model data bytes.
func (s *Snapshot) Size() int {
	n := 0
	for i := range s.Models {
		n += len(s.Models[i].Data)
	}
	return n
}

// Model returns the model with the given name, or nil.
func (s *Snapshot) Model(name string) *Model {
	for i := range s.Models {
		if s.Models[i].Name == name {
			return &s.Models[i]
		}
	}
	return nil
}

// Validate reports whether s can be stored: model names non-empty, unique and
// at most MaxNameLen bytes; types at most MaxNameLen bytes; offsets with a
// non-empty topic, non-negative partition and offset, and no partition listed
// twice. The error wraps ErrInvalid.
func (s *Snapshot) Validate() error {
	if len(s.Fingerprint) > MaxFingerprintLen {
		return fmt.Errorf("%w: fingerprint is %d bytes, limit %d", ErrInvalid, len(s.Fingerprint), MaxFingerprintLen)
	}
	type tp struct {
		t string
		p int32
	}
	seenTP := make(map[tp]struct{}, len(s.Offsets))
	for _, o := range s.Offsets {
		switch {
		case o.Topic == "" || len(o.Topic) > MaxTopicLen:
			return fmt.Errorf("%w: offset topic %q: length must be 1..%d", ErrInvalid, o.Topic, MaxTopicLen)
		case o.Partition < 0:
			return fmt.Errorf("%w: %s/%d: negative partition", ErrInvalid, o.Topic, o.Partition)
		case o.Offset < 0:
			return fmt.Errorf("%w: %s/%d: negative offset %d", ErrInvalid, o.Topic, o.Partition, o.Offset)
		}
		k := tp{o.Topic, o.Partition}
		if _, dup := seenTP[k]; dup {
			return fmt.Errorf("%w: %s/%d listed twice", ErrInvalid, o.Topic, o.Partition)
		}
		seenTP[k] = struct{}{}
	}
	seen := make(map[string]struct{}, len(s.Models))
	for i := range s.Models {
		m := &s.Models[i]
		if m.Name == "" || len(m.Name) > MaxNameLen {
			return fmt.Errorf("%w: model name %q: length must be 1..%d", ErrInvalid, m.Name, MaxNameLen)
		}
		if len(m.Type) > MaxNameLen {
			return fmt.Errorf("%w: model %q: type is %d bytes, limit %d", ErrInvalid, m.Name, len(m.Type), MaxNameLen)
		}
		if len(m.Fingerprint) > MaxFingerprintLen {
			return fmt.Errorf("%w: model %q: fingerprint is %d bytes, limit %d", ErrInvalid, m.Name, len(m.Fingerprint), MaxFingerprintLen)
		}
		if _, dup := seen[m.Name]; dup {
			return fmt.Errorf("%w: model %q listed twice", ErrInvalid, m.Name)
		}
		seen[m.Name] = struct{}{}
	}
	return nil
}

// CorruptError describes one bad part of an encoded snapshot or changelog
// record. It wraps ErrCorrupt.
type CorruptError struct {
	Part   string // "header", "model \"mam\"", "trailer", "manifest", …
	Detail string // what is wrong: "checksum mismatch", "truncated", …
}

func (e *CorruptError) Error() string {
	return "snapshot: corrupt " + e.Part + ": " + e.Detail
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

func corrupt(part, format string, args ...any) error {
	return &CorruptError{Part: part, Detail: fmt.Sprintf(format, args...)}
}
