package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

// RegisterAuditSink makes the outbox trigger queue every event stored
// from now on for sink.
func (s *Store) RegisterAuditSink(ctx context.Context, sink string, at time.Time) error {
	if _, err := s.exec(ctx, `INSERT INTO audit_sinks (name, registered_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, sink, micros(at)); err != nil {
		return fmt.Errorf("register audit sink %s: %w", sink, err)
	}
	return nil
}

// DropAuditSink stops queueing for sink and deletes what waits for it.
func (s *Store) DropAuditSink(ctx context.Context, sink, org string) error {
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if org != "" {
			var other int
			err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM audit_outbox WHERE sink = ? AND organization_id <> ? LIMIT 1)`, sink, org).Scan(&other)
			if err != nil {
				return err
			}
			if other > 0 {
				return toolplane.ErrSinkShared
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM audit_sinks WHERE name = ?`, sink); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM audit_outbox WHERE sink = ?`, sink)
		return err
	})
	if err != nil {
		return fmt.Errorf("drop audit sink %s: %w", sink, err)
	}
	return nil
}

// ClaimAuditOutbox leases up to limit of sink's entries to owner. SQLite
// has one writer and one node: a database file is served by one process,
// so a lease held by an owner that never claimed in this process is a
// dead process's (a node killed and started again) and its entries are
// free now, not when the lease ends. The lease still keeps apart the
// exporters of this process.
func (s *Store) ClaimAuditOutbox(ctx context.Context, sink, owner string, after int64, now, until time.Time, limit int) ([]toolplane.AuditOutboxEntry, error) {
	if err := sqlstore.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("claim audit outbox: %w", err)
	}
	var out []toolplane.AuditOutboxEntry
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		out = out[:0]
		// The owners alive are read here, under the write lock, and not
		// before the claim queues: a rival new to the process may join
		// them and claim meanwhile, and a list read before it did would
		// take its leases for a dead process's and its entries as free.
		// Read here, the list holds every owner whose claim ran before.
		others, _ := json.Marshal(outboxOwners.others(owner))
		rows, err := tx.QueryContext(ctx, `UPDATE audit_outbox SET lease_until = ?, owner = ?
			WHERE seq IN (SELECT seq FROM audit_outbox WHERE sink = ? AND seq > ?
				AND (lease_until < ? OR owner NOT IN (SELECT value FROM json_each(?)))
				ORDER BY seq LIMIT ?)
			RETURNING seq, organization_id, event_id`, micros(until), owner, sink, after, micros(now), string(others), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e toolplane.AuditOutboxEntry
			if err := rows.Scan(&e.Seq, &e.OrganizationID, &e.EventID); err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("claim audit outbox: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	slices.SortFunc(out, func(a, b toolplane.AuditOutboxEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	seqs := make([]int64, len(out))
	for i, e := range out {
		seqs[i] = e.Seq
	}
	list, _ := json.Marshal(seqs)
	// CROSS JOIN fixes the order: from the claimed sequence numbers, to
	// their entries by primary key, to each event by its own; the planner
	// left free may scan the trail instead.
	rows, err := s.query(ctx, `SELECT `+outboxEventColumns+` FROM json_each(?) AS j
		CROSS JOIN audit_outbox AS o CROSS JOIN audit_events AS e
		WHERE o.seq = j.value AND e.organization_id = o.organization_id AND e.id = o.event_id`, string(list))
	if err != nil {
		return nil, fmt.Errorf("claim audit outbox: read the events: %w", err)
	}
	evs, err := collect(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("claim audit outbox: read the events: %w", err)
	}
	attachEvents(out, evs)
	return out, nil
}

// outboxOwners are the owners that claimed outbox entries in this
// process: the only ones whose leases can still be honoured, since the
// process that claimed under any other is gone.
var outboxOwners = &claimants{names: map[string]bool{}}

// claimants is a set of lease owners.
type claimants struct {
	mu    sync.Mutex
	names map[string]bool
}

// others adds owner to the set and answers the rest of it.
func (c *claimants) others(owner string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names[owner] = true
	list := make([]string, 0, len(c.names)-1)
	for name := range c.names {
		if name != owner {
			list = append(list, name)
		}
	}
	return list
}

// outboxEventColumns are auditSelect's columns of the audit_events row
// named e.
var outboxEventColumns = dialect.AuditSelect("e")

// attachEvents sets each entry's event from evs, found by organization
// and ID; an entry whose event is not among them keeps nil.
func attachEvents(out []toolplane.AuditOutboxEntry, evs []toolplane.AuditEvent) {
	type key struct{ org, id string }
	byKey := make(map[key]*toolplane.AuditEvent, len(evs))
	for i := range evs {
		byKey[key{evs[i].OrganizationID, evs[i].ID}] = &evs[i]
	}
	for i := range out {
		out[i].Event = byKey[key{out[i].OrganizationID, out[i].EventID}]
	}
}

// DeleteAuditOutbox deletes sink's entries with those sequence numbers.
func (s *Store) DeleteAuditOutbox(ctx context.Context, sink string, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	list, _ := json.Marshal(seqs)
	if _, err := s.exec(ctx, `DELETE FROM audit_outbox WHERE sink = ? AND seq IN (SELECT value FROM json_each(?))`, sink, string(list)); err != nil {
		return fmt.Errorf("delete audit outbox: %w", err)
	}
	return nil
}

// AuditOutboxLag answers what waits for sink, of org's events or (org
// nil) of every organization's.
func (s *Store) AuditOutboxLag(ctx context.Context, sink string, org *string) (toolplane.AuditOutboxLag, error) {
	q := `SELECT count(*), coalesce(min(created_at), 0) FROM audit_outbox WHERE sink = ?`
	args := []any{sink}
	if org != nil {
		q += ` AND organization_id = ?`
		args = append(args, *org)
	}
	var lag toolplane.AuditOutboxLag
	var oldest int64
	if err := s.queryRow(ctx, q, args...).Scan(&lag.Pending, &oldest); err != nil {
		return lag, fmt.Errorf("audit outbox lag of %s: %w", sink, err)
	}
	if lag.Pending > 0 {
		lag.Oldest = fromMicros(oldest)
	}
	return lag, nil
}

var _ toolplane.AuditOutboxStore = (*Store)(nil)
