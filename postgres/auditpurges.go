package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
)

const purgeColumns = `id, organization_id, before_at, proposed_by, proposed_at, expires_at, confirmed_by, confirmed_at`

func scanPurge(r scanner) (toolplane.AuditPurge, error) {
	var (
		p                                         toolplane.AuditPurge
		before, proposed, expires, confirmedMicro int64
	)
	err := r.Scan(&p.ID, &p.OrganizationID, &before, &p.ProposedBy, &proposed, &expires, &p.ConfirmedBy, &confirmedMicro)
	p.Before, p.ProposedAt, p.ExpiresAt = fromMicros(before), fromMicros(proposed), fromMicros(expires)
	if confirmedMicro != 0 {
		p.ConfirmedAt = fromMicros(confirmedMicro)
	}
	return p, err
}

// CreateAuditPurge stores the proposal p and its audit event ev in one
// transaction.
func (s *Store) CreateAuditPurge(ctx context.Context, p *toolplane.AuditPurge, ev *toolplane.AuditEvent) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO audit_purges (`+purgeColumns+`) VALUES ($1, $2, $3, $4, $5, $6, '', 0)`,
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
// statement.
func (s *Store) ConfirmAuditPurge(ctx context.Context, org, id, by string, at time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE audit_purges SET confirmed_by = $3, confirmed_at = $4
		WHERE organization_id = $1 AND id = $2 AND confirmed_by = '' AND proposed_by <> $3 AND expires_at > $4`,
		org, id, by, micros(at))
	if err != nil {
		return false, fmt.Errorf("confirm audit purge %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
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
