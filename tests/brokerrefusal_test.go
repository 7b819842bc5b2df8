package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/stream"
)

// A broker's permanent refusal of the configuration — a session timeout
// outside its range, a consumer group or topic the client may not use —
// stops `streamer run` within seconds with exit status 1 and a message
// naming the key to fix; a broker that is merely away is waited for.

// refusedWithin is how soon a refusal must stop start-up.
const refusedWithin = 10 * time.Second

// expectRefusal runs the streamer on cfgYAML and checks that it exits
// with status 1 within refusedWithin and that its output holds each of
// want.
func expectRefusal(t *testing.T, b *stream.Broker, cfgYAML string, want ...string) {
	t.Helper()
	code, out, took := runFailing(t, b, cfgYAML)
	if code != 1 || took > refusedWithin {
		t.Fatalf("exit %d after %v, want exit 1 within %v; output:\n%s", code, took.Round(time.Millisecond), refusedWithin, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("the output does not say %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, securePassword) {
		t.Fatalf("the password shows in the output:\n%s", out)
	}
	last := strings.TrimSpace(out)
	t.Logf("exit %d after %v: %s", code, took.Round(time.Millisecond), last[strings.LastIndex(last, "\n")+1:])
}

// TestRefusedSessionTimeout: kafka.session_timeout 2s against brokers whose
// group.min.session.timeout.ms is Kafka's default 6 s.
func TestRefusedSessionTimeout(t *testing.T) {
	b := startSecureBroker(t, stream.BrokerConfig{MinSessionTimeoutConfig: 6 * time.Second})
	expectRefusal(t, b, secureConfig("  session_timeout: 2s", "", ""),
		"kafka.session_timeout: 2s is outside the brokers' allowed range (group.min.session.timeout.ms 6s",
		"INVALID_SESSION_TIMEOUT")
}

// aclBroker starts a broker that checks ACLs: admin is a superuser, alice
// may do what grants allow.
func aclBroker(t *testing.T, grants ...stream.Grant) *stream.Broker {
	t.Helper()
	return startSecureBroker(t, stream.BrokerConfig{
		SASL: []stream.SASLUser{{Mechanism: config.SASLScramSHA256, User: "admin", Password: "admin-" + securePassword}},
		ACLs: true,
		Users: []stream.ACLUser{{SASLUser: stream.SASLUser{Mechanism: config.SASLScramSHA256, User: "alice", Password: securePassword},
			Grants: grants}},
	})
}

// aliceConfig is the streamer's config as alice.
func aliceConfig() string {
	return secureConfig(`  sasl: {mechanism: scram-sha-256, username: alice, password: "`+securePassword+`"}`, "", "")
}

// allGrants are what the streamer needs, less those on skip ("group",
// "events", "scores", "events.dlq").
func allGrants(skip string) []stream.Grant {
	var g []stream.Grant
	add := func(res, name string, ops ...string) {
		if name == skip {
			return
		}
		for _, op := range ops {
			g = append(g, stream.Grant{Resource: res, Name: name, Operation: op})
		}
	}
	add("group", "secure", "read", "describe")
	add("topic", "events", "read", "describe")
	add("topic", "scores", "write", "describe")
	add("topic", "events.dlq", "write", "describe")
	return g
}

// TestACLAllowed is the control of the two below: with every grant the
// streamer needs, alice's streamer scores events.
func TestACLAllowed(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	b := aclBroker(t, allGrants("")...)
	p := startStreamer(t, b, aliceConfig())
	produceAndScore(t, b, mustSecurity(t, config.Kafka{SASL: config.SASL{Mechanism: config.SASLScramSHA256, Username: "admin", Password: "admin-" + securePassword}}), 20)
	stopClean(t, p)
}

// TestRefusedGroup: alice may use the topics but not the consumer group.
func TestRefusedGroup(t *testing.T) {
	b := aclBroker(t, allGrants("secure")...)
	expectRefusal(t, b, aliceConfig(), "kafka.group:", `consumer group "secure"`, `"User:alice"`)
}

// TestRefusedTopic: alice may use the group and the input and dead-letter
// topics but not the output topic.
func TestRefusedTopic(t *testing.T) {
	b := aclBroker(t, allGrants("scores")...)
	expectRefusal(t, b, aliceConfig(), "kafka.output_topic:", `topic "scores"`, `"User:alice"`)
}

// TestBrokerOutageWaited: started with no broker listening, the streamer
// stays up, says on /readyz why it is not ready, and does not flood its
// log; once the broker comes up it joins, scores, and stops cleanly.
func TestBrokerOutageWaited(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)

	p := spawnStreamer(t, addr, secureConfig("", "", ""))
	waitFor(t, 10*time.Second, "/readyz answering", func() bool { return p.readyz(t) != 0 })
	const outage = 5 * time.Second
	time.Sleep(outage)
	code, body := p.readyzBody()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready: consumer group not joined; retrying: ") || !strings.Contains(body, "connection refused") {
		t.Fatalf("/readyz during the outage: %d %q, want 503 saying the brokers refuse connections", code, body)
	}
	if p.cmd.ProcessState != nil {
		t.Fatalf("the streamer exited during the outage:\n%s", p.logs.String())
	}
	lines := strings.Count(p.logs.String(), "\n")
	t.Logf("/readyz during a %v outage: %d %q; %d log lines", outage, code, strings.TrimSpace(body), lines)
	// Retries go on twice a second per client; each distinct failure is
	// logged once (three clients, a few distinct messages each).
	if lines > 40 {
		t.Fatalf("%d log lines in a %v outage:\n%s", lines, outage, p.logs.String())
	}

	b, err := stream.StartBroker(port, stream.TopicSpec{Name: "events", Partitions: 2}, stream.TopicSpec{Name: "scores", Partitions: 2},
		stream.TopicSpec{Name: "events.dlq", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	waitFor(t, 60*time.Second, "streamer ready after the outage", func() bool { return p.readyz(t) == http.StatusOK })
	produceAndScore(t, b, mustSecurity(t, config.Kafka{}), 20)
	m := p.metrics(t)
	if !strings.Contains(m, `streamer_broker_refusals_total{error="INVALID_SESSION_TIMEOUT"} 0`) {
		t.Fatalf("streamer_broker_refusals_total not at 0 for each error:\n%s", m)
	}
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, "streamer_broker_refusals_total{") && !strings.HasSuffix(line, "} 0") {
			t.Fatalf("a refusal counted after an outage (an outage is not a refusal): %s", line)
		}
	}
	stopClean(t, p)
}

