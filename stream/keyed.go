package stream

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
)

// keyedModels is a model with `scope: key`: one instance per event key
// (e.g. one ranking model per user, trained on that user's items), created
// on first sight from the model's configuration. At most max instances are
// kept in memory; the least recently used one is evicted first. With a
// directory (snapshot.dir/keys), an evicted instance's state is written
// there and read back when its key returns; without one it is dropped
// (counted). Instances in memory are part of every snapshot.
type keyedModels struct {
	proto   online.Model // answers Type, Dim and Label; never learns
	factory func() (online.Model, error)
	max     int
	dir     string

	index map[string]*list.Element
	lru   *list.List // front = most recent

	evicted, dropped, reloaded int64
}

type keyedEntry struct {
	key string
	m   online.Model
}

func newKeyedModels(factory func() (online.Model, error), max int, dir string) (*keyedModels, error) {
	proto, err := factory()
	if err != nil {
		return nil, err
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("keyed models: %w", err)
		}
	}
	return &keyedModels{proto: proto, factory: factory, max: max, dir: dir, index: map[string]*list.Element{}, lru: list.New()}, nil
}

// get returns the instance for key, creating (or reloading) it if needed.
func (k *keyedModels) get(key []byte) (online.Model, error) {
	if e, ok := k.index[string(key)]; ok {
		k.lru.MoveToFront(e)
		return e.Value.(*keyedEntry).m, nil
	}
	m, err := k.factory()
	if err != nil {
		return nil, err
	}
	if k.dir != "" {
		if b, err := os.ReadFile(k.path(key)); err == nil {
			if err := m.UnmarshalBinary(b); err != nil {
				return nil, fmt.Errorf("keyed models: reload %q: %w", key, err)
			}
			k.reloaded++
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("keyed models: reload %q: %w", key, err)
		}
	}
	s := string(key)
	k.index[s] = k.lru.PushFront(&keyedEntry{key: s, m: m})
	for k.lru.Len() > k.max {
		if err := k.evict(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (k *keyedModels) evict() error {
	e := k.lru.Back()
	ent := e.Value.(*keyedEntry)
	if k.dir != "" {
		b, err := ent.m.MarshalBinary()
		if err != nil {
			return fmt.Errorf("keyed models: evict %q: %w", ent.key, err)
		}
		tmp := k.path([]byte(ent.key)) + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return fmt.Errorf("keyed models: evict %q: %w", ent.key, err)
		}
		if err := os.Rename(tmp, k.path([]byte(ent.key))); err != nil {
			return fmt.Errorf("keyed models: evict %q: %w", ent.key, err)
		}
		k.evicted++
	} else {
		k.dropped++
	}
	k.lru.Remove(e)
	delete(k.index, ent.key)
	return nil
}

func (k *keyedModels) path(key []byte) string {
	h := sha256.Sum256(key)
	return filepath.Join(k.dir, hex.EncodeToString(h[:16])+".model")
}

// len is the number of instances in memory.
func (k *keyedModels) len() int { return k.lru.Len() }

// Encoding of the instances in memory (least recent first, so that a
// restore rebuilds the same LRU order; online/codec's conventions): magic
// "KEYD", count u32, then per instance the key and its model's state, each
// as bytes (u32 length + bytes).
const keyedMagic = "KEYD"

// maxKeyedInstances bounds the count of a decoded keyed state.
const maxKeyedInstances = 1 << 26

func (k *keyedModels) MarshalBinary() ([]byte, error) {
	dst := codec.AppendU32([]byte(keyedMagic), uint32(k.lru.Len()))
	for e := k.lru.Back(); e != nil; e = e.Prev() {
		ent := e.Value.(*keyedEntry)
		b, err := ent.m.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("keyed models: %q: %w", ent.key, err)
		}
		dst = codec.AppendBytes(dst, []byte(ent.key))
		dst = codec.AppendBytes(dst, b)
	}
	return dst, nil
}

// IsKeyed reports whether b is the encoded state of a key-scoped model
// (scope: key).
func IsKeyed(b []byte) bool { return bytes.HasPrefix(b, []byte(keyedMagic)) }

// DecodeKeyed splits the encoded state of a key-scoped model into its
// instances' keys and encoded states (aliasing b), least recently used
// first. Errors wrap online.ErrFormat.
func DecodeKeyed(b []byte) (keys []string, states [][]byte, err error) {
	if !IsKeyed(b) {
		return nil, nil, fmt.Errorf("%w: keyed models: bad magic", online.ErrFormat)
	}
	r := codec.NewReader(b[len(keyedMagic):], online.ErrFormat)
	n := r.Count("keyed instances", maxKeyedInstances, 8)
	for range n {
		key := r.Bytes()
		state := r.Bytes()
		if r.Err() != nil {
			break
		}
		keys = append(keys, string(key))
		states = append(states, state)
	}
	if err := r.End(); err != nil {
		return nil, nil, fmt.Errorf("keyed models: %w", err)
	}
	return keys, states, nil
}

// UnmarshalBinary replaces the instances in memory with the encoded ones.
// On error k is unchanged.
func (k *keyedModels) UnmarshalBinary(b []byte) error {
	keys, states, err := DecodeKeyed(b)
	if err != nil {
		return err
	}
	index := map[string]*list.Element{}
	lru := list.New()
	for i, key := range keys {
		m, err := k.factory()
		if err != nil {
			return err
		}
		if err := m.UnmarshalBinary(states[i]); err != nil {
			return fmt.Errorf("keyed models: %q: %w", key, err)
		}
		if _, dup := index[key]; dup {
			return fmt.Errorf("%w: keyed models: key %q repeated", online.ErrFormat, key)
		}
		index[key] = lru.PushFront(&keyedEntry{key: key, m: m})
	}
	k.index, k.lru = index, lru
	for k.lru.Len() > k.max {
		if err := k.evict(); err != nil {
			return err
		}
	}
	return nil
}

// examples sums the instances' examples (O(instances)).
func (k *keyedModels) examples() int64 {
	var n int64
	for e := k.lru.Front(); e != nil; e = e.Next() {
		n += e.Value.(*keyedEntry).m.Examples()
	}
	return n
}
