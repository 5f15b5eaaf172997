// Package jetstreamsink is the audit export sink that publishes events to
// a NATS JetStream stream. Each event is published to
// <prefix>.<organization> with the Nats-Msg-Id header set to the event's
// organization and id, so a batch published again (a node killed before
// it deleted its outbox entries, an acknowledgement lost) is dropped by
// the stream's duplicate window rather than stored twice.
package jetstreamsink

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditexport"
)

// Config is what a Sink is built from; URL and Stream are required.
type Config struct {
	// URL is the NATS server (nats://127.0.0.1:4222).
	URL string
	// Stream is the JetStream stream the events are stored in, created
	// (file storage, limits retention) when absent.
	Stream string
	// Subject is the prefix of each event's subject (zero:
	// "toolplane.audit"): an event of organization org is published to
	// <Subject>.<org>, so a consumer can follow one organization.
	Subject string
	// Duplicates is the stream's duplicate window when the sink creates
	// it (zero: 10 minutes): longer than any resend of a batch.
	Duplicates time.Duration
	// InFlight bounds the publishes awaiting their acknowledgement,
	// over every batch in flight (zero: 4096).
	InFlight int
	// Timeout bounds a batch's wait for its acknowledgements (zero: 10s).
	Timeout time.Duration
}

// Sink publishes audit events to a JetStream stream.
type Sink struct {
	cfg Config
	nc  *nats.Conn
	js  jetstream.JetStream
	// ready is set once the stream is known to exist; until then each
	// Send makes sure of it (NATS may have been down at startup).
	mu    sync.Mutex
	ready bool
}

// New connects to cfg.URL. A server that does not answer yet is no
// error: the connection keeps trying, and sends fail (the events stay
// queued in the outbox) until it does.
func New(cfg Config) (*Sink, error) {
	if cfg.URL == "" || cfg.Stream == "" {
		return nil, fmt.Errorf("%w: a JetStream export needs a server URL and a stream", toolplane.ErrInvalid)
	}
	if _, err := url.Parse(cfg.URL); err != nil {
		// Never the parser's message: it quotes the URL, password and all.
		return nil, fmt.Errorf("%w: the JetStream export's NATS URL does not parse", toolplane.ErrInvalid)
	}
	if cfg.Subject == "" {
		cfg.Subject = "toolplane.audit"
	}
	if cfg.Duplicates <= 0 {
		cfg.Duplicates = 10 * time.Minute
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = 4096
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	nc, err := nats.Connect(cfg.URL, nats.Name("toolplane audit export"), nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS %s: %w", redacted(cfg.URL), err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(cfg.InFlight), jetstream.WithPublishAsyncTimeout(cfg.Timeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("JetStream on %s: %w", redacted(cfg.URL), err)
	}
	return &Sink{cfg: cfg, nc: nc, js: js}, nil
}

var _ auditexport.Publisher = (*Sink)(nil)

// Name is the sink's name in the outbox: "jetstream:<stream>".
func (s *Sink) Name() string { return "jetstream:" + s.cfg.Stream }

// ensureStream creates the stream when it is absent; one that exists is
// left as its operator configured it.
func (s *Sink) ensureStream(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready {
		return nil
	}
	_, err := s.js.Stream(ctx, s.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = s.js.CreateStream(ctx, jetstream.StreamConfig{
			Name:       s.cfg.Stream,
			Subjects:   []string{s.cfg.Subject + ".>"},
			Storage:    jetstream.FileStorage,
			Duplicates: s.cfg.Duplicates,
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = nil // another node made it meanwhile
		}
	}
	if err != nil {
		return fmt.Errorf("JetStream stream %s: %w", s.cfg.Stream, err)
	}
	s.ready = true
	return nil
}

// Subject answers the subject an event of org is published to. An
// organization id that is not one subject token (it holds a dot, a
// wildcard or a space, or nothing) is written in hex behind "x-", so it
// still names one organization and never a wildcard.
func (s *Sink) Subject(org string) string {
	return s.cfg.Subject + "." + token(org)
}

func token(org string) string {
	if org != "" && !strings.ContainsAny(org, ".*> \t\r\n") && !strings.HasPrefix(org, "x-") {
		return org
	}
	return "x-" + hex.EncodeToString([]byte(org))
}

// MsgID answers the Nats-Msg-Id an event is published with: its
// organization and id, which name one event (an id is unique within its
// organization).
func MsgID(ev *toolplane.AuditEvent) string { return ev.OrganizationID + "/" + ev.ID }

// Send publishes events asynchronously, at most InFlight unacknowledged
// at once, and answers once the stream acknowledged every one (or the
// first failure).
func (s *Sink) Send(ctx context.Context, events []*toolplane.AuditEvent) error {
	wait, err := s.Publish(ctx, events)
	if err != nil {
		return err
	}
	return wait(ctx)
}

// Publish publishes events asynchronously, after those of the batches
// published before, and answers a wait for the stream's acknowledgements
// of every one: the exporter claims its next batch meanwhile. At most
// InFlight publishes of all batches are unacknowledged at once; one
// finding the limit reached waits (up to Timeout) for room.
func (s *Sink) Publish(ctx context.Context, events []*toolplane.AuditEvent) (func(context.Context) error, error) {
	if err := s.ensureStream(ctx); err != nil {
		return nil, err
	}
	futures := make([]jetstream.PubAckFuture, 0, len(events))
	for _, ev := range events {
		data, err := json.Marshal(ev)
		if err != nil {
			return nil, fmt.Errorf("encode audit event %s: %w", ev.ID, err)
		}
		msg := nats.NewMsg(s.Subject(ev.OrganizationID))
		msg.Data = data
		msg.Header.Set(jetstream.MsgIDHeader, MsgID(ev))
		f, err := s.js.PublishMsgAsync(msg, jetstream.WithExpectStream(s.cfg.Stream), jetstream.WithStallWait(s.cfg.Timeout))
		if err != nil {
			return nil, fmt.Errorf("publish audit event %s: %w", ev.ID, err)
		}
		futures = append(futures, f)
	}
	published := time.Now()
	return func(ctx context.Context) error {
		// Timeout counts from the publish, not from the wait: an
		// acknowledgement already in is taken before the timer is
		// looked at, so a wait that starts late fails only for an
		// acknowledgement that is missing.
		timeout := time.NewTimer(max(s.cfg.Timeout-time.Since(published), 0))
		defer timeout.Stop()
		for _, f := range futures {
			select {
			case <-f.Ok():
				continue
			case err := <-f.Err():
				return fmt.Errorf("publish audit events: %w", err)
			default:
			}
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return fmt.Errorf("publish audit events: %w", err)
			case <-timeout.C:
				return fmt.Errorf("publish audit events: no acknowledgement within %s", s.cfg.Timeout)
			case <-ctx.Done():
				return fmt.Errorf("publish audit events: %w", ctx.Err())
			}
		}
		return nil
	}, nil
}

// Close drains the connection.
func (s *Sink) Close() error {
	s.nc.Close()
	return nil
}

// redacted answers a NATS URL fit for an error or a log: its password
// replaced, or nothing of it when it does not parse (url.Parse's own
// message would quote it whole).
func redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(the configured URL, which does not parse)"
	}
	return u.Redacted()
}
