package wire_test

import (
	"fmt"
	"time"

	"github.com/streamer/streamer/stream/wire"
)

func ExampleDecoder_Decode() {
	d, err := wire.NewDecoder(3, []string{"age", "clicks", "score"}, 1<<20)
	if err != nil {
		fmt.Println(err)
		return
	}
	var ev wire.Event // reused for every message
	for _, msg := range []string{
		`{"id":"e-1","key":"user-42","features":[0.5,3,-1.25],"label":true}`,
		`{"id":"e-2","features":{"clicks":2,"age":0.25,"score":1e-3}}`,
		`{"id":"e-3","features":[0.5,3]}`,
		`{"id":"e-4","features":[0.5,3,"x"]}`,
	} {
		if err := d.Decode([]byte(msg), &ev); err != nil {
			fmt.Printf("reject %s: %v\n", wire.ReasonOf(err), err)
			continue
		}
		fmt.Printf("%s %v labelled=%v label=%v\n", ev.ID, ev.Features, ev.HasLabel, ev.Label)
	}
	// Output:
	// e-1 [0.5 3 -1.25] labelled=true label=1
	// e-2 [0.25 2 0.001] labelled=false label=0
	// reject wrong_dimension: wire: wrong_dimension: got 2 features, want 3
	// reject wrong_type: wire: wrong_type: features[2]: not a number (got string)
}

func ExampleAppendScore() {
	s := wire.Score{
		ID: []byte("e-1"), Key: []byte("user-42"), Model: "mam", Version: 17,
		Score: 0.42, Prediction: 1,
		HasBound: true, MistakeBound: 0.31, Delta: 0.05, N: 120000,
		EventTS:  []byte("2026-11-22T04:00:00Z"),
		ScoredAt: time.Date(2026, 11, 22, 4, 0, 1, 500000000, time.UTC),
	}
	buf := make([]byte, 0, 512) // reuse across records
	buf = wire.AppendScore(buf[:0], &s)
	fmt.Println(string(buf))
	// Output:
	// {"id":"e-1","key":"user-42","model":"mam","version":17,"score":0.42,"prediction":1,"certainty":{"mistake_bound":0.31,"delta":0.05,"n":120000},"event_ts":"2026-11-22T04:00:00Z","scored_at":"2026-11-22T04:00:01.5Z"}
}
