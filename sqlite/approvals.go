package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

func scanApproval(r scanner) (toolplane.Approval, error) {
	var (
		a                 toolplane.Approval
		expires, resolved sql.NullInt64
		created           int64
		approvedBy        string
	)
	err := r.Scan(&a.OrganizationID, &a.ID, &a.RunID, &a.StepPath, &a.Tool, &a.ToolVersion, &a.Key,
		&a.ArgumentsHash, &a.Arguments, &a.Invocation, &a.PrincipalID, &a.Preview, &a.Status,
		&a.DefaultOnTimeout, &expires, &created, &resolved, &a.ResolvedBy, &a.Reason, &a.Version,
		&a.Level, &a.ApproverGroup, &a.EscalatedFrom, &a.Rule, &a.Approvers, &a.Approver, &approvedBy)
	if err != nil {
		return a, err
	}
	if a.ApprovedBy, err = fromNames(approvedBy); err != nil {
		return a, fmt.Errorf("approved_by: %w", err)
	}
	a.ExpiresAt = fromOptMicros(expires)
	a.CreatedAt = fromMicros(created)
	a.ResolvedAt = fromOptMicros(resolved)
	return a, err
}

const insertApproval = `INSERT INTO approvals (` + approvalColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// fileApproval is insertApproval that stores nothing when the call
// already has a pending approval (approvals_one_pending).
const fileApproval = insertApproval + ` ON CONFLICT (organization_id, tool, key) WHERE status = 'pending' DO NOTHING`

func insertApprovalArgs(a *toolplane.Approval) ([]any, error) {
	approvedBy, err := names("approved_by", a.ApprovedBy)
	if err != nil {
		return nil, err
	}
	return []any{a.OrganizationID, a.ID, a.RunID, a.StepPath, a.Tool, a.ToolVersion, a.Key,
		a.ArgumentsHash, blob(a.Arguments), blob(a.Invocation), a.PrincipalID, a.Preview, string(a.Status),
		a.DefaultOnTimeout, optMicros(a.ExpiresAt), micros(a.CreatedAt), optMicros(a.ResolvedAt), a.ResolvedBy, a.Reason, a.Version,
		a.Level, a.ApproverGroup, a.EscalatedFrom, a.Rule, a.Approvers, a.Approver, approvedBy}, nil
}

// InsertApproval stores a, or answers an error wrapping toolplane.ErrExists
// when its organization already has an approval with that ID, or (a being
// pending) a pending approval of the same tool and key.
func (s *Store) InsertApproval(ctx context.Context, a *toolplane.Approval) error {
	args, err := insertApprovalArgs(a)
	if err != nil {
		return fmt.Errorf("insert approval %s: %w", a.ID, err)
	}
	_, err = s.exec(ctx, insertApproval, args...)
	if isDuplicate(err) {
		return fmt.Errorf("insert approval %s: %w", a.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert approval %s: %w", a.ID, err)
	}
	return nil
}

// fileAttempts bounds FileApproval's tries: each lost one saw the call's
// pending approval answered between its insert and its read, which a
// person does at human speed.
const fileAttempts = 8

// FileApproval implements toolplane.ApprovalStore: an insert that stores
// nothing when the call has a pending approval, then the read of that
// one. One answered between the two (no longer pending) is filed for
// again.
func (s *Store) FileApproval(ctx context.Context, a *toolplane.Approval) (*toolplane.Approval, error) {
	if a.Status != toolplane.ApprovalPending {
		return nil, fmt.Errorf("file approval %s: %w: it is %s, not pending", a.ID, toolplane.ErrInvalid, a.Status)
	}
	args, err := insertApprovalArgs(a)
	if err != nil {
		return nil, fmt.Errorf("file approval %s: %w", a.ID, err)
	}
	for range fileAttempts {
		res, err := s.exec(ctx, fileApproval, args...)
		if isDuplicate(err) {
			return nil, fmt.Errorf("file approval %s: %w", a.ID, toolplane.ErrExists)
		}
		if err != nil {
			return nil, fmt.Errorf("file approval %s: %w", a.ID, err)
		}
		stored, err := affected(res)
		if err != nil {
			return nil, fmt.Errorf("file approval %s: %w", a.ID, err)
		}
		if stored {
			return a, nil
		}
		row := s.queryRow(ctx, `SELECT `+approvalColumns+` FROM approvals
			WHERE organization_id = ? AND tool = ? AND key = ? AND status = 'pending'`, a.OrganizationID, a.Tool, a.Key)
		existing, err := scanApproval(row)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("file approval %s: read the pending one: %w", a.ID, err)
		}
		return &existing, nil
	}
	return nil, fmt.Errorf("file approval %s: %w: the call's pending approval was answered %d times while filing", a.ID, toolplane.ErrConflict, fileAttempts)
}

