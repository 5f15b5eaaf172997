package storetest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/cursor"
)

// TestReferenceStore runs the suite against memStore, the contract written
// as plainly as possible with no database. It keeps the suite honest: a
// check that only one database's quirks could pass fails here.
func TestReferenceStore(t *testing.T) {
	t.Parallel()
	Run(t, func(t *testing.T) toolplane.Store { return newMemStore() })
}

// TestReferenceMaintenance runs the maintenance suite against memStore.
func TestReferenceMaintenance(t *testing.T) {
	t.Parallel()
	RunMaintenance(t, func(t *testing.T) MaintenanceStore { return newMemStore() }, errLimit)
}

// errLimit is memStore's answer to a limit outside 1..maxLimit.
var errLimit = fmt.Errorf("%w: limit out of range", toolplane.ErrInvalid)

func checkLimit(limit int) error {
	if limit < 1 || limit > maxLimit {
		return fmt.Errorf("%w: %d", errLimit, limit)
	}
	return nil
}

// memStore is a toolplane.Store in maps under one mutex.
type memStore struct {
	mu        sync.Mutex
	claims    map[[3]string]toolplane.Claim
	approvals map[[2]string]toolplane.Approval
	usage     map[[2]string]toolplane.Usage
	audit     map[[2]string]toolplane.AuditEvent
	// credentials are keyed by ID alone: a credential's ID is unique
	// across organizations.
	credentials map[string]toolplane.Credential
	// versions are keyed by organization, name and version. versionSeq is
	// each one's insertion order.
	versions         map[[3]string]toolplane.ToolVersion
	versionSeq       map[[3]string]int64
	catalogRevision  int64
	grants           map[[2]string]toolplane.Grant
	denies           map[[2]string]toolplane.Deny
	bundles          map[[2]string]toolplane.Bundle
	changes          map[[2]string]toolplane.Change
	spendCeilings    map[string]toolplane.SpendCeiling
	authzRevisions   map[string]int64
	sessions         map[[2]string]toolplane.Session
	nodes            map[string]toolplane.Node
	upstreamSettings map[[2]string]toolplane.UpstreamToolSetting
	connections      map[[2]string]toolplane.Connection
	// policyBundles are keyed by organization and version.
	policyBundles map[string]map[int64]toolplane.PolicyBundle
	// oauthStates are keyed by ID alone: a state's ID is unique across
	// organizations.
	oauthStates map[string]toolplane.OAuthState
	// browserSessions are keyed by organization and ID; the token hash is
	// unique across organizations besides.
	browserSessions map[[2]string]toolplane.BrowserSession
	// asyncCalls are keyed by organization and ID.
	asyncCalls map[[2]string]toolplane.AsyncCall
	// streams are the chunks of each async call, in order, keyed as the
	// call.
	streams map[[2]string][]toolplane.StreamChunk
}

func newMemStore() *memStore {
	return &memStore{
		claims:    make(map[[3]string]toolplane.Claim),
		approvals: make(map[[2]string]toolplane.Approval),
		usage:     make(map[[2]string]toolplane.Usage),
		audit:     make(map[[2]string]toolplane.AuditEvent),

		credentials: make(map[string]toolplane.Credential),

		versions:         make(map[[3]string]toolplane.ToolVersion),
		versionSeq:       make(map[[3]string]int64),
		grants:           make(map[[2]string]toolplane.Grant),
		denies:           make(map[[2]string]toolplane.Deny),
		bundles:          make(map[[2]string]toolplane.Bundle),
		changes:          make(map[[2]string]toolplane.Change),
		authzRevisions:   make(map[string]int64),
		sessions:         make(map[[2]string]toolplane.Session),
		nodes:            make(map[string]toolplane.Node),
		upstreamSettings: make(map[[2]string]toolplane.UpstreamToolSetting),
		connections:      make(map[[2]string]toolplane.Connection),
		policyBundles:    make(map[string]map[int64]toolplane.PolicyBundle),
		asyncCalls:       make(map[[2]string]toolplane.AsyncCall),
		streams:          make(map[[2]string][]toolplane.StreamChunk),
		oauthStates:      make(map[string]toolplane.OAuthState),
		browserSessions:  make(map[[2]string]toolplane.BrowserSession),
	}
}

// keep answers t as the contract stores it.
func keep(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.Truncate(time.Microsecond).UTC()
}

func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return slices.Clone(b)
}

func storedClaim(c toolplane.Claim) toolplane.Claim {
	c.LeaseUntil, c.CreatedAt, c.UpdatedAt = keep(c.LeaseUntil), keep(c.CreatedAt), keep(c.UpdatedAt)
	c.Result, c.Arguments, c.Invocation = cloneBytes(c.Result), cloneBytes(c.Arguments), cloneBytes(c.Invocation)
	return c
}

func storedApproval(a toolplane.Approval) toolplane.Approval {
	a.ExpiresAt, a.CreatedAt, a.ResolvedAt = keep(a.ExpiresAt), keep(a.CreatedAt), keep(a.ResolvedAt)
	a.Arguments, a.Invocation = cloneBytes(a.Arguments), cloneBytes(a.Invocation)
	return a
}

// A memCursor is the ordering key of a page's last row, encoded as the
// stores encode theirs (package cursor), so a cursor of one list is refused
// by another here too.
type memCursor struct {
	at   int64
	a, b string
}

func (c memCursor) encode(list byte) string { return cursor.Encode(list, c.at, c.a, c.b) }

func parseCursor(s string, list byte) (memCursor, error) {
	if s == "" {
		return memCursor{}, nil
	}
	at, parts, err := cursor.Decode(s, list, 2)
	if err != nil {
		return memCursor{}, err
	}
	return memCursor{at, parts[0], parts[1]}, nil
}

func (c memCursor) compare(d memCursor) int {
	return cmp.Or(cmp.Compare(c.at, d.at), strings.Compare(c.a, d.a), strings.Compare(c.b, d.b))
}

// page answers rows (sorted by key, ascending or descending) strictly after
// the cursor, at most limit of them, and the next cursor.
func page[T any](list byte, rows []T, key func(T) memCursor, desc bool, after string, limit int) ([]T, string, error) {
	if err := checkLimit(limit); err != nil {
		return nil, "", err
	}
	cur, err := parseCursor(after, list)
	if err != nil {
		return nil, "", err
	}
	dir := 1
	if desc {
		dir = -1
	}
	slices.SortFunc(rows, func(x, y T) int { return dir * key(x).compare(key(y)) })
	var out []T
	for _, r := range rows {
		if after != "" && dir*key(r).compare(cur) <= 0 {
			continue
		}
		if len(out) == limit {
			return out, key(out[limit-1]).encode(list), nil
		}
		out = append(out, r)
	}
	return out, "", nil
}

