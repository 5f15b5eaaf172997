package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

func scanEvent(r scanner) (toolplane.AuditEvent, error) {
	var (
		e       toolplane.AuditEvent
		created int64
		input   []byte
		args    []byte
		pii     string
		classes string
	)
	err := r.Scan(&e.OrganizationID, &e.ID, &e.RunID, &e.AgentID, &e.PrincipalID, &e.UserID, &e.Tool,
		&e.ToolVersion, &e.Source, &e.Outcome, byteString{&e.ArgumentsHash}, &e.ApprovalID, &e.AuthorizedBy,
		&e.Replayed, &e.LatencyMicros, &created, byteString{&e.Key}, &e.Reason, &e.ConnectionID,
		&e.PolicyDecision, &e.PolicyBundle, &e.PolicyRule, &e.PolicyDegraded, &input, &e.ParentID,
		&e.Kind, &e.Subject, &e.TenantID, &e.StepPath, &e.KeyID, &e.Effect, &e.Destructive, &e.TraceID, &e.SpanID,
		&e.ApproverID, &args, &pii, &classes, &e.OutputHash, &e.CostCents, &e.Attempts)
	if err != nil {
		return e, err
	}
	if len(input) > 0 {
		e.PolicyInput = input
	}
	if len(args) > 0 {
		e.Arguments = args
	}
	if e.PIIFields, err = sqlstore.SplitStrings(pii); err != nil {
		return e, err
	}
	if e.Classifications, err = sqlstore.SplitStrings(classes); err != nil {
		return e, err
	}
	e.CreatedAt = fromMicros(created)
	return e, nil
}

// AppendAudit stores e, or answers an error wrapping toolplane.ErrExists when
// its organization already has an event with that ID.
func (s *Store) AppendAudit(ctx context.Context, e *toolplane.AuditEvent) error {
	_, err := s.pool.Exec(ctx, insertAudit, auditArgs(e)...)
	return auditErr(e, err)
}

// insertAudit is a var, like every statement built from placeholders:
// the placeholders are counted from auditArgs, not written out.
var insertAudit = `INSERT INTO audit_events (` + auditColumns + `)
		VALUES (` + dialect.Placeholders(1, auditArgCount) + `)`

// auditArgCount is how many arguments auditArgs answers.
var auditArgCount = len(auditArgs(&toolplane.AuditEvent{}))

func auditArgs(e *toolplane.AuditEvent) []any {
	return []any{e.OrganizationID, e.ID, e.RunID, e.AgentID, e.PrincipalID, e.UserID, e.Tool,
		e.ToolVersion, string(e.Source), e.Outcome, bytea(e.ArgumentsHash), e.ApprovalID, e.AuthorizedBy,
		e.Replayed, e.LatencyMicros, micros(e.CreatedAt), bytea(e.Key), e.Reason, e.ConnectionID,
		e.PolicyDecision, e.PolicyBundle, e.PolicyRule, e.PolicyDegraded, blob(e.PolicyInput), e.ParentID,
		string(e.Kind), e.Subject, e.TenantID, e.StepPath, e.KeyID, string(e.Effect), e.Destructive, e.TraceID, e.SpanID,
		e.ApproverID, blob(e.Arguments), sqlstore.JoinStrings(e.PIIFields), sqlstore.JoinStrings(e.Classifications),
		e.OutputHash, e.CostCents, e.Attempts}
}

func auditErr(e *toolplane.AuditEvent, err error) error {
	if isDuplicate(err) {
		return fmt.Errorf("append audit %s: %w", e.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("append audit %s: %w", e.ID, err)
	}
	return nil
}

// AppendAuditBatch appends events in one transaction: one commit for many
// events is what lets a background writer keep up with the calls it
// records. Either every event is stored or none is. The inserts travel as
// one pipelined batch, so a batch costs three round trips (begin, the
// inserts, commit) whatever its size.
func (s *Store) AppendAuditBatch(ctx context.Context, events []*toolplane.AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("append audit batch: %w", err)
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	var b pgx.Batch
	for _, e := range events {
		b.Queue(insertAudit, auditArgs(e)...)
	}
	results := tx.SendBatch(ctx, &b)
	for _, e := range events {
		// The first failure aborts the transaction; it is the one reported.
		if _, err := results.Exec(); err != nil {
			results.Close()
			return auditErr(e, err)
		}
	}
	if err := results.Close(); err != nil {
		return fmt.Errorf("append audit batch: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("append audit batch: %w", err)
	}
	return nil
}

// ListAudit answers the events matching filter, newest first (ties by ID,
// descending), before the cursor. Paging walks toward older events, so
// events appended meanwhile (newer ones) never shift a page. The next cursor
// is "" when no event follows.
func (s *Store) ListAudit(ctx context.Context, org string, filter toolplane.AuditFilter, after string, limit int) ([]toolplane.AuditEvent, string, error) {
	var q sqlstore.Query
	err := sqlstore.ListAudit(&q, dialect, org, filter, after, limit)
	return page(ctx, s, "list audit", &q, err, limit, scanEvent, sqlstore.AuditCursor)
}

// GetAudit answers the organization's event with that ID, or an error
// wrapping toolplane.ErrNotFound.
func (s *Store) GetAudit(ctx context.Context, org, id string) (*toolplane.AuditEvent, error) {
	if !dialect.Text(id) {
		// No stored ID is such text; asking would answer a database error.
		return nil, fmt.Errorf("get audit: %w", toolplane.ErrNotFound)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+auditColumns+` FROM audit_events WHERE organization_id = $1 AND id = $2`, org, id)
	if err != nil {
		return nil, fmt.Errorf("get audit %s: %w", id, err)
	}
	out, err := collect(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("get audit %s: %w", id, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("get audit %s: %w", id, toolplane.ErrNotFound)
	}
	return &out[0], nil
}
