package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
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