func (m *memStore) InsertClaim(_ context.Context, c *toolplane.Claim) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [3]string{c.OrganizationID, c.Tool, c.Key}
	if _, ok := m.claims[k]; ok {
		return false, nil
	}
	m.claims[k] = storedClaim(*c)
	return true, nil
}

func (m *memStore) GetClaim(_ context.Context, org, tool, key string) (*toolplane.Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.claims[[3]string{org, tool, key}]
	if !ok {
		return nil, toolplane.ErrNotFound
	}
	c = storedClaim(c)
	return &c, nil
}

func (m *memStore) UpdateClaim(_ context.Context, c *toolplane.Claim) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [3]string{c.OrganizationID, c.Tool, c.Key}
	old, ok := m.claims[k]
	if !ok || old.Version != c.Version {
		return false, nil
	}
	c.Version++
	next := storedClaim(*c)
	next.CreatedAt = old.CreatedAt
	m.claims[k] = next
	return true, nil
}

func (m *memStore) UpdateClaimAudited(_ context.Context, c *toolplane.Claim, e *toolplane.AuditEvent) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [3]string{c.OrganizationID, c.Tool, c.Key}
	old, ok := m.claims[k]
	if !ok || old.Version != c.Version {
		return false, nil
	}
	ak := [2]string{e.OrganizationID, e.ID}
	if _, dup := m.audit[ak]; dup {
		return false, toolplane.ErrExists
	}
	c.Version++
	next := storedClaim(*c)
	next.CreatedAt = old.CreatedAt
	m.claims[k] = next
	stored := *e
	stored.CreatedAt = keep(e.CreatedAt)
	m.audit[ak] = stored
	return true, nil
}

func (m *memStore) DeleteClaim(_ context.Context, org, tool, key string, version int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [3]string{org, tool, key}
	if old, ok := m.claims[k]; !ok || old.Version != version {
		return false, nil
	}
	delete(m.claims, k)
	return true, nil
}

func (m *memStore) DeleteClaimAudited(_ context.Context, org, tool, key string, version int64, e *toolplane.AuditEvent) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [3]string{org, tool, key}
	if old, ok := m.claims[k]; !ok || old.Version != version {
		return false, nil
	}
	ak := [2]string{e.OrganizationID, e.ID}
	if _, dup := m.audit[ak]; dup {
		return false, toolplane.ErrExists
	}
	delete(m.claims, k)
	stored := *e
	stored.CreatedAt = keep(e.CreatedAt)
	m.audit[ak] = stored
	return true, nil
}

func (m *memStore) InsertNode(_ context.Context, n *toolplane.Node) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.nodes[n.ID]; ok {
		return toolplane.ErrExists
	}
	m.nodes[n.ID] = toolplane.Node{ID: n.ID, Name: n.Name, StartedAt: keep(n.StartedAt), HeartbeatAt: keep(n.HeartbeatAt)}
	return nil
}

func (m *memStore) Heartbeat(_ context.Context, n *toolplane.Node) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	stored, ok := m.nodes[n.ID]
	if !ok || stored.HeartbeatAt.Equal(time.Unix(0, 0)) {
		return nil // retired, or removed since: its process is gone
	}
	if hb := keep(n.HeartbeatAt); hb.After(stored.HeartbeatAt) {
		stored.HeartbeatAt = hb
	}
	m.nodes[n.ID] = stored
	return nil
}

func (m *memStore) GetNode(_ context.Context, id string) (*toolplane.Node, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.nodes[id]
	if !ok {
		return nil, toolplane.ErrNotFound
	}
	return &n, nil
}

func (m *memStore) RetireNodes(_ context.Context, name, except string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	count := 0
	for id, n := range m.nodes {
		if n.Name == name && id != except && !n.HeartbeatAt.Equal(time.Unix(0, 0)) {
			n.HeartbeatAt = time.Unix(0, 0).UTC()
			m.nodes[id] = n
			count++
		}
	}
	return count, nil
}

func (m *memStore) ListClaims(_ context.Context, org string, status toolplane.ClaimStatus, after string, limit int) ([]toolplane.Claim, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rows []toolplane.Claim
	for _, c := range m.claims {
		if c.OrganizationID == org && c.Status == status {
			rows = append(rows, storedClaim(c))
		}
	}
	return page(cursor.Claims, rows, func(c toolplane.Claim) memCursor {
		return memCursor{c.CreatedAt.UnixMicro(), c.Tool, c.Key}
	}, false, after, limit)
}

func (m *memStore) InsertApproval(_ context.Context, a *toolplane.Approval) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{a.OrganizationID, a.ID}
	if _, ok := m.approvals[k]; ok {
		return toolplane.ErrExists
	}
	if a.Status == toolplane.ApprovalPending && m.pendingApproval(a) != nil {
		return toolplane.ErrExists
	}
	m.approvals[k] = storedApproval(*a)
	return nil
}

// pendingApproval answers the pending approval of a's call (its tool and
// key), or nil; m.mu is held.
func (m *memStore) pendingApproval(a *toolplane.Approval) *toolplane.Approval {
	for _, p := range m.approvals {
		if p.Status == toolplane.ApprovalPending && p.OrganizationID == a.OrganizationID && p.Tool == a.Tool && p.Key == a.Key {
			p = storedApproval(p)
			return &p
		}
	}
	return nil
}

func (m *memStore) FileApproval(_ context.Context, a *toolplane.Approval) (*toolplane.Approval, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a.Status != toolplane.ApprovalPending {
		return nil, toolplane.ErrInvalid
	}
	k := [2]string{a.OrganizationID, a.ID}
	if _, ok := m.approvals[k]; ok {
		return nil, toolplane.ErrExists
	}
	if p := m.pendingApproval(a); p != nil {
		return p, nil
	}
	m.approvals[k] = storedApproval(*a)
	return a, nil
}

func (m *memStore) GetApproval(_ context.Context, org, id string) (*toolplane.Approval, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.approvals[[2]string{org, id}]
	if !ok {
		return nil, toolplane.ErrNotFound
	}
	a = storedApproval(a)
	return &a, nil
}

func (m *memStore) UpdateApproval(_ context.Context, a *toolplane.Approval) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{a.OrganizationID, a.ID}
	old, ok := m.approvals[k]
	if !ok || old.Version != a.Version {
		return false, nil
	}
	a.Version++
	next := storedApproval(*a)
	next.CreatedAt = old.CreatedAt
	m.approvals[k] = next
	return true, nil
}

func (m *memStore) UpdateApprovalAudited(_ context.Context, a *toolplane.Approval, e *toolplane.AuditEvent) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{a.OrganizationID, a.ID}
	old, ok := m.approvals[k]
	if !ok || old.Version != a.Version {
		return false, nil
	}
	ak := [2]string{e.OrganizationID, e.ID}
	if _, dup := m.audit[ak]; dup {
		return false, toolplane.ErrExists
	}
	a.Version++
	next := storedApproval(*a)
	next.CreatedAt = old.CreatedAt
	m.approvals[k] = next
	stored := *e
	stored.CreatedAt = keep(e.CreatedAt)
	m.audit[ak] = stored
	return true, nil
}

