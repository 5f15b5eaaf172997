package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

func scanClaim(r scanner) (toolplane.Claim, error) {
	var (
		c                toolplane.Claim
		lease            *int64
		created, updated int64
	)
	err := r.Scan(&c.OrganizationID, &c.Tool, byteString{&c.Key}, byteString{&c.RequestHash}, &c.Status, &c.Result, &c.Owner,
		&lease, &c.Dispatched, &c.Attempts, &c.RunID, &c.StepPath, &c.Arguments, &c.Reason,
		&c.ReconciledBy, &c.Note, &c.Version, &created, &updated, &c.Invocation, &c.Node)
	c.LeaseUntil = fromOptMicros(lease)
	c.CreatedAt = fromMicros(created)
	c.UpdatedAt = fromMicros(updated)
	return c, err
}

// InsertClaim stores c unless its organization already has a claim on the
// tool and key. The conflict is resolved inside the one statement, so of any
// number of concurrent inserts, from any number of nodes, exactly one
// answers true.
func (s *Store) InsertClaim(ctx context.Context, c *toolplane.Claim) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO claims (`+claimColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
		ON CONFLICT (organization_id, tool, key) DO NOTHING`,
		c.OrganizationID, c.Tool, bytea(c.Key), bytea(c.RequestHash), string(c.Status), blob(c.Result), c.Owner,
		optMicros(c.LeaseUntil), c.Dispatched, c.Attempts, c.RunID, c.StepPath, blob(c.Arguments), c.Reason,
		c.ReconciledBy, c.Note, c.Version, micros(c.CreatedAt), micros(c.UpdatedAt), blob(c.Invocation), c.Node)
	if err != nil {
		return false, fmt.Errorf("insert claim %s/%s: %w", c.Tool, c.Key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// GetClaim answers the claim, or an error wrapping toolplane.ErrNotFound.
func (s *Store) GetClaim(ctx context.Context, org, tool, key string) (*toolplane.Claim, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+claimColumns+` FROM claims
		WHERE organization_id = $1 AND tool = $2 AND key = $3`, org, tool, bytea(key))
	c, err := scanClaim(row)
	if errors.Is(err, pgx.ErrNoRows) {
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
// that is not there, answers false. Of concurrent updates from one version,
// the row lock the first takes makes the others re-check the version after
// it commits, so exactly one writes.
func (s *Store) UpdateClaim(ctx context.Context, c *toolplane.Claim) (bool, error) {
	tag, err := s.pool.Exec(ctx, updateClaim, updateClaimArgs(c)...)
	if err != nil {
		return false, fmt.Errorf("update claim %s/%s: %w", c.Tool, c.Key, err)
	}
	ok := tag.RowsAffected() == 1
	if ok {
		c.Version++
	}
	return ok, nil
}

// DispatchClaim writes the dispatch mark (toolplane.ClaimDispatcher): the
// three fields it changes, on the row at c.Version, in one conditional
// statement, without sending the row's arguments and invocation again.
func (s *Store) DispatchClaim(ctx context.Context, c *toolplane.Claim) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE claims SET dispatched = $1, attempts = $2, updated_at = $3, version = version + 1
		WHERE organization_id = $4 AND tool = $5 AND key = $6 AND version = $7`,
		c.Dispatched, c.Attempts, micros(c.UpdatedAt), c.OrganizationID, c.Tool, bytea(c.Key), c.Version)
	if err != nil {
		return false, fmt.Errorf("dispatch claim %s/%s: %w", c.Tool, c.Key, err)
	}
	ok := tag.RowsAffected() == 1
	if ok {
		c.Version++
	}
	return ok, nil
}

const updateClaim = `UPDATE claims SET
			request_hash = $1, status = $2, result = $3, owner = $4, lease_until = $5,
			dispatched = $6, attempts = $7, run_id = $8, step_path = $9, arguments = $10,
			reason = $11, reconciled_by = $12, note = $13, updated_at = $14, invocation = $19,
			node = $20, version = version + 1
		WHERE organization_id = $15 AND tool = $16 AND key = $17 AND version = $18`

func updateClaimArgs(c *toolplane.Claim) []any {
	return []any{bytea(c.RequestHash), string(c.Status), blob(c.Result), c.Owner, optMicros(c.LeaseUntil),
		c.Dispatched, c.Attempts, c.RunID, c.StepPath, blob(c.Arguments),
		c.Reason, c.ReconciledBy, c.Note, micros(c.UpdatedAt),
		c.OrganizationID, c.Tool, bytea(c.Key), c.Version, blob(c.Invocation), c.Node}
}

// updateClaimAudited is updateClaim and the audit insert as one statement:
// the event is inserted once per row the update wrote, so a stale version
// inserts nothing, and a statement is atomic, so an event that cannot be
// stored undoes the update. One statement is one round trip, where an
// explicit transaction would take four.
var updateClaimAudited = guarded(updateClaim, 20, "audit_events", auditColumns, auditArgCount)

// UpdateClaimAudited is UpdateClaim and AppendAudit in one transaction; a
// stale version stores neither, and an event that cannot be stored (an
// error wrapping toolplane.ErrExists for a duplicate ID) stores neither.
// c.Version changes only when both are stored.
func (s *Store) UpdateClaimAudited(ctx context.Context, c *toolplane.Claim, e *toolplane.AuditEvent) (bool, error) {
	tag, err := s.pool.Exec(ctx, updateClaimAudited, append(updateClaimArgs(c), auditArgs(e)...)...)
	if err != nil {
		if isDuplicate(err) {
			return false, auditErr(e, err)
		}
		return false, fmt.Errorf("update claim %s/%s: %w", c.Tool, c.Key, err)
	}
	ok := tag.RowsAffected() == 1
	if ok {
		c.Version++
	}
	return ok, nil
}

// completeClaimAudited is a claim's completion, the fields it changes
// alone, and the audit insert as one statement, as updateClaimAudited.
var completeClaimAudited = guarded(`UPDATE claims SET status = $1, result = $2, owner = $3, arguments = $4,
			invocation = $5, updated_at = $6, version = version + 1
		WHERE organization_id = $7 AND tool = $8 AND key = $9 AND version = $10`,
	10, "audit_events", auditColumns, auditArgCount)

// CompleteClaimAudited writes a claim's completion
// (toolplane.ClaimCompleter) and its audit event in one statement: the
// six fields it changes, on the row at c.Version; a stale version stores
// neither, and an event that cannot be stored (an error wrapping
// toolplane.ErrExists for a duplicate ID) stores neither. It sends 10
// values for the claim where UpdateClaimAudited sends 20.
func (s *Store) CompleteClaimAudited(ctx context.Context, c *toolplane.Claim, e *toolplane.AuditEvent) (bool, error) {
	args := append([]any{string(c.Status), blob(c.Result), c.Owner, blob(c.Arguments), blob(c.Invocation),
		micros(c.UpdatedAt), c.OrganizationID, c.Tool, bytea(c.Key), c.Version}, auditArgs(e)...)
	tag, err := s.pool.Exec(ctx, completeClaimAudited, args...)
	if err != nil {
		if isDuplicate(err) {
			return false, auditErr(e, err)
		}
		return false, fmt.Errorf("complete claim %s/%s: %w", c.Tool, c.Key, err)
	}
	ok := tag.RowsAffected() == 1
	if ok {
		c.Version++
	}
	return ok, nil
}

const deleteClaim = `DELETE FROM claims
		WHERE organization_id = $1 AND tool = $2 AND key = $3 AND version = $4`

// DeleteClaim removes the claim where the stored version is version, in one
// conditional statement.
func (s *Store) DeleteClaim(ctx context.Context, org, tool, key string, version int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, deleteClaim, org, tool, bytea(key), version)
	if err != nil {
		return false, fmt.Errorf("delete claim %s/%s: %w", tool, key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// deleteClaimAudited is the conditional delete and the audit insert as one
// statement, as updateClaimAudited: a stale version inserts nothing.
var deleteClaimAudited = guarded(deleteClaim, 4, "audit_events", auditColumns, auditArgCount)

// DeleteClaimAudited is DeleteClaim and AppendAudit in one transaction; a
// stale version stores neither, and an event that cannot be stored (an
// error wrapping toolplane.ErrExists for a duplicate ID) deletes nothing.
func (s *Store) DeleteClaimAudited(ctx context.Context, org, tool, key string, version int64, e *toolplane.AuditEvent) (bool, error) {
	tag, err := s.pool.Exec(ctx, deleteClaimAudited, append([]any{org, tool, bytea(key), version}, auditArgs(e)...)...)
	if err != nil {
		if isDuplicate(err) {
			return false, auditErr(e, err)
		}
		return false, fmt.Errorf("delete claim %s/%s: %w", tool, key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ListClaims answers claims in status, oldest first (ties by tool, then key,
// bytewise), after the cursor. The next cursor is "" when no claim follows.
func (s *Store) ListClaims(ctx context.Context, org string, status toolplane.ClaimStatus, after string, limit int) ([]toolplane.Claim, string, error) {
	var q sqlstore.Query
	err := sqlstore.ListClaims(&q, dialect, org, status, after, limit)
	return page(ctx, s, "list claims", &q, err, limit, scanClaim, sqlstore.ClaimCursor)
}
