package jetstreamsink_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditexport"
	"github.com/toolplane/toolplane/auditexport/jetstreamsink"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// natsURL is the NATS server with JetStream the tests publish to.
const natsURL = "nats://127.0.0.1:4222"

type store interface {
	toolplane.AuditStore
	toolplane.AuditOutboxStore
}

func eachStore(t *testing.T, fn func(t *testing.T, s store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, sqlitetest.New(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, newPostgres(t))
	})
}

func newPostgres(t testing.TB) *postgres.Store {
	dsn := pgtest.SchemaDSN(t, pgtest.DSN(t))
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := postgres.New(pool)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// natsOrSkip connects to the local NATS, or skips when none answers.
func natsOrSkip(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(natsURL, nats.Timeout(2*time.Second))
	if err != nil {
		t.Skipf("no NATS at %s: %v", natsURL, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// names answers a stream and subject prefix of the test's own, and
// deletes the stream when the test ends.
func names(t testing.TB, js jetstream.JetStream) (stream, subject string) {
	suffix := strings.ToLower(rand.Text()[:10])
	stream, subject = "AUDIT_"+strings.ToUpper(suffix), "test."+suffix+".audit"
	t.Cleanup(func() { js.DeleteStream(context.Background(), stream) })
	return stream, subject
}

func appendEvents(t testing.TB, s store, org, prefix string, n int) []*toolplane.AuditEvent {
	t.Helper()
	evs := make([]*toolplane.AuditEvent, n)
	base := time.Now().Add(-time.Minute)
	for i := range evs {
		evs[i] = &toolplane.AuditEvent{ID: fmt.Sprintf("%s-%06d", prefix, i), OrganizationID: org, RunID: "run-1",
			Tool: "payments.refund", Outcome: "ok", Source: toolplane.SourceREST, UserID: "user-ada",
			CreatedAt: base.Add(time.Duration(i) * time.Microsecond)}
	}
	type batcher interface {
		AppendAuditBatch(ctx context.Context, events []*toolplane.AuditEvent) error
	}
	for from := 0; from < n; from += 256 {
		if err := s.(batcher).AppendAuditBatch(context.Background(), evs[from:min(from+256, n)]); err != nil {
			t.Fatal(err)
		}
	}
	return evs
}

// consume reads every message of stream with a consumer that keeps the
// first of each Nats-Msg-Id and counts the others, until want distinct
// messages arrived and the stream went quiet, or a deadline.
func consume(t testing.TB, js jetstream.JetStream, stream string, want int) (byID map[string]int, subjects map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	byID, subjects = map[string]int{}, map[string]string{}
	for {
		batch, err := cons.FetchNoWait(1000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			id := msg.Headers().Get(jetstream.MsgIDHeader)
			byID[id]++
			subjects[id] = msg.Subject()
			var ev toolplane.AuditEvent
			if err := json.Unmarshal(msg.Data(), &ev); err != nil || jetstreamsink.MsgID(&ev) != id {
				t.Fatalf("message %s: %v, an event of id %q", id, err, jetstreamsink.MsgID(&ev))
			}
		}
		if n == 0 {
			if len(byID) >= want {
				return byID, subjects
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%d distinct events in the stream, want %d", len(byID), want)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// checkOnce fails unless the stream holds each of evs exactly once, on
// its organization's subject, and nothing else.
func checkOnce(t testing.TB, js jetstream.JetStream, stream, subject string, evs []*toolplane.AuditEvent) {
	t.Helper()
	byID, subjects := consume(t, js, stream, len(evs))
	for _, ev := range evs {
		id := jetstreamsink.MsgID(ev)
		if byID[id] != 1 {
			t.Fatalf("event %s in the stream %d times, want once", id, byID[id])
		}
		if subjects[id] != subject+"."+ev.OrganizationID {
			t.Fatalf("event %s on %s, want %s.%s", id, subjects[id], subject, ev.OrganizationID)
		}
	}
	if len(byID) != len(evs) {
		t.Fatalf("%d events in the stream, want %d", len(byID), len(evs))
	}
}

func newExporter(t testing.TB, s store, url, stream, subject string) *auditexport.Exporter {
	t.Helper()
	return newExporterBatch(t, s, url, stream, subject, 200)
}

// newExporterBatch is newExporter with batches of batch entries.
func newExporterBatch(t testing.TB, s store, url, stream, subject string, batch int) *auditexport.Exporter {
	t.Helper()
	sink, err := jetstreamsink.New(jetstreamsink.Config{URL: url, Stream: stream, Subject: subject, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	x := auditexport.New(auditexport.Config{Store: s, Sink: sink, Batch: batch, Lease: 5 * time.Second})
	if err := x.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

func drainAll(t testing.TB, x *auditexport.Exporter) int {
	t.Helper()
	total := 0
	for {
		n, err := x.Drain(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return total
		}
		total += n
	}
}

// TestEveryEventOnce: every event stored after the sink registered
// reaches the stream once, on its organization's subject; a batch
// published again (a node that died before deleting its entries) is
// dropped by the stream's duplicate window; events stored before the
// sink registered are not queued.
func TestEveryEventOnce(t *testing.T) {
	t.Parallel()
	_, js := natsOrSkip(t)
	eachStore(t, func(t *testing.T, s store) {
		stream, subject := names(t, js)
		appendEvents(t, s, "org-a", "before", 10)
		x := newExporter(t, s, natsURL, stream, subject)
		evs := append(appendEvents(t, s, "org-a", "ev-a", 700), appendEvents(t, s, "org-b", "ev-b", 300)...)
		// Five batches, three in flight at once.
		if n, err := x.DrainBacklog(context.Background()); err != nil || n != 1000 {
			t.Fatalf("DrainBacklog = %d, %v; want 1000 entries", n, err)
		}
		// The same events published again, as after a crash between the
		// acknowledgement and the delete.
		again, err := jetstreamsink.New(jetstreamsink.Config{URL: natsURL, Stream: stream, Subject: subject})
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		if err := again.Send(context.Background(), evs[:250]); err != nil {
			t.Fatal(err)
		}
		checkOnce(t, js, stream, subject, evs)
		if lag, err := x.Lag(context.Background(), nil); err != nil || lag.Pending != 0 {
			t.Fatalf("lag = %+v, %v; want none", lag, err)
		}
	})
}

// proxy is a TCP proxy to NATS that a test stops and starts again on the
// same port: a NATS server that went down and came back.
type proxy struct {
	addr  string
	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func newProxy(t testing.TB) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String()}
	p.serve(ln)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", "127.0.0.1:4222")
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// stop closes the listener and every connection through it.
func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// start listens again on the same address.
func (p *proxy) start(t testing.TB) {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(ln)
}

// TestNATSDown: while NATS does not answer, sends fail, the events stay
// queued (the lag says how many and how old), and none is lost; once it
// answers again, the queue drains and a consumer sees each event once.
func TestNATSDown(t *testing.T) {
	t.Parallel()
	_, js := natsOrSkip(t)
	eachStore(t, func(t *testing.T, s store) {
		stream, subject := names(t, js)
		p := newProxy(t)
		x := newExporter(t, s, "nats://"+p.addr, stream, subject)
		first := appendEvents(t, s, "org-a", "up", 300)
		drainAll(t, x)

		p.stop()
		down := appendEvents(t, s, "org-a", "down", 500)
		for _, drain := range []func(context.Context) (int, error){x.Drain, x.DrainBacklog, x.Drain, x.DrainBacklog} {
			if n, err := drain(context.Background()); err == nil || n != 0 {
				t.Fatalf("drain with NATS down = %d, %v; want 0 and an error", n, err)
			}
		}
		lag, err := x.Lag(context.Background(), nil)
		if err != nil || lag.Pending != 500 || lag.Oldest.IsZero() {
			t.Fatalf("lag with NATS down = %+v, %v; want 500 pending", lag, err)
		}
		p.start(t)
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, err := x.DrainBacklog(context.Background())
			if err == nil && n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the outbox did not drain after NATS came back: %d, %v", n, err)
			}
			if err != nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
		checkOnce(t, js, stream, subject, append(first, down...))
	})
}

// TestNodesShareTheBacklog: exporters of one sink on several nodes
// (PostgreSQL) drain one backlog together, each entry sent by one of
// them: the events they sent add up to the backlog, none twice; batch
// by batch, and pipelined (several batches of each node in flight).
func TestNodesShareTheBacklog(t *testing.T) {
	t.Parallel()
	_, js := natsOrSkip(t)
	for _, pipelined := range []bool{false, true} {
		t.Run(fmt.Sprintf("pipelined=%t", pipelined), func(t *testing.T) {
			t.Parallel()
			s := newPostgres(t)
			stream, subject := names(t, js)
			var xs []*auditexport.Exporter
			for range 3 {
				xs = append(xs, newExporter(t, s, natsURL, stream, subject))
			}
			evs := appendEvents(t, s, "org-a", "ev", 3000)
			var wg sync.WaitGroup
			errs := make(chan error, len(xs))
			for _, x := range xs {
				wg.Go(func() {
					for {
						drain := x.Drain
						if pipelined {
							drain = x.DrainBacklog
						}
						n, err := drain(context.Background())
						if err != nil {
							errs <- err
							return
						}
						if n == 0 {
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			if err := errors.Join(<-errs); err != nil {
				t.Fatal(err)
			}
			var sent int64
			for _, x := range xs {
				n, _ := x.Sent()
				sent += n
			}
			if sent != int64(len(evs)) {
				t.Fatalf("the nodes sent %d events for %d queued: some twice", sent, len(evs))
			}
			checkOnce(t, js, stream, subject, evs)
		})
	}
}