func approvalKey(a toolplane.Approval) memCursor {
	return memCursor{a.CreatedAt.UnixMicro(), a.ID, ""}
}

func (m *memStore) FindApprovals(_ context.Context, org, tool, key string) ([]toolplane.Approval, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []toolplane.Approval
	for _, a := range m.approvals {
		if a.OrganizationID == org && a.Tool == tool && a.Key == key {
			out = append(out, storedApproval(a))
		}
	}
	slices.SortFunc(out, func(x, y toolplane.Approval) int { return approvalKey(y).compare(approvalKey(x)) })
	return out, nil
}

func (m *memStore) FindOpenApprovals(_ context.Context, org, principalID, tool, argsHash string, now time.Time) ([]toolplane.Approval, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []toolplane.Approval
	for _, a := range m.approvals {
		open := (a.Status == toolplane.ApprovalPending || a.Status == toolplane.ApprovalApproved) && now.Before(a.ExpiresAt)
		if open && a.OrganizationID == org && a.PrincipalID == principalID && a.Tool == tool && a.ArgumentsHash == argsHash {
			out = append(out, storedApproval(a))
		}
	}
	slices.SortFunc(out, func(x, y toolplane.Approval) int { return approvalKey(y).compare(approvalKey(x)) })
	return out[:min(len(out), toolplane.MaxOpenApprovals)], nil
}

func (m *memStore) ListApprovals(_ context.Context, org string, status toolplane.ApprovalStatus, after string, limit int) ([]toolplane.Approval, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rows []toolplane.Approval
	for _, a := range m.approvals {
		if a.OrganizationID == org && a.Status == status {
			rows = append(rows, storedApproval(a))
		}
	}
	return page(cursor.Approvals, rows, approvalKey, false, after, limit)
}

