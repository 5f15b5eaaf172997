package toolplane

import (
	"context"
	"fmt"
	"time"
)

// VersionState is where a published version of a tool is in its
// lifecycle. Only an active or deprecated version is shown to agents or
// called; every version is kept, so an audit event always finds the
// contract its call ran under.
type VersionState string

// The lifecycle states.
const (
	// StatePendingApproval: published, not yet sent to review (or sent
	// back by a reviewer); visible to its owner only.
	StatePendingApproval VersionState = "pending_approval"
	// StateInReview: waiting in the review queue.
	StateInReview VersionState = "in_review"
	// StateActive: shown and callable.
	StateActive VersionState = "active"
	// StateDeprecated: still shown and callable, with a warning on every
	// result, until it is retired at or after its sunset.
	StateDeprecated VersionState = "deprecated"
	// StateRetired: never shown or called again; kept for the audit trail.
	StateRetired VersionState = "retired"
)

// Callable reports whether a version in this state may be called, and so
// is shown to agents: the two never differ.
func (s VersionState) Callable() bool { return s == StateActive || s == StateDeprecated }

// ToolVersion is one published version of a tool: the definition as
// published and where it is in its lifecycle. A version belongs to the
// organization that published it: only that organization reviews, changes,
// lists and calls it. (Built-in and ingested tools, which the operator
// configures, are the platform's and are not stored here.)
type ToolVersion struct {
	OrganizationID string
	// Name is the tool's platform name; Version its semantic version.
	// (OrganizationID, Name, Version) is the identity, so two
	// organizations hold one name independently, and a published
	// version's definition never changes.
	Name    string
	Version string
	State   VersionState
	// Definition is the full definition, JSON.
	Definition []byte
	SchemaHash string
	// Owner is the owning team.
	Owner string
	// ReviewReasons say why the version needs review ("destructive",
	// "tag:finance", "first tool of its team"); empty for self-service.
	ReviewReasons []string
	PublishedBy   string
	PublishedAt   time.Time
	// ReviewedBy, ReviewedAt and ReviewNote record the last review
	// decision.
	ReviewedBy string
	ReviewedAt time.Time
	ReviewNote string
	// SunsetAt and Replacement are set when the version is deprecated: the
	// earliest retirement, and what callers should move to, a reference
	// "name@range" (another tool, or another version of this one; "name"
	// alone is any version of it). Versions deprecated before references
	// named a tool hold a bare version of this tool.
	SunsetAt    time.Time
	Replacement string
	// DeprecationNote is the owner's word on the deprecation, for people;
	// it is kept apart from the review's note.
	DeprecationNote string
	// RetireBlocked says why the sunset job did not retire the version
	// (the agents that still call it); empty when nothing blocks it.
	RetireBlocked string
	// Source is where a version comes from: SourcePublished for one
	// published here and stored, SourceBuiltIn or SourceUpstream for the
	// platform's own tools, which a listing shows beside the published
	// ones but nobody publishes, reviews or retires.
	Source VersionSource
	// Upstream names the upstream MCP server a SourceUpstream tool was
	// ingested from.
	Upstream string
	// Revision increments on every update; updates are conditional on it.
	Revision  int64
	UpdatedAt time.Time
}

// VersionSource is where a tool version comes from.
type VersionSource string

// The sources of a version.
const (
	// SourcePublished: published to the catalogue and stored ("" reads
	// as this).
	SourcePublished VersionSource = "published"
	// SourceBuiltIn: one of the tools the server was built with (Go
	// handlers, the demo's).
	SourceBuiltIn VersionSource = "builtin"
	// SourceUpstream: ingested from an upstream MCP server the operator
	// configured.
	SourceUpstream VersionSource = "upstream"
)

// VersionFilter narrows a listing of versions; empty fields match
// everything.
type VersionFilter struct {
	Name   string
	States []VersionState
	Owner  string
}