// GetApproval answers the approval, or an error wrapping
// toolplane.ErrNotFound.
func (s *Store) GetApproval(ctx context.Context, org, id string) (*toolplane.Approval, error) {
	row := s.queryRow(ctx, `SELECT `+approvalColumns+` FROM approvals
		WHERE organization_id = ? AND id = ?`, org, id)
	a, err := scanApproval(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get approval %s: %w", id, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get approval %s: %w", id, err)
	}
	return &a, nil
}

// UpdateApproval writes a where the stored version is a.Version, in one
// conditional statement, and on success sets a.Version to the new version.
// The identity and CreatedAt are never written.
func (s *Store) UpdateApproval(ctx context.Context, a *toolplane.Approval) (bool, error) {
	res, err := s.exec(ctx, updateApproval, updateApprovalArgs(a)...)
	return approvalUpdated(a, res, err)
}

const updateApproval = `UPDATE approvals SET
			run_id = ?, step_path = ?, tool = ?, tool_version = ?, key = ?,
			arguments_hash = ?, arguments = ?, invocation = ?, principal_id = ?, preview = ?,
			status = ?, default_on_timeout = ?, expires_at = ?, resolved_at = ?,
			resolved_by = ?, reason = ?, level = ?, approver_group = ?, escalated_from = ?,
			rule = ?, approvers = ?, approver = ?, approved_by = ?,
			version = version + 1
		WHERE organization_id = ? AND id = ? AND version = ?`

func updateApprovalArgs(a *toolplane.Approval) []any {
	return []any{a.RunID, a.StepPath, a.Tool, a.ToolVersion, a.Key,
		a.ArgumentsHash, blob(a.Arguments), blob(a.Invocation), a.PrincipalID, a.Preview,
		string(a.Status), a.DefaultOnTimeout, optMicros(a.ExpiresAt), optMicros(a.ResolvedAt),
		a.ResolvedBy, a.Reason, a.Level, a.ApproverGroup, a.EscalatedFrom,
		a.Rule, a.Approvers, a.Approver, approvedBy(a),
		a.OrganizationID, a.ID, a.Version}
}

// approvalUpdated answers whether an update of a wrote its row, and on
// success moves a.Version to the version stored.
func approvalUpdated(a *toolplane.Approval, res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, fmt.Errorf("update approval %s: %w", a.ID, err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("update approval %s: %w", a.ID, err)
	}
	if ok {
		a.Version++
	}
	return ok, nil
}

// UpdateApprovalAudited is UpdateApproval and AppendAudit in one
// transaction; a stale version stores neither, and neither does an event
// that cannot be stored.
func (s *Store) UpdateApprovalAudited(ctx context.Context, a *toolplane.Approval, e *toolplane.AuditEvent) (bool, error) {
	ok, err := s.writeAudited(ctx, updateApproval, updateApprovalArgs(a), e)
	if err != nil {
		return false, fmt.Errorf("update approval %s: %w", a.ID, err)
	}
	if ok {
		a.Version++
	}
	return ok, nil
}

// FindApprovals answers the approvals filed for one call, tool and key, in
// any run and state, newest first (ties by ID, descending).
func (s *Store) FindApprovals(ctx context.Context, org, tool, key string) ([]toolplane.Approval, error) {
	rows, err := s.query(ctx, `SELECT `+approvalColumns+` FROM approvals
		WHERE organization_id = ? AND tool = ? AND key = ?
		ORDER BY created_at DESC, id DESC`, org, tool, key)
	if err != nil {
		return nil, fmt.Errorf("find approvals of %s: %w", tool, err)
	}
	out, err := collect(rows, scanApproval)
	if err != nil {
		return nil, fmt.Errorf("find approvals of %s: %w", tool, err)
	}
	return out, nil
}

