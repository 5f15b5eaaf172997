// Package auditexport ships the audit trail to sinks outside the
// database (a NATS JetStream stream, a directory of JSON Lines files)
// through the stores' transactional outbox (toolplane.AuditOutboxStore).
//
// The store queues an event for every registered sink in the transaction
// that stores it, so the exporter never has to be told about an event
// and an insert path cannot forget one. An Exporter claims a batch of a
// sink's entries under a lease, hands their events to the sink, and
// deletes the entries only once the sink says they are durable there (a
// JetStream acknowledgement, an fsync): at least once. A node killed
// mid-batch leaves its entries leased; when the lease ends another
// exporter (or the same node, restarted) claims and sends them again,
// and a sink that deduplicates (JetStream's Nats-Msg-Id) turns that into
// exactly once for its consumers.
package auditexport

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
)

// A Sink is where an exporter sends events.
type Sink interface {
	// Name is the sink's name in the outbox: stable across restarts, so
	// a restarted node resumes what the last one left.
	Name() string
	// Send makes events durable in the sink, in order, and answers nil
	// only once every one of them is (acknowledged, synced). An error
	// means some may have been, some not: they are sent again.
	Send(ctx context.Context, events []*toolplane.AuditEvent) error
	// Close releases the sink's connection or file.
	Close() error
}

// A Publisher is a Sink that can hand a batch over without waiting for
// it to be durable: the exporter then claims and reads its next batch
// while the sink acknowledges the last, rather than leave the store idle
// during the sink's round trips and the sink idle during the store's.
type Publisher interface {
	// Publish starts sending events, in order and after every batch
	// published before, and answers a wait that answers nil only once
	// every one of them is durable in the sink (what Send answers). An
	// error from Publish or from the wait means some may be, some not:
	// they are sent again.
	Publish(ctx context.Context, events []*toolplane.AuditEvent) (wait func(context.Context) error, err error)
}

// Config is what an Exporter is built from; Store and Sink are required.
type Config struct {
	Store toolplane.AuditOutboxStore
	Sink  Sink
	// Batch is how many entries one claim takes (zero: 1000).
	Batch int
	// Pipeline is how many claimed batches may wait for a Publisher
	// sink's acknowledgement at once while a backlog drains (zero: 3);
	// a sink that is no Publisher has one.
	Pipeline int
	// Lease is how long a claim holds its entries (zero: 15s): longer
	// than a batch takes to send, or another node sends it too.
	Lease time.Duration
	// Poll is how long an exporter with nothing to send waits before it
	// looks again (zero: 250ms).
	Poll time.Duration
	// MaxBackoff bounds the wait after a failed send (zero: 5s).
	MaxBackoff time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Log reports failed sends (nil: slog.Default()).
	Log *slog.Logger
}

// Exporter drains one sink's outbox.
type Exporter struct {
	cfg   Config
	owner string
	sent  sync.Mutex // one drain at a time
	// after is where the next claim starts (under sent): past the last
	// full batch while a backlog is worked through, 0 once caught up or
	// when a lease period has passed, so entries a dead exporter held
	// below it are claimed again.
	after      int64
	afterSince time.Time
	stats      struct {
		sync.Mutex
		sent, failed int64
	}
}

