// Package audit takes the audit trail off the hot path of a call. A Writer
// queues events and one goroutine appends them, so a read call does not
// wait for a database commit. A write or send waits until its own event is
// stored: an effect must never exist without its audit row, while a read
// that a crash drops from the last few milliseconds of the trail changed
// nothing that needs accounting for.
package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
)

// ErrClosed: the writer no longer accepts events.
var ErrClosed = errors.New("audit writer closed")

type item struct {
	ev   *toolplane.AuditEvent
	done chan error // nil: nobody waits
}

// Writer appends audit events in the background, in the order they were
// queued.
type Writer struct {
	store toolplane.AuditStore
	log   *slog.Logger
	ch    chan item
	// urgent ends a linger early: an event somebody waits for was queued,
	// or a batch's worth is. Events nobody waits for are only queued, so
	// a lingering writer is not woken once per event (each wake is a
	// thread handed work on the caller's path, for nothing).
	urgent chan struct{}
	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup
}

// WriterConfig is what a Writer is built from. Store is required; the
// rest have defaults.
type WriterConfig struct {
	Store toolplane.AuditStore
	// Queue is how many events wait for the store at most (zero: 4096); a
	// full queue makes Append wait (backpressure), never drop.
	Queue int
	// Logger reports events the store refused; nil is slog.Default().
	Logger *slog.Logger
}

// NewWriter starts a writer built from cfg.
func NewWriter(cfg WriterConfig) *Writer {
	queue, log := cfg.Queue, cfg.Logger
	if queue <= 0 {
		queue = 4096
	}
	if log == nil {
		log = slog.Default()
	}
	w := &Writer{store: cfg.Store, log: log, ch: make(chan item, queue), urgent: make(chan struct{}, 1)}
	w.wg.Add(1)
	go w.run()
	return w
}

// Batcher is a store that can append many events in one commit.
type Batcher interface {
	AppendAuditBatch(ctx context.Context, events []*toolplane.AuditEvent) error
}

// maxBatch bounds one commit; a larger backlog takes several.
const maxBatch = 256

// linger is how long a batch nobody waits for stays open for more events
// when the store commits batches. A commit costs far more than a row, so
// at a low call rate, where the queue holds one event at a time, each read
// call would pay a commit of its own; lingering lets a few share one (at
// about 1,400 reads a second, 10 ms measured 13% less server CPU per MCP
// call than 3 ms). It only delays when a read's event (which changed
// nothing) is stored, widening what a crash may drop from a read's trail to
// the last 10 ms; an event somebody waits for ends the linger at once, and
// Close stores everything queued.
const linger = 10 * time.Millisecond

func (w *Writer) run() {
	defer w.wg.Done()
	batcher, _ := w.store.(Batcher)
	batch := make([]item, 0, maxBatch)
	timer := time.NewTimer(linger)
	timer.Stop()
	for it := range w.ch {
		batch = append(batch[:0], it)
	drain:
		for len(batch) < maxBatch {
			select {
			case next, ok := <-w.ch:
				if !ok {
					break drain
				}
				batch = append(batch, next)
			default:
				break drain
			}
		}
		if batcher != nil && len(batch) < maxBatch && !waited(batch) {
			batch = w.gather(batch, timer)
		}
		w.store1(batcher, batch)
		// The next batch reuses the array: without this, the events of the
		// largest batch stay reachable from it, and through each event the
		// call that made it (its arguments, its result), until as many are
		// queued again — at rest, for good.
		clear(batch)
	}
}

// waited reports whether somebody waits for an event of batch.
func waited(batch []item) bool {
	for _, it := range batch {
		if it.done != nil {
			return true
		}
	}
	return false
}

// gather adds to batch the events queued within linger, ending early when
// the batch is full, an event arrives that somebody waits for, or the
// queue closes. It sleeps through the linger rather than receiving each
// event as it comes: only an urgent event, or the end of the linger, wakes
// it.
func (w *Writer) gather(batch []item, timer *time.Timer) []item {
	timer.Reset(linger)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			batch, _ = w.take(batch)
			return batch
		case <-w.urgent:
			var open bool
			if batch, open = w.take(batch); !open || len(batch) >= maxBatch || waited(batch) {
				return batch
			}
		}
	}
}

// take adds to batch what is queued now, up to a full batch, and reports
// whether the queue is still open.
func (w *Writer) take(batch []item) ([]item, bool) {
	for len(batch) < maxBatch {
		select {
		case next, ok := <-w.ch:
			if !ok {
				return batch, false
			}
			batch = append(batch, next)
		default:
			return batch, true
		}
	}
	return batch, true
}

// store1 stores one batch: in one commit when the store can, and, when
// that commit fails, event by event, so one bad event (a duplicate id) does
// not take its neighbours down with it.
func (w *Writer) store1(batcher Batcher, batch []item) {
	if batcher != nil && len(batch) > 1 {
		evs := make([]*toolplane.AuditEvent, len(batch))
		for i, it := range batch {
			evs[i] = it.ev
		}
		if err := batcher.AppendAuditBatch(context.Background(), evs); err == nil {
			for _, it := range batch {
				if it.done != nil {
					it.done <- nil
				}
			}
			return
		}
	}
	for _, it := range batch {
		err := w.store.AppendAudit(context.Background(), it.ev)
		if err != nil {
			w.log.Error("audit append failed", "tool", it.ev.Tool, "outcome", it.ev.Outcome, "err", err)
		}
		if it.done != nil {
			it.done <- err
		}
	}
}