// CatalogStore is the storage of published tool versions. Every method but
// ListEveryToolVersion and CatalogRevision is scoped to one organization.
type CatalogStore interface {
	// InsertToolVersion stores a new version in v.OrganizationID;
	// ErrExists when the organization's name already has that version (a
	// second publish of one version loses).
	InsertToolVersion(ctx context.Context, v *ToolVersion) error
	// GetToolVersion answers one version of the organization, or
	// ErrNotFound.
	GetToolVersion(ctx context.Context, org, name, version string) (*ToolVersion, error)
	// ListToolVersions answers the organization's versions ordered by
	// name, then publication, after the cursor.
	ListToolVersions(ctx context.Context, org string, f VersionFilter, after string, limit int) ([]ToolVersion, string, error)
	// ListEveryToolVersion answers the versions of every organization,
	// ordered by organization, then as ListToolVersions orders them, after
	// the cursor. It is the deployment's own read (loading what each
	// organization is served, the sunset rule), never an answer to an
	// organization, like CountApprovals.
	ListEveryToolVersion(ctx context.Context, f VersionFilter, after string, limit int) ([]ToolVersion, string, error)
	// UpdateToolVersion writes v's lifecycle fields when its Revision is
	// still the stored one in v.OrganizationID, incrementing it; false
	// when another update came first. OrganizationID, Name, Version,
	// Definition and PublishedAt never change.
	UpdateToolVersion(ctx context.Context, v *ToolVersion) (bool, error)
	// CatalogRevision answers a number that grows with every insert and
	// update, in any organization, so every node notices a change with one
	// cheap read.
	CatalogRevision(ctx context.Context) (int64, error)
}

// Grant lets an agent identity of an organization call tools: those
// matching a pattern, or those of a bundle. A grant to a person (UserID)
// or to a group of people (Group) says what an agent acting for them may
// do: a call made for a person needs both the agent's grant and one of
// the person's. At most one of AgentID, UserID and Group is set (the
// grant service requires exactly one).
type Grant struct {
	ID             string
	OrganizationID string
	// AgentID is the agent identity (an agent credential's subject).
	AgentID string
	// UserID is the person granted (a token's subject, or the
	// on_behalf_of a trusted key names).
	UserID string
	// Group grants every person whose identity provider's claims place
	// them in the group (toolplane.User.Groups).
	Group string
	// Pattern is a glob over platform names ("payments.*"), optionally
	// pinned to a version range ("payments.refund_order@^2.1.0"). Exactly
	// one of Pattern and Bundle is set.
	Pattern string
	Bundle  string
	// TenantScope limits the grant to calls for these tenants; empty is
	// every tenant.
	TenantScope []string
	// ExpiresAt is zero for never.
	ExpiresAt time.Time
	GrantedBy string
	CreatedAt time.Time
	// RevokedAt is zero while the grant stands.
	RevokedAt time.Time
	RevokedBy string
}

// CheckTarget refuses a grant naming both a pattern and a bundle, or
// neither, with an error that says which: the rule every store and the
// grant service hold a grant to.
func (g *Grant) CheckTarget() error {
	if (g.Pattern == "") == (g.Bundle == "") {
		return fmt.Errorf("a grant names exactly one of a pattern and a bundle, not pattern %q and bundle %q", g.Pattern, g.Bundle)
	}
	return nil
}

// Deny refuses tools to an agent identity, or to every agent of the
// organization (AgentID "*": an incident deny), whatever any grant says.
type Deny struct {
	ID             string
	OrganizationID string
	AgentID        string
	// Pattern is a glob over platform names.
	Pattern   string
	Reason    string
	CreatedBy string
	CreatedAt time.Time
}

// CheckSubject refuses a grant that names more than one of an agent, a
// person and a group: the rule every store holds a grant to. The grant
// service also refuses one that names none.
func (g *Grant) CheckSubject() error {
	n := 0
	for _, s := range []string{g.AgentID, g.UserID, g.Group} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("a grant names exactly one of an agent (agent_id), a person (user_id) and a group (group), not agent %q, person %q and group %q", g.AgentID, g.UserID, g.Group)
	}
	return nil
}

