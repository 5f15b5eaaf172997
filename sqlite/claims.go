package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/cursor"
)

const claimColumns = `organization_id, tool, key, request_hash, status, result, owner,
	lease_until, dispatched, attempts, run_id, step_path, arguments, reason,
	reconciled_by, note, version, created_at, updated_at, invocation`

func scanClaim(r scanner) (toolplane.Claim, error) {
	var (
		c                toolplane.Claim
		lease            sql.NullInt64
		created, updated int64
	)
	err := r.Scan(&c.OrganizationID, &c.Tool, &c.Key, &c.RequestHash, &c.Status, &c.Result, &c.Owner,
		&lease, &c.Dispatched, &c.Attempts, &c.RunID, &c.StepPath, &c.Arguments, &c.Reason,
		&c.ReconciledBy, &c.Note, &c.Version, &created, &updated, &c.Invocation)
	c.LeaseUntil = fromOptMicros(lease)
	c.CreatedAt = fromMicros(created)
	c.UpdatedAt = fromMicros(updated)
	return c, err
}

// InsertClaim stores c unless its organization already has a claim on the
// tool and key. The conflict is resolved inside the one statement, so of any
// number of concurrent inserts exactly one answers true.
func (s *Store) InsertClaim(ctx context.Context, c *toolplane.Claim) (bool, error) {
	res, err := s.exec(ctx, `INSERT INTO claims (`+claimColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (organization_id, tool, key) DO NOTHING`,
		c.OrganizationID, c.Tool, c.Key, c.RequestHash, string(c.Status), blob(c.Result), c.Owner,
		optMicros(c.LeaseUntil), c.Dispatched, c.Attempts, c.RunID, c.StepPath, blob(c.Arguments), c.Reason,
		c.ReconciledBy, c.Note, c.Version, micros(c.CreatedAt), micros(c.UpdatedAt), blob(c.Invocation))
	if err != nil {
		return false, fmt.Errorf("insert claim %s/%s: %w", c.Tool, c.Key, err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("insert claim %s/%s: %w", c.Tool, c.Key, err)
	}
	return ok, nil
}

// GetClaim answers the claim, or an error wrapping toolplane.ErrNotFound.
func (s *Store) GetClaim(ctx context.Context, org, tool, key string) (*toolplane.Claim, error) {
	row := s.queryRow(ctx, `SELECT `+claimColumns+` FROM claims
		WHERE organization_id = ? AND tool = ? AND key = ?`, org, tool, key)
	c, err := scanClaim(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get claim %s/%s: %w", tool, key, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get claim %s/%s: %w", tool, key, err)
	}
	return &c, nil
}

// UpdateClaim writes c where the stored version is c.Version, in one
// conditional statement, and on success sets c.Version to the new version.
// The identity and CreatedAt are never written. A stale version, or a claim
// that is not there, answers false.
func (s *Store) UpdateClaim(ctx context.Context, c *toolplane.Claim) (bool, error) {
	st, err := s.prepared(ctx, updateClaim)
	if err != nil {
		return false, fmt.Errorf("update claim %s/%s: %w", c.Tool, c.Key, err)
	}
	return applyClaimUpdate(ctx, st, c)
}

const updateClaim = `UPDATE claims SET
			request_hash = ?, status = ?, result = ?, owner = ?, lease_until = ?,
			dispatched = ?, attempts = ?, run_id = ?, step_path = ?, arguments = ?,
			reason = ?, reconciled_by = ?, note = ?, updated_at = ?, invocation = ?, version = version + 1
		WHERE organization_id = ? AND tool = ? AND key = ? AND version = ?`

func applyClaimUpdate(ctx context.Context, st *sql.Stmt, c *toolplane.Claim) (bool, error) {
	res, err := st.ExecContext(ctx,
		c.RequestHash, string(c.Status), blob(c.Result), c.Owner, optMicros(c.LeaseUntil),
		c.Dispatched, c.Attempts, c.RunID, c.StepPath, blob(c.Arguments),
		c.Reason, c.ReconciledBy, c.Note, micros(c.UpdatedAt), blob(c.Invocation),
		c.OrganizationID, c.Tool, c.Key, c.Version)
	if err != nil {
		return false, fmt.Errorf("update claim %s/%s: %w", c.Tool, c.Key, err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("update claim %s/%s: %w", c.Tool, c.Key, err)
	}
	if ok {
		c.Version++
	}
	return ok, nil
}

// UpdateClaimAudited is UpdateClaim and AppendAudit in one transaction; a
// stale version stores neither.
func (s *Store) UpdateClaimAudited(ctx context.Context, c *toolplane.Claim, e *toolplane.AuditEvent) (bool, error) {
	upd, err := s.prepared(ctx, updateClaim)
	if err != nil {
		return false, fmt.Errorf("update claim %s/%s: %w", c.Tool, c.Key, err)
	}
	ins, err := s.prepared(ctx, insertAudit)
	if err != nil {
		return false, fmt.Errorf("update claim %s/%s: %w", c.Tool, c.Key, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("update claim %s/%s: %w", c.Tool, c.Key, err)
	}
	defer tx.Rollback()
	version := c.Version
	ok, err := applyClaimUpdate(ctx, tx.StmtContext(ctx, upd), c)
	if err != nil || !ok {
		return false, err
	}
	if _, err := tx.StmtContext(ctx, ins).ExecContext(ctx, auditArgs(e)...); err != nil {
		c.Version = version
		return false, auditErr(e, err)
	}
	if err := tx.Commit(); err != nil {
		c.Version = version
		return false, fmt.Errorf("update claim %s/%s: %w", c.Tool, c.Key, err)
	}
	return true, nil
}

// DeleteClaim removes the claim where the stored version is version, in one
// conditional statement.
func (s *Store) DeleteClaim(ctx context.Context, org, tool, key string, version int64) (bool, error) {
	res, err := s.exec(ctx, `DELETE FROM claims
		WHERE organization_id = ? AND tool = ? AND key = ? AND version = ?`, org, tool, key, version)
	if err != nil {
		return false, fmt.Errorf("delete claim %s/%s: %w", tool, key, err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("delete claim %s/%s: %w", tool, key, err)
	}
	return ok, nil
}

// ListClaims answers claims in status, oldest first (ties by tool, then key,
// bytewise), after the cursor. The next cursor is "" when no claim follows.
func (s *Store) ListClaims(ctx context.Context, org string, status toolplane.ClaimStatus, after string, limit int) ([]toolplane.Claim, string, error) {
	if err := checkLimit(limit); err != nil {
		return nil, "", fmt.Errorf("list claims: %w", err)
	}
	q := `SELECT ` + claimColumns + ` FROM claims WHERE organization_id = ? AND status = ?`
	args := []any{org, string(status)}
	if after != "" {
		createdAt, parts, err := cursor.Decode(after, cursor.Claims, 2)
		if err != nil {
			return nil, "", fmt.Errorf("list claims: %w", err)
		}
		q += ` AND (created_at, tool, key) > (?, ?, ?)`
		args = append(args, createdAt, parts[0], parts[1])
	}
	q += ` ORDER BY created_at, tool, key LIMIT ?`
	args = append(args, limit+1) // one more, to know whether a page follows

	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list claims: %w", err)
	}
	out, err := collectClaims(rows)
	if err != nil {
		return nil, "", fmt.Errorf("list claims: %w", err)
	}
	if len(out) <= limit {
		return out, "", nil
	}
	out = out[:limit]
	last := out[limit-1]
	return out, cursor.Encode(cursor.Claims, micros(last.CreatedAt), last.Tool, last.Key), nil
}

// collectClaims scans and closes rows.
func collectClaims(rows *sql.Rows) ([]toolplane.Claim, error) {
	defer rows.Close()
	var out []toolplane.Claim
	for rows.Next() {
		c, err := scanClaim(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// affected answers whether the statement changed a row.
func affected(res sql.Result) (bool, error) {
	n, err := res.RowsAffected()
	return n == 1, err
}
