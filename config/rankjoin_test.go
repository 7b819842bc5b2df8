package config

import (
	"strings"
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
		{"defaults", minimal, nil, RankJoin{Events: 100000, PerKey: 10000, NewKeys: 0.5}},
		{"file", "rank: {join: {events: 5000, time: 2m, per_key: 0, entries: 9000, new_keys: 1}}\n" + minimal, nil,
			RankJoin{Events: 5000, Time: 2 * time.Minute, Entries: 9000, NewKeys: 1}},
		{"off", "rank: {join: {events: 0}}\n" + minimal, nil, RankJoin{PerKey: 10000, NewKeys: 0.5}},
		{"env", minimal, []string{"STREAMER_RANK_JOIN_EVENTS=7", "STREAMER_RANK_JOIN_TIME=30s", "STREAMER_RANK_JOIN_PER_KEY=3", "STREAMER_RANK_JOIN_ENTRIES=64", "STREAMER_RANK_JOIN_NEW_KEYS=0"},
			RankJoin{Events: 7, Time: 30 * time.Second, PerKey: 3, Entries: 64, NewKeys: 0}},
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

// rank.join.new_keys outside [0, 1] stops start-up naming the key.
func TestRankJoinNewKeysBad(t *testing.T) {
	for _, v := range []string{"-0.1", "1.5", ".nan"} {
		_, err := Parse([]byte("rank: {join: {new_keys: "+v+"}}\n"+minimal), nil, testTypes)
		if err == nil || !strings.Contains(err.Error(), "rank.join.new_keys") {
			t.Errorf("new_keys %s: %v, want an error naming rank.join.new_keys", v, err)
		}
	}
}