// New answers an exporter built from cfg. Its owner name, which its
// leases carry, is new each time: a restarted node waits for the leases
// its last run held to end, as any other node would.
func New(cfg Config) *Exporter {
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.Pipeline <= 0 {
		cfg.Pipeline = 3
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 15 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Exporter{cfg: cfg, owner: "exporter-" + rand.Text()}
}

// Sink answers the exporter's sink's name.
func (x *Exporter) Sink() string { return x.cfg.Sink.Name() }

// Register makes the store queue every event stored from now on for the
// exporter's sink. A node calls it at startup, before it serves calls.
func (x *Exporter) Register(ctx context.Context) error {
	if err := x.cfg.Store.RegisterAuditSink(ctx, x.cfg.Sink.Name(), x.cfg.Now()); err != nil {
		return fmt.Errorf("audit export to %s: %w", x.cfg.Sink.Name(), err)
	}
	return nil
}

// Drain sends one batch: it claims up to Batch entries, sends their
// events, and deletes the entries. It answers how many entries it
// finished (0: none waited, or another node holds them all). On a failed
// send the entries stay claimed by this exporter, which claims them
// again on its next Drain.
func (x *Exporter) Drain(ctx context.Context) (int, error) {
	x.sent.Lock()
	defer x.sent.Unlock()
	now := x.cfg.Now()
	if x.after > 0 && now.Sub(x.afterSince) >= x.cfg.Lease {
		x.after = 0
	}
	entries, err := x.cfg.Store.ClaimAuditOutbox(ctx, x.cfg.Sink.Name(), x.owner, x.after, now, now.Add(x.cfg.Lease), x.cfg.Batch)
	if err != nil {
		x.after = 0
		return 0, err
	}
	if len(entries) < x.cfg.Batch {
		// Caught up (or others hold the rest): the next claim looks from
		// the start again.
		if x.after > 0 && len(entries) == 0 {
			x.after = 0
			return x.drainFrom(ctx)
		}
		x.after = 0
	} else {
		if x.after == 0 {
			x.afterSince = now
		}
		x.after = entries[len(entries)-1].Seq
	}
	if len(entries) == 0 {
		return 0, nil
	}
	return x.send(ctx, entries)
}

// drainFrom is Drain from the first entry, its lock held.
func (x *Exporter) drainFrom(ctx context.Context) (int, error) {
	now := x.cfg.Now()
	entries, err := x.cfg.Store.ClaimAuditOutbox(ctx, x.cfg.Sink.Name(), x.owner, 0, now, now.Add(x.cfg.Lease), x.cfg.Batch)
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	return x.send(ctx, entries)
}

// send sends the claimed entries' events and deletes the entries.
func (x *Exporter) send(ctx context.Context, entries []toolplane.AuditOutboxEntry) (int, error) {
	events := make([]*toolplane.AuditEvent, 0, len(entries))
	seqs := make([]int64, len(entries))
	for i, e := range entries {
		seqs[i] = e.Seq
		if e.Event != nil { // nil: retention dropped it; nothing to send
			events = append(events, e.Event)
		}
	}
	if len(events) > 0 {
		if err := x.cfg.Sink.Send(ctx, events); err != nil {
			x.after = 0 // the failed batch is claimed again first
			return 0, x.failed(len(events), err)
		}
	}
	// A failure here leaves the entries to be sent again: once more is
	// what at-least-once allows, and a deduplicating sink drops it.
	if err := x.cfg.Store.DeleteAuditOutbox(ctx, x.cfg.Sink.Name(), seqs); err != nil {
		x.after = 0
		return 0, fmt.Errorf("audit export to %s: %w", x.cfg.Sink.Name(), err)
	}
	x.stats.Lock()
	x.stats.sent += int64(len(events))
	x.stats.Unlock()
	return len(entries), nil
}

// DrainBacklog sends batch after batch until a claim comes back short of
// a batch (caught up, or other exporters hold the rest) and answers how
// many entries it finished. While a Publisher sink acknowledges a batch,
// it claims and publishes the next, up to Pipeline batches waiting at
// once: the store's round trips and the sink's overlap. Each batch's
// entries are deleted only once the sink acknowledged that batch. After
// a failure it claims no more, waits for the batches already published
// (deleting those acknowledged), and answers the failure; the failed
// batch stays claimed by this exporter, which claims it again first.
func (x *Exporter) DrainBacklog(ctx context.Context) (int, error) {
	x.sent.Lock()
	defer x.sent.Unlock()
	type flight struct {
		seqs   []int64
		events int
		wait   func(context.Context) error
	}
	depth := 1
	if _, ok := x.cfg.Sink.(Publisher); ok {
		depth = x.cfg.Pipeline
	}
	var (
		queue     []flight
		done      int
		failure   error
		more      = true
		fromStart bool // a claim past the cursor came back short: look from the first entry once the pipeline is empty
	)
	for {
		// A claim never starts below a batch in flight: the claim takes
		// entries this exporter holds, and would send that batch again.
		for more && failure == nil && len(queue) < depth {
			now := x.cfg.Now()
			if len(queue) == 0 && x.after > 0 && now.Sub(x.afterSince) >= x.cfg.Lease {
				x.after = 0
			}
			from := x.after
			entries, err := x.cfg.Store.ClaimAuditOutbox(ctx, x.cfg.Sink.Name(), x.owner, from, now, now.Add(x.cfg.Lease), x.cfg.Batch)
			if err != nil {
				x.after, failure = 0, err
				break
			}
			if len(entries) < x.cfg.Batch {
				more, fromStart, x.after = false, from > 0, 0
			} else {
				if x.after == 0 {
					x.afterSince = now
				}
				x.after = entries[len(entries)-1].Seq
			}
			if len(entries) == 0 {
				break
			}
			f := flight{seqs: make([]int64, len(entries))}
			events := make([]*toolplane.AuditEvent, 0, len(entries))
			for i, e := range entries {
				f.seqs[i] = e.Seq
				if e.Event != nil { // nil: retention dropped it; nothing to send
					events = append(events, e.Event)
				}
			}
			f.events = len(events)
			if f.wait, err = x.publish(ctx, events); err != nil {
				x.after, failure = 0, x.failed(len(events), err)
				break
			}
			queue = append(queue, f)
		}
		if len(queue) == 0 {
			if failure != nil {
				return done, failure
			}
			if !fromStart {
				return done, nil
			}
			fromStart, more = false, true
			continue
		}
		f := queue[0]
		queue = queue[1:]
		if err := f.wait(ctx); err != nil {
			x.after, more = 0, false
			if failure == nil {
				failure = x.failed(f.events, err)
			}
			continue
		}
		// A failure here leaves the entries to be sent again: once more
		// is what at-least-once allows, and a deduplicating sink drops it.
		if err := x.cfg.Store.DeleteAuditOutbox(ctx, x.cfg.Sink.Name(), f.seqs); err != nil {
			x.after, more = 0, false
			if failure == nil {
				failure = fmt.Errorf("audit export to %s: %w", x.cfg.Sink.Name(), err)
			}
			continue
		}
		done += len(f.seqs)
		x.stats.Lock()
		x.stats.sent += int64(f.events)
		x.stats.Unlock()
	}
}

// publish hands events to the sink: published and waited for later when
// it is a Publisher, sent now when not.
func (x *Exporter) publish(ctx context.Context, events []*toolplane.AuditEvent) (func(context.Context) error, error) {
	if len(events) == 0 {
		return func(context.Context) error { return nil }, nil
	}
	if p, ok := x.cfg.Sink.(Publisher); ok {
		return p.Publish(ctx, events)
	}
	if err := x.cfg.Sink.Send(ctx, events); err != nil {
		return nil, err
	}
	return func(context.Context) error { return nil }, nil
}

// failed counts a failed send of n events and answers err with context.
func (x *Exporter) failed(n int, err error) error {
	x.stats.Lock()
	x.stats.failed++
	x.stats.Unlock()
	return fmt.Errorf("send %d audit events to %s: %w", n, x.cfg.Sink.Name(), err)
}

// Run drains the outbox until ctx ends: a pipeline of batches while
// entries wait (DrainBacklog), a poll interval apart when none do, and
// with a growing wait (bounded by MaxBackoff) while the sink or the
// store fails.
func (x *Exporter) Run(ctx context.Context) {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		n, err := x.DrainBacklog(ctx)
		var wait time.Duration
		switch {
		case err != nil && ctx.Err() == nil:
			backoff = min(max(2*backoff, 50*time.Millisecond), x.cfg.MaxBackoff)
			wait = backoff
			x.cfg.Log.Warn("audit export failed; the events stay queued", "sink", x.cfg.Sink.Name(), "retry_in", wait, "err", err)
		case n == 0:
			backoff, wait = 0, x.cfg.Poll
		default:
			backoff = 0
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// Lag answers what waits for the sink: of one organization's events
// (org set) or of every organization's (org nil).
func (x *Exporter) Lag(ctx context.Context, org *string) (toolplane.AuditOutboxLag, error) {
	return x.cfg.Store.AuditOutboxLag(ctx, x.cfg.Sink.Name(), org)
}

// Sent answers how many events the exporter sent and how many sends
// failed since it started.
func (x *Exporter) Sent() (sent, failed int64) {
	x.stats.Lock()
	defer x.stats.Unlock()
	return x.stats.sent, x.stats.failed
}

// Close closes the sink. Run must have returned.
func (x *Exporter) Close() error { return x.cfg.Sink.Close() }

// ErrNotAuthorized: the caller may not see the exports' state.
var ErrNotAuthorized = toolplane.Refine(toolplane.ErrForbidden, "not authorized to see the audit exports")

// Exporters are a node's exporters, run together, and what the REST API
// and the metrics read of them.
type Exporters struct {
	list   []*Exporter
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewExporters answers the exporters of list, not yet running.
func NewExporters(list ...*Exporter) *Exporters { return &Exporters{list: list} }

// List answers the exporters.
func (e *Exporters) List() []*Exporter {
	if e == nil {
		return nil
	}
	return e.list
}

// Start registers every exporter's sink and starts draining them; Stop
// ends it.
func (e *Exporters) Start(ctx context.Context) error {
	for _, x := range e.list {
		if err := x.Register(ctx); err != nil {
			return err
		}
	}
	ctx, e.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, x := range e.list {
		e.wg.Go(func() { x.Run(ctx) })
	}
	return nil
}

// Stop stops draining and closes the sinks; what waits stays queued for
// the next start.
func (e *Exporters) Stop() error {
	if e.cancel != nil {
		e.cancel()
	}
	e.wg.Wait()
	var errs []error
	for _, x := range e.list {
		errs = append(errs, x.Close())
	}
	return errors.Join(errs...)
}

// SinkStatus is one sink's lag, as the REST API answers it.
type SinkStatus struct {
	Sink string `json:"sink"`
	// Pending is how many events wait; OldestAgeSeconds how long ago the
	// oldest of them happened (0 when none waits).
	Pending          int64      `json:"pending"`
	Oldest           *time.Time `json:"oldest,omitempty"`
	OldestAgeSeconds float64    `json:"oldest_age_seconds"`
}

// Status answers each sink's lag over the caller's organization's
// events, to a platform_admin: the sinks are the operator's, and an
// organization sees only its own share of what waits.
func (e *Exporters) Status(ctx context.Context, by *toolplane.Credential) ([]SinkStatus, error) {
	if !by.HasAnyRole(toolplane.RolePlatformAdmin) {
		return nil, toolplane.Refuse(by, ErrNotAuthorized, "the audit exports need the platform_admin role")
	}
	out := []SinkStatus{}
	for _, x := range e.List() {
		org := by.OrganizationID
		lag, err := x.Lag(ctx, &org)
		if err != nil {
			return nil, err
		}
		out = append(out, status(x.Sink(), lag, x.cfg.Now()))
	}
	return out, nil
}

func status(sink string, lag toolplane.AuditOutboxLag, now time.Time) SinkStatus {
	s := SinkStatus{Sink: sink, Pending: lag.Pending}
	if !lag.Oldest.IsZero() {
		oldest := lag.Oldest
		s.Oldest = &oldest
		s.OldestAgeSeconds = max(now.Sub(oldest).Seconds(), 0)
	}
	return s
}