func (m *memStore) ListApprovalsNewest(_ context.Context, org string, status toolplane.ApprovalStatus, groups []string, after string, limit int) ([]toolplane.Approval, string, error) {
	if len(groups) > toolplane.MaxApprovalGroups {
		return nil, "", toolplane.ErrInvalid
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var rows []toolplane.Approval
	for _, a := range m.approvals {
		if a.OrganizationID == org && a.Status == status && (groups == nil || slices.Contains(groups, a.ApproverGroup)) {
			rows = append(rows, storedApproval(a))
		}
	}
	return page(cursor.NewestApprovals, rows, approvalKey, true, after, limit)
}

func (m *memStore) SearchApprovals(_ context.Context, org string, status toolplane.ApprovalStatus, groups []string, f toolplane.ApprovalFilter, after string, limit int) ([]toolplane.Approval, string, error) {
	if len(groups) > toolplane.MaxApprovalGroups || len(f.Text) > toolplane.MaxApprovalFilterText {
		return nil, "", toolplane.ErrInvalid
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var rows []toolplane.Approval
	for _, a := range m.approvals {
		if a.OrganizationID == org && a.Status == status && (groups == nil || slices.Contains(groups, a.ApproverGroup)) && memMatches(&a, f) {
			rows = append(rows, storedApproval(a))
		}
	}
	return page(cursor.NewestApprovals, rows, approvalKey, true, after, limit)
}

// memMatches is the filter's rule, as the package doc of
// toolplane.ApprovalFilter says it.
func memMatches(a *toolplane.Approval, f toolplane.ApprovalFilter) bool {
	lower := func(s string) string {
		b := []byte(s)
		for i, c := range b {
			if 'A' <= c && c <= 'Z' {
				b[i] = c + 'a' - 'A'
			}
		}
		return string(b)
	}
	text := lower(f.Text)
	agent, _ := json.Marshal(f.Agent)
	switch {
	case f.Tool != "" && a.Tool != f.Tool,
		f.Group != "" && a.ApproverGroup != f.Group,
		f.Agent != "" && a.PrincipalID != f.Agent && !bytes.Contains(a.Invocation, append([]byte(`"AgentID":`), agent...)),
		!f.Since.IsZero() && a.CreatedAt.Truncate(time.Microsecond).Before(f.Since.Truncate(time.Microsecond)),
		!f.Before.IsZero() && !a.CreatedAt.Truncate(time.Microsecond).Before(f.Before.Truncate(time.Microsecond)):
		return false
	case text == "":
		return true
	}
	for _, s := range []string{a.Tool, a.Preview, a.ID, a.RunID, a.PrincipalID} {
		if strings.Contains(lower(s), text) {
			return true
		}
	}
	return false
}

func (m *memStore) CountApprovals(_ context.Context, status toolplane.ApprovalStatus) (map[string]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for _, a := range m.approvals {
		if a.Status == status {
			out[a.OrganizationID]++
		}
	}
	return out, nil
}

func (m *memStore) CountClaims(_ context.Context, status toolplane.ClaimStatus) (map[string]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for _, c := range m.claims {
		if c.Status == status {
			out[c.OrganizationID]++
		}
	}
	return out, nil
}

func (m *memStore) CountOrgClaims(_ context.Context, org string, status toolplane.ClaimStatus, limit int) (int, error) {
	if limit < 1 {
		return 0, toolplane.ErrInvalid
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.claims {
		if c.OrganizationID == org && c.Status == status {
			n++
		}
	}
	return min(n, limit), nil
}

func (m *memStore) InsertUsage(_ context.Context, u *toolplane.Usage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{u.OrganizationID, u.ID}
	if _, ok := m.usage[k]; ok {
		return toolplane.ErrExists
	}
	m.usage[k] = *u
	return nil
}

func (m *memStore) RunTreeCost(_ context.Context, org, rootRunID string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var total int64
	for _, u := range m.usage {
		if u.OrganizationID == org && u.RootRunID == rootRunID {
			total += u.CostCents
		}
	}
	return total, nil
}

func (m *memStore) ToolUsage(_ context.Context, org, tool string, since time.Time) (toolplane.UsageStats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rows []toolplane.Usage
	for _, u := range m.usage {
		if u.OrganizationID == org && u.Tool == tool && !u.CreatedAt.Before(since) {
			rows = append(rows, u)
		}
	}
	slices.SortFunc(rows, func(a, b toolplane.Usage) int { return b.CreatedAt.Compare(a.CreatedAt) })
	rows = rows[:min(len(rows), toolplane.MaxUsageSample)]
	var st toolplane.UsageStats
	var sum float64
	for _, u := range rows {
		st.Calls++
		sum += float64(u.CostCents)
		st.MaxCents = max(st.MaxCents, u.CostCents)
	}
	if st.Calls > 0 {
		st.AverageCents = sum / float64(st.Calls)
	}
	return st, nil
}

func (m *memStore) AppendAudit(_ context.Context, e *toolplane.AuditEvent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{e.OrganizationID, e.ID}
	if _, ok := m.audit[k]; ok {
		return toolplane.ErrExists
	}
	stored := *e
	stored.CreatedAt = keep(e.CreatedAt)
	m.audit[k] = stored
	return nil
}

func (m *memStore) ListAudit(_ context.Context, org string, f toolplane.AuditFilter, after string, limit int) ([]toolplane.AuditEvent, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rows []toolplane.AuditEvent
	for _, e := range m.audit {
		if e.OrganizationID == org && (f.RunID == "" || f.RunID == e.RunID) && matches(f, e) {
			rows = append(rows, e)
		}
	}
	return page(cursor.Audit, rows, func(e toolplane.AuditEvent) memCursor {
		return memCursor{e.CreatedAt.UnixMicro(), e.ID, ""}
	}, true, after, limit)
}

func (m *memStore) GetAudit(_ context.Context, org, id string) (*toolplane.AuditEvent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.audit[[2]string{org, id}]
	if !ok {
		return nil, toolplane.ErrNotFound
	}
	return &e, nil
}

func cloneNames(n []string) []string {
	if len(n) == 0 {
		return nil
	}
	return slices.Clone(n)
}

func storedCredential(c toolplane.Credential) toolplane.Credential {
	c.CreatedAt, c.ExpiresAt, c.RevokedAt, c.LastUsedAt = keep(c.CreatedAt), keep(c.ExpiresAt), keep(c.RevokedAt), keep(c.LastUsedAt)
	c.Roles, c.Tools, c.Hash = cloneNames(c.Roles), cloneNames(c.Tools), cloneBytes(c.Hash)
	return c
}

func (m *memStore) InsertCredential(_ context.Context, c *toolplane.Credential) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.insertCredentialLocked(c)
	return err
}

func (m *memStore) insertCredentialLocked(c *toolplane.Credential) (bool, error) {
	if err := memListing(c); err != nil {
		return false, err
	}
	if _, ok := m.credentials[c.ID]; ok {
		return false, toolplane.ErrExists
	}
	m.credentials[c.ID] = storedCredential(*c)
	return true, nil
}

func (m *memStore) InsertCredentialAudited(_ context.Context, c *toolplane.Credential, e *toolplane.AuditEvent) error {
	_, err := m.audited(nil, e, func() (bool, error) { return m.insertCredentialLocked(c) })
	return err
}

func (m *memStore) GetCredential(_ context.Context, id string) (*toolplane.Credential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.credentials[id]
	if !ok {
		return nil, toolplane.ErrNotFound
	}
	c = storedCredential(c)
	return &c, nil
}

func (m *memStore) ListCredentials(_ context.Context, org, after string, limit int) ([]toolplane.Credential, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rows []toolplane.Credential
	for _, c := range m.credentials {
		if c.OrganizationID == org {
			rows = append(rows, storedCredential(c))
		}
	}
	return page(cursor.Credentials, rows, func(c toolplane.Credential) memCursor {
		return memCursor{c.CreatedAt.UnixMicro(), c.ID, ""}
	}, false, after, limit)
}

// UpdateCredential writes the fields an update may write, and keeps a
// stored revocation.
func (m *memStore) UpdateCredential(_ context.Context, c *toolplane.Credential) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.updateCredentialLocked(c)
}

func (m *memStore) UpdateCredentialAudited(_ context.Context, c *toolplane.Credential, e *toolplane.AuditEvent) (bool, error) {
	return m.audited(nil, e, func() (bool, error) { return m.updateCredentialLocked(c) })
}

func (m *memStore) updateCredentialLocked(c *toolplane.Credential) (bool, error) {
	if err := memListing(c); err != nil {
		return false, err
	}
	old, ok := m.credentials[c.ID]
	if !ok || old.OrganizationID != c.OrganizationID || old.Version != c.Version {
		return false, nil
	}
	c.Version++
	next := old
	next.Roles, next.Tools, next.Label, next.ExpiresAt = c.Roles, c.Tools, c.Label, c.ExpiresAt
	next.Listing, next.ListingTop = c.Listing, c.ListingTop
	if old.RevokedAt.IsZero() {
		next.RevokedAt = c.RevokedAt
	}
	next.Version = c.Version
	m.credentials[c.ID] = storedCredential(next)
	return true, nil
}

func (m *memStore) TouchCredential(_ context.Context, org, id string, at time.Time) error {
	if at.IsZero() {
		return errors.New("zero time")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.credentials[id]
	if !ok || c.OrganizationID != org {
		return toolplane.ErrNotFound
	}
	if at = keep(at); at.After(c.LastUsedAt) {
		c.LastUsedAt = at
		m.credentials[id] = c
	}
	return nil
}

func storedVersion(v toolplane.ToolVersion) toolplane.ToolVersion {
	v.PublishedAt, v.ReviewedAt, v.SunsetAt, v.UpdatedAt = keep(v.PublishedAt), keep(v.ReviewedAt), keep(v.SunsetAt), keep(v.UpdatedAt)
	v.Definition, v.ReviewReasons = cloneBytes(v.Definition), cloneNames(v.ReviewReasons)
	return v
}

func (m *memStore) InsertToolVersion(_ context.Context, v *toolplane.ToolVersion) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [3]string{v.OrganizationID, v.Name, v.Version}
	if _, ok := m.versions[k]; ok {
		return toolplane.ErrExists
	}
	m.versions[k] = storedVersion(*v)
	m.versionSeq[k] = int64(len(m.versionSeq)) + 1
	m.catalogRevision++
	return nil
}

func (m *memStore) GetToolVersion(_ context.Context, org, name, version string) (*toolplane.ToolVersion, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.versions[[3]string{org, name, version}]
	if !ok {
		return nil, toolplane.ErrNotFound
	}
	v = storedVersion(v)
	return &v, nil
}

// versionKey orders versions by name, then publication, then insertion:
// the name leads, and the rest is encoded so that it sorts as text.
func (m *memStore) versionKey(v toolplane.ToolVersion) memCursor {
	seq := m.versionSeq[[3]string{v.OrganizationID, v.Name, v.Version}]
	return memCursor{0, v.Name, fmt.Sprintf("%020d %020d", uint64(v.PublishedAt.UnixMicro())^1<<63, seq)}
}

// everyVersionKey orders versions by organization first, then as
// versionKey does (the suite's names hold no NUL, which separates them).
func (m *memStore) everyVersionKey(v toolplane.ToolVersion) memCursor {
	k := m.versionKey(v)
	return memCursor{0, v.OrganizationID, k.a + "\x00" + k.b}
}

func (m *memStore) listVersions(org *string, f toolplane.VersionFilter) []toolplane.ToolVersion {
	var rows []toolplane.ToolVersion
	for _, v := range m.versions {
		if (org == nil || *org == v.OrganizationID) && (f.Name == "" || f.Name == v.Name) && (f.Owner == "" || f.Owner == v.Owner) &&
			(len(f.States) == 0 || slices.Contains(f.States, v.State)) {
			rows = append(rows, storedVersion(v))
		}
	}
	return rows
}

func (m *memStore) ListToolVersions(_ context.Context, org string, f toolplane.VersionFilter, after string, limit int) ([]toolplane.ToolVersion, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return page(cursor.ToolVersions, m.listVersions(&org, f), m.versionKey, false, after, limit)
}

func (m *memStore) ListEveryToolVersion(_ context.Context, f toolplane.VersionFilter, after string, limit int) ([]toolplane.ToolVersion, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return page(cursor.EveryToolVersion, m.listVersions(nil, f), m.everyVersionKey, false, after, limit)
}

// UpdateToolVersion writes the lifecycle fields only.
func (m *memStore) UpdateToolVersion(_ context.Context, v *toolplane.ToolVersion) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [3]string{v.OrganizationID, v.Name, v.Version}
	old, ok := m.versions[k]
	if !ok {
		return false, toolplane.ErrNotFound
	}
	if old.Revision != v.Revision {
		return false, nil
	}
	v.Revision++
	next := old
	next.State, next.ReviewReasons = v.State, v.ReviewReasons
	next.ReviewedBy, next.ReviewedAt, next.ReviewNote = v.ReviewedBy, v.ReviewedAt, v.ReviewNote
	next.SunsetAt, next.Replacement, next.RetireBlocked, next.DeprecationNote = v.SunsetAt, v.Replacement, v.RetireBlocked, v.DeprecationNote
	next.Revision, next.UpdatedAt = v.Revision, v.UpdatedAt
	m.versions[k] = storedVersion(next)
	m.catalogRevision++
	return true, nil
}

