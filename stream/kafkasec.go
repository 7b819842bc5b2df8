package stream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/snapshot"
)

// KafkaSecurity is the TLS and SASL setting that every Kafka connection of
// the service uses: the consumer group and the partition readers (through a
// *kafka.Dialer), the score and dead-letter producer and the changelog
// (through a *kafka.Transport each; the changelog's reader dials). A nil
// *KafkaSecurity is plaintext without authentication.
//
// The password is held only inside the SASL mechanism; no method returns or
// prints it.
type KafkaSecurity struct {
	tls       *tls.Config    // nil: plaintext
	mechanism sasl.Mechanism // nil: no authentication
	mechName  string         // as configured (kafka.sasl.mechanism), for messages
	user      string
}

// dialTimeout bounds each connection attempt (TCP, TLS and SASL).
const dialTimeout = 10 * time.Second

// NewKafkaSecurity builds the TLS config and the SASL mechanism that
// k.TLS and k.SASL describe; with neither enabled it returns nil, nil.
// Errors are *config.Error naming the key at fault.
func NewKafkaSecurity(k config.Kafka) (*KafkaSecurity, error) {
	tc, err := KafkaTLSConfig(k.TLS)
	if err != nil {
		return nil, err
	}
	mech, err := KafkaSASLMechanism(k.SASL)
	if err != nil {
		return nil, err
	}
	if tc == nil && mech == nil {
		return nil, nil
	}
	return &KafkaSecurity{tls: tc, mechanism: mech, mechName: k.SASL.Mechanism, user: k.SASL.Username}, nil
}