// FindOpenApprovals answers the pending and approved approvals of one
// principal's call of tool with the arguments hash, in any run, newest
// first (ties by ID, descending), at most toolplane.MaxOpenApprovals, of
// those that expire after now.
func (s *Store) FindOpenApprovals(ctx context.Context, org, principalID, tool, argsHash string, now time.Time) ([]toolplane.Approval, error) {
	rows, err := s.query(ctx, `SELECT `+approvalColumns+` FROM approvals
		WHERE organization_id = ? AND principal_id = ? AND tool = ? AND arguments_hash = ?
		AND status IN ('pending', 'approved') AND expires_at > ?
		ORDER BY created_at DESC, id DESC LIMIT ?`, org, principalID, tool, argsHash, micros(now), toolplane.MaxOpenApprovals)
	if err != nil {
		return nil, fmt.Errorf("find open approvals of %s: %w", tool, err)
	}
	out, err := collect(rows, scanApproval)
	if err != nil {
		return nil, fmt.Errorf("find open approvals of %s: %w", tool, err)
	}
	return out, nil
}

// ListApprovals answers approvals in status, oldest first (ties by ID), after
// the cursor. The next cursor is "" when no approval follows.
func (s *Store) ListApprovals(ctx context.Context, org string, status toolplane.ApprovalStatus, after string, limit int) ([]toolplane.Approval, string, error) {
	var q sqlstore.Query
	err := sqlstore.ListApprovals(&q, dialect, org, status, after, limit)
	return page(ctx, s, "list approvals", &q, err, limit, scanApproval, sqlstore.ApprovalCursor)
}

// ListApprovalsNewest implements toolplane.ApprovalStore. Unfiltered, it
// reads approvals_by_status backwards; by groups, one bounded read of
// approvals_by_group per group, each already in order, merged: the page
// costs limit rows a group however many approvals wait elsewhere.
func (s *Store) ListApprovalsNewest(ctx context.Context, org string, status toolplane.ApprovalStatus, groups []string, after string, limit int) ([]toolplane.Approval, string, error) {
	var q sqlstore.Query
	err := sqlstore.ListApprovalsNewest(&q, dialect, org, status, groups, toolplane.ApprovalFilter{}, after, limit)
	return page(ctx, s, "list approvals", &q, err, limit, scanApproval, sqlstore.NewestApprovalCursor)
}

// SearchApprovals implements toolplane.ApprovalStore: the reads of
// ListApprovalsNewest, each narrowed by f in its statement.
func (s *Store) SearchApprovals(ctx context.Context, org string, status toolplane.ApprovalStatus, groups []string, f toolplane.ApprovalFilter, after string, limit int) ([]toolplane.Approval, string, error) {
	var q sqlstore.Query
	err := sqlstore.ListApprovalsNewest(&q, dialect, org, status, groups, f, after, limit)
	return page(ctx, s, "search approvals", &q, err, limit, scanApproval, sqlstore.NewestApprovalCursor)
}

// CountApprovals implements toolplane.ApprovalStore. The status index
// (approvals_by_resolution) keeps it to the rows in that state.
func (s *Store) CountApprovals(ctx context.Context, status toolplane.ApprovalStatus) (map[string]int, error) {
	rows, err := s.query(ctx, `SELECT organization_id, COUNT(*) FROM approvals WHERE status = ? GROUP BY organization_id`, string(status))
	if err != nil {
		return nil, fmt.Errorf("count approvals: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var org string
		var n int
		if err := rows.Scan(&org, &n); err != nil {
			return nil, fmt.Errorf("count approvals: %w", err)
		}
		out[org] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count approvals: %w", err)
	}
	return out, nil
}

// approvedBy answers a's ApprovedBy as its column takes it; nil (which
// the NOT NULL column refuses) for a name that cannot be stored as given.
func approvedBy(a *toolplane.Approval) any {
	v, err := names("approved_by", a.ApprovedBy)
	if err != nil {
		return nil
	}
	return v
}
