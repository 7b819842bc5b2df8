package engine

import (
	"path/filepath"
	"testing"

	"github.com/streamer/streamer/config"
)

// TestShippedConfigsBuild builds every model of every shipped config and
// checks them against the engine, so a config that loads but cannot run (a
// key combination the model builders or the engine refuse) fails here
// rather than at a user's start-up.
func TestShippedConfigsBuild(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("shipped configs: %v %v", files, err)
	}
	for _, f := range files {
		cfg, err := config.Load(f, nil, testTypes)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		cfg.Snapshot.Dir = t.TempDir()
		models, err := BuildModels(cfg, testTypes)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(models) != len(cfg.Models) {
			t.Errorf("%s: %d models built for %d configured", f, len(models), len(cfg.Models))
		}
		ecfg := ConfigFrom(cfg)
		if ecfg.Profiles, err = ProfilesFrom(cfg); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if err := Check(ecfg, models); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
