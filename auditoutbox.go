package toolplane

import (
	"context"
	"time"
)

// AuditOutboxStore is the transactional outbox the audit trail is
// exported through. A store queues every event it stores for every
// registered sink, in the transaction that stores the event (a trigger
// on the audit table), so no path that writes an event can forget to
// queue it, and an event rolled back is never exported. An exporter
// claims queued entries under a lease, sends their events, and deletes
// the entries once the sink acknowledged them: at least once, across
// restarts (the queue is durable) and nodes (a claim skips entries
// another exporter holds).
//
// The outbox is the operator's, not an organization's: it carries every
// organization's events to sinks the operator configured. What an
// organization's people may see of it is its own lag (AuditOutboxLag
// with their organization).
type AuditOutboxStore interface {
	// RegisterAuditSink makes the store queue every event stored from now
	// on for sink; registering a registered sink changes nothing.
	RegisterAuditSink(ctx context.Context, sink string, at time.Time) error
	// DropAuditSink stops queueing for sink and deletes what waits for it.
	// Asked for an organization (org not empty), it drops nothing while
	// another organization's events wait for the sink and answers
	// ErrSinkShared: one organization's admin never discards another's
	// queued trail. Empty org is the operator's drop, of everything.
	DropAuditSink(ctx context.Context, sink, org string) error
	// AuditSinks answers the registered sinks, by name: a sink no node
	// exports to any more still queues every event until it is dropped.
	AuditSinks(ctx context.Context) ([]AuditSink, error)
	// ClaimAuditOutbox leases up to limit of sink's entries after the
	// sequence number after (0: from the first), oldest first, to owner
	// until until: entries nobody holds (their lease ended before now)
	// and entries owner already holds. An entry another owner holds is
	// skipped, never waited for. Each entry carries its event, or nil
	// when the event is gone (retention dropped it): nothing to send.
	// after lets an exporter working through a backlog start where its
	// last claim ended, rather than step again over the entries it
	// deleted (which PostgreSQL's index keeps until a vacuum).
	ClaimAuditOutbox(ctx context.Context, sink, owner string, after int64, now, until time.Time, limit int) ([]AuditOutboxEntry, error)
	// DeleteAuditOutbox deletes sink's entries with those sequence
	// numbers: their events were sent. Deleting an entry already deleted
	// is no error.
	DeleteAuditOutbox(ctx context.Context, sink string, seqs []int64) error
	// AuditOutboxLag answers what waits for sink: of one organization's
	// events (org set), or of every organization's (org nil, for the
	// operator's metrics).
	AuditOutboxLag(ctx context.Context, sink string, org *string) (AuditOutboxLag, error)
}

// AuditOutboxEntry is one event queued for one sink.
type AuditOutboxEntry struct {
	// Seq orders a sink's entries: the order the events were stored.
	Seq            int64
	OrganizationID string
	EventID        string
	// Event is the queued event, nil when it is no longer stored.
	Event *AuditEvent
}

// AuditOutboxLag is how far a sink is behind the trail.
type AuditOutboxLag struct {
	// Pending is how many events wait for the sink.
	Pending int64
	// Oldest is when the oldest waiting event happened; zero when none
	// waits.
	Oldest time.Time
}

// ErrSinkShared: an organization asked to drop an audit sink that other
// organizations' events still wait for.
var ErrSinkShared = Refine(ErrConflict, "other organizations' events wait for this audit sink; only the operator may drop it")
