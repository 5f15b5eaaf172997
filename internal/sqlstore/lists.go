package sqlstore

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/cursor"
)

// The columns of each table both stores read, in the order their scan
// functions take them. The schemas are the same but for the types (a key
// is BLOB in SQLite, BYTEA in PostgreSQL), so the names are too.
const (
	AuditColumns = `organization_id, id, run_id, agent_id, principal_id, user_id, tool,
	tool_version, source, outcome, arguments_hash, approval_id, authorized_by,
	replayed, latency_micros, created_at, key, reason, connection_id,
	policy_decision, policy_bundle, policy_rule, policy_degraded, policy_input, parent_id,
	kind, subject, tenant_id, step_path, key_id, effect, destructive, trace_id, span_id,
	approver_id, arguments, pii_fields, classifications, output_hash, cost_cents, attempts,
	seq, prev_hash, hash`
	ApprovalColumns = `organization_id, id, run_id, step_path, tool, tool_version, key,
	arguments_hash, arguments, invocation, principal_id, preview, status,
	default_on_timeout, expires_at, created_at, resolved_at, resolved_by, reason, version,
	level, approver_group, escalated_from, rule, approvers, approver, approved_by`
	ChangeColumns = `organization_id, id, kind, subject, actor, detail, created_at`
	ClaimColumns  = `organization_id, tool, key, request_hash, status, result, owner,
	lease_until, dispatched, attempts, run_id, step_path, arguments, reason,
	reconciled_by, note, version, created_at, updated_at, invocation, node`
	ConnectionColumns = `organization_id, id, name, provider, kind, user_id, state, reason,
	config, scope, scopes, secret, token_expires_at, refresh_owner, refresh_until,
	owner, created_at, updated_at, revoked_at, version`
	CredentialColumns = `id, organization_id, kind, subject, roles, tools, hash, label,
	created_at, expires_at, revoked_at, last_used_at, created_by, version, attributes, listing, listing_top`
	ToolVersionColumns = `organization_id, name, version, state, definition, schema_hash, owner, review_reasons,
	published_by, published_at, reviewed_by, reviewed_at, review_note, sunset_at,
	replacement, retire_blocked, revision, updated_at, deprecation_note`
)

// Qualified answers columns (a list such as AuditColumns) with each name
// prefixed by table and a dot, for a statement that joins tables sharing
// column names.
func Qualified(table, columns string) string {
	var b strings.Builder
	for i, c := range strings.Split(columns, ",") {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(table)
		b.WriteByte('.')
		b.WriteString(strings.TrimSpace(c))
	}
	return b.String()
}

// The lists below write into q the statement of one page of a store's
// list, in a dialect, after checking the limit and reading the cursor: a
// store runs it, scans the rows and cuts the page with Page and the list's
// cursor function. The store owns q (a Query on its stack costs no
// allocation). An error wraps ErrLimit or cursor.ErrMalformed. A list no
// stored row can match (a filter value the dialect cannot bind as text)
// leaves q Empty: the page is empty, and nothing is to run.