// KafkaTLSConfig returns the client TLS config of kafka.tls, or nil when TLS
// is off. TLS 1.2 is the minimum.
func KafkaTLSConfig(t config.TLS) (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, // opt-in (kafka.tls.insecure_skip_verify), documented as testing only
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, &config.Error{Key: "kafka.tls.ca_file", Msg: err.Error()}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &config.Error{Key: "kafka.tls.ca_file", Msg: fmt.Sprintf("no PEM certificate in %s", t.CAFile)}
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, &config.Error{Key: "kafka.tls.cert_file", Msg: fmt.Sprintf("client certificate %s with key %s (kafka.tls.key_file): %v", t.CertFile, t.KeyFile, err)}
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// KafkaSASLMechanism returns the SASL mechanism of kafka.sasl, or nil when
// SASL is off. The password is read here (from the config or
// kafka.sasl.password_file); errors never include it.
func KafkaSASLMechanism(s config.SASL) (sasl.Mechanism, error) {
	if !s.Enabled() {
		return nil, nil
	}
	pw, err := s.ResolvePassword()
	if err != nil {
		return nil, err
	}
	m, serr := saslMechanism(s.Mechanism, s.Username, pw)
	if serr != nil {
		return nil, &config.Error{Key: "kafka.sasl." + serr.key, Msg: serr.msg}
	}
	return m, nil
}

// saslError names the kafka.sasl key at fault; msg never holds the password.
type saslError struct{ key, msg string }

// saslMechanism builds the kafka-go mechanism named as in
// kafka.sasl.mechanism.
func saslMechanism(mechanism, user, password string) (sasl.Mechanism, *saslError) {
	switch mechanism {
	case config.SASLPlain:
		return plain.Mechanism{Username: user, Password: password}, nil
	case config.SASLScramSHA256, config.SASLScramSHA512:
		algo := scram.SHA256
		if mechanism == config.SASLScramSHA512 {
			algo = scram.SHA512
		}
		m, err := scram.Mechanism(algo, user, password)
		if err != nil {
			// The SCRAM library's message quotes the rejected string:
			// only the username's may be repeated.
			if strings.Contains(err.Error(), "SASLprepping username") {
				return nil, &saslError{"username", "not valid for SCRAM: " + err.Error()}
			}
			return nil, &saslError{"password", "not valid for SCRAM: SASLprep (RFC 4013) rejects one of its characters"}
		}
		return m, nil
	}
	return nil, &saslError{"mechanism", fmt.Sprintf("unknown %q (one of %s, %s, %s)",
		mechanism, config.SASLPlain, config.SASLScramSHA256, config.SASLScramSHA512)}
}

// TLSConfig returns the client TLS config (nil: plaintext).
func (s *KafkaSecurity) TLSConfig() *tls.Config {
	if s == nil {
		return nil
	}
	return s.tls
}

// SASLMechanism returns the SASL mechanism (nil: no authentication).
func (s *KafkaSecurity) SASLMechanism() sasl.Mechanism {
	if s == nil {
		return nil
	}
	return s.mechanism
}

// Dialer returns a new dialer with the TLS and SASL settings, for the
// consumer group, readers and kafka.Conn users.
func (s *KafkaSecurity) Dialer(clientID string) *kafka.Dialer {
	return &kafka.Dialer{ClientID: clientID, Timeout: dialTimeout, DualStack: true,
		TLS: s.TLSConfig(), SASLMechanism: s.SASLMechanism()}
}

// Transport returns a new transport with the TLS and SASL settings, for
// kafka.Writer and kafka.Client. Each caller gets its own connection pool.
func (s *KafkaSecurity) Transport(clientID string) *kafka.Transport {
	return &kafka.Transport{ClientID: clientID, DialTimeout: dialTimeout,
		TLS: s.TLSConfig(), SASL: s.SASLMechanism()}
}

// ChangelogOption makes a changelog store connect with the TLS and SASL
// settings.
func (s *KafkaSecurity) ChangelogOption(clientID string) snapshot.ChangelogOption {
	return snapshot.WithDialer(s.Dialer(clientID), s.Transport(clientID))
}

// dialer is the consumer's dialer: cfg.Dialer, or a plaintext one.
func (cfg PipelineConfig) dialer() *kafka.Dialer {
	if cfg.Dialer != nil {
		return cfg.Dialer
	}
	return (*KafkaSecurity)(nil).Dialer(cfg.ClientID)
}

// KafkaAuthError is a failure that retrying cannot fix: the TLS handshake
// or the SASL exchange with a reachable broker failed. Mechanism is "" for
// TLS failures.
type KafkaAuthError struct {
	Broker    string
	Mechanism string
	User      string
	Err       error
}

func (e *KafkaAuthError) Error() string {
	if e.Mechanism != "" {
		return fmt.Sprintf("kafka: SASL authentication failed (mechanism %s, user %q): broker %s: %v (check kafka.sasl.username and the password)",
			e.Mechanism, e.User, e.Broker, e.Err)
	}
	return fmt.Sprintf("kafka: TLS with broker %s failed: %v (check kafka.tls and that the listener speaks TLS)", e.Broker, e.Err)
}

func (e *KafkaAuthError) Unwrap() error { return e.Err }

// AuthCheckTimeout bounds [KafkaSecurity.CheckBrokers].
const AuthCheckTimeout = 10 * time.Second

// CheckBrokers connects to the brokers in turn, with TLS and SASL, and makes
// one metadata request, all within timeout. It returns a *KafkaAuthError
// when a broker was reached but the TLS handshake or the SASL exchange
// failed: a wrong password or certificate does not get better by retrying,
// so start-up should stop. It returns nil once one broker answers
// (reachable), and also when none can be reached (connection refused,
// time-outs; not reachable): the consumer and producers retry that in the
// background, so only a warning is logged.
func (s *KafkaSecurity) CheckBrokers(ctx context.Context, brokers []string, clientID string, timeout time.Duration, log *slog.Logger) (reachable bool, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if s.SASLMechanism() != nil && s.mechName == config.SASLPlain && s.TLSConfig() == nil {
		log.Warn("kafka.sasl.mechanism is plain without kafka.tls: the password crosses the network in clear")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	reached, err := s.reach(ctx, brokers, clientID)
	if reached {
		return true, err
	}
	log.Warn("kafka: no broker answered at start-up; retrying in the background"+s.securityHint(), "brokers", brokers, "err", err)
	return false, nil
}

// securityHint completes a message that no broker answered when TLS or
// SASL is off.
func (s *KafkaSecurity) securityHint() string {
	if s.TLSConfig() == nil || s.SASLMechanism() == nil {
		return " (if the brokers require TLS or SASL, set kafka.tls / kafka.sasl)"
	}
	return ""
}

// reach probes the brokers in turn until one answers: reached and nil
// then; reached and a *KafkaAuthError when a broker was reached but the TLS
// handshake or the SASL exchange failed; not reached and every broker's
// error otherwise.
func (s *KafkaSecurity) reach(ctx context.Context, brokers []string, clientID string) (reached bool, err error) {
	var errs []error
	for _, addr := range brokers {
		err := s.probe(ctx, addr, clientID)
		if err == nil {
			return true, nil
		}
		if _, fatal := errors.AsType[*KafkaAuthError](err); fatal {
			return true, err
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return false, errors.Join(errs...)
}

// probe dials addr, doing the TLS handshake itself so that its failures
// are told apart from an unreachable broker, lets the dialer authenticate,
// and asks for metadata.
func (s *KafkaSecurity) probe(ctx context.Context, addr, clientID string) error {
	d := s.Dialer(clientID)
	d.TLS = nil // the handshake is done in DialFunc
	var connected bool
	var tlsErr error
	d.DialFunc = func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		if tc := s.TLSConfig(); tc != nil {
			if tc.ServerName == "" {
				tc = tc.Clone()
				tc.ServerName, _, _ = net.SplitHostPort(address)
			}
			conn := tls.Client(c, tc)
			if err := conn.HandshakeContext(ctx); err != nil {
				_ = c.Close()
				tlsErr = err
				return nil, err
			}
			c = conn
		}
		connected = true
		return c, nil
	}
	conn, err := d.DialContext(ctx, "tcp", addr)
	switch {
	case tlsErr != nil && !isTimeout(tlsErr):
		return &KafkaAuthError{Broker: addr, Err: tlsErr}
	case isTLSAlert(err):
		// With TLS 1.3 the broker checks a client certificate after the
		// client's handshake has returned: its refusal arrives here.
		return &KafkaAuthError{Broker: addr, Err: err}
	case err != nil && connected && s.SASLMechanism() != nil && !isTimeout(err):
		// Reached, TLS done: the SASL exchange failed.
		return &KafkaAuthError{Broker: addr, Mechanism: s.mechName, User: s.user, Err: err}
	case tlsErr != nil:
		return fmt.Errorf("%s: TLS handshake got no answer (is the listener plaintext?): %w", addr, tlsErr)
	case err != nil:
		return fmt.Errorf("%s: %w", addr, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Brokers(); err != nil {
		if isTLSAlert(err) {
			return &KafkaAuthError{Broker: addr, Err: err}
		}
		return fmt.Errorf("%s: metadata: %w", addr, err)
	}
	return nil
}

// isTLSAlert reports whether err is a TLS alert the broker sent (crypto/tls
// returns those as a *net.OpError with Op "remote error"), e.g. "tls:
// certificate required".
func isTLSAlert(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}