func (m *memStore) CatalogRevision(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.catalogRevision, nil
}

func storedGrant(g toolplane.Grant) toolplane.Grant {
	g.ExpiresAt, g.CreatedAt, g.RevokedAt = keep(g.ExpiresAt), keep(g.CreatedAt), keep(g.RevokedAt)
	g.TenantScope = cloneNames(g.TenantScope)
	return g
}

func (m *memStore) InsertGrant(_ context.Context, g *toolplane.Grant) error {
	if err := g.CheckTarget(); err != nil {
		return err
	}
	if err := g.CheckSubject(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.insertGrantLocked(g)
	return err
}

func (m *memStore) insertGrantLocked(g *toolplane.Grant) (bool, error) {
	k := [2]string{g.OrganizationID, g.ID}
	if _, ok := m.grants[k]; ok {
		return false, toolplane.ErrExists
	}
	m.grants[k] = storedGrant(*g)
	m.authzRevisions[g.OrganizationID]++
	return true, nil
}

func (m *memStore) InsertGrantAudited(_ context.Context, g *toolplane.Grant, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	if err := errors.Join(g.CheckTarget(), g.CheckSubject()); err != nil {
		return err
	}
	_, err := m.audited(ch, e, func() (bool, error) { return m.insertGrantLocked(g) })
	return err
}

// byCreation is the oldest-first order of grants and denies.
func byCreation(at time.Time, id string) memCursor { return memCursor{at.UnixMicro(), id, ""} }

func (m *memStore) ListGrants(_ context.Context, org, agentID string, withRevoked bool) ([]toolplane.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []toolplane.Grant
	for _, g := range m.grants {
		if g.OrganizationID == org && (agentID == "" || g.AgentID == agentID) && (withRevoked || g.RevokedAt.IsZero()) {
			out = append(out, storedGrant(g))
		}
	}
	slices.SortFunc(out, func(x, y toolplane.Grant) int {
		return byCreation(x.CreatedAt, x.ID).compare(byCreation(y.CreatedAt, y.ID))
	})
	return out, nil
}

func (m *memStore) RevokeGrant(_ context.Context, org, id, by string, at time.Time) error {
	if at.IsZero() {
		return errors.New("zero time")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return found(m.revokeGrantLocked(org, id, by, at))
}

func (m *memStore) revokeGrantLocked(org, id, by string, at time.Time) (bool, error) {
	k := [2]string{org, id}
	g, ok := m.grants[k]
	if !ok || !g.RevokedAt.IsZero() {
		return false, nil
	}
	g.RevokedAt, g.RevokedBy = keep(at), by
	m.grants[k] = g
	m.authzRevisions[org]++
	return true, nil
}

func (m *memStore) RevokeGrantAudited(_ context.Context, org, id, by string, at time.Time, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	if at.IsZero() {
		return errors.New("zero time")
	}
	return found(m.audited(ch, e, func() (bool, error) { return m.revokeGrantLocked(org, id, by, at) }))
}

// found answers a write of one row that may not be there: ErrNotFound
// when it was not.
func found(ok bool, err error) error {
	if err == nil && !ok {
		return toolplane.ErrNotFound
	}
	return err
}

// audited is a write and the append of its change record (when ch is not
// nil) and its audit event, with m.mu held: a record or an event that
// cannot be stored is checked before write runs, so it stores nothing.
func (m *memStore) audited(ch *toolplane.Change, e *toolplane.AuditEvent, write func() (bool, error)) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ak := [2]string{e.OrganizationID, e.ID}
	if _, dup := m.audit[ak]; dup {
		return false, toolplane.ErrExists
	}
	if ch != nil {
		if _, dup := m.changes[[2]string{ch.OrganizationID, ch.ID}]; dup {
			return false, toolplane.ErrExists
		}
	}
	ok, err := write()
	if err != nil || !ok {
		return false, err
	}
	if ch != nil {
		if err := m.appendChangeLocked(ch); err != nil {
			return false, err
		}
	}
	stored := *e
	stored.CreatedAt = keep(e.CreatedAt)
	m.audit[ak] = stored
	return true, nil
}

func (m *memStore) InsertDeny(_ context.Context, d *toolplane.Deny) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.insertDenyLocked(d)
	return err
}

func (m *memStore) InsertDenyAudited(_ context.Context, d *toolplane.Deny, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	_, err := m.audited(ch, e, func() (bool, error) { return m.insertDenyLocked(d) })
	return err
}

func (m *memStore) insertDenyLocked(d *toolplane.Deny) (bool, error) {
	k := [2]string{d.OrganizationID, d.ID}
	if _, ok := m.denies[k]; ok {
		return false, toolplane.ErrExists
	}
	stored := *d
	stored.CreatedAt = keep(d.CreatedAt)
	m.denies[k] = stored
	m.authzRevisions[d.OrganizationID]++
	return true, nil
}

