package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// The demo prints its broker's address and listens where --broker-listen
// says, so that kcat or a user's own client can talk to it.
func TestDemoBrokerAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runDemo(ctx, demoOptions{rate: 200, listen: "127.0.0.1:0", brokerListen: addr, noise: 0.02}, &out)
	}()
	// A client of our own reads the demo's topics at that address.
	var topics []string
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && len(topics) == 0 {
		conn, err := kafka.Dial("tcp", addr)
		if err == nil {
			parts, err := conn.ReadPartitions("scores")
			conn.Close()
			if err == nil && len(parts) > 0 {
				topics = append(topics, "scores")
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(topics) == 0 {
		t.Fatalf("no broker with the demo's topics at %s", addr)
	}
	if !strings.Contains(out.String(), "broker: "+addr) || !strings.Contains(out.String(), "kcat -b "+addr) {
		t.Fatalf("the screen does not show the broker's address %s:\n%s", addr, out.String())
	}
	for _, bad := range []string{"10.0.0.1:9092", "127.0.0.1:x", "nohost"} {
		if _, err := brokerPort(bad); err == nil {
			t.Errorf("--broker-listen %s accepted", bad)
		}
	}
}

// The demo's models are ones a user can trust at a glance: on Ripley's
// held-out test set (what the demo streams is the training set), the
// linear MAM, standardised, errs about as often as the data allows
// (a raw linear MAM errs on about 41%).
func TestDemoModelsOnRipley(t *testing.T) {
	dir := t.TempDir()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"eval", "-c", "../../configs/demo.yaml", "--data", "data/ripley_train.csv",
		"--test", "../../eval/testdata/ripley_test.csv", "-o", dir})
	if err := root.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Models map[string]struct {
			Holdout struct{ Error float64 } `json:"holdout"`
		} `json:"models"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	for name, max := range map[string]float64{"mam_linear": 0.16, "mam_rbf": 0.12} {
		m, ok := rep.Models[name]
		if !ok {
			t.Fatalf("no model %s in the demo's report", name)
		}
		if m.Holdout.Error > max {
			t.Errorf("%s: holdout error %.3f, want ≤ %.2f", name, m.Holdout.Error, max)
		}
		t.Logf("%s: holdout error %.3f", name, m.Holdout.Error)
	}
}

// TestReadmeFirstEvent runs the README's "Send your first event" against
// the demo, command by command (kcat's producer and consumer done with
// kafka-go on the demo's broker, kcat's -f '%h %s\n' as kcat writes it),
// and checks every output the README shows: the event's score records,
// one per model of configs/demo.yaml, found by the event's id among the
// demo's own, and the malformed event on the dead-letter topic with its
// reason.
func TestReadmeFirstEvent(t *testing.T) {
	blocks := readmeBlocks(t, "../../README.md", "## Send your first event")
	broker := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	screen := &stampedWriter{}
	done := make(chan error, 1)
	go func() {
		done <- runDemo(ctx, demoOptions{rate: 500, listen: "127.0.0.1:0", brokerListen: broker, noise: 0.02}, screen)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	consumeRe := regexp.MustCompile(`^kcat -C -u -b 127\.0\.0\.1:9092 -t (\S+) -o beginning -q (?:-f '%h %s\\n' )?\| grep -m(\d+) '([^']*)'$`)
	// consume is kcat -C -o beginning (-f '%h %s\n') | grep -m n.
	consume := func(line string) []string {
		m := consumeRe.FindStringSubmatch(line)
		n, _ := strconv.Atoi(m[2])
		headers := strings.Contains(line, "-f '%h %s")
		// A group of its own reads every partition from the first offset.
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: m[1], GroupID: fmt.Sprint("readme-", time.Now().UnixNano()),
			StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
		defer r.Close()
		var out []string
		for len(out) < n {
			msg, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("%s: %v (%d of %d lines)", line, err, len(out), n)
			}
			s := string(msg.Value)
			if headers {
				hs := make([]string, len(msg.Headers))
				for i, h := range msg.Headers {
					hs[i] = h.Key + "=" + string(h.Value)
				}
				s = strings.Join(hs, ",") + " " + s
			}
			if strings.Contains(s, m[3]) {
				out = append(out, s)
			}
		}
		return out
	}
	// The demo's broker, with its stream under way.
	waitUntil := time.Now().Add(30 * time.Second)
	for !strings.Contains(screen.text(), "events/s") {
		if time.Now().After(waitUntil) {
			t.Fatalf("the demo shows no screen within 30 s:\n%s", screen.text())
		}
		time.Sleep(100 * time.Millisecond)
	}
	w := &kafka.Writer{Addr: kafka.TCP(broker), BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	steps := runReadme(t, blocks, func(line string) []string {
		switch {
		case reProduce.MatchString(line):
			m := reProduce.FindStringSubmatch(line)
			if err := w.WriteMessages(ctx, kafka.Message{Topic: m[2], Key: []byte(m[3]), Value: []byte(m[1])}); err != nil {
				t.Fatal(err)
			}
			return nil
		case consumeRe.MatchString(line):
			return consume(line)
		}
		t.Fatalf("README: a command the test cannot run (write it as the others are): %q", line)
		return nil
	})
	if steps != 4 {
		t.Errorf("%d commands run, want the README's 4", steps)
	}
}

