package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
)

const purgeColumns = `id, organization_id, before_at, proposed_by, proposed_at, expires_at, confirmed_by, confirmed_at, done_at`

func scanPurge(r scanner) (toolplane.AuditPurge, error) {
	var (
		p                                               toolplane.AuditPurge
		before, proposed, expires, confirmedMicro, done int64
	)
	err := r.Scan(&p.ID, &p.OrganizationID, &before, &p.ProposedBy, &proposed, &expires, &p.ConfirmedBy, &confirmedMicro, &done)
	p.Before, p.ProposedAt, p.ExpiresAt = fromMicros(before), fromMicros(proposed), fromMicros(expires)
	if confirmedMicro != 0 {
		p.ConfirmedAt = fromMicros(confirmedMicro)
	}
	if done != 0 {
		p.DoneAt = fromMicros(done)
	}
	return p, err
}

// CreateAuditPurge stores the proposal p and its audit event ev in one
// transaction.
func (s *Store) CreateAuditPurge(ctx context.Context, p *toolplane.AuditPurge, ev *toolplane.AuditEvent) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO audit_purges (`+purgeColumns+`) VALUES ($1, $2, $3, $4, $5, $6, '', 0, 0)`,
			p.ID, p.OrganizationID, micros(p.Before), p.ProposedBy, micros(p.ProposedAt), micros(p.ExpiresAt))
		if isDuplicate(err) {
			return toolplane.ErrExists
		}
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, insertAudit+` RETURNING seq, prev_hash, hash`, auditArgs(ev)...).Scan(&ev.Seq, &ev.PrevHash, &ev.Hash)
		return auditErr(ev, err)
	})
	if err != nil {
		return fmt.Errorf("create audit purge %s: %w", p.ID, err)
	}
	return nil
}

// GetAuditPurge answers the organization's proposal id.
func (s *Store) GetAuditPurge(ctx context.Context, org, id string) (*toolplane.AuditPurge, error) {
	p, err := scanPurge(s.pool.QueryRow(ctx, `SELECT `+purgeColumns+` FROM audit_purges WHERE organization_id = $1 AND id = $2`, org, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("audit purge %s: %w", id, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("audit purge %s: %w", id, err)
	}
	return &p, nil
}

// ConfirmAuditPurge records by as the confirmer, in one conditional
// statement, and appends ev in its transaction when it did.
func (s *Store) ConfirmAuditPurge(ctx context.Context, org, id, by string, at time.Time, ev *toolplane.AuditEvent) (bool, error) {
	ok, err := s.updateAudited(ctx, `UPDATE audit_purges SET confirmed_by = $3, confirmed_at = $4
		WHERE organization_id = $1 AND id = $2 AND confirmed_by = '' AND proposed_by <> $3 AND expires_at > $4`,
		[]any{org, id, by, micros(at)}, ev)
	if err != nil {
		return false, fmt.Errorf("confirm audit purge %s: %w", id, err)
	}
	return ok, nil
}

// CompleteAuditPurge records the confirmed purge done, in one conditional
// statement, and appends ev in its transaction when it did.
func (s *Store) CompleteAuditPurge(ctx context.Context, org, id string, at time.Time, ev *toolplane.AuditEvent) (bool, error) {
	ok, err := s.updateAudited(ctx, `UPDATE audit_purges SET done_at = $3
		WHERE organization_id = $1 AND id = $2 AND confirmed_by <> '' AND done_at = 0`,
		[]any{org, id, micros(at)}, ev)
	if err != nil {
		return false, fmt.Errorf("complete audit purge %s: %w", id, err)
	}
	return ok, nil
}

// updateAudited runs the conditional statement update and, when it
// changed a row, appends ev (when not nil), in one transaction; it
// answers whether the row changed.
func (s *Store) updateAudited(ctx context.Context, update string, args []any, ev *toolplane.AuditEvent) (bool, error) {
	var ok bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, update, args...)
		if err != nil {
			return err
		}
		if ok = tag.RowsAffected() == 1; !ok || ev == nil {
			return nil
		}
		err = tx.QueryRow(ctx, insertAudit+` RETURNING seq, prev_hash, hash`, auditArgs(ev)...).Scan(&ev.Seq, &ev.PrevHash, &ev.Hash)
		return auditErr(ev, err)
	})
	return ok && err == nil, err
}

// UnfinishedAuditPurges answers the confirmed purges of every
// organization not done yet, in ID order. It crosses organizations on
// purpose: it is the purge job's, never reachable from a request.
func (s *Store) UnfinishedAuditPurges(ctx context.Context, confirmedBefore time.Time, after string, limit int) ([]toolplane.AuditPurge, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("unfinished audit purges: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+purgeColumns+` FROM audit_purges
		WHERE confirmed_by <> '' AND done_at = 0 AND confirmed_at < $1 AND id > $2
		ORDER BY id LIMIT $3`, micros(confirmedBefore), after, limit)
	if err != nil {
		return nil, fmt.Errorf("unfinished audit purges: %w", err)
	}
	out, err := collect(rows, scanPurge)
	if err != nil {
		return nil, fmt.Errorf("unfinished audit purges: %w", err)
	}
	return out, nil
}

// ListAuditPurges answers the organization's proposals, newest first.
func (s *Store) ListAuditPurges(ctx context.Context, org string, limit int) ([]toolplane.AuditPurge, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("audit purges: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+purgeColumns+` FROM audit_purges WHERE organization_id = $1
		ORDER BY proposed_at DESC, id DESC LIMIT $2`, org, limit)
	if err != nil {
		return nil, fmt.Errorf("audit purges: %w", err)
	}
	out, err := collect(rows, scanPurge)
	if err != nil {
		return nil, fmt.Errorf("audit purges: %w", err)
	}
	return out, nil
}

// AuditSinks answers the registered sinks, by name.
func (s *Store) AuditSinks(ctx context.Context) ([]toolplane.AuditSink, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, registered_at FROM audit_sinks ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("audit sinks: %w", err)
	}
	out, err := collect(rows, func(r scanner) (toolplane.AuditSink, error) {
		var (
			k  toolplane.AuditSink
			at int64
		)
		err := r.Scan(&k.Name, &at)
		k.RegisteredAt = fromMicros(at)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("audit sinks: %w", err)
	}
	return out, nil
}

var _ toolplane.AuditPurgeStore = (*Store)(nil)