// TestRefusedWrite: alice may describe the output topic but not write to
// it, which only the first produce finds out: the streamer stops with the
// key once the first scores are refused.
func TestRefusedWrite(t *testing.T) {
	grants := append(allGrants("scores"), stream.Grant{Resource: "topic", Name: "scores", Operation: "describe"})
	b := aclBroker(t, grants...)
	p := spawnStreamer(t, strings.Join(b.Addrs(), ","), aliceConfig())
	waitFor(t, 10*time.Second, "the consumer group joined", func() bool { return p.readyz(t) == http.StatusOK })
	admin := mustSecurity(t, config.Kafka{SASL: config.SASL{Mechanism: config.SASLScramSHA256, Username: "admin", Password: "admin-" + securePassword}})
	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Topic: "events", BatchTimeout: 5 * time.Millisecond, Transport: admin.Transport("refusal-test")}
	defer w.Close()
	label := 1
	if err := w.WriteMessages(context.Background(), kafka.Message{Value: eventJSON("e-1", []float64{1, 0.5}, &label)}); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	var err error
	select {
	case err = <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20s after the first event:\n%s", p.logs.String())
	}
	took := time.Since(sent)
	out := p.logs.String()
	want := "streamer: kafka.output_topic: "
	if p.cmd.ProcessState.ExitCode() != 1 || took > refusedWithin || !strings.Contains(out, want) || !strings.Contains(out, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("exit %v after %v, want exit 1 within %v saying %q:\n%s", err, took, refusedWithin, want, out)
	}
	last := strings.TrimSpace(out)
	t.Logf("exit 1 %v after the first event: %s", took.Round(time.Millisecond), last[strings.LastIndex(last, "\n")+1:])
}

