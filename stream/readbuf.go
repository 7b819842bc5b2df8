package stream

import (
	"bufio"
	"context"
	"net"

	"github.com/segmentio/kafka-go"
)

// readBufferSize is the receive buffer a partition reader's connection
// reads the socket through.
//
// kafka-go's connection reads through a 4 KiB bufio.Reader, and its batch
// reader takes each record's key and value out of it in turn: a fetch
// response of 1 MiB then costs about 256 read system calls (9% of the
// score pipeline's CPU in a profile of `streamer bench --kernel rbf`, more
// than the rbf model's sin/cos). Underneath it, a larger buffer fills
// from the socket with as much as the kernel holds (hundreds of KiB on a
// busy connection) and hands it on by copying.
const readBufferSize = 256 << 10

// bufferedDialer returns a copy of d whose connections read the socket
// through a readBufferSize buffer, under TLS when d has TLS (the dialer
// wraps the connection DialFunc returns).
func bufferedDialer(d *kafka.Dialer) *kafka.Dialer {
	b := *d
	dial := d.DialFunc
	if dial == nil {
		dial = (&net.Dialer{DualStack: d.DualStack, KeepAlive: d.KeepAlive, LocalAddr: d.LocalAddr, FallbackDelay: d.FallbackDelay}).DialContext
	}
	b.DialFunc = func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, readBufferSize)}, nil
	}
	return &b
}

// bufferedConn is a connection whose reads go through r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