func (m *memStore) ListDenies(_ context.Context, org string) ([]toolplane.Deny, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []toolplane.Deny
	for _, d := range m.denies {
		if d.OrganizationID == org {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(x, y toolplane.Deny) int {
		return byCreation(x.CreatedAt, x.ID).compare(byCreation(y.CreatedAt, y.ID))
	})
	return out, nil
}

func (m *memStore) DeleteDeny(_ context.Context, org, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return found(m.deleteDenyLocked(org, id))
}

func (m *memStore) DeleteDenyAudited(_ context.Context, org, id string, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	return found(m.audited(ch, e, func() (bool, error) { return m.deleteDenyLocked(org, id) }))
}

func (m *memStore) deleteDenyLocked(org, id string) (bool, error) {
	k := [2]string{org, id}
	if _, ok := m.denies[k]; !ok {
		return false, nil
	}
	delete(m.denies, k)
	m.authzRevisions[org]++
	return true, nil
}

func storedBundle(b toolplane.Bundle) toolplane.Bundle {
	b.CreatedAt, b.UpdatedAt = keep(b.CreatedAt), keep(b.UpdatedAt)
	b.Refs = cloneNames(b.Refs)
	return b
}

// PutBundle keeps a replaced bundle's creation.
func (m *memStore) PutBundle(_ context.Context, b *toolplane.Bundle) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.putBundleLocked(b)
	return err
}

func (m *memStore) PutBundleAudited(_ context.Context, b *toolplane.Bundle, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	_, err := m.audited(ch, e, func() (bool, error) { return m.putBundleLocked(b) })
	return err
}

func (m *memStore) putBundleLocked(b *toolplane.Bundle) (bool, error) {
	k := [2]string{b.OrganizationID, b.Name}
	next := storedBundle(*b)
	if old, ok := m.bundles[k]; ok {
		next.CreatedAt, next.CreatedBy = old.CreatedAt, old.CreatedBy
	}
	m.bundles[k] = next
	m.authzRevisions[b.OrganizationID]++
	return true, nil
}

func (m *memStore) GetBundle(_ context.Context, org, name string) (*toolplane.Bundle, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.bundles[[2]string{org, name}]
	if !ok {
		return nil, toolplane.ErrNotFound
	}
	b = storedBundle(b)
	return &b, nil
}

func (m *memStore) ListBundles(_ context.Context, org string) ([]toolplane.Bundle, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []toolplane.Bundle
	for _, b := range m.bundles {
		if b.OrganizationID == org {
			out = append(out, storedBundle(b))
		}
	}
	slices.SortFunc(out, func(x, y toolplane.Bundle) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

func (m *memStore) AuthzRevision(_ context.Context, org string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.authzRevisions[org], nil
}

func (m *memStore) AppendChange(_ context.Context, c *toolplane.Change) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.appendChangeLocked(c)
}

// appendChangeLocked is AppendChange with m.mu held.
func (m *memStore) appendChangeLocked(c *toolplane.Change) error {
	k := [2]string{c.OrganizationID, c.ID}
	if _, ok := m.changes[k]; ok {
		return toolplane.ErrExists
	}
	stored := *c
	stored.CreatedAt, stored.Detail = keep(c.CreatedAt), cloneBytes(c.Detail)
	m.changes[k] = stored
	return nil
}

func (m *memStore) ListChanges(_ context.Context, org, kind, subject, after string, limit int) ([]toolplane.Change, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rows []toolplane.Change
	for _, c := range m.changes {
		if c.OrganizationID == org && (kind == "" || c.Kind == kind) && (subject == "" || c.Subject == subject) {
			rows = append(rows, c)
		}
	}
	return page(cursor.Changes, rows, func(c toolplane.Change) memCursor { return byCreation(c.CreatedAt, c.ID) }, true, after, limit)
}

func storedSession(s toolplane.Session) toolplane.Session {
	s.CreatedAt, s.ExpiresAt = keep(s.CreatedAt), keep(s.ExpiresAt)
	s.Client = cloneBytes(s.Client)
	if len(s.Contracts) == 0 {
		s.Contracts = nil
	} else {
		s.Contracts = maps.Clone(s.Contracts)
	}
	return s
}

func (m *memStore) InsertSession(_ context.Context, s *toolplane.Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{s.OrganizationID, s.ID}
	if _, ok := m.sessions[k]; ok {
		return toolplane.ErrExists
	}
	m.sessions[k] = storedSession(*s)
	return nil
}

func (m *memStore) GetSession(_ context.Context, org, id string) (*toolplane.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[[2]string{org, id}]
	if !ok {
		return nil, toolplane.ErrNotFound
	}
	s = storedSession(s)
	return &s, nil
}

func (m *memStore) TouchSession(_ context.Context, org, id string, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{org, id}
	s, ok := m.sessions[k]
	if !ok {
		return toolplane.ErrNotFound
	}
	if until = keep(until); until.After(s.ExpiresAt) {
		s.ExpiresAt = until
		m.sessions[k] = s
	}
	return nil
}

func (m *memStore) SetSessionContracts(_ context.Context, org, id string, contracts map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{org, id}
	s, ok := m.sessions[k]
	if !ok {
		return toolplane.ErrNotFound
	}
	s.Contracts = contracts
	m.sessions[k] = storedSession(s)
	return nil
}

func (m *memStore) DeleteSession(_ context.Context, org, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{org, id}
	_, ok := m.sessions[k]
	delete(m.sessions, k)
	return ok, nil
}

func (m *memStore) DeleteExpiredSessions(_ context.Context, now time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var expired []toolplane.Session
	for _, s := range m.sessions {
		if s.ExpiresAt.Before(keep(now)) {
			expired = append(expired, s)
		}
	}
	slices.SortFunc(expired, func(a, b toolplane.Session) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	if len(expired) > limit {
		expired = expired[:limit]
	}
	for _, s := range expired {
		delete(m.sessions, [2]string{s.OrganizationID, s.ID})
	}
	return len(expired), nil
}

func (m *memStore) PutUpstreamToolSettingRecorded(_ context.Context, us *toolplane.UpstreamToolSetting, ch *toolplane.Change) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.appendChangeLocked(ch); err != nil {
		return err
	}
	c := *us
	c.Settings = slices.Clone(us.Settings)
	c.UpdatedAt = stored(us.UpdatedAt).UTC()
	m.upstreamSettings[[2]string{us.Upstream, us.Tool}] = c
	return nil
}

func (m *memStore) DeleteUpstreamToolSettingRecorded(_ context.Context, upstream, tool string, ch *toolplane.Change) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{upstream, tool}
	if _, ok := m.upstreamSettings[k]; !ok {
		return fmt.Errorf("delete upstream tool setting %s/%s: %w", upstream, tool, toolplane.ErrNotFound)
	}
	if err := m.appendChangeLocked(ch); err != nil {
		return err
	}
	delete(m.upstreamSettings, k)
	return nil
}

