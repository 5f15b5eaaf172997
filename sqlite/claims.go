package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

func scanClaim(r scanner) (toolplane.Claim, error) {
	var (
		c                toolplane.Claim
		lease            sql.NullInt64
		created, updated int64
	)
	err := r.Scan(&c.OrganizationID, &c.Tool, &c.Key, &c.RequestHash, &c.Status, &c.Result, &c.Owner,
		&lease, &c.Dispatched, &c.Attempts, &c.RunID, &c.StepPath, &c.Arguments, &c.Reason,
		&c.ReconciledBy, &c.Note, &c.Version, &created, &updated, &c.Invocation, &c.Node)
	c.LeaseUntil = fromOptMicros(lease)
	c.CreatedAt = fromMicros(created)
	c.UpdatedAt = fromMicros(updated)
	return c, err
}

// claimKey answers the claim key k as the claims' key column holds it
// (sqlstore.PackClaimKey): every statement naming a claim by its key binds
// this form, so a derived key stored as bytes is found, by the primary
// key's index, from its text.
func claimKey(k string) any { return sqlstore.ClaimKeyArg(k) }

// InsertClaim stores c unless its organization already has a claim on the
// tool and key. The conflict is resolved inside the one statement, so of any
// number of concurrent inserts exactly one answers true.
func (s *Store) InsertClaim(ctx context.Context, c *toolplane.Claim) (bool, error) {
	// A new claim is created and updated at once: one boxed time for both
	// (an int64 in an interface is an allocation).
	createdAt, updatedAt := micros(c.CreatedAt), micros(c.UpdatedAt)
	created := any(createdAt)
	updated := created
	if updatedAt != createdAt {
		updated = updatedAt
	}
	res, err := s.exec(ctx, `INSERT INTO claims (`+claimColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (organization_id, tool, key) DO NOTHING`,
		c.OrganizationID, c.Tool, claimKey(c.Key), sqlstore.ClaimHashArg(c.Key, c.RequestHash), statusArg(c.Status), blob(c.Result), c.Owner,
		optMicros(c.LeaseUntil), c.Dispatched, c.Attempts, c.RunID, c.StepPath, blob(c.Arguments), c.Reason,
		c.ReconciledBy, c.Note, c.Version, created, updated, blob(c.Invocation), c.Node)
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
//
// Every write call reads the journal before its policy decision, and a
// fresh call finds nothing. The driver names each column of a result
// before its first row, two allocations a column whether or not a row
// follows, so a key with no claim is told by a probe of one column (about
// 45 allocations fewer a write call than the whole row's 21), and only a
// claim found is read whole. A claim released between the two reads is
// not found, as it would be by a read made after the release.
func (s *Store) GetClaim(ctx context.Context, org, tool, key string) (*toolplane.Claim, error) {
	var one int
	stored := claimKey(key)
	err := s.queryRow(ctx, `SELECT 1 FROM claims
		WHERE organization_id = ? AND tool = ? AND key = ?`, org, tool, stored).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &claimNotFound{tool: tool, key: key}
	}
	if err != nil {
		return nil, fmt.Errorf("get claim %s/%s: %w", tool, key, err)
	}
	row := s.queryRow(ctx, `SELECT `+claimSelect+` FROM claims
		WHERE organization_id = ? AND tool = ? AND key = ?`, org, tool, stored)
	c, err := scanClaim(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get claim %s/%s: %w", tool, key, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get claim %s/%s: %w", tool, key, err)
	}
	return &c, nil
}

// claimNotFound is GetClaim's answer for a key with no claim, which every
// fresh write call gets: one allocation, where fmt.Errorf's formatting
// made four, and the message is made only when read.
type claimNotFound struct{ tool, key string }

func (e *claimNotFound) Error() string {
	return "get claim " + e.tool + "/" + e.key + ": " + toolplane.ErrNotFound.Error()
}

func (e *claimNotFound) Unwrap() error { return toolplane.ErrNotFound }

// UpdateClaim writes c where the stored version is c.Version, in one
// conditional statement, and on success sets c.Version to the new version.
// The identity and CreatedAt are never written. A stale version, or a claim
// that is not there, answers false.
//
// SQLite rewrites every index on a column an UPDATE assigns, whether or not
// the value changes. A processing claim that stays processing under the same
// lease and node (the dispatch mark, written before every handler runs)
// changes no indexed column, so it is first written by a statement that
// assigns none of them and matches only when status, lease and node already
// are the ones written: the commit appends the row's page alone to the WAL,
// not the index pages besides. When that statement matches no row, the full one
// decides, on the version as always; both run in one write.
func (s *Store) UpdateClaim(ctx context.Context, c *toolplane.Claim) (bool, error) {
	full, err := s.prepared(ctx, updateClaim)
	if err != nil {
		return false, fmt.Errorf("update claim %s/%s: %w", c.Tool, c.Key, err)
	}
	var inPlace *sql.Stmt
	if c.Status == toolplane.ClaimProcessing {
		if inPlace, err = s.prepared(ctx, updateClaimInPlace); err != nil {
			return false, fmt.Errorf("update claim %s/%s: %w", c.Tool, c.Key, err)
		}
	}
	var ok bool
	update := func(ctx context.Context, stmt func(*sql.Stmt) *sql.Stmt) error {
		if inPlace != nil {
			if ok, err = applyClaimUpdateInPlace(ctx, stmt(inPlace), c); err != nil || ok {
				return err
			}
		}
		ok, err = applyClaimUpdate(ctx, stmt(full), c)
		return err
	}
	// Alone, the two statements commit each on its own: the first changes
	// the row only when the second then is not run.
	err = s.writeSolo(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return update(ctx, func(st *sql.Stmt) *sql.Stmt { return tx.StmtContext(ctx, st) })
	}, func(ctx context.Context) error {
		return update(ctx, func(st *sql.Stmt) *sql.Stmt { return st })
	})
	if err != nil {
		return false, fmt.Errorf("update claim %s/%s: %w", c.Tool, c.Key, err)
	}
	if ok {
		c.Version++
	}
	return ok, nil
}

// DispatchClaim writes the dispatch mark (toolplane.ClaimDispatcher): the
// three fields it changes, on the row at c.Version. It assigns no indexed
// column (updated_at's indexes hold completed and uncertain claims only, and
// a processing claim stays processing), so its commit appends the row's
// page alone, and it binds 7 values where UpdateClaim's in-place statement
// binds 20, the arguments and the invocation among them.
func (s *Store) DispatchClaim(ctx context.Context, c *toolplane.Claim) (bool, error) {
	res, err := s.exec(ctx, dispatchClaim, c.Dispatched, c.Attempts, micros(c.UpdatedAt),
		c.OrganizationID, c.Tool, claimKey(c.Key), c.Version)
	if err != nil {
		return false, fmt.Errorf("dispatch claim %s/%s: %w", c.Tool, c.Key, err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("dispatch claim %s/%s: %w", c.Tool, c.Key, err)
	}
	if ok {
		c.Version++
	}
	return ok, nil
}

const dispatchClaim = `UPDATE claims SET dispatched = ?, attempts = ?, updated_at = ?, version = version + 1
		WHERE organization_id = ? AND tool = ? AND key = ? AND version = ?`

const updateClaim = `UPDATE claims SET
			request_hash = ?, status = ?, result = ?, owner = ?, lease_until = ?,
			dispatched = ?, attempts = ?, run_id = ?, step_path = ?, arguments = ?,
			reason = ?, reconciled_by = ?, note = ?, updated_at = ?, invocation = ?, node = ?, version = version + 1
		WHERE organization_id = ? AND tool = ? AND key = ? AND version = ?`

// updateClaimInPlace is updateClaim for a row whose status, lease and node
// stay as they are: it assigns none of them, so the indexes on them are
// left alone, and matches only a row that already holds the status, lease
// and node written.
// updated_at is assigned, but its index holds completed claims only, and
// this statement never makes or unmakes one.
const updateClaimInPlace = `UPDATE claims SET
			request_hash = ?, result = ?, owner = ?,
			dispatched = ?, attempts = ?, run_id = ?, step_path = ?, arguments = ?,
			reason = ?, reconciled_by = ?, note = ?, updated_at = ?, invocation = ?, version = version + 1
		WHERE organization_id = ? AND tool = ? AND key = ? AND version = ?
			AND status = ? AND lease_until IS ? AND node = ?`

func applyClaimUpdate(ctx context.Context, st *sql.Stmt, c *toolplane.Claim) (bool, error) {
	res, err := st.ExecContext(ctx, updateClaimArgs(c)...)
	return claimUpdated(res, err)
}

// updateClaimArgs are updateClaim's arguments for c.
func updateClaimArgs(c *toolplane.Claim) []any {
	return []any{sqlstore.ClaimHashArg(c.Key, c.RequestHash), statusArg(c.Status), blob(c.Result), c.Owner, optMicros(c.LeaseUntil),
		c.Dispatched, c.Attempts, c.RunID, c.StepPath, blob(c.Arguments),
		c.Reason, c.ReconciledBy, c.Note, micros(c.UpdatedAt), blob(c.Invocation), c.Node,
		c.OrganizationID, c.Tool, claimKey(c.Key), c.Version}
}

func applyClaimUpdateInPlace(ctx context.Context, st *sql.Stmt, c *toolplane.Claim) (bool, error) {
	res, err := st.ExecContext(ctx,
		sqlstore.ClaimHashArg(c.Key, c.RequestHash), blob(c.Result), c.Owner,
		c.Dispatched, c.Attempts, c.RunID, c.StepPath, blob(c.Arguments),
		c.Reason, c.ReconciledBy, c.Note, micros(c.UpdatedAt), blob(c.Invocation),
		c.OrganizationID, c.Tool, claimKey(c.Key), c.Version,
		statusArg(c.Status), optMicros(c.LeaseUntil), c.Node)
	return claimUpdated(res, err)
}

// claimUpdated answers whether an update wrote its row. The caller moves
// the claim's version to the version stored once the write is committed.
func claimUpdated(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	return affected(res)
}

// UpdateClaimAudited is UpdateClaim and AppendAudit in one transaction; a
// stale version stores neither.
func (s *Store) UpdateClaimAudited(ctx context.Context, c *toolplane.Claim, e *toolplane.AuditEvent) (bool, error) {
	ok, err := s.writeAudited(ctx, updateClaim, updateClaimArgs(c), e)
	if err != nil {
		return false, fmt.Errorf("update claim %s/%s: %w", c.Tool, c.Key, err)
	}
	if ok {
		c.Version++
	}
	return ok, nil
}

// CompleteClaimAudited writes a claim's completion
// (toolplane.ClaimCompleter): the six fields it changes, on the row at
// c.Version, and e in the same transaction; a stale version stores
// neither. It binds 10 values where UpdateClaimAudited binds 20, the
// key's run, step, node and request hash among them.
func (s *Store) CompleteClaimAudited(ctx context.Context, c *toolplane.Claim, e *toolplane.AuditEvent) (bool, error) {
	ok, err := s.writeAudited(ctx, completeClaim, []any{statusArg(c.Status), blob(c.Result), c.Owner,
		blob(c.Arguments), blob(c.Invocation), micros(c.UpdatedAt),
		c.OrganizationID, c.Tool, claimKey(c.Key), c.Version}, e)
	if err != nil {
		return false, fmt.Errorf("complete claim %s/%s: %w", c.Tool, c.Key, err)
	}
	if ok {
		c.Version++
	}
	return ok, nil
}

const completeClaim = `UPDATE claims SET status = ?, result = ?, owner = ?, arguments = ?, invocation = ?,
			updated_at = ?, version = version + 1
		WHERE organization_id = ? AND tool = ? AND key = ? AND version = ?`

// statusArg answers st as a statement's argument. The statuses the
// journal writes are boxed from constants, which allocates nothing;
// string(st) allocates each time.
func statusArg(st toolplane.ClaimStatus) any {
	switch st {
	case toolplane.ClaimProcessing:
		return string(toolplane.ClaimProcessing)
	case toolplane.ClaimCompleted:
		return string(toolplane.ClaimCompleted)
	case toolplane.ClaimUncertain:
		return string(toolplane.ClaimUncertain)
	}
	return string(st)
}

// DeleteClaim removes the claim where the stored version is version, in one
// conditional statement.
func (s *Store) DeleteClaim(ctx context.Context, org, tool, key string, version int64) (bool, error) {
	res, err := s.exec(ctx, deleteClaim, org, tool, claimKey(key), version)
	if err != nil {
		return false, fmt.Errorf("delete claim %s/%s: %w", tool, key, err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("delete claim %s/%s: %w", tool, key, err)
	}
	return ok, nil
}

const deleteClaim = `DELETE FROM claims
		WHERE organization_id = ? AND tool = ? AND key = ? AND version = ?`

// DeleteClaimAudited is DeleteClaim and AppendAudit in one transaction; a
// stale version stores neither.
func (s *Store) DeleteClaimAudited(ctx context.Context, org, tool, key string, version int64, e *toolplane.AuditEvent) (bool, error) {
	ok, err := s.writeAudited(ctx, deleteClaim, []any{org, tool, claimKey(key), version}, e)
	if err != nil {
		return false, fmt.Errorf("delete claim %s/%s: %w", tool, key, err)
	}
	return ok, nil
}

// ListClaims answers claims in status, oldest first (ties by tool, then key,
// bytewise), after the cursor. The next cursor is "" when no claim follows.
func (s *Store) ListClaims(ctx context.Context, org string, status toolplane.ClaimStatus, after string, limit int) ([]toolplane.Claim, string, error) {
	var q sqlstore.Query
	err := sqlstore.ListClaims(&q, dialect, org, status, after, limit)
	return page(ctx, s, "list claims", &q, err, limit, scanClaim, sqlstore.ClaimCursor)
}

// affected answers whether the statement changed a row.
func affected(res sql.Result) (bool, error) {
	n, err := res.RowsAffected()
	return n == 1, err
}