// TestRefusedInOperation: a refusal that comes after start-up (the output
// topic's WRITE denied to alice while the streamer runs) does not stop the
// streamer: /readyz turns 503 naming the key, the refusal is logged once
// and counted, and the scores wait; once the grant is back, the streamer is
// ready again and every event is scored exactly once.
func TestRefusedInOperation(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	b := aclBroker(t, allGrants("")...)
	p := startStreamer(t, b, aliceConfig())
	admin := mustSecurity(t, config.Kafka{SASL: config.SASL{Mechanism: config.SASLScramSHA256, Username: "admin", Password: "admin-" + securePassword}})
	produceAndScore(t, b, admin, 20)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Transport: admin.Transport("refusal-test")}
	deny := kafka.ACLEntry{ResourceType: kafka.ResourceTypeTopic, ResourceName: "scores", ResourcePatternType: kafka.PatternTypeLiteral,
		Principal: "User:alice", Host: "*", Operation: kafka.ACLOperationTypeWrite, PermissionType: kafka.ACLPermissionTypeDeny}
	if res, err := client.CreateACLs(ctx, &kafka.CreateACLsRequest{ACLs: []kafka.ACLEntry{deny}}); err != nil || errors.Join(res.Errors...) != nil {
		t.Fatalf("deny alice WRITE on scores: %v %v", err, res)
	}
	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Topic: "events", Balancer: &kafka.Murmur2Balancer{}, BatchTimeout: 5 * time.Millisecond,
		RequiredAcks: kafka.RequireAll, Transport: admin.Transport("refusal-test")}
	defer w.Close()
	const late = 10
	for i := range late {
		label := 2*(i%2) - 1
		if err := w.WriteMessages(ctx, kafka.Message{Key: fmt.Appendf(nil, "user-%d", i%3), Value: eventJSON(fmt.Sprintf("late-%d", i), []float64{float64(label), 0.5}, &label)}); err != nil {
			t.Fatal(err)
		}
	}
	var body string
	waitFor(t, 20*time.Second, "/readyz 503 naming kafka.output_topic", func() bool {
		var code int
		code, body = p.readyzBody()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "kafka.output_topic: ") && strings.Contains(body, "TOPIC_AUTHORIZATION_FAILED")
	})
	time.Sleep(2 * time.Second) // the publisher keeps retrying meanwhile
	if p.cmd.ProcessState != nil {
		t.Fatalf("the streamer stopped on a refusal in operation:\n%s", p.logs.String())
	}
	if n := p.metric(t, "streamer_broker_refusals_total", `error="TOPIC_AUTHORIZATION_FAILED"`); n < 2 {
		t.Fatalf("streamer_broker_refusals_total{error=TOPIC_AUTHORIZATION_FAILED} = %v after retries, want >= 2", n)
	}
	if n := strings.Count(p.logs.String(), "the brokers refuse this configuration"); n != 1 {
		t.Fatalf("the refusal logged %d times, want once:\n%s", n, p.logs.String())
	}
	t.Logf("/readyz while refused: %s", strings.TrimSpace(body))
	// The publisher retries several times a second; each distinct message
	// is logged once a minute.
	if n := strings.Count(p.logs.String(), "\n"); n > 15 {
		t.Fatalf("%d log lines by 2 s into a refusal:\n%s", n, p.logs.String())
	}

	if res, err := client.DeleteACLs(ctx, &kafka.DeleteACLsRequest{Filters: []kafka.DeleteACLsFilter{{
		ResourceTypeFilter: deny.ResourceType, ResourceNameFilter: deny.ResourceName, ResourcePatternTypeFilter: deny.ResourcePatternType,
		PrincipalFilter: deny.Principal, HostFilter: deny.Host, Operation: deny.Operation, PermissionType: deny.PermissionType}}}); err != nil || res.Results[0].Error != nil {
		t.Fatalf("lift the denial: %v %v", err, res)
	}
	waitFor(t, 20*time.Second, "ready again", func() bool { return p.readyz(t) == http.StatusOK })
	// Every event scored exactly once.
	seen := map[string]int{}
	for part := range 2 {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Addrs(), Topic: "scores", Partition: part, MaxWait: 100 * time.Millisecond, Dialer: admin.Dialer("refusal-test")})
		defer r.Close()
		for {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			m, err := r.ReadMessage(rctx)
			rcancel()
			if err != nil {
				break
			}
			var rec outRecord
			if err := json.Unmarshal(m.Value, &rec); err != nil {
				t.Fatal(err)
			}
			seen[rec.ID]++
		}
	}
	for i := range late {
		if id := fmt.Sprintf("late-%d", i); seen[id] != 1 {
			t.Fatalf("%s scored %d times after the refusal was lifted (scores: %v)", id, seen[id], seen)
		}
	}
	if len(seen) != 20+late {
		t.Fatalf("%d distinct events scored, want %d", len(seen), 20+late)
	}
	stopClean(t, p)
}

// TestRefusedChangelogCreate: alice may use every topic, the changelog
// included, but not create it: start-up stops naming
// snapshot.changelog_topic instead of retrying the creation forever.
func TestRefusedChangelogCreate(t *testing.T) {
	grants := append(allGrants(""), stream.Grant{Resource: "topic", Name: "streamer.state", Operation: "read"},
		stream.Grant{Resource: "topic", Name: "streamer.state", Operation: "write"},
		stream.Grant{Resource: "topic", Name: "streamer.state", Operation: "describe"})
	b := aclBroker(t, grants...)
	expectRefusal(t, b, aliceConfig()+"snapshot: {changelog_topic: streamer.state}\n", "snapshot.changelog_topic:", `"streamer.state"`)
}

// TestRefusedRead: alice may describe the input topic but not read it,
// which only the first fetch finds out: start-up stops naming
// kafka.input_topic.
func TestRefusedRead(t *testing.T) {
	grants := append(allGrants("events"), stream.Grant{Resource: "topic", Name: "events", Operation: "describe"})
	b := aclBroker(t, grants...)
	expectRefusal(t, b, aliceConfig(), "kafka.input_topic:", `read topic "events"`)
}

// TestMissingTopic: an output or dead-letter topic that does not exist (a
// typo, with the brokers' auto-creation off) stops start-up naming the key
// and the command that creates the topics, instead of a silent stall with
// publishing retried forever.
func TestMissingTopic(t *testing.T) {
	b := startBroker(t, 2)
	expectRefusal(t, b, secureConfig("  output_topic: scroes", "", ""), "kafka.output_topic:", `topic "scroes" does not exist`,
		"create it with: streamer topics create --config <your config>", "UNKNOWN_TOPIC_OR_PARTITION")
	expectRefusal(t, b, secureConfig("  dlq_topic: events.dql", "", ""), "kafka.dlq_topic:", `topic "events.dql" does not exist`)
}