func (m *memStore) ListUpstreamToolSettings(context.Context) ([]toolplane.UpstreamToolSetting, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Collect(maps.Values(m.upstreamSettings))
	slices.SortFunc(out, func(a, b toolplane.UpstreamToolSetting) int {
		return cmp.Or(cmp.Compare(a.Upstream, b.Upstream), cmp.Compare(a.Tool, b.Tool))
	})
	return out, nil
}

// storedConnection answers c as the contract keeps it. Config and Scope
// pass through JSON, as a store holds them, so an empty list inside them
// comes back as none.
func storedConnection(c toolplane.Connection) toolplane.Connection {
	c.TokenExpiresAt, c.RefreshUntil = keep(c.TokenExpiresAt), keep(c.RefreshUntil)
	c.CreatedAt, c.UpdatedAt, c.RevokedAt = keep(c.CreatedAt), keep(c.UpdatedAt), keep(c.RevokedAt)
	c.Scopes, c.Secret = cloneNames(c.Scopes), cloneBytes(c.Secret)
	c.Config, c.Scope = throughJSON(c.Config), throughJSON(c.Scope)
	return c
}

func throughJSON[T any](v T) T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// nameHeldLocked reports whether a connection of org other than id that
// is not revoked is named name.
func (m *memStore) nameHeldLocked(org, id, name string) bool {
	for k, c := range m.connections {
		if k[0] == org && k[1] != id && c.Name == name && c.State != toolplane.ConnectionRevoked {
			return true
		}
	}
	return false
}

func (m *memStore) InsertConnection(_ context.Context, c *toolplane.Connection, ch *toolplane.Change) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{c.OrganizationID, c.ID}
	if _, ok := m.connections[k]; ok {
		return toolplane.ErrExists
	}
	if c.State != toolplane.ConnectionRevoked && m.nameHeldLocked(c.OrganizationID, c.ID, c.Name) {
		return toolplane.ErrExists
	}
	if err := m.appendChangeLocked(ch); err != nil {
		return err
	}
	m.connections[k] = storedConnection(*c)
	return nil
}

func (m *memStore) GetConnection(_ context.Context, org, id string) (*toolplane.Connection, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.connections[[2]string{org, id}]
	if !ok {
		return nil, toolplane.ErrNotFound
	}
	c = storedConnection(c)
	return &c, nil
}

func (m *memStore) ListConnections(_ context.Context, org string, f toolplane.ConnectionFilter, after string, limit int) ([]toolplane.Connection, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rows []toolplane.Connection
	for _, c := range m.connections {
		if c.OrganizationID == org && (f.Provider == "" || c.Provider == f.Provider) &&
			(f.UserID == "" || c.UserID == f.UserID) && (f.State == "" || c.State == f.State) {
			rows = append(rows, storedConnection(c))
		}
	}
	return page(cursor.Connections, rows, func(c toolplane.Connection) memCursor {
		return byCreation(c.CreatedAt, c.ID)
	}, false, after, limit)
}

// UpdateConnection writes all but the immutable fields, and keeps a
// stored revocation.
func (m *memStore) UpdateConnection(_ context.Context, c *toolplane.Connection, ch *toolplane.Change) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{c.OrganizationID, c.ID}
	old, ok := m.connections[k]
	if !ok || old.Version != c.Version {
		return false, nil
	}
	next := *c
	next.Provider, next.Kind, next.UserID, next.Owner, next.CreatedAt = old.Provider, old.Kind, old.UserID, old.Owner, old.CreatedAt
	if old.State == toolplane.ConnectionRevoked {
		next.State, next.RevokedAt = old.State, old.RevokedAt
	}
	if next.State != toolplane.ConnectionRevoked && m.nameHeldLocked(c.OrganizationID, c.ID, next.Name) {
		return false, toolplane.ErrExists
	}
	if ch != nil {
		if err := m.appendChangeLocked(ch); err != nil {
			return false, err
		}
	}
	c.Version++
	next.Version = c.Version
	m.connections[k] = storedConnection(next)
	return true, nil
}

func (m *memStore) ListAllConnections(_ context.Context, after string, limit int) ([]toolplane.Connection, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rows []toolplane.Connection
	for _, c := range m.connections {
		rows = append(rows, storedConnection(c))
	}
	return page(cursor.EveryConnection, rows, func(c toolplane.Connection) memCursor {
		return memCursor{0, c.ID, c.OrganizationID}
	}, false, after, limit)
}

func (m *memStore) InsertOAuthState(_ context.Context, st *toolplane.OAuthState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.oauthStates[st.ID]; ok {
		return toolplane.ErrExists
	}
	kept := *st
	kept.CreatedAt, kept.ExpiresAt, kept.Verifier = keep(st.CreatedAt), keep(st.ExpiresAt), cloneBytes(st.Verifier)
	m.oauthStates[st.ID] = kept
	return nil
}

func (m *memStore) TakeOAuthState(_ context.Context, id string, now time.Time) (*toolplane.OAuthState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.oauthStates[id]
	if !ok {
		return nil, toolplane.ErrNotFound
	}
	delete(m.oauthStates, id)
	if !st.ExpiresAt.After(now) {
		return nil, toolplane.ErrNotFound
	}
	return &st, nil
}

func (m *memStore) DeleteExpiredOAuthStates(_ context.Context, now time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	expired := pick(m.oauthStates, func(st toolplane.OAuthState) bool { return !st.ExpiresAt.After(now) },
		func(a, b toolplane.OAuthState) int { return a.ExpiresAt.Compare(b.ExpiresAt) }, limit)
	for _, st := range expired {
		delete(m.oauthStates, st.ID)
	}
	return len(expired), nil
}

// The maintenance reads cross organizations; each is the contract's
// sentence in jobs.Maintenance written as a filter. A zero lease or
// resolution time is "none", never "long ago".

// pick answers the rows that match, in order (none: any), at most limit.
func pick[K comparable, V any](rows map[K]V, match func(V) bool, order func(a, b V) int, limit int) []V {
	var out []V
	for _, r := range rows {
		if match(r) {
			out = append(out, r)
		}
	}
	if order != nil {
		slices.SortFunc(out, order)
	}
	return out[:min(limit, len(out))]
}

// prune deletes at most limit of the rows that match and answers how many.
func prune[K comparable, V any](rows map[K]V, match func(V) bool, limit int) int {
	n := 0
	for k, r := range rows {
		if n < limit && match(r) {
			delete(rows, k)
			n++
		}
	}
	return n
}

func (m *memStore) ExpiredClaims(_ context.Context, before time.Time, limit int) ([]toolplane.Claim, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return pick(m.claims, func(c toolplane.Claim) bool {
		return c.Status == toolplane.ClaimProcessing && !c.LeaseUntil.IsZero() && c.LeaseUntil.Before(keep(before))
	}, func(a, b toolplane.Claim) int { return a.LeaseUntil.Compare(b.LeaseUntil) }, limit), nil
}

