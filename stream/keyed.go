package stream

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/streamer/streamer/online"
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
// restore rebuilds the same LRU order): magic "KEYD", u32 count, then per
// instance u32 key length, key, u32 state length, state.
func (k *keyedModels) MarshalBinary() ([]byte, error) {
	le := binary.LittleEndian
	dst := le.AppendUint32([]byte("KEYD"), uint32(k.lru.Len()))
	for e := k.lru.Back(); e != nil; e = e.Prev() {
		ent := e.Value.(*keyedEntry)
		b, err := ent.m.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("keyed models: %q: %w", ent.key, err)
		}
		dst = le.AppendUint32(dst, uint32(len(ent.key)))
		dst = append(dst, ent.key...)
		dst = le.AppendUint32(dst, uint32(len(b)))
		dst = append(dst, b...)
	}
	return dst, nil
}

// UnmarshalBinary replaces the instances in memory with the encoded ones.
func (k *keyedModels) UnmarshalBinary(b []byte) error {
	le := binary.LittleEndian
	if len(b) < 8 || string(b[:4]) != "KEYD" {
		return errors.New("keyed models: bad encoding")
	}
	n := int(le.Uint32(b[4:]))
	b = b[8:]
	index := map[string]*list.Element{}
	lru := list.New()
	for range n {
		if len(b) < 4 || int(le.Uint32(b)) > len(b)-4 {
			return errors.New("keyed models: truncated key")
		}
		kl := int(le.Uint32(b))
		key := string(b[4 : 4+kl])
		b = b[4+kl:]
		if len(b) < 4 || int(le.Uint32(b)) > len(b)-4 {
			return errors.New("keyed models: truncated state")
		}
		sl := int(le.Uint32(b))
		m, err := k.factory()
		if err != nil {
			return err
		}
		if err := m.UnmarshalBinary(b[4 : 4+sl]); err != nil {
			return fmt.Errorf("keyed models: %q: %w", key, err)
		}
		b = b[4+sl:]
		index[key] = lru.PushFront(&keyedEntry{key: key, m: m})
	}
	if len(b) != 0 {
		return errors.New("keyed models: trailing bytes")
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
