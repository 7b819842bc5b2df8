package config

import (
	"slices"
	"testing"
	"time"
)

// TestSnapshotVersions: snapshot.versions defaults to 5, takes 0 (off) to
// 1000 from the file or the environment, and every other value is refused
// naming the key; admin is an endpoint group, protected by default.
func TestSnapshotVersions(t *testing.T) {
	c, err := Parse([]byte(minimal), nil, testTypes)
	if err != nil || c.Snapshot.Versions != 5 {
		t.Fatalf("default: %d, %v", c.Snapshot.Versions, err)
	}
	for _, n := range []string{"0", "1", "1000"} {
		c, err := Parse([]byte(minimal+"snapshot: {dir: s, versions: "+n+"}\n"), nil, testTypes)
		if err != nil || c.Snapshot.Versions == 0 && n != "0" {
			t.Fatalf("versions %s: %+v, %v", n, c.Snapshot, err)
		}
	}
	c, err = Parse([]byte(minimal), []string{"STREAMER_SNAPSHOT_VERSIONS=12", "STREAMER_SNAPSHOT_VERSIONS_EVERY=1h"}, testTypes)
	if err != nil || c.Snapshot.Versions != 12 || c.Snapshot.VersionsEvery != time.Hour {
		t.Fatalf("from the environment: %+v, %v", c.Snapshot, err)
	}
	if c, err := Parse([]byte(minimal+"snapshot: {versions_every: 30m}\n"), nil, testTypes); err != nil || c.Snapshot.VersionsEvery != 30*time.Minute {
		t.Fatalf("versions_every: %+v, %v", c.Snapshot, err)
	}
	for _, tc := range []struct {
		yaml string
		env  []string
		want string
	}{
		{"snapshot: {versions: -1}\n", nil, "config: snapshot.versions: must be 0 (off) to 1000, got -1 (line 3)"},
		{"snapshot: {versions: 1001}\n", nil, "config: snapshot.versions: must be 0 (off) to 1000, got 1001 (line 3)"},
		{"snapshot: {versions: all}\n", nil, `config: snapshot.versions: "all" is not an integer (line 3)`},
		{"", []string{"STREAMER_SNAPSHOT_VERSIONS=-3"}, "config: snapshot.versions: must be 0 (off) to 1000, got -3 (from STREAMER_SNAPSHOT_VERSIONS)"},
		{"snapshot: {versions_every: -1s}\n", nil, "config: snapshot.versions_every: must be >= 0 (0 = at every checkpoint where the model changed), got -1s (line 3)"},
		{"snapshot: {versions_every: hourly}\n", nil, `config: snapshot.versions_every: "hourly" is not a duration (write e.g. 1s, 250ms, 1m30s) (line 3)`},
	} {
		_, err := Parse([]byte(minimal+tc.yaml), tc.env, testTypes)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q %v: got %v, want %s", tc.yaml, tc.env, err, tc.want)
		}
	}
	if !slices.Contains(HTTPGroups(), GroupAdmin) || !slices.Contains(DefaultProtect(), GroupAdmin) {
		t.Errorf("groups %v, default protect %v", HTTPGroups(), DefaultProtect())
	}
}