func (m *memStore) DeleteCompletedClaims(_ context.Context, before time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return prune(m.claims, func(c toolplane.Claim) bool {
		return c.Status == toolplane.ClaimCompleted && c.UpdatedAt.Before(keep(before))
	}, limit), nil
}

func (m *memStore) ApprovedApprovals(_ context.Context, since time.Time, limit int) ([]toolplane.Approval, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return pick(m.approvals, func(a toolplane.Approval) bool {
		return a.Status == toolplane.ApprovalApproved && !a.ResolvedAt.IsZero() && !a.ResolvedAt.Before(keep(since))
	}, func(a, b toolplane.Approval) int { return a.ResolvedAt.Compare(b.ResolvedAt) }, limit), nil
}

// deadLocked reports whether the node instance id is known and silent
// since before.
func (m *memStore) deadLocked(id string, before time.Time) bool {
	n, ok := m.nodes[id]
	return ok && n.HeartbeatAt.Before(keep(before))
}

func (m *memStore) OrphanedClaims(_ context.Context, deadBefore time.Time, limit int) ([]toolplane.Claim, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return pick(m.claims, func(c toolplane.Claim) bool {
		return c.Status == toolplane.ClaimProcessing && m.deadLocked(c.Node, deadBefore)
	}, nil, limit), nil
}

func (m *memStore) DeleteDeadNodes(_ context.Context, before time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	busy := make(map[string]bool)
	for _, c := range m.claims {
		if c.Status == toolplane.ClaimProcessing {
			busy[c.Node] = true
		}
	}
	return prune(m.nodes, func(n toolplane.Node) bool { return !busy[n.ID] && m.deadLocked(n.ID, before) }, limit), nil
}

func (m *memStore) InsertPolicyBundle(_ context.Context, b *toolplane.PolicyBundle) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.insertPolicyBundleLocked(b)
	return err
}

func (m *memStore) InsertPolicyBundleAudited(_ context.Context, b *toolplane.PolicyBundle, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	_, err := m.audited(ch, e, func() (bool, error) { return m.insertPolicyBundleLocked(b) })
	return err
}

func (m *memStore) insertPolicyBundleLocked(b *toolplane.PolicyBundle) (bool, error) {
	org := m.policyBundles[b.OrganizationID]
	if org == nil {
		org = map[int64]toolplane.PolicyBundle{}
		m.policyBundles[b.OrganizationID] = org
	}
	if _, ok := org[b.Version]; ok {
		return false, fmt.Errorf("insert policy bundle %d: %w", b.Version, toolplane.ErrExists)
	}
	c := *b
	c.Files = maps.Clone(b.Files)
	c.PublishedAt = stored(b.PublishedAt).UTC()
	org[b.Version] = c
	return true, nil
}

func (m *memStore) GetPolicyBundle(_ context.Context, org string, version int64) (*toolplane.PolicyBundle, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.policyBundles[org][version]
	if !ok {
		return nil, fmt.Errorf("get policy bundle %d: %w", version, toolplane.ErrNotFound)
	}
	b.Files = maps.Clone(b.Files)
	if b.Files == nil {
		b.Files = map[string]string{}
	}
	return &b, nil
}

func (m *memStore) PolicyBundleVersion(_ context.Context, org string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var v int64
	for n := range m.policyBundles[org] {
		v = max(v, n)
	}
	return v, nil
}

func (m *memStore) ListPolicyBundles(_ context.Context, org string, before int64, limit int) ([]toolplane.PolicyBundle, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []toolplane.PolicyBundle
	for v, b := range m.policyBundles[org] {
		if before > 0 && v >= before {
			continue
		}
		b.Files = nil
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b toolplane.PolicyBundle) int { return cmp.Compare(b.Version, a.Version) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func storedBrowserSession(b toolplane.BrowserSession) toolplane.BrowserSession {
	b.CreatedAt, b.IdleUntil, b.ExpiresAt = keep(b.CreatedAt), keep(b.IdleUntil), keep(b.ExpiresAt)
	if len(b.Roles) == 0 {
		b.Roles = nil
	} else {
		b.Roles = slices.Clone(b.Roles)
	}
	return b
}

func (m *memStore) InsertBrowserSession(_ context.Context, b *toolplane.BrowserSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{b.OrganizationID, b.ID}
	if _, ok := m.browserSessions[k]; ok {
		return toolplane.ErrExists
	}
	for _, have := range m.browserSessions {
		if have.TokenHash == b.TokenHash {
			return toolplane.ErrExists
		}
	}
	m.browserSessions[k] = storedBrowserSession(*b)
	return nil
}

func (m *memStore) FindBrowserSession(_ context.Context, hash string) (*toolplane.BrowserSession, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range m.browserSessions {
		if b.TokenHash == hash {
			b = storedBrowserSession(b)
			return &b, nil
		}
	}
	return nil, toolplane.ErrNotFound
}

func (m *memStore) TouchBrowserSession(_ context.Context, org, id string, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{org, id}
	b, ok := m.browserSessions[k]
	if !ok {
		return toolplane.ErrNotFound
	}
	if until = keep(until); until.After(b.IdleUntil) {
		b.IdleUntil = until
		if b.IdleUntil.After(b.ExpiresAt) {
			b.IdleUntil = b.ExpiresAt
		}
		m.browserSessions[k] = b
	}
	return nil
}

func (m *memStore) DeleteBrowserSession(_ context.Context, org, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{org, id}
	_, ok := m.browserSessions[k]
	delete(m.browserSessions, k)
	return ok, nil
}

func (m *memStore) DeleteBrowserSessionsOf(_ context.Context, org, subject string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, b := range m.browserSessions {
		if b.OrganizationID == org && b.Subject == subject {
			delete(m.browserSessions, k)
			n++
		}
	}
	return n, nil
}

func (m *memStore) DeleteExpiredBrowserSessions(_ context.Context, now time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var ended []toolplane.BrowserSession
	for _, b := range m.browserSessions {
		if b.IdleUntil.Before(keep(now)) {
			ended = append(ended, b)
		}
	}
	slices.SortFunc(ended, func(a, b toolplane.BrowserSession) int { return a.IdleUntil.Compare(b.IdleUntil) })
	if len(ended) > limit {
		ended = ended[:limit]
	}
	for _, b := range ended {
		delete(m.browserSessions, [2]string{b.OrganizationID, b.ID})
	}
	return len(ended), nil
}

// memListing refuses a tool listing the stores' credentials table does not
// hold.
func memListing(c *toolplane.Credential) error {
	if !c.Listing.Valid() || c.ListingTop < 0 || c.ListingTop > toolplane.MaxListingTop {
		return fmt.Errorf("listing %q top %d: %w", c.Listing, c.ListingTop, toolplane.ErrInvalid)
	}
	return nil
}