// ListAudit is the page of an organization's audit events f matches,
// newest first (ties by ID, descending), before the cursor. Only the
// fields set become conditions, so each query can use the index that fits
// it.
func ListAudit(q *Query, d Dialect, org string, f toolplane.AuditFilter, after string, limit int) error {
	if err := CheckLimit(limit); err != nil {
		return err
	}
	q.Start(d, `SELECT `+d.AuditSelect("")+` FROM audit_events WHERE organization_id = ?`, org)
	q.Eq("run_id", f.RunID)
	q.Eq("agent_id", f.AgentID)
	q.Eq("user_id", f.UserID)
	q.Eq("tool", f.Tool)
	q.Eq("outcome", f.Outcome)
	if f.ApprovalID != "" {
		// The literal term lets the stores use the partial index of
		// events naming an approval, as for approvers below.
		q.Add(` AND approval_id <> ''`)
		q.Eq("approval_id", f.ApprovalID)
	}
	q.In("outcome", f.Outcomes)
	q.Eq("tenant_id", f.TenantID)
	q.Eq("effect", string(f.Effect))
	if f.ApproverID != "" {
		// The literal term lets SQLite use the partial index of approvers
		// (a bound value proves nothing about the index's condition).
		q.Add(` AND approver_id <> ''`)
		q.Eq("approver_id", f.ApproverID)
	}
	if len(f.Kinds) > 0 {
		kinds := make([]string, len(f.Kinds))
		for i, k := range f.Kinds {
			kinds[i] = string(k)
		}
		q.In("kind", kinds)
	}
	if f.Approved != nil {
		if *f.Approved {
			q.Add(` AND approval_id <> ''`)
		} else {
			q.Add(` AND approval_id = ''`)
		}
	}
	if f.Destructive != nil {
		// Bare, not compared: the column is a boolean in PostgreSQL and an
		// integer in SQLite, and both read it as a condition.
		if *f.Destructive {
			q.Add(` AND destructive`)
		} else {
			q.Add(` AND NOT destructive`)
		}
	}
	if f.Classification != "" {
		// The column is a JSON array of strings: the value's quoted form
		// matches one element whole, never a part of another.
		q.Add(` AND classifications <> ''`)
		quoted := JoinStrings([]string{f.Classification}) // ["pii"]
		q.Contains("classifications", quoted[1:len(quoted)-1])
	}
	if f.Person != "" {
		q.Add(` AND (user_id = ? OR approver_id = ? OR principal_id = ?)`, f.Person, f.Person, f.Person)
	}
	if !f.Since.IsZero() {
		q.Add(` AND created_at >= ?`, f.Since.UnixMicro())
	}
	if !f.Until.IsZero() {
		q.Add(` AND created_at < ?`, f.Until.UnixMicro())
	}
	if err := q.AfterCursor(after, cursor.Audit, "<"); err != nil {
		return err
	}
	if q.Unbindable() {
		// A value no TEXT column holds: no stored event matches it.
		q.empty = true
		return nil
	}
	q.Page("created_at DESC, id DESC", limit)
	return nil
}

// AuditCursor is the cursor of ListAudit after e.
func AuditCursor(e *toolplane.AuditEvent) string {
	return cursor.Encode(cursor.Audit, e.CreatedAt.UnixMicro(), e.ID)
}

// ListChanges is the page of an organization's changes of kind and
// subject (each when set), newest first (ties by ID, descending), before
// the cursor.
func ListChanges(q *Query, d Dialect, org, kind, subject, after string, limit int) error {
	if err := CheckLimit(limit); err != nil {
		return err
	}
	q.Start(d, `SELECT `+ChangeColumns+` FROM changes WHERE organization_id = ?`, org)
	q.Eq("kind", kind)
	q.Eq("subject", subject)
	if err := q.AfterCursor(after, cursor.Changes, "<"); err != nil {
		return err
	}
	q.Page("created_at DESC, id DESC", limit)
	return nil
}

// ChangeCursor is the cursor of ListChanges after c.
func ChangeCursor(c *toolplane.Change) string {
	return cursor.Encode(cursor.Changes, c.CreatedAt.UnixMicro(), c.ID)
}

// ListCredentials is the page of an organization's credentials, oldest
// first (ties by ID), after the cursor.
func ListCredentials(q *Query, d Dialect, org, after string, limit int) error {
	if err := CheckLimit(limit); err != nil {
		return err
	}
	q.Start(d, `SELECT `+CredentialColumns+` FROM credentials WHERE organization_id = ?`, org)
	if err := q.AfterCursor(after, cursor.Credentials, ">"); err != nil {
		return err
	}
	q.Page("created_at, id", limit)
	return nil
}

// CredentialCursor is the cursor of ListCredentials after c.
func CredentialCursor(c *toolplane.Credential) string {
	return cursor.Encode(cursor.Credentials, c.CreatedAt.UnixMicro(), c.ID)
}

