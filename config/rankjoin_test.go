package config

import (
	"testing"
	"time"
)

// rank.join: its defaults, the file's keys and the variables.
func TestRankJoin(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		env  []string
		want RankJoin
	}{
		{"defaults", minimal, nil, RankJoin{Events: 100000, PerKey: 10000}},
		{"file", "rank: {join: {events: 5000, time: 2m, per_key: 0, entries: 9000}}\n" + minimal, nil,
			RankJoin{Events: 5000, Time: 2 * time.Minute, Entries: 9000}},
		{"off", "rank: {join: {events: 0}}\n" + minimal, nil, RankJoin{PerKey: 10000}},
		{"env", minimal, []string{"STREAMER_RANK_JOIN_EVENTS=7", "STREAMER_RANK_JOIN_TIME=30s", "STREAMER_RANK_JOIN_PER_KEY=3", "STREAMER_RANK_JOIN_ENTRIES=64"},
			RankJoin{Events: 7, Time: 30 * time.Second, PerKey: 3, Entries: 64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml), tc.env, testTypes)
			if err != nil {
				t.Fatal(err)
			}
			if c.Rank.Join != tc.want {
				t.Fatalf("rank.join %+v, want %+v", c.Rank.Join, tc.want)
			}
		})
	}
}