// ForPeople reports whether g grants a person or a group rather than an
// agent.
func (g *Grant) ForPeople() bool { return g.UserID != "" || g.Group != "" }

// EveryAgent is the AgentID of a deny that applies to every agent.
const EveryAgent = "*"

// Bundle is a named set of tool references, each a name with a version
// range ("payments.refund_order@^2.1.0"), granted together by one grant.
type Bundle struct {
	OrganizationID string
	Name           string
	Refs           []string
	CreatedBy      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Change is one audited change to the registry or to authorization: a
// publish, a review decision, a deprecation, a grant, a deny, a bundle.
type Change struct {
	ID             string
	OrganizationID string
	// Kind names the change ("version.publish", "grant.add", ...).
	Kind string
	// Subject is what changed (a tool version, an agent, a bundle).
	Subject string
	Actor   string
	// Detail is the change's content, JSON.
	Detail    []byte
	CreatedAt time.Time
}

// GrantStore is the storage of grants, denies, bundles and the change
// log.
//
// Each write has an Audited form, the write, AppendChange of its change
// record ch and AppendAudit of its audit event e in one transaction: a
// change to what agents may call is stored with its record and its event
// or not at all. A change record or an event that cannot be stored (an
// error wrapping ErrExists for a duplicate ID) stores none of the three,
// and so does a write that does not apply (a grant or deny not there).
type GrantStore interface {
	InsertGrant(ctx context.Context, g *Grant) error
	// InsertGrantAudited is InsertGrant, AppendChange and AppendAudit
	// in one transaction.
	InsertGrantAudited(ctx context.Context, g *Grant, ch *Change, e *AuditEvent) error
	// ListGrants answers an organization's grants, of one agent when
	// agentID is set, revoked ones included only when asked; oldest first.
	ListGrants(ctx context.Context, org, agentID string, withRevoked bool) ([]Grant, error)
	// RevokeGrant marks a grant revoked; ErrNotFound when there is no
	// standing grant with that id.
	RevokeGrant(ctx context.Context, org, id, by string, at time.Time) error
	// RevokeGrantAudited is RevokeGrant, AppendChange and AppendAudit in
	// one transaction; no standing grant stores nothing and answers
	// ErrNotFound.
	RevokeGrantAudited(ctx context.Context, org, id, by string, at time.Time, ch *Change, e *AuditEvent) error

	InsertDeny(ctx context.Context, d *Deny) error
	// InsertDenyAudited is InsertDeny, AppendChange and AppendAudit in
	// one transaction.
	InsertDenyAudited(ctx context.Context, d *Deny, ch *Change, e *AuditEvent) error
	ListDenies(ctx context.Context, org string) ([]Deny, error)
	// DeleteDeny lifts a deny; ErrNotFound when there is none.
	DeleteDeny(ctx context.Context, org, id string) error
	// DeleteDenyAudited is DeleteDeny, AppendChange and AppendAudit in
	// one transaction; no such deny stores nothing and answers
	// ErrNotFound.
	DeleteDenyAudited(ctx context.Context, org, id string, ch *Change, e *AuditEvent) error

	// PutBundle creates or replaces a bundle.
	PutBundle(ctx context.Context, b *Bundle) error
	// PutBundleAudited is PutBundle, AppendChange and AppendAudit in one
	// transaction.
	PutBundleAudited(ctx context.Context, b *Bundle, ch *Change, e *AuditEvent) error
	GetBundle(ctx context.Context, org, name string) (*Bundle, error)
	ListBundles(ctx context.Context, org string) ([]Bundle, error)

	// AuthzRevision answers a number that grows with every change to the
	// organization's grants, denies and bundles.
	AuthzRevision(ctx context.Context, org string) (int64, error)

	AppendChange(ctx context.Context, c *Change) error
	// ListChanges answers changes newest first, of one kind and subject
	// when set, after the cursor.
	ListChanges(ctx context.Context, org, kind, subject, after string, limit int) ([]Change, string, error)
}
