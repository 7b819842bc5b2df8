package stream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestBufferedDialer checks the partition readers' connection: every byte
// the peer writes arrives in order whatever the reads' sizes, writes go
// through, and a read deadline still ends a read that waits.
func TestBufferedDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	want := make([]byte, 3<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(r.Uint32())
	}
	echoed := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		wr := rand.New(rand.NewPCG(3, 4))
		for off := 0; off < len(want); { // uneven writes
			n := min(1+wr.IntN(100_000), len(want)-off)
			if _, err := c.Write(want[off : off+n]); err != nil {
				return
			}
			off += n
		}
		got := make([]byte, 5)
		_, _ = io.ReadFull(c, got)
		echoed <- got
		time.Sleep(time.Second) // hold the connection open, silent
	}()

	d := bufferedDialer(&kafka.Dialer{Timeout: 5 * time.Second})
	c, err := d.DialFunc(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*bufferedConn); !ok {
		t.Fatalf("connection is %T, want *bufferedConn", c)
	}
	got := make([]byte, 0, len(want))
	for len(got) < len(want) { // reads of every size, as kafka-go's bufio and record reads make
		n := min(1+r.IntN(2*readBufferSize), len(want)-len(got))
		k, err := c.Read(got[len(got) : len(got)+n])
		if err != nil {
			t.Fatalf("read after %d bytes: %v", len(got), err)
		}
		got = got[:len(got)+k]
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read differ from those written")
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if e := <-echoed; string(e) != "hello" {
		t.Fatalf("peer read %q", e)
	}
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a deadline error", err)
	}
}