// Append queues ev. With wait it returns once ev is stored (or failed to
// be); without, once it is queued.
func (w *Writer) Append(ctx context.Context, ev *toolplane.AuditEvent, wait bool) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	it := item{ev: ev}
	if wait {
		it.done = make(chan error, 1)
	}
	select {
	case w.ch <- it:
	case <-ctx.Done():
		return fmt.Errorf("queue audit event: %w", ctx.Err())
	}
	if wait || len(w.ch) >= maxBatch {
		select {
		case w.urgent <- struct{}{}:
		default: // a wake is already pending
		}
	}
	if !wait {
		return nil
	}
	select {
	case err := <-it.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("store audit event: %w", ctx.Err())
	}
}

// Close stops accepting events and returns once every queued event is
// stored.
func (w *Writer) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.ch)
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// ErrNotAuthorized: the caller's roles do not allow reading the audit
// trail.
var ErrNotAuthorized = toolplane.Refine(toolplane.ErrForbidden, "not authorized to read the audit trail")

// Reader is where the trail is read from.
type Reader interface {
	ListAudit(ctx context.Context, org string, filter toolplane.AuditFilter, after string, limit int) ([]toolplane.AuditEvent, string, error)
	GetAudit(ctx context.Context, org, id string) (*toolplane.AuditEvent, error)
}

// Trail reads the audit trail for the people who may read it, so every
// door (REST, the console) applies the same rule.
type Trail struct {
	store Reader
}

// NewTrail answers a trail reading store.
func NewTrail(store Reader) *Trail { return &Trail{store: store} }

// MayRead refuses a caller who may not read the audit trail: it is an
// auditor's (platform_admin holds every role). Agents never read it: what
// they did is recorded about them, not shown to them.
func MayRead(by *toolplane.Credential) error {
	if !by.HasAnyRole(toolplane.RoleAuditor) {
		return toolplane.Refuse(by, ErrNotAuthorized, "the audit trail needs the auditor role")
	}
	return nil
}

// List answers the events of the caller's organization f matches, newest
// first, after the cursor, to an auditor (MayRead; a refusal is a
// *toolplane.DeniedError wrapping ErrNotAuthorized).
func (t *Trail) List(ctx context.Context, f toolplane.AuditFilter, after string, limit int, by *toolplane.Credential) ([]toolplane.AuditEvent, string, error) {
	if err := MayRead(by); err != nil {
		return nil, "", err
	}
	if err := checkFilter(f); err != nil {
		return nil, "", err
	}
	evs, next, err := t.store.ListAudit(ctx, by.OrganizationID, f, after, limit)
	if err != nil {
		return nil, "", fmt.Errorf("list the audit trail: %w", err)
	}
	return evs, next, nil
}

// MaxOutcomes bounds the outcomes of a filter a Trail lists by
// (AuditFilter.Outcomes): a query's conditions are the server's choice,
// never a caller's list of any length. A store takes any number; the
// trail, which serves callers, refuses more.
const MaxOutcomes = 64

// checkFilter refuses a filter no stored event could match the way it
// reads: a value longer than any stored one, text a store cannot hold (a
// database would answer an error, not "no events"), more outcomes than a
// query takes, or a time range ending before it starts.
func checkFilter(f toolplane.AuditFilter) error {
	fields := []struct {
		name, v string
		max     int
	}{{"run_id", f.RunID, toolplane.MaxRunLen}, {"agent_id", f.AgentID, toolplane.MaxRefLen}, {"user_id", f.UserID, toolplane.MaxRefLen},
		{"tool", f.Tool, toolplane.MaxNameLen}, {"outcome", f.Outcome, toolplane.MaxRefLen}, {"approval_id", f.ApprovalID, toolplane.MaxRefLen},
		{"tenant_id", f.TenantID, toolplane.MaxRefLen}, {"effect", string(f.Effect), toolplane.MaxRefLen}, {"approver_id", f.ApproverID, toolplane.MaxRefLen},
		{"classification", f.Classification, toolplane.MaxRefLen}, {"person", f.Person, toolplane.MaxRefLen}}
	if len(f.Kinds) > MaxOutcomes {
		return fmt.Errorf("%w: at most %d kinds", toolplane.ErrInvalid, MaxOutcomes)
	}
	for _, k := range f.Kinds {
		fields = append(fields, struct {
			name, v string
			max     int
		}{"kind", string(k), toolplane.MaxRefLen})
	}
	if len(f.Outcomes) > MaxOutcomes {
		return fmt.Errorf("%w: at most %d outcomes", toolplane.ErrInvalid, MaxOutcomes)
	}
	for _, o := range f.Outcomes {
		fields = append(fields, struct {
			name, v string
			max     int
		}{"outcomes", o, toolplane.MaxRefLen})
	}
	for _, fd := range fields {
		if err := toolplane.CheckLen(fd.name, fd.v, fd.max); err != nil {
			return err
		}
		if !utf8.ValidString(fd.v) || strings.ContainsRune(fd.v, 0) {
			return fmt.Errorf("%w: %s is plain text: UTF-8 without NUL bytes", toolplane.ErrInvalid, fd.name)
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Before(f.Since) {
		return fmt.Errorf("%w: the time range ends before it starts", toolplane.ErrInvalid)
	}
	return nil
}

// Get answers one event of the caller's organization, to an auditor
// (MayRead); an event of another organization is not found
// (toolplane.ErrNotFound), so its existence is not disclosed.
func (t *Trail) Get(ctx context.Context, id string, by *toolplane.Credential) (*toolplane.AuditEvent, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	if err := toolplane.CheckLen("event id", id, toolplane.MaxRefLen); err != nil {
		return nil, err
	}
	ev, err := t.store.GetAudit(ctx, by.OrganizationID, id)
	if err != nil {
		return nil, fmt.Errorf("audit event %s: %w", id, err)
	}
	return ev, nil
}
