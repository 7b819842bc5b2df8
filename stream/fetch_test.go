package stream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// produceN writes records key k<i % keys>, value v<i> for i in [from, to)
// to partition 0 of topic, in batches of batch records, each acknowledged
// before the next is sent (kafka-go's writer does not wait for the broker
// by default, and two of its connections can then land batches out of
// order).
func produceN(t *testing.T, b *Broker, topic string, from, to, keys, batch int) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Topic: topic, Balancer: &kafka.RoundRobin{}, BatchSize: batch, BatchTimeout: time.Millisecond,
		RequiredAcks: kafka.RequireAll}
	defer w.Close()
	for lo := from; lo < to; lo += batch {
		var msgs []kafka.Message
		for i := lo; i < min(lo+batch, to); i++ {
			msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "k%d", i%keys), Value: fmt.Appendf(nil, "v%d%s", i, pad)})
		}
		if err := w.WriteMessages(context.Background(), msgs...); err != nil {
			t.Fatal(err)
		}
	}
}

// startFetchBroker starts a broker for the test with a topic of one
// partition, with the given configs.
func startFetchBroker(t *testing.T, topic string, configs ...kafka.ConfigEntry) *Broker {
	t.Helper()
	b, err := StartBroker(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.CreateTopic(context.Background(), topic, 1, configs...); err != nil {
		t.Fatal(err)
	}
	return b
}

// pad lengthens every value, so that a fetch response is larger than the
// connection's read buffer.
var pad = strings.Repeat(".", 200)

// readN reads n records from f, checking each is the next: values v<i>
// with offset i, i from `from`.
func readN(t *testing.T, ctx context.Context, f *partitionFetcher, from, n int, hold func(i int)) {
	t.Helper()
	for i := from; i < from+n; i++ {
		msg, err := f.Next(ctx)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if msg.Offset != int64(i) || string(msg.Value) != fmt.Sprintf("v%d%s", i, pad) || msg.Partition != 0 {
			t.Fatalf("record %d: offset %d partition %d value %q", i, msg.Offset, msg.Partition, msg.Value)
		}
		if msg.HighWaterMark <= msg.Offset {
			t.Fatalf("record %d: high-water mark %d", i, msg.HighWaterMark)
		}
		if hold != nil {
			hold(i)
		}
	}
}

// TestPartitionFetcher reads a partition through many fetch responses in
// order from its first offset, from an offset inside it and after a
// caller held records past the connection's deadline, waits for records
// produced later, and returns when its context ends while it waits.
func TestPartitionFetcher(t *testing.T) {
	t.Parallel()
	b := startFetchBroker(t, "in")
	const n = 30000
	produceN(t, b, "in", 0, n, n, 5000)
	ctx := context.Background()
	d := bufferedDialer(&kafka.Dialer{Timeout: 5 * time.Second})

	// Small fetches: many responses, each cut at maxBytes.
	f := newPartitionFetcher(d, b.Addrs(), "in", 0, 16<<10, time.Second, kafka.FirstOffset)
	readN(t, ctx, f, 0, n, nil)
	f.Close()

	f = newPartitionFetcher(d, b.Addrs(), "in", 0, 4<<20, time.Second, 12345)
	readN(t, ctx, f, 12345, 1000, nil)
	f.Close()

	// A caller that holds records longer than the deadline: the fetcher
	// reconnects where it was, the caller sees nothing of it. (The
	// deadline is not renewed here: a renewal before the next socket read
	// would let the connection go on.)
	// Fetches of 256 KB and a 500 ms deadline: a 4 MB fetch under a
	// 150 ms one timed out twice running under -race on a loaded CI
	// machine, before any record was held.
	f = newPartitionFetcher(d, b.Addrs(), "in", 0, 256<<10, 100*time.Millisecond, kafka.FirstOffset)
	f.timeout, f.rearm = 500*time.Millisecond, n
	readN(t, ctx, f, 0, n, func(i int) {
		if i == 100 || i == 20000 {
			time.Sleep(3 * f.timeout)
		}
	})
	if f.dials < 3 {
		t.Fatalf("%d connections: the held records did not outlast the deadline", f.dials)
	}

	// At the end it waits, across empty fetches, for the next record.
	go func() {
		time.Sleep(600 * time.Millisecond) // several empty fetches of 100 ms
		produceN(t, b, "in", n, n+10, n+10, 5000)
	}()
	readN(t, ctx, f, n, 10, nil)
	f.Close()

	// Waiting with nothing to read, a context that ends ends the wait,
	// however long the broker would hold the fetch.
	f = newPartitionFetcher(d, b.Addrs(), "in", 0, 4<<20, time.Minute, kafka.LastOffset)
	if err := nextBlocksUntilCancel(ctx, f, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if f.conn != nil {
		t.Fatal("connection left open")
	}
}

// cutConn fails its reads with a connection reset once it has read left
// bytes, as when a broker drops a connection.
type cutConn struct {
	net.Conn
	left int
}

func (c *cutConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	n, err := c.Conn.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, err
}

// TestPartitionFetcherReconnects reads a partition over connections that
// the "broker" resets every 300 KB: the fetcher reconnects where it was
// and the caller sees every record once, in order, and no error.
func TestPartitionFetcherReconnects(t *testing.T) {
	t.Parallel()
	b := startFetchBroker(t, "in")
	const n = 20000 // about 4 MB
	// Record batches of 21 KB: a new connection reads the one it resumes
	// in from its start.
	produceN(t, b, "in", 0, n, n, 100)
	var nd net.Dialer
	d := bufferedDialer(&kafka.Dialer{Timeout: 5 * time.Second, DialFunc: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := nd.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &cutConn{Conn: c, left: 300 << 10}, nil
	}})
	f := newPartitionFetcher(d, b.Addrs(), "in", 0, 4<<20, time.Second, kafka.FirstOffset)
	defer f.Close()
	readN(t, context.Background(), f, 0, n, nil)
	if f.dials < 10 {
		t.Fatalf("%d connections for %d records cut every 300 KB", f.dials, n)
	}
	t.Logf("%d connections", f.dials)
}

// TestPartitionFetcherTruncated: retention deletes the records a fetcher
// is about to read; it goes on from the log's new first offset, as a
// kafka.Reader does, without an error.
func TestPartitionFetcherTruncated(t *testing.T) {
	t.Parallel()
	b := startFetchBroker(t, "r", kafka.ConfigEntry{ConfigName: "retention.bytes", ConfigValue: "200000"})
	ctx := context.Background()
	const n = 5000 // 50 record batches of about 21 KB
	produceN(t, b, "r", 0, n, n, 100)
	f := newPartitionFetcher(bufferedDialer(&kafka.Dialer{Timeout: 5 * time.Second}), b.Addrs(), "r", 0, 16<<10, time.Second, kafka.FirstOffset)
	defer f.Close()
	readN(t, ctx, f, 0, 50, nil)
	b.c.ApplyRetention()
	first, err := firstOffset(b, "r")
	if err != nil || first < 1000 {
		t.Fatalf("first offset after retention %d, %v: retention kept too much for the test", first, err)
	}
	prev, jumped := int64(49), false
	for prev < n-1 {
		msg, err := f.Next(ctx)
		if err != nil {
			t.Fatalf("after offset %d: %v", prev, err)
		}
		if msg.Offset != prev+1 {
			if prev+1 >= first || msg.Offset != first || jumped {
				t.Fatalf("offset %d after %d (the log starts at %d)", msg.Offset, prev, first)
			}
			jumped = true
		}
		if string(msg.Value) != fmt.Sprintf("v%d%s", msg.Offset, pad) {
			t.Fatalf("offset %d: value %q", msg.Offset, msg.Value)
		}
		prev = msg.Offset
	}
	if !jumped {
		t.Fatal("never skipped to the log's first offset")
	}
}

// leader dials the leader of partition part of topic on addr, within 10 s,
// and gives the connection a 10 s deadline: an answer that never comes
// fails the test instead of hanging the package.
func leader(addr, topic string, part int) (*kafka.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := kafka.DialLeader(ctx, "tcp", addr, topic, part)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, nil
}

// lastOffset is the end offset of partition part of topic on addr.
func lastOffset(t testing.TB, addr, topic string, part int) int64 {
	t.Helper()
	c, err := leader(addr, topic, part)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	off, err := c.ReadLastOffset()
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// firstOffset is the first offset of partition 0 of topic.
func firstOffset(b *Broker, topic string) (int64, error) {
	c, err := leader(b.Addrs()[0], topic, 0)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.ReadFirstOffset()
}

// TestPartitionFetcherCompacted reads a compacted partition, whose offsets
// have gaps: the surviving records in order, then a record produced after
// them (the fetcher does not stall on the gap at the end).
func TestPartitionFetcherCompacted(t *testing.T) {
	t.Parallel()
	b := startFetchBroker(t, "c", kafka.ConfigEntry{ConfigName: "cleanup.policy", ConfigValue: "compact"})
	ctx := context.Background()
	const n, keys = 5000, 7
	produceN(t, b, "c", 0, n, keys, 10) // the broker compacts whole batches
	b.Compact()
	f := newPartitionFetcher(bufferedDialer(&kafka.Dialer{Timeout: 5 * time.Second}), b.Addrs(), "c", 0, 4<<20, time.Second, kafka.FirstOffset)
	defer f.Close()
	last := map[string]int64{}
	prev, read := int64(-1), 0
	for {
		msg, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Offset <= prev {
			t.Fatalf("offset %d after %d", msg.Offset, prev)
		}
		prev = msg.Offset
		read++
		if string(msg.Value) != fmt.Sprintf("v%d%s", msg.Offset, pad) {
			t.Fatalf("offset %d: value %q", msg.Offset, msg.Value)
		}
		last[string(msg.Key)] = msg.Offset
		if msg.Offset >= n-keys { // the last record of each key is kept
			if msg.Offset == n-1 {
				break
			}
		}
	}
	if len(last) != keys || read > n-100 {
		t.Fatalf("%d records of %d read after compaction, keys %v", read, n, last)
	}
	t.Logf("%d records of %d read after compaction", read, n)
	produceN(t, b, "c", n, n+1, keys, 10)
	msg, err := f.Next(ctx)
	if err != nil || msg.Offset != n {
		t.Fatalf("after the compacted records: offset %d, %v", msg.Offset, err)
	}
}

// nextBlocksUntilCancel checks that f.Next, with nothing to read, waits
// for at least wait, and returns context.Canceled once its context is
// cancelled (within 20 s).
func nextBlocksUntilCancel(ctx context.Context, f Fetcher, wait time.Duration) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, err := f.Next(cctx)
		got <- err
	}()
	select {
	case err := <-got:
		return fmt.Errorf("Next with nothing to read returned %v before its context ended, want it to wait", err)
	case <-time.After(wait):
	}
	cancel()
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			return fmt.Errorf("Next after cancel: %v, want context.Canceled", err)
		}
		return nil
	case <-time.After(20 * time.Second):
		return errors.New("Next did not return after its context ended")
	}
}
