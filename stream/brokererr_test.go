package stream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
)

// TestRefusalClassifies: the permanent errors become refusals naming a key,
// wrapped or in WriteErrors; the retriable ones and network errors do not.
func TestRefusalClassifies(t *testing.T) {
	output := &topicUse{key: "kafka.output_topic", topic: "scores", needs: "WRITE"}
	for _, c := range []struct {
		err     error
		use     *topicUse
		key     string // "" = retriable
		message string
	}{
		{kafka.InvalidSessionTimeout, nil, "kafka.session_timeout", "group.min.session.timeout.ms"},
		{fmt.Errorf("join: %w", kafka.GroupAuthorizationFailed), nil, "kafka.group", "READ and DESCRIBE on the consumer group"},
		{kafka.WriteErrors{nil, kafka.TopicAuthorizationFailed}, output, "kafka.output_topic", `write to topic "scores": grant it WRITE`},
		{kafka.TopicAuthorizationFailed, &topicUse{topic: "x", needs: "READ"}, "kafka.input_topic", `read topic "x"`},
		{kafka.MessageSizeTooLarge, changelogUse("state"), "snapshot.changelog_topic", `larger than topic "state" accepts`},
		{kafka.ClusterAuthorizationFailed, nil, "kafka.sasl.username", "cluster operation"},
		{kafka.InvalidReplicationFactor, nil, "snapshot.changelog_topic", "create the changelog topic yourself"},
		{kafka.UnsupportedVersion, nil, "kafka.brokers", "upgrade them"},
		{kafka.LeaderNotAvailable, output, "", ""},
		{kafka.NotCoordinatorForGroup, nil, "", ""},
		{kafka.RebalanceInProgress, nil, "", ""},
		{kafka.WriteErrors{kafka.NotLeaderForPartition}, output, "", ""},
		{kafka.RequestTimedOut, nil, "", ""},
		{io.EOF, nil, "", ""},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), nil, "", ""},
		{nil, nil, "", ""},
	} {
		r := refusal(c.err, c.use, `"User:alice"`)
		if c.key == "" {
			if r != nil {
				t.Errorf("%v: refusal %v, want retriable", c.err, r)
			}
			continue
		}
		if r == nil || r.Key != c.key || !strings.Contains(r.Error(), c.message) || !strings.HasPrefix(r.Error(), c.key+": ") {
			t.Errorf("%v: %v, want a refusal of %s saying %q", c.err, r, c.key, c.message)
			continue
		}
		if !errors.Is(r, c.err) && !errors.As(r, new(kafka.WriteErrors)) {
			t.Errorf("%v: the refusal does not wrap the error", c.err)
		}
	}
	if got := codeName(kafka.InvalidSessionTimeout); got != "INVALID_SESSION_TIMEOUT" {
		t.Errorf("codeName = %q", got)
	}
}

func healthForTest(window time.Duration) (*BrokerHealth, *prometheus.Registry, *bytes.Buffer) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	h := NewBrokerHealth(reg, slog.New(slog.NewTextHandler(&logs, nil)))
	h.window = window
	return h, reg, &logs
}

// TestBrokerHealthStartup: during start-up a refusal on a component that
// never worked is fatal; a retriable error is not.
func TestBrokerHealthStartup(t *testing.T) {
	h, _, _ := healthForTest(time.Hour)
	if r := h.Report("consumer group", kafka.GroupCoordinatorNotAvailable, nil); r != nil {
		t.Fatalf("retriable reported as %v", r)
	}
	select {
	case r := <-h.Fatal():
		t.Fatalf("fatal on a retriable error: %v", r)
	default:
	}
	if got := h.Retrying(); !strings.Contains(got, "consumer group: ") || h.Reason() != "" {
		t.Fatalf("Retrying %q, Reason %q", got, h.Reason())
	}
	h.Report("consumer group", kafka.InvalidSessionTimeout, nil)
	select {
	case r := <-h.Fatal():
		if r.Key != "kafka.session_timeout" {
			t.Fatalf("fatal %v", r)
		}
	default:
		t.Fatal("a refusal at start-up is not fatal")
	}
}

