package config

import (
	"strings"
	"testing"
)

// rank.challenger: its defaults, the file's keys, the variables, and every
// mistake refused naming its key.
func TestChallenger(t *testing.T) {
	const two = "models:\n  - {name: a, type: mam, features: {dim: 2}}\n  - {name: b, type: mam, features: {dim: 2}, kernel: {type: linear}}\n"
	c, err := Parse([]byte(minimal), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Challenger{Promote: "manual", Estimator: "dr", Confidence: 0.95, Hold: 2000}); c.Rank.Challenger != want {
		t.Fatalf("defaults %+v, want %+v", c.Rank.Challenger, want)
	}
	c, err = Parse([]byte("rank: {model: a, challenger: {model: b, promote: auto, estimator: ips, confidence: 0.99, hold: 500}}\n"+two), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Challenger{Model: "b", Promote: "auto", Estimator: "ips", Confidence: 0.99, Hold: 500}); c.Rank.Challenger != want {
		t.Fatalf("file %+v, want %+v", c.Rank.Challenger, want)
	}
	c, err = Parse([]byte("rank: {model: a}\n"+two), []string{"STREAMER_RANK_CHALLENGER_MODEL=b", "STREAMER_RANK_CHALLENGER_PROMOTE=auto", "STREAMER_RANK_CHALLENGER_HOLD=300"}, testTypes)
	if err != nil || c.Rank.Challenger.Model != "b" || c.Rank.Challenger.Promote != "auto" || c.Rank.Challenger.Hold != 300 {
		t.Fatalf("env: %+v, %v", c.Rank.Challenger, err)
	}
	const ord = "models:\n  - {name: a, type: mam, features: {dim: 2}}\n  - {name: o, type: omam, features: {dim: 2}, label: {edges: [1, 2]}}\n"
	for _, tc := range []struct{ yaml, want string }{
		{"rank: {model: a, challenger: {model: b, promote: sometimes}}\n" + two, `rank.challenger.promote: "sometimes" is not one of manual, auto`},
		{"rank: {model: a, challenger: {model: b, estimator: snips}}\n" + two, `rank.challenger.estimator: "snips" is not one of dr, ips`},
		{"rank: {model: a, challenger: {model: b, confidence: 1}}\n" + two, "rank.challenger.confidence: must be in [0.5, 1), got 1"},
		{"rank: {model: a, challenger: {model: b, hold: 10}}\n" + two, "rank.challenger.hold: must be in [100, 10000000] labelled first items, got 10"},
		{"rank: {challenger: {model: b}}\n" + two, `rank.challenger.model: "b" challenges rank.model, which is not set`},
		{"rank: {model: a, challenger: {model: a}}\n" + two, `rank.challenger.model: "a" is rank.model itself`},
		{"rank: {model: a, challenger: {model: z}}\n" + two, `rank.challenger.model: "z" is not the name of a model of this config ([a, b])`},
		{"rank: {model: a, challenger: {model: o}}\n" + ord, `rank.challenger.model: "o" is of kind ordinal, rank.model "a" of kind classifier`},
	} {
		_, err := Parse([]byte(tc.yaml), nil, testTypes)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %s", strings.SplitN(tc.yaml, "\n", 2)[0], err, tc.want)
		}
	}
}