// TestDemoTakenAddresses: with the default addresses taken (another demo,
// a local Kafka), the demo moves to free ports and its screen says so in
// a line naming the address taken and the new one, since the README's
// commands name the defaults; an address given with the flag and taken is
// an error naming the flag instead of a silent move.
func TestDemoTakenAddresses(t *testing.T) {
	taken := func() (string, func()) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln.Addr().String(), func() { ln.Close() }
	}
	brokerAddr, closeBroker := taken()
	defer closeBroker()
	httpAddr, closeHTTP := taken()
	defer closeHTTP()

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second) // start-up on a loaded machine included
	defer cancel()
	var out bytes.Buffer
	if err := runDemo(ctx, demoOptions{rate: 0, listen: httpAddr, brokerListen: brokerAddr}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, a := range []struct{ addr, what string }{{brokerAddr, "broker"}, {httpAddr, "HTTP server"}} {
		re := regexp.MustCompile(`note: ` + regexp.QuoteMeta(a.addr) + ` was taken \(another demo or broker\?\), so the ` + a.what + ` is on (127\.0\.0\.1:\d+)`)
		m := re.FindStringSubmatch(s)
		if m == nil || m[1] == a.addr {
			t.Fatalf("the screen does not say that %s was taken and where the %s went:\n%s", a.addr, a.what, s)
		}
	}

	for _, o := range []demoOptions{
		{listen: "127.0.0.1:0", brokerListen: brokerAddr, fixedBroker: true},
		{listen: httpAddr, brokerListen: "127.0.0.1:0", fixedListen: true},
	} {
		flag, addr := "--broker-listen "+brokerAddr, brokerAddr
		if o.fixedListen {
			flag, addr = "--listen "+httpAddr, httpAddr
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := runDemo(ctx, o, io.Discard)
		cancel()
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s given and taken: %v, want an error naming the flag and %s", flag, err, addr)
		}
	}
	// Where the addresses are free, or a free port was asked for, no note.
	if got := movedNotice("127.0.0.1:9092", "127.0.0.1:9092", "127.0.0.1:0", "127.0.0.1:41234"); got != "" {
		t.Errorf("movedNotice with nothing moved = %q, want none", got)
	}
}

// TestStrayArguments: a command that takes no arguments refuses one (run
// used to ignore it), eval's --max-skipped must be a fraction, and bench
// refuses an unknown --kernel at once (after its preload, it did).
func TestStrayArguments(t *testing.T) {
	for _, args := range [][]string{
		{"run", "extra"}, {"bench", "extra"}, {"demo", "foo"}, {"demo", "recommend", "x"},
		{"eval", "--max-skipped", "5"}, {"eval", "--max-skipped", "-1"}, {"bench", "--kernel", "poly"},
	} {
		root := newRoot()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs(args)
		err := root.Execute()
		want := args[len(args)-1]
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("streamer %s: %v, want an error naming %q", strings.Join(args, " "), err, want)
		}
	}
}
