package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

// RegisterAuditSink makes the outbox trigger queue every event stored
// from now on for sink.
func (s *Store) RegisterAuditSink(ctx context.Context, sink string, at time.Time) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO audit_sinks (name, registered_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, sink, micros(at)); err != nil {
		return fmt.Errorf("register audit sink %s: %w", sink, err)
	}
	return nil
}

// DropAuditSink stops queueing for sink and deletes what waits for it.
func (s *Store) DropAuditSink(ctx context.Context, sink, org string) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("drop audit sink %s: %w", sink, err)
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	// The sink's row, locked first, keeps a concurrent drop out; events
	// queued meanwhile by other organizations are seen below or wait
	// for the lock (the outbox trigger reads audit_sinks).
	if _, err := tx.Exec(ctx, `SELECT 1 FROM audit_sinks WHERE name = $1 FOR UPDATE`, sink); err != nil {
		return fmt.Errorf("drop audit sink %s: %w", sink, err)
	}
	if org != "" {
		var other bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM audit_outbox WHERE sink = $1 AND organization_id <> $2)`, sink, org).Scan(&other); err != nil {
			return fmt.Errorf("drop audit sink %s: %w", sink, err)
		}
		if other {
			return fmt.Errorf("drop audit sink %s: %w", sink, toolplane.ErrSinkShared)
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM audit_sinks WHERE name = $1`, sink); err != nil {
		return fmt.Errorf("drop audit sink %s: %w", sink, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM audit_outbox WHERE sink = $1`, sink); err != nil {
		return fmt.Errorf("drop audit sink %s: %w", sink, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("drop audit sink %s: %w", sink, err)
	}
	return nil
}

// ClaimAuditOutbox leases up to limit of sink's entries to owner. Rows
// another exporter is claiming are skipped (SKIP LOCKED), and rows it
// holds are not free until their lease ends, so the nodes of a cluster
// share a backlog rather than each sending all of it.
func (s *Store) ClaimAuditOutbox(ctx context.Context, sink, owner string, after int64, now, until time.Time, limit int) ([]toolplane.AuditOutboxEntry, error) {
	if err := sqlstore.CheckLimit(limit); err != nil {
		return nil, fmt.Errorf("claim audit outbox: %w", err)
	}
	rows, err := s.pool.Query(ctx, `WITH c AS (
			SELECT seq FROM audit_outbox WHERE sink = $1 AND seq > $6 AND (lease_until < $2 OR owner = $3)
			ORDER BY seq LIMIT $4 FOR UPDATE SKIP LOCKED)
		UPDATE audit_outbox o SET lease_until = $5, owner = $3 FROM c WHERE o.seq = c.seq
		RETURNING o.seq, o.organization_id, o.event_id`, sink, micros(now), owner, limit, micros(until), after)
	if err != nil {
		return nil, fmt.Errorf("claim audit outbox: %w", err)
	}
	var out []toolplane.AuditOutboxEntry
	for rows.Next() {
		var e toolplane.AuditOutboxEntry
		if err := rows.Scan(&e.Seq, &e.OrganizationID, &e.EventID); err != nil {
			rows.Close()
			return nil, fmt.Errorf("claim audit outbox: %w", err)
		}
		out = append(out, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim audit outbox: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	slices.SortFunc(out, func(a, b toolplane.AuditOutboxEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	orgs, ids := make([]string, len(out)), make([]string, len(out))
	for i, e := range out {
		orgs[i], ids[i] = e.OrganizationID, e.EventID
	}
	// The events by the keys the claim returned: no second visit to the
	// outbox rows just updated.
	evRows, err := s.pool.Query(ctx, `SELECT `+sqlstore.Qualified("e", auditColumns)+`
		FROM unnest($1::text[], $2::text[]) AS k(organization_id, id)
		JOIN audit_events e ON e.organization_id = k.organization_id AND e.id = k.id`, orgs, ids)
	if err != nil {
		return nil, fmt.Errorf("claim audit outbox: read the events: %w", err)
	}
	evs, err := collect(evRows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("claim audit outbox: read the events: %w", err)
	}
	type key struct{ org, id string }
	byKey := make(map[key]*toolplane.AuditEvent, len(evs))
	for i := range evs {
		byKey[key{evs[i].OrganizationID, evs[i].ID}] = &evs[i]
	}
	for i := range out {
		out[i].Event = byKey[key{out[i].OrganizationID, out[i].EventID}]
	}
	return out, nil
}

// DeleteAuditOutbox deletes sink's entries with those sequence numbers.
func (s *Store) DeleteAuditOutbox(ctx context.Context, sink string, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM audit_outbox WHERE sink = $1 AND seq = ANY($2)`, sink, seqs); err != nil {
		return fmt.Errorf("delete audit outbox: %w", err)
	}
	return nil
}

// AuditOutboxLag answers what waits for sink, of org's events or (org
// nil) of every organization's.
func (s *Store) AuditOutboxLag(ctx context.Context, sink string, org *string) (toolplane.AuditOutboxLag, error) {
	q := `SELECT count(*), coalesce(min(created_at), 0) FROM audit_outbox WHERE sink = $1`
	args := []any{sink}
	if org != nil {
		if !dialect.Text(*org) {
			return toolplane.AuditOutboxLag{}, nil
		}
		q += ` AND organization_id = $2`
		args = append(args, *org)
	}
	var lag toolplane.AuditOutboxLag
	var oldest int64
	if err := s.pool.QueryRow(ctx, q, args...).Scan(&lag.Pending, &oldest); err != nil {
		return lag, fmt.Errorf("audit outbox lag of %s: %w", sink, err)
	}
	if lag.Pending > 0 {
		lag.Oldest = fromMicros(oldest)
	}
	return lag, nil
}

var _ toolplane.AuditOutboxStore = (*Store)(nil)
