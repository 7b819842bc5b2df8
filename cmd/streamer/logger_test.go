package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLogDurationsAsStrings: durations are logged as "1.5s" in both
// formats, not as nanoseconds.
func TestLogDurationsAsStrings(t *testing.T) {
	for _, json := range []bool{true, false} {
		var buf bytes.Buffer
		opts := &slog.HandlerOptions{ReplaceAttr: durationsAsStrings}
		var h slog.Handler = slog.NewTextHandler(&buf, opts)
		want := "in=1.5s"
		if json {
			h, want = slog.NewJSONHandler(&buf, opts), `"in":"1.5s"`
		}
		slog.New(h).Warn("retrying", "in", 1500*time.Millisecond)
		if !strings.Contains(buf.String(), want) {
			t.Errorf("logged %q, want %s", buf.String(), want)
		}
	}
}
