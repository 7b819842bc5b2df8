package engine

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// defaultMaxKeys is max_keys when the configuration leaves it out.
const defaultMaxKeys = 10_000

// checkKeyMemory refuses a key-scoped model whose instances in memory
// (max_keys of them) cannot fit: each takes at least the bytes of an empty
// instance's encoded state, which for the types that keep dense vectors
// is O(features.dim), 2^bits with hashed features (a logistic at 20 bits:
// 16 MiB a key). Without the check such a configuration starts and runs
// out of memory once enough keys have been seen, hours later.
func checkKeyMemory(cfg *Config, nm NamedModel) error {
	if nm.Factory == nil || cfg.MemoryLimit < 0 {
		return nil
	}
	limit, from := cfg.MemoryLimit, "engine.Config.MemoryLimit"
	if limit == 0 {
		limit, from = memoryLimit()
		if limit <= 0 {
			return nil // unknown: no check
		}
	}
	inst, err := nm.Factory()
	if err != nil {
		return fmt.Errorf("stream: model %s: %w", nm.Name, err)
	}
	b, err := inst.MarshalBinary()
	if err != nil {
		return fmt.Errorf("stream: model %s: %w", nm.Name, err)
	}
	keys := nm.MaxKeys
	if keys <= 0 {
		keys = defaultMaxKeys
	}
	per := int64(len(b))
	if need := per * int64(keys); need > limit {
		hint := "lower max_keys"
		if cfg.Hash != nil {
			hint += ", or features.hash.bits (every bit doubles a key's state)"
		} else {
			hint += ", or features.dim"
		}
		return fmt.Errorf("stream: model %s (scope: key): max_keys %d instances in memory at %s each at least (an empty one's state at dimension %d) need %s, more than the %s available (%s): %s, or use a global model",
			nm.Name, keys, byteSize(per), cfg.Dim, byteSize(need), byteSize(limit), from, hint)
	}
	return nil
}

// memoryLimit returns the memory the process may use and where that
// figure comes from: GOMEMLIMIT when set, else the machine's MemTotal
// (0 when neither is known).
func memoryLimit() (int64, string) {
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		return l, "GOMEMLIMIT"
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, ""
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb > 0 {
					return kb << 10, "the machine's memory"
				}
			}
		}
	}
	return 0, ""
}

// byteSize formats n bytes in binary units (16 MiB).
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + string("KMGTP"[exp]) + "iB"
}