// TestBrokerHealthOperation: after a component worked (or after start-up)
// a refusal stands on Reason, is logged once and counted each time, and
// clears when the component works again.
func TestBrokerHealthOperation(t *testing.T) {
	h, reg, logs := healthForTest(time.Hour)
	h.OK("publish scores")
	use := &topicUse{key: "kafka.output_topic", topic: "scores", needs: "WRITE"}
	for range 5 {
		h.Report("publish scores", kafka.WriteErrors{kafka.TopicAuthorizationFailed}, use)
	}
	select {
	case r := <-h.Fatal():
		t.Fatalf("fatal on a component that worked: %v", r)
	default:
	}
	if got := h.Reason(); !strings.HasPrefix(got, "publish scores: kafka.output_topic: ") {
		t.Fatalf("Reason %q", got)
	}
	if n := strings.Count(logs.String(), "the brokers refuse this configuration"); n != 1 {
		t.Fatalf("logged %d times:\n%s", n, logs)
	}
	if n := testutil.ToFloat64(h.refusals.WithLabelValues("TOPIC_AUTHORIZATION_FAILED")); n != 5 {
		t.Fatalf("counted %v, want 5", n)
	}
	if n, err := testutil.GatherAndCount(reg, "streamer_broker_refusals_total"); err != nil || n != len(permanentErrors) {
		t.Fatalf("series %d, %v", n, err)
	}
	h.OK("publish scores")
	if got := h.Reason(); got != "" {
		t.Fatalf("Reason after OK %q", got)
	}
	if !strings.Contains(logs.String(), "the brokers accept publish scores again") {
		t.Fatalf("recovery not logged:\n%s", logs)
	}

	// After start-up, a component that never worked is not fatal either.
	late, _, _ := healthForTest(0)
	late.Report("consumer group", kafka.GroupAuthorizationFailed, nil)
	select {
	case r := <-late.Fatal():
		t.Fatalf("fatal after start-up: %v", r)
	default:
	}
	if !strings.Contains(late.Reason(), "kafka.group") {
		t.Fatalf("Reason %q", late.Reason())
	}
	var nilHealth *BrokerHealth
	nilHealth.OK("x")
	if nilHealth.Reason() != "" || nilHealth.Report("x", kafka.InvalidSessionTimeout, nil) == nil {
		t.Fatal("nil BrokerHealth")
	}
}

// TestDedupLogger: clients retrying the same failures, in turns, log each
// once; a new message is logged at once.
func TestDedupLogger(t *testing.T) {
	var logs bytes.Buffer
	h, _, _ := healthForTest(time.Hour)
	log := dedupLogger(slog.New(slog.NewTextHandler(&logs, nil)), "consumer group", h)
	for i := range 100 {
		log("error writing to partition %d: refused", i%2)
	}
	log("something else")
	if n := strings.Count(logs.String(), "\n"); n != 3 {
		t.Fatalf("%d lines for 2 repeated messages and a new one:\n%s", n, logs.String())
	}
	if got := h.Retrying(); got != "consumer group: something else" {
		t.Fatalf("Retrying %q", got)
	}
	var r repeats
	for i := range 2 * maxRepeats {
		if ok, _ := r.pass(fmt.Sprint(i)); !ok {
			t.Fatalf("new message %d held back", i)
		}
	}
	if len(r.seen) > maxRepeats {
		t.Fatalf("%d messages remembered", len(r.seen))
	}
}

// TestReadmeListsRefusals: the table of refusals in docs/operations.md lists every
// permanent error under its protocol name, with the key it names.
func TestReadmeListsRefusals(t *testing.T) {
	readme, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	start, end := strings.Index(s, "<!-- refusals -->"), strings.Index(s, "<!-- /refusals -->")
	if start < 0 || end < start {
		t.Fatal("docs/operations.md has no <!-- refusals --> table")
	}
	rows := strings.Split(s[start:end], "\n")
	for code, p := range permanentErrors {
		name := "`" + codeName(code) + "`"
		found := false
		for _, row := range rows {
			cells := strings.Split(row, "|")
			if len(cells) > 3 && strings.Contains(cells[1], name) {
				found = true
				if !strings.Contains(cells[2], "`"+p.key+"`") && !strings.Contains(cells[2], "the topic's") {
					t.Errorf("docs/operations.md: the row of %s does not name %s: %s", name, p.key, row)
				}
			}
		}
		if !found {
			t.Errorf("docs/operations.md: the refusals table lacks %s", name)
		}
	}
}