// ListConnections is the page of an organization's connections f
// matches, oldest first (ties by ID), after the cursor; Empty when a
// value of f or org is one no stored connection holds.
func ListConnections(q *Query, d Dialect, org string, f toolplane.ConnectionFilter, after string, limit int) error {
	if err := CheckLimit(limit); err != nil {
		return err
	}
	q.Start(d, `SELECT `+ConnectionColumns+` FROM connections WHERE organization_id = ?`, org)
	q.Eq("provider", f.Provider)
	q.Eq("user_id", f.UserID)
	q.Eq("state", string(f.State))
	if err := q.AfterCursor(after, cursor.Connections, ">"); err != nil {
		return err
	}
	if q.Unbindable() {
		q.empty = true
		return nil
	}
	q.Page("created_at, id", limit)
	return nil
}

// ConnectionCursor is the cursor of ListConnections after c.
func ConnectionCursor(c *toolplane.Connection) string {
	return cursor.Encode(cursor.Connections, c.CreatedAt.UnixMicro(), c.ID)
}

// ListAllConnections is the page of every organization's connections by
// ID (ties by organization), after the cursor.
func ListAllConnections(q *Query, d Dialect, after string, limit int) error {
	if err := CheckLimit(limit); err != nil {
		return err
	}
	q.Start(d, `SELECT `+ConnectionColumns+` FROM connections`)
	if after != "" {
		at, parts, err := d.Cursor(after, cursor.EveryConnection, 2)
		if err == nil && at != 0 {
			err = fmt.Errorf("%w: a time where none belongs", cursor.ErrMalformed)
		}
		if err != nil {
			return err
		}
		q.WhereAfter("id, organization_id", ">", parts[0], parts[1])
	}
	q.Page("id, organization_id", limit)
	return nil
}

// EveryConnectionCursor is the cursor of ListAllConnections after c.
func EveryConnectionCursor(c *toolplane.Connection) string {
	return cursor.Encode(cursor.EveryConnection, 0, c.ID, c.OrganizationID)
}

// ListClaims is the page of an organization's claims in status, oldest
// first (ties by tool, then key, bytewise), after the cursor.
func ListClaims(q *Query, d Dialect, org string, status toolplane.ClaimStatus, after string, limit int) error {
	if err := CheckLimit(limit); err != nil {
		return err
	}
	q.Start(d, `SELECT `+d.ClaimSelect()+` FROM claims WHERE organization_id = ? AND status = ?`+OpenClaims(status), org, string(status))
	// On SQLite the key is ordered, and compared with the cursor's, as
	// its text, which claims_by_status holds (see ClaimKeyRead).
	order := "created_at, tool, key"
	if d.hexAudit {
		order = "created_at, tool, " + sqliteClaimKeyText
	}
	if after != "" {
		createdAt, parts, err := cursor.Decode(after, cursor.Claims, 2)
		if err == nil {
			err = d.CursorText(parts[0]) // the tool; a key is bytes
		}
		if err != nil {
			return err
		}
		q.After(order, ">", createdAt, parts[0], d.Bytes(parts[1]))
	}
	q.Page(order, limit)
	return nil
}

// OpenClaims answers the condition a query of claims in status adds so
// that SQLite reads claims_by_status, which holds uncertain claims alone
// (its partial index is usable only where a query's own terms imply the
// index's): " AND status = 'uncertain'" for the uncertain status, nothing
// for the others, which no index of theirs serves by organization. The
// term never changes what a query answers.
func OpenClaims(status toolplane.ClaimStatus) string {
	if status == toolplane.ClaimUncertain {
		return " AND status = 'uncertain'"
	}
	return ""
}

// ClaimCursor is the cursor of ListClaims after c.
func ClaimCursor(c *toolplane.Claim) string {
	return cursor.Encode(cursor.Claims, c.CreatedAt.UnixMicro(), c.Tool, c.Key)
}

