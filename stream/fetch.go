package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
)

// partitionFetcher reads one partition in offset order on the caller's
// goroutine: a connection to the partition's leader and the fetch
// responses (batches) read from it one record at a time.
//
// It replaces a kafka.Reader per partition. The Reader runs a goroutine
// of its own that hands every record over a channel and reads the clock
// and resets the connection's deadline once per record: in a profile of
// `streamer bench --kernel rbf`, about 10% of the score pipeline's CPU
// went there, besides reading the records. Here the deadline is set once
// per fetch and renewed every rearmEvery records, and nothing but the
// record itself crosses a goroutine.
//
// Errors the fetcher can get past on its own do not reach the caller: the
// end of a fetch response, a fetch the broker let time out empty, and
// once per call a leader that moved, an offset out of the log's range, a
// connection that lost its place, timed out or was closed by the broker:
// it reconnects, and connect resolves the offset again (one below the
// log's first becomes the first, as a kafka.Reader does). Any other error closes the connection and is returned; the
// next call reconnects and resumes at the offset after the last record
// returned.
type partitionFetcher struct {
	dialer    *kafka.Dialer
	brokers   []string
	topic     string
	partition int
	maxBytes  int
	maxWait   time.Duration // the broker's wait for a fetch's first byte
	timeout   time.Duration // fetchReadTimeout (tests shorten it)
	rearm     int           // rearmEvery (tests lengthen it)

	offset int64 // the next to read (kafka.FirstOffset or LastOffset until the first connection)
	conn   *kafka.Conn
	batch  *kafka.Batch
	unhook func() bool // stops closing conn when the caller's context ends
	reads  int         // records read since the deadline was set
	dials  int         // connections made
}

// Deadlines of a fetcher's connection: a fetch must answer within its
// broker-side wait plus fetchReadTimeout, and each run of rearmEvery
// records must arrive within fetchReadTimeout. The deadline is renewed
// after each run, not per record (a clock reading and a deadline update
// per record were part of what the Reader cost), so a caller that holds
// one run longer than that makes the next socket read time out, and the
// fetcher reconnects.
const (
	fetchReadTimeout = 10 * time.Second
	rearmEvery       = 64
)

func newPartitionFetcher(d *kafka.Dialer, brokers []string, topic string, partition, maxBytes int, maxWait time.Duration, offset int64) *partitionFetcher {
	return &partitionFetcher{dialer: d, brokers: brokers, topic: topic, partition: partition, maxBytes: maxBytes, maxWait: maxWait,
		timeout: fetchReadTimeout, rearm: rearmEvery, offset: offset}
}

// Next returns the next record. It blocks until one arrives, an error
// occurs or ctx ends (then ctx's error, and the connection is closed).
func (f *partitionFetcher) Next(ctx context.Context) (kafka.Message, error) {
	reconnected := false
	for {
		if err := ctx.Err(); err != nil {
			f.Close()
			return kafka.Message{}, err
		}
		if f.conn == nil {
			if err := f.connect(ctx); err != nil {
				return kafka.Message{}, err
			}
		}
		if f.batch == nil {
			f.conn.SetDeadline(time.Now().Add(f.maxWait + f.timeout))
			f.batch = f.conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: f.maxBytes, MaxWait: f.maxWait})
			f.reads = 0
		} else if f.reads++; f.reads == f.rearm {
			f.conn.SetReadDeadline(time.Now().Add(f.timeout))
			f.reads = 0
		}
		msg, err := f.batch.ReadMessage()
		if err == nil {
			f.offset = msg.Offset + 1
			return msg, nil
		}
		f.batch.Close()
		f.batch = nil
		switch {
		case ctx.Err() != nil:
			continue
		case errors.Is(err, io.EOF), errors.Is(err, kafka.RequestTimedOut):
			// The end of a fetch response (kafka-go turns a connection's
			// own EOF into io.ErrUnexpectedEOF), or an empty one.
			continue
		case !reconnected && (errors.Is(err, kafka.NotLeaderForPartition) || errors.Is(err, kafka.LeaderNotAvailable) ||
			errors.Is(err, kafka.UnknownTopicOrPartition) || errors.Is(err, kafka.OffsetOutOfRange) ||
			errors.Is(err, io.ErrNoProgress) || errors.Is(err, os.ErrDeadlineExceeded) ||
			errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)):
			// The leader moved, the partition's log no longer starts
			// where it did, the connection lost its place or was closed
			// by the broker, or the caller held a run of records past
			// the deadline: connect again, once, before saying so
			// (connect places an offset below the log's first at the
			// first).
			reconnected = true
			f.Close()
			continue
		default:
			f.Close()
			return kafka.Message{}, fmt.Errorf("fetch %s/%d at offset %d: %w", f.topic, f.partition, f.offset, err)
		}
	}
}

// connect dials the partition's leader through the first broker that
// answers and positions the connection at f.offset (resolving
// kafka.FirstOffset and LastOffset, and an offset before the first).
func (f *partitionFetcher) connect(ctx context.Context) error {
	var err error
	for _, b := range f.brokers {
		var c *kafka.Conn
		if c, err = f.dialer.DialLeader(ctx, "tcp", b, f.topic, f.partition); err != nil {
			continue
		}
		c.SetDeadline(time.Now().Add(f.timeout))
		first, last, oerr := c.ReadOffsets()
		if oerr != nil {
			c.Close()
			err = oerr
			continue
		}
		switch {
		case f.offset == kafka.FirstOffset || (f.offset >= 0 && f.offset < first):
			f.offset = first
		case f.offset == kafka.LastOffset:
			f.offset = last
		}
		if _, err = c.Seek(f.offset, kafka.SeekAbsolute|kafka.SeekDontCheck); err != nil {
			c.Close()
			continue
		}
		c.SetDeadline(time.Time{})
		f.conn = c
		f.dials++
		f.unhook = context.AfterFunc(ctx, func() { c.Close() })
		return nil
	}
	if err == nil {
		err = errors.New("no brokers")
	}
	return fmt.Errorf("connect to the leader of %s/%d: %w", f.topic, f.partition, err)
}

// Close closes the connection (the next Next reconnects).
func (f *partitionFetcher) Close() {
	if f.batch != nil {
		f.batch.Close()
		f.batch = nil
	}
	if f.conn != nil {
		f.unhook()
		f.conn.Close()
		f.conn = nil
	}
}
