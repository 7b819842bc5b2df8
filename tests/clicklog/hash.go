package main

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// hashBits is the hashed feature space: indices in [0, 2^hashBits).
const hashBits = 18

// featureHash is the wire's hashing of a categorical feature (without a
// namespace): h = xxhash64(name + "=" + value), index h mod 2^hashBits,
// value +1 or −1 by bit 63 of h (1 means −1).
func featureHash(name, value string) (h uint64) {
	return xxhash.Sum64String(name + "=" + value)
}

// crossHash is the hash of the interaction of two features, from their
// hashes: xxhash64 of the 16 little-endian bytes of h1 then h2.
func crossHash(h1, h2 uint64) uint64 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], h1)
	binary.LittleEndian.PutUint64(b[8:], h2)
	return xxhash.Sum64(b[:])
}

// hashEntry maps a hash to its sparse entry: index h mod 2^hashBits and
// value ±1 from bit 63.
func hashEntry(h uint64) (int32, float64) {
	v := 1.0
	if h>>63 != 0 {
		v = -1
	}
	return int32(h & (1<<hashBits - 1)), v
}