// ListApprovals is the page of an organization's approvals in status,
// oldest first (ties by ID), after the cursor.
func ListApprovals(q *Query, d Dialect, org string, status toolplane.ApprovalStatus, after string, limit int) error {
	if err := CheckLimit(limit); err != nil {
		return err
	}
	q.Start(d, `SELECT `+ApprovalColumns+` FROM approvals WHERE organization_id = ? AND status = ?`, org, string(status))
	if err := q.AfterCursor(after, cursor.Approvals, ">"); err != nil {
		return err
	}
	q.Page("created_at, id", limit)
	return nil
}

// ApprovalCursor is the cursor of ListApprovals after a.
func ApprovalCursor(a *toolplane.Approval) string {
	return cursor.Encode(cursor.Approvals, a.CreatedAt.UnixMicro(), a.ID)
}

// ListApprovalsNewest is the page of an organization's approvals in
// status, newest first (ties by ID, descending), after the cursor.
// Unfiltered (groups nil), it reads approvals_by_status backwards; by
// groups, one bounded read of approvals_by_group per group, each already
// in order, merged: the page costs limit rows a group however many
// approvals wait elsewhere. More than toolplane.MaxApprovalGroups groups
// are refused (toolplane.ErrInvalid); an empty groups matches nothing.
//
// f narrows each read by its conditions (toolplane.ApprovalFilter), in the
// statement: the rows it leaves out are never answered, so a page of a
// narrowed inbox is as full as one of the whole.
func ListApprovalsNewest(q *Query, d Dialect, org string, status toolplane.ApprovalStatus, groups []string, f toolplane.ApprovalFilter, after string, limit int) error {
	if err := CheckLimit(limit); err != nil {
		return err
	}
	if len(f.Text) > toolplane.MaxApprovalFilterText {
		return fmt.Errorf("%w: the search is longer than %d bytes", toolplane.ErrInvalid, toolplane.MaxApprovalFilterText)
	}
	if len(groups) > toolplane.MaxApprovalGroups {
		return fmt.Errorf("%w: more than %d groups", toolplane.ErrInvalid, toolplane.MaxApprovalGroups)
	}
	var createdAt int64
	var afterID string
	if after != "" {
		at, parts, err := d.Cursor(after, cursor.NewestApprovals, 1)
		if err != nil {
			return err
		}
		createdAt, afterID = at, parts[0]
	}
	if groups != nil {
		// A group that is not text names no stored group: it matches
		// nothing, and the database would refuse it as a parameter.
		if groups = d.Texts(groups); len(groups) == 0 {
			q.empty = true
			return nil
		}
	}
	q.Start(d, ``)
	// one is the read of one group (or of all, for group nil).
	one := func(group *string) {
		q.Add(`SELECT `+ApprovalColumns+` FROM approvals WHERE organization_id = ? AND status = ?`, org, string(status))
		if group != nil {
			q.Add(` AND approver_group = ?`, *group)
		}
		approvalFilter(q, f)
		if after != "" {
			q.After("created_at, id", "<", createdAt, afterID)
		}
		q.Page("created_at DESC, id DESC", limit)
	}
	if groups == nil {
		one(nil)
		return nil
	}
	for i := range groups {
		if i > 0 {
			q.Add(` UNION ALL `)
		}
		q.Add(`SELECT * FROM (`)
		one(&groups[i])
		q.Add(`) AS g` + strconv.Itoa(i))
	}
	q.Page("created_at DESC, id DESC", limit)
	return nil
}

