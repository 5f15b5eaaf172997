package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
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
		&e.ApproverID, &args, &pii, &classes, &e.OutputHash, &e.CostCents, &e.Attempts,
		&e.Seq, &e.PrevHash, &e.Hash)
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
// its organization already has an event with that ID. It sets e's place in
// its organization's chain (Seq, PrevHash, Hash), which the statement that
// stores it assigns.
func (s *Store) AppendAudit(ctx context.Context, e *toolplane.AuditEvent) error {
	err := s.pool.QueryRow(ctx, insertAudit+` RETURNING seq, prev_hash, hash`, auditArgs(e)...).Scan(&e.Seq, &e.PrevHash, &e.Hash)
	return auditErr(e, err)
}

// insertAudit is a var, like every statement built from placeholders:
// the placeholders are counted from auditArgs, not written out. It stores
// one event chained to its organization's head (see chainedAudit).
var insertAudit = chainedAudit("", 1)

// auditArgCount is how many arguments auditArgs answers: the event's
// stored fields, then its digest.
var auditArgCount = len(auditArgs(&toolplane.AuditEvent{}))

// auditFieldCount is how many of them are stored fields.
var auditFieldCount = auditArgCount - 1

// chainedAudit answers the statement (after "WITH " and the CTEs in with,
// when there are any: each a "name AS (...)," and the last one's rows
// gating the insert) that advances the head of the event's organization
// and inserts the event numbered and hashed from the head's RETURNING: the
// event's placeholders are numbered from first, auditArgs' order, the
// digest last. One statement: the head row is locked by its own upsert
// until the transaction ends, so writers of one organization queue there
// and those of others do not; no round trip reads the head first.
//
// The first event's prev_hash is empty; each hash is
// sha256(prev_hash || int8send(seq) || digest), auditchain.Link.
func chainedAudit(with string, first int) string {
	org := fmt.Sprintf("$%d", first)
	digest := fmt.Sprintf("$%d::bytea", first+auditFieldCount)
	head := `INSERT INTO audit_heads AS h (organization_id, seq, prev_hash, hash)
		VALUES (` + org + `, 1, ''::bytea, sha256(int8send(1) || ` + digest + `))`
	if with != "" {
		head = `INSERT INTO audit_heads AS h (organization_id, seq, prev_hash, hash)
		SELECT ` + org + `, 1, ''::bytea, sha256(int8send(1) || ` + digest + `) FROM ` + with
	}
	withClause := "WITH "
	if with != "" {
		withClause = ""
	}
	return withClause + `head AS (` + head + `
		ON CONFLICT (organization_id) DO UPDATE
		SET seq = h.seq + 1, prev_hash = h.hash, hash = sha256(h.hash || int8send(h.seq + 1) || ` + digest + `)
		RETURNING seq, prev_hash, hash)
	INSERT INTO audit_events (` + auditColumns + `)
	SELECT ` + dialect.Placeholders(first, auditFieldCount) + `, head.seq, head.prev_hash, head.hash FROM head`
}

// auditArgs answers e's arguments of insertAudit: its fields as stored,
// then its digest (auditchain.Digest). It normalizes e's JSON documents
// first (auditchain.Normalize), so the digest is the one an export of
// the event reproduces.
func auditArgs(e *toolplane.AuditEvent) []any {
	auditchain.Normalize(e)
	return []any{e.OrganizationID, e.ID, e.RunID, e.AgentID, e.PrincipalID, e.UserID, e.Tool,
		e.ToolVersion, string(e.Source), e.Outcome, bytea(e.ArgumentsHash), e.ApprovalID, e.AuthorizedBy,
		e.Replayed, e.LatencyMicros, micros(e.CreatedAt), bytea(e.Key), e.Reason, e.ConnectionID,
		e.PolicyDecision, e.PolicyBundle, e.PolicyRule, e.PolicyDegraded, blob(e.PolicyInput), e.ParentID,
		string(e.Kind), e.Subject, e.TenantID, e.StepPath, e.KeyID, string(e.Effect), e.Destructive, e.TraceID, e.SpanID,
		e.ApproverID, blob(e.Arguments), sqlstore.JoinStrings(e.PIIFields), sqlstore.JoinStrings(e.Classifications),
		e.OutputHash, e.CostCents, e.Attempts, auditchain.Digest(e)}
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
	// The heads are locked in organization order, so two batches of the
	// same organizations cannot each hold one the other waits for; each
	// organization's events keep their order.
	sorted := slices.Clone(events)
	slices.SortStableFunc(sorted, func(a, b *toolplane.AuditEvent) int {
		return strings.Compare(a.OrganizationID, b.OrganizationID)
	})
	var b pgx.Batch
	for _, e := range sorted {
		b.Queue(insertAudit, auditArgs(e)...)
	}
	results := tx.SendBatch(ctx, &b)
	for _, e := range sorted {
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