// approvalFilter appends f's conditions to a read of approvals.
func approvalFilter(q *Query, f toolplane.ApprovalFilter) {
	q.Eq("tool", f.Tool)
	q.Eq("approver_group", f.Group)
	if f.Agent != "" {
		// The agent identity is inside the stored invocation, written by
		// encoding/json: its field is found as the encoder writes it,
		// bytewise, without decoding every row's invocation.
		field := AgentField(f.Agent)
		if q.d.byteSlices {
			q.Add(` AND (principal_id = ? OR position(? IN invocation) > 0)`, f.Agent, field)
		} else {
			q.Add(` AND (principal_id = ? OR instr(invocation, ?) > 0)`, f.Agent, field)
		}
	}
	if !f.Since.IsZero() {
		q.Add(` AND created_at >= ?`, f.Since.UnixMicro())
	}
	if !f.Before.IsZero() {
		q.Add(` AND created_at < ?`, f.Before.UnixMicro())
	}
	if f.Text != "" {
		text := LowerASCII(f.Text)
		pos := q.d.position
		if pos == "" {
			pos = "instr"
		}
		q.Add(` AND (`+pos+`(lower(tool), ?) > 0 OR `+pos+`(lower(preview), ?) > 0 OR `+pos+`(lower(id), ?) > 0 OR `+
			pos+`(lower(run_id), ?) > 0 OR `+pos+`(lower(principal_id), ?) > 0)`, text, text, text, text, text)
	}
}

// AgentField answers the bytes a stored invocation (encoding/json's
// encoding of a toolplane.Invocation) holds when it names agent.
func AgentField(agent string) []byte {
	v, _ := json.Marshal(agent) // a string always encodes
	return append([]byte(`"AgentID":`), v...)
}

// LowerASCII answers s with its ASCII letters in lower case, the folding
// both databases' lower() agree on for the columns searched.
func LowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// NewestApprovalCursor is the cursor of ListApprovalsNewest after a.
func NewestApprovalCursor(a *toolplane.Approval) string {
	return cursor.Encode(cursor.NewestApprovals, a.CreatedAt.UnixMicro(), a.ID)
}

// ListToolVersions is the page of the tool versions f matches, of one
// organization (org) or of every organization (org nil), by organization
// when every, then by name, publication and sequence, after the cursor;
// Empty when org is one no stored version holds. The statement selects seq after
// ToolVersionColumns: the cursor carries it (see ToolVersionCursor).
func ListToolVersions(q *Query, d Dialect, org *string, f toolplane.VersionFilter, after string, limit int) error {
	if err := CheckLimit(limit); err != nil {
		return err
	}
	q.Start(d, `SELECT `+ToolVersionColumns+`, seq FROM tool_versions WHERE 1 = 1`)
	list, parts := cursor.EveryToolVersion, 3
	if org != nil {
		if !d.Text(*org) {
			// No organization has it; the cursor is still read.
			if after != "" {
				if _, _, err := cursor.Decode(after, cursor.ToolVersions, 2); err != nil {
					return err
				}
			}
			q.empty = true
			return nil
		}
		q.Add(` AND organization_id = ?`, *org)
		list, parts = cursor.ToolVersions, 2
	}
	q.Eq("name", f.Name)
	q.Eq("owner", f.Owner)
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, st := range f.States {
			states[i] = string(st)
		}
		q.In("state", states)
	}
	if after != "" {
		published, at, err := d.Cursor(after, list, parts)
		if err != nil {
			return err
		}
		seq, err := strconv.ParseInt(at[1], 10, 64)
		if err != nil {
			return fmt.Errorf("%w: bad sequence", cursor.ErrMalformed)
		}
		if org != nil {
			q.After("name, published_at, seq", ">", at[0], published, seq)
		} else {
			q.After("organization_id, name, published_at, seq", ">", at[2], at[0], published, seq)
		}
	}
	if org == nil {
		q.Page("organization_id, name, published_at, seq", limit)
	} else {
		q.Page("name, published_at, seq", limit)
	}
	return nil
}

// ToolVersionCursor is the cursor of ListToolVersions after v, whose row
// had sequence seq; every is whether the list was of every organization.
func ToolVersionCursor(v *toolplane.ToolVersion, seq int64, every bool) string {
	s := strconv.FormatInt(seq, 10)
	if every {
		return cursor.Encode(cursor.EveryToolVersion, v.PublishedAt.UnixMicro(), v.Name, s, v.OrganizationID)
	}
	return cursor.Encode(cursor.ToolVersions, v.PublishedAt.UnixMicro(), v.Name, s)
}
