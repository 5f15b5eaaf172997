package toolplane

import (
	"context"
	"encoding/json"
	"time"
)

// ClaimStatus is the state of an idempotency claim.
type ClaimStatus string

// The claim states. A released claim is deleted, not kept.
const (
	// ClaimProcessing: a worker holds the claim under a lease.
	ClaimProcessing ClaimStatus = "processing"
	// ClaimCompleted: the call ended and Result is what every identical
	// call answers.
	ClaimCompleted ClaimStatus = "completed"
	// ClaimUncertain: the effect may have happened; identical calls answer
	// uncertain until a reconciliation completes the claim.
	ClaimUncertain ClaimStatus = "uncertain"
)

// Claim is one row of the idempotency journal: the claim on a key, and the
// answer stored for it. The journal is the claim record; there is no second
// table beside it.
type Claim struct {
	OrganizationID string
	// Tool is the claim's scope: the tool's platform name.
	Tool string
	// Key is the encoded idempotency key (see canonical.Key).
	Key string
	// RequestHash is the canonical hash of the coerced arguments; the same
	// key with another hash is a conflict.
	RequestHash string
	Status      ClaimStatus
	// Result is the stored answer (a rendered Result) once completed.
	Result []byte
	// Owner and LeaseUntil: who holds a processing claim, and until when.
	// An uncertain claim keeps the owner that was running it.
	Owner      string
	LeaseUntil time.Time
	// Dispatched is set, durably, just before the handler starts: after a
	// lost worker it tells "never reached the handler" (safe to run) from
	// "may have acted" (uncertain).
	Dispatched bool
	// Attempts counts handler starts.
	Attempts int
	// Node names the node instance holding a processing claim (see Node):
	// once that node stops heartbeating the claim is decided without
	// waiting for its lease. "" is judged by the lease alone.
	Node     string
	RunID    string
	StepPath string
	// Arguments are the coerced arguments, kept so a person reconciling an
	// uncertain action sees what was asked, and so a call safe to replay can
	// be run again by a worker after its own was lost.
	Arguments []byte
	// Invocation is the stored invocation (JSON) the call ran under, for
	// that same replay.
	Invocation []byte
	// Reason says why the claim is uncertain; ReconciledBy and Note record
	// who settled it and how.
	Reason       string
	ReconciledBy string
	Note         string
	// Version increments on every update; updates are conditional on it.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ClaimStore is the storage of the idempotency journal. Every method is
// scoped to one organization. Updates are compare-and-swap on Version, so
// two workers (or two nodes) never both win a claim.
type ClaimStore interface {
	// InsertClaim stores c if no claim exists for its organization, tool and
	// key, and reports whether it did.
	InsertClaim(ctx context.Context, c *Claim) (bool, error)
	// GetClaim answers the claim, or ErrNotFound.
	GetClaim(ctx context.Context, org, tool, key string) (*Claim, error)
	// UpdateClaim writes c where the stored Version equals c.Version, sets
	// c.Version to the new version, and reports whether it wrote.
	UpdateClaim(ctx context.Context, c *Claim) (bool, error)
	// UpdateClaimAudited is UpdateClaim and AppendAudit in one
	// transaction: the answer of a call that may have made an effect and
	// its audit event are stored together or not at all, so no effect is
	// ever recorded without its audit row. When the update does not apply
	// (a stale version) the event is not stored either.
	UpdateClaimAudited(ctx context.Context, c *Claim, e *AuditEvent) (bool, error)
	// DeleteClaim removes the claim where the stored Version equals version
	// and reports whether it did.
	DeleteClaim(ctx context.Context, org, tool, key string, version int64) (bool, error)
	// DeleteClaimAudited is DeleteClaim and AppendAudit in one
	// transaction: a claim released by someone other than its caller (a
	// sweep, a late settlement) leaves its audit event, or stays. When the
	// delete does not apply the event is not stored either.
	DeleteClaimAudited(ctx context.Context, org, tool, key string, version int64, e *AuditEvent) (bool, error)
	// ListClaims answers claims in a state, oldest first, after the cursor
	// (an opaque value from a previous page, "" for the first).
	ListClaims(ctx context.Context, org string, status ClaimStatus, after string, limit int) ([]Claim, string, error)
}

// ApprovalStatus is the state of an approval.
type ApprovalStatus string

// The approval states.
const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalRejected ApprovalStatus = "rejected"
	ApprovalExpired  ApprovalStatus = "expired"
)

// Approval is a call waiting for (or decided by) a person. It holds
// everything needed to execute the call without the model asking again.
type Approval struct {
	ID             string
	OrganizationID string
	RunID          string
	StepPath       string
	Tool           string
	ToolVersion    string
	// Key is the call's idempotency key; ArgumentsHash the canonical hash of
	// its coerced Arguments.
	Key           string
	ArgumentsHash string
	Arguments     []byte
	// Invocation is the stored invocation (JSON) the approved call runs
	// under.
	Invocation  []byte
	PrincipalID string
	// Preview is the one-line summary a person reads; empty when the tool
	// has none or it failed.
	Preview string
	Status  ApprovalStatus
	// DefaultOnTimeout is what expiry means: "deny", or "escalate" to the
	// next group of the tool's approval chain.
	DefaultOnTimeout string
	// Level is the step of the tool's approval chain this approval is at
	// (0 first); ApproverGroup the group whose members may answer it
	// ("" for anyone the deployment lets approve). EscalatedFrom names the
	// approval this one replaced when that one timed out, so the trail from
	// the first request to the answer stays whole.
	Level         int
	ApproverGroup string
	EscalatedFrom string
	// Rule names the policy rule that asked for the approval ("" when the
	// tool's own requires_approval did). Approvers is how many distinct
	// people must approve (0 and 1 are one); ApprovedBy who has so far,
	// while the approval stays pending. Approver, when set, is the one
	// person who must answer (the requester's manager).
	Rule       string
	Approvers  int
	Approver   string
	ApprovedBy []string
	ExpiresAt  time.Time
	CreatedAt  time.Time
	ResolvedAt time.Time
	ResolvedBy string
	Reason     string
	Version    int64
}

// MaxOpenApprovals bounds the rows FindOpenApprovals answers: more than one
// open approval of one call is a leftover of filings made before calls
// were matched across runs, and the newest are the ones that matter.
const MaxOpenApprovals = 10

// MaxApprovalGroups bounds the groups ListApprovalsNewest filters by: a
// person in more groups is shown their inbox unfiltered by the store and
// judged approval by approval.
const MaxApprovalGroups = 32

// ApprovalFilter narrows a list of approvals (ApprovalStore.SearchApprovals).
// A field left zero is no condition.
type ApprovalFilter struct {
	// Tool is the tool's name, exactly.
	Tool string
	// Agent is the agent that asked: the principal (PrincipalID) or the
	// agent identity its stored invocation names (Invocation.AgentID),
	// exactly.
	Agent string
	// Group is the approver group the approval is routed to, exactly.
	Group string
	// Since and Before bound when the approval was filed: at or after
	// Since, strictly before Before.
	Since, Before time.Time
	// Text is words the approval's tool, preview, ID, run or principal
	// holds, compared with ASCII letters folded to lower case.
	Text string
}

// MaxApprovalFilterText bounds ApprovalFilter.Text.
const MaxApprovalFilterText = 200

// ApprovalStore is the storage of approvals, scoped to one organization.
//
// One call (an organization's tool and idempotency key) has at most one
// pending approval, and the store enforces it: a person is asked once
// for a call however many sessions, runs or concurrent requests ask.
type ApprovalStore interface {
	// InsertApproval stores a, or answers an error wrapping ErrExists
	// when the organization already has an approval with its ID or, a
	// being pending, a pending approval of the same tool and key.
	InsertApproval(ctx context.Context, a *Approval) error
	// FileApproval stores a, a pending approval, unless the organization
	// already has a pending approval of the same tool and key: then it
	// stores nothing and answers that one. It answers a when it stored
	// it. Concurrent filings of one call all answer the one approval
	// stored. An ID already taken is an error wrapping ErrExists.
	FileApproval(ctx context.Context, a *Approval) (*Approval, error)
	GetApproval(ctx context.Context, org, id string) (*Approval, error)
	// UpdateApproval is compare-and-swap on Version, like UpdateClaim.
	UpdateApproval(ctx context.Context, a *Approval) (bool, error)
	// UpdateApprovalAudited is UpdateApproval and AppendAudit in one
	// transaction, like UpdateClaimAudited: a state an approval reaches
	// without a person (its expiry) and its audit event are stored
	// together or not at all.
	UpdateApprovalAudited(ctx context.Context, a *Approval, e *AuditEvent) (bool, error)
	// FindApprovals answers the approvals filed for one call, tool and
	// key, in any run and state, newest first.
	FindApprovals(ctx context.Context, org, tool, key string) ([]Approval, error)
	// FindOpenApprovals answers the pending and approved approvals of one
	// principal's call of tool with arguments hash argsHash, in any run,
	// that expire after now, newest first, at most MaxOpenApprovals: what a
	// later session of the same agent asking the same thing is offered
	// instead of a new filing. Expired rows are left out by the query, not
	// after it, so they never take the places of open ones.
	FindOpenApprovals(ctx context.Context, org, principalID, tool, argsHash string, now time.Time) ([]Approval, error)
	// ListApprovals answers approvals in a state, oldest first, after the
	// cursor.
	ListApprovals(ctx context.Context, org string, status ApprovalStatus, after string, limit int) ([]Approval, string, error)
	// ListApprovalsNewest answers approvals in a state, newest first (ties
	// by ID, descending), after the cursor: the inbox and history a person
	// reads. With groups not nil it answers only the approvals routed to
	// one of them (ApproverGroup; "" names the approvals routed to no
	// group), at most MaxApprovalGroups; an empty groups answers none.
	ListApprovalsNewest(ctx context.Context, org string, status ApprovalStatus, groups []string, after string, limit int) ([]Approval, string, error)
	// SearchApprovals is ListApprovalsNewest answering only the approvals
	// f matches: the inbox a person narrowed by tool, agent, group, age or
	// words. The conditions are the query's, so a page costs what matches,
	// not the whole state read and cut afterwards.
	SearchApprovals(ctx context.Context, org string, status ApprovalStatus, groups []string, f ApprovalFilter, after string, limit int) ([]Approval, string, error)
	// CountApprovals answers how many approvals are in a state, by
	// organization, across the whole deployment: the operator's view (the
	// metrics), never an organization's. Organizations with none are
	// absent.
	CountApprovals(ctx context.Context, status ApprovalStatus) (map[string]int, error)
}

// Usage is one billable operation a metered call completed.
type Usage struct {
	ID             string
	OrganizationID string
	RunID          string
	RootRunID      string
	// AgentID is the agent whose call it was ("" for rows written before
	// it was recorded): what spend reports group by.
	AgentID   string
	Tool      string
	CostCents int64
	Units     int64
	CreatedAt time.Time
}

// UsageStats is what the meter recorded of one tool's calls: how many rows,
// and their average and largest CostCents. Zero Calls means none were
// measured, and the costs are then zero too.
type UsageStats struct {
	Calls        int
	AverageCents float64
	MaxCents     int64
}

// MaxUsageSample bounds the usage rows ToolUsage reads: an estimate of a
// call's cost needs the recent calls, not every call of a busy tool, and a
// person waiting for an approval card must not wait for a scan of them.
const MaxUsageSample = 1000

// UsageStore is the canonical meter.
type UsageStore interface {
	InsertUsage(ctx context.Context, u *Usage) error
	// RunTreeCost answers the total cost of a run tree, read from the rows
	// themselves (never a rollup, which lags).
	RunTreeCost(ctx context.Context, org, rootRunID string) (int64, error)
	// ToolUsage answers the count, the average and the largest CostCents
	// of the organization's usage rows of tool created at or after since,
	// reading at most the newest MaxUsageSample of them (Calls is then
	// MaxUsageSample). No rows answer zero stats, not an error.
	ToolUsage(ctx context.Context, org, tool string, since time.Time) (UsageStats, error)
}

// AuditKind says what an audit event records: a call (the call trail), or
// a change a person or the platform made to what calls may do (the
// control-plane trail beside it).
type AuditKind string

// The kinds of audit events. A call's event has the empty kind, so the
// events stored before kinds existed read as what they are.
const (
	AuditCall AuditKind = ""
	// AuditApproval: a person decided an approval (outcome approved or
	// rejected), or it expired or escalated without one.
	AuditApproval AuditKind = "approval"
	// AuditReconciliation: a person or a handler settled an uncertain
	// action.
	AuditReconciliation AuditKind = "reconciliation"
	// AuditKey: an API key was created, rotated or revoked.
	AuditKey AuditKind = "key"
	// AuditGrant: an agent's or a person's grants changed.
	AuditGrant AuditKind = "grant"
	// AuditPolicy: a policy bundle was published or rolled back.
	AuditPolicy AuditKind = "policy"
	// AuditRetention: a range of the trail was dropped (by the retention
	// policy or a confirmed purge), a purge was proposed or confirmed, or
	// an export sink was dropped.
	AuditRetention AuditKind = "retention"
	// AuditOAuth: a person consented to an OAuth client, a consent or a
	// client was revoked (by a person, an admin, or a replayed code or
	// refresh token), or the access-token signing key was rotated.
	AuditOAuth AuditKind = "oauth"
	// AuditSlack: a Slack account was linked to a person (it then
	// decides approvals as them) or unlinked.
	AuditSlack AuditKind = "slack"
)

// AuditEvent records one call's outcome, or one control-plane change
// (Kind).
type AuditEvent struct {
	ID             string `json:"id"`
	OrganizationID string `json:"organization_id"`
	// Kind is what the event records; empty for a call.
	Kind AuditKind `json:"kind,omitempty"`
	// Subject names what a control-plane event is about (the key, the
	// agent whose grants changed, the bundle's version); empty for a call,
	// whose subject is its tool.
	Subject string `json:"subject,omitempty"`
	// TenantID is the tenant the call acted for, when the deployment
	// serves tenants.
	TenantID string `json:"tenant_id,omitempty"`
	RunID    string `json:"run_id"`
	// StepPath is the call's place in its run.
	StepPath    string `json:"step_path,omitempty"`
	AgentID     string `json:"agent_id,omitempty"`
	PrincipalID string `json:"principal_id,omitempty"`
	UserID      string `json:"user_id,omitempty"`
	// KeyID is the API key (or other credential) the call was made with:
	// by ID, never its secret.
	KeyID       string `json:"key_id,omitempty"`
	Tool        string `json:"tool"`
	ToolVersion string `json:"tool_version,omitempty"`
	// Effect and Destructive are what the tool's version declared when
	// the call was decided, so "every destructive call without an
	// approval" reads the trail alone, whatever the catalogue says now.
	Effect      Effect `json:"effect,omitempty"`
	Destructive bool   `json:"destructive,omitempty"`
	Source      Source `json:"source"`
	// TraceID and SpanID are the call's span (hex, W3C trace context),
	// where a trace and the trail meet; empty when nothing traced it.
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
	// Outcome is "ok", "approval_required", or the error code.
	Outcome       string `json:"outcome"`
	ArgumentsHash string `json:"arguments_hash,omitempty"`
	// Key is the idempotency key the event is about, when the call had
	// one; Reason says why the state was reached (why a claim is
	// uncertain, why it was released), when the outcome alone does not.
	Key          string `json:"key,omitempty"`
	Reason       string `json:"reason,omitempty"`
	ApprovalID   string `json:"approval_id,omitempty"`
	AuthorizedBy string `json:"authorized_by,omitempty"`
	// ApproverID is the person who decided the approval that let the call
	// through (or that a control-plane event records).
	ApproverID string `json:"approver_id,omitempty"`
	// Arguments are the call's validated arguments with every value the
	// input schema marks x-sensitive, and every credential-shaped value,
	// replaced, bounded; empty when they could not be kept safely.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// PIIFields are the argument paths the input schema classifies
	// (x-classification) that the call carried, and Classifications the
	// distinct classes among them ("pii", "financial"): what makes "every
	// call that touched a classification" a query.
	PIIFields       []string `json:"pii_fields_touched,omitempty"`
	Classifications []string `json:"classifications,omitempty"`
	// OutputHash is the SHA-256 of the result the caller received (its
	// one rendering), proof of what was returned without keeping it.
	OutputHash string `json:"output_hash,omitempty"`
	// CostCents is what the call cost, as metered; Attempts how many
	// times the handler ran for it.
	CostCents int64 `json:"cost_cents,omitempty"`
	Attempts  int   `json:"attempts,omitempty"`
	// ConnectionID names the connection whose secret the broker released
	// for the call: by ID, never by value.
	ConnectionID string `json:"connection_id,omitempty"`
	// ParentID is the ID of the audit event of the call that made this
	// one, for a tool-to-tool call (a handler calling another tool): the
	// trail of a chain of calls links each to its parent.
	ParentID string `json:"parent_id,omitempty"`
	// PolicyDecision is what the policy step decided (allow, deny,
	// require_approval; "" when the call ended before it); PolicyBundle
	// and PolicyRule the organization's rules version and the rule that
	// decided (0 and "" when the grants alone did). PolicyDegraded marks
	// a decision taken from the last known good rules while the store
	// could not be read.
	PolicyDecision string `json:"policy_decision,omitempty"`
	PolicyBundle   int64  `json:"policy_bundle,omitempty"`
	PolicyRule     string `json:"policy_rule,omitempty"`
	PolicyDegraded bool   `json:"policy_degraded,omitempty"`
	// PolicyInput is the document the rules decided on (or would have,
	// when none were published), credentials redacted as in a span: what
	// a shadow run replays a candidate bundle against. Empty when the
	// grants refused the call, or the document was too large to keep.
	PolicyInput   json.RawMessage `json:"policy_input,omitempty"`
	Replayed      bool            `json:"replayed"`
	LatencyMicros int64           `json:"latency_micros"`
	CreatedAt     time.Time       `json:"created_at"`
	// Seq, PrevHash and Hash place the event in its organization's hash
	// chain (see package auditchain): Seq counts the organization's events
	// from 1 with no gap, PrevHash is the hash of the event before (empty
	// for the first), and Hash covers every other stored field, Seq and
	// PrevHash. The store assigns them in the transaction that stores the
	// event; whatever the caller set is ignored. An event stored before the
	// chain existed has Seq 0 and no hashes.
	Seq      int64  `json:"seq,omitempty"`
	PrevHash []byte `json:"prev_hash,omitempty"`
	Hash     []byte `json:"hash,omitempty"`
}

// AuditCheckpoint is a signed statement that an organization's audit chain
// reached Hash at Seq at CreatedAt: whoever holds the operator's public
// keys can check that no event up to Seq was changed since, even by
// someone who could rewrite the whole table and recompute its hashes.
type AuditCheckpoint struct {
	OrganizationID string    `json:"organization_id"`
	Seq            int64     `json:"seq"`
	Hash           []byte    `json:"hash"`
	CreatedAt      time.Time `json:"created_at"`
	// KeyID names the operator's signing key; Signature is its Ed25519
	// signature of the checkpoint's canonical encoding
	// (auditchain.CheckpointMessage).
	KeyID     string `json:"key_id"`
	Signature []byte `json:"signature"`
}

// AuditHead is where an organization's chain stands: its last event's
// sequence number and hash (0 and empty before its first chained event).
type AuditHead struct {
	Seq  int64
	Hash []byte
}

// AuditChainStore reads an organization's chain and keeps its checkpoints.
// The chain itself is written by the AuditStore's appends (and by every
// store write that records an event), in the transaction of the write.
type AuditChainStore interface {
	// AuditChain answers the organization's chained events with from <=
	// Seq <= to (to 0: no upper bound), in Seq order, at most limit.
	AuditChain(ctx context.Context, org string, from, to int64, limit int) ([]AuditEvent, error)
	// AuditHead answers where the organization's chain stands, and the
	// lowest Seq of its stored events (0 when none is stored).
	AuditHead(ctx context.Context, org string) (head AuditHead, first int64, err error)
	// AppendAuditCheckpoint stores cp; a checkpoint of the organization at
	// the same Seq answers an error wrapping ErrExists.
	AppendAuditCheckpoint(ctx context.Context, cp *AuditCheckpoint) error
	// AuditCheckpoints answers the organization's checkpoints with from <=
	// Seq <= to (to 0: no upper bound), in Seq order.
	AuditCheckpoints(ctx context.Context, org string, from, to int64) ([]AuditCheckpoint, error)
	// AuditOrganizations answers the organizations whose chain head moved
	// past their newest checkpoint, at most limit, after the organization
	// after (a cursor): what the checkpoint job signs.
	AuditOrganizations(ctx context.Context, after string, limit int) ([]string, error)
	// DropAudit is retention: it stores cp, a checkpoint of the
	// organization at Seq through (which must match the chain there:
	// ErrConflict, or ErrNotFound when no event is there), deletes every
	// event of the organization with Seq <= through (and every event
	// stored before the chain), and appends ev (when not nil: the event
	// recording the drop, chained after the head), in one transaction,
	// answering how many it deleted. It is the only deletion the table
	// allows.
	//
	// from is the first event of the range the caller read (AuditExpired)
	// and ev records: the drop is made only while it is still the
	// organization's first stored chained event, checked in the drop's
	// transaction after every other drop of the organization that
	// committed before it, and otherwise answers ErrConflict, deleting
	// and recording nothing. So two retention passes at once (two nodes',
	// or two periods' on a loaded host) never drop a range twice nor
	// record its drop twice: the second finds the range's start gone,
	// and reads what is left again.
	DropAudit(ctx context.Context, from int64, cp *AuditCheckpoint, ev *AuditEvent) (int, error)
	// AuditExpired answers the range of the organization's stored chained
	// events that were all created before before: from its first stored
	// event to through, the last before the first event created at or
	// after before (through 0: none).
	AuditExpired(ctx context.Context, org string, before time.Time) (first, through int64, err error)
	// AuditRetentionOrganizations answers the organizations that store a
	// chained event created before before, at most limit, after the
	// organization after (a cursor): what the retention job drops from.
	AuditRetentionOrganizations(ctx context.Context, before time.Time, after string, limit int) ([]string, error)
}

// AuditStore is the append-only audit trail.
type AuditStore interface {
	AppendAudit(ctx context.Context, e *AuditEvent) error
	// ListAudit answers events newest first, before the cursor.
	ListAudit(ctx context.Context, org string, filter AuditFilter, after string, limit int) ([]AuditEvent, string, error)
	// GetAudit answers the organization's event with that ID, or an
	// error wrapping ErrNotFound (another organization's event included).
	GetAudit(ctx context.Context, org, id string) (*AuditEvent, error)
}

// AuditFilter narrows an audit query; empty fields match everything.
type AuditFilter struct {
	RunID   string
	AgentID string
	UserID  string
	Tool    string
	Outcome string
	// ApprovalID matches the events that name an approval: its filing,
	// the calls it let through, their repeats (see invoke.Aftermath).
	// Set it beside RunID, whose index then serves the query.
	ApprovalID string
	// Outcomes, when set, matches an event whose outcome is any of them
	// (every error code, say), beside Outcome. How many a caller may ask
	// for is audit.Trail's rule (audit.MaxOutcomes), not a store's.
	Outcomes []string
	// Since and Until bound when the event happened: at or after Since,
	// before Until; a zero time does not bound.
	Since, Until time.Time
	// TenantID, Effect and ApproverID match the event's fields of those
	// names.
	TenantID   string
	Effect     Effect
	ApproverID string
	// Kinds, when set, matches an event of any of these kinds; AuditCall
	// (the empty kind) among them matches calls.
	Kinds []AuditKind
	// Approved, when set, matches the events that name an approval (true)
	// or that name none (false).
	Approved *bool
	// Destructive, when set, matches the events of destructive tools
	// (true) or of the others (false).
	Destructive *bool
	// Classification matches the events whose call touched a field of
	// that data class (x-classification: "pii", "financial").
	Classification string
	// Person matches every event about one person: the person a call
	// acted for (UserID), the person who decided its approval
	// (ApproverID), or the principal that made it (PrincipalID). It is
	// what a data-subject export reads.
	Person string
}

// CredentialStore is the storage of API keys' stored forms (Credential).
//
// Unlike every other store, a credential's identity is its ID alone: IDs
// are unique across organizations, and GetCredential takes no organization.
// Authentication reads the credential before the caller's organization is
// known (the organization is what the credential answers), so the key's
// public ID must find exactly one row; an identity scoped to an organization
// would let two organizations hold the same ID and make the lookup
// ambiguous. Every other method is still scoped to an organization, so one
// organization's administration never reaches another's credentials.
type CredentialStore interface {
	// InsertCredential stores c, or answers an error wrapping ErrExists
	// when a credential with its ID exists, in any organization.
	InsertCredential(ctx context.Context, c *Credential) error
	// InsertCredentialAudited is InsertCredential and AppendAudit in one
	// transaction: a key and the event recording its creation are stored
	// together or not at all, so no key ever authenticates that the
	// trail does not account for. An event that cannot be stored (an
	// error wrapping ErrExists for a duplicate ID) stores no credential.
	InsertCredentialAudited(ctx context.Context, c *Credential, e *AuditEvent) error
	// GetCredential answers the credential with that ID, whatever its
	// organization, or ErrNotFound. It is the authentication lookup: the
	// caller learns the organization from the answer.
	GetCredential(ctx context.Context, id string) (*Credential, error)
	// ListCredentials answers the organization's credentials (revoked and
	// expired ones included), oldest first, after the cursor.
	ListCredentials(ctx context.Context, org, after string, limit int) ([]Credential, string, error)
	// UpdateCredential writes c where the stored organization, ID and
	// Version match c's, sets c.Version to the new version, and reports
	// whether it wrote; compare-and-swap, like UpdateClaim. It writes Roles,
	// Tools, Label, ExpiresAt, RevokedAt, Listing and ListingTop, and never
	// the rest:
	//
	//   - ID, OrganizationID, Kind and Subject: who the key authenticates.
	//     A key handed to one subject never comes to act as another.
	//   - Hash: a key's secret never changes; a new secret is a new
	//     credential.
	//   - CreatedAt and CreatedBy: the credential's provenance, and the
	//     list order.
	//   - LastUsedAt, which is TouchCredential's alone: an update from a
	//     copy read before a touch does not roll the time back.
	//
	// Revocation is final: once RevokedAt is stored, an update keeps it
	// (neither clearing nor moving it), so a revoked key is never valid
	// again.
	UpdateCredential(ctx context.Context, c *Credential) (bool, error)
	// UpdateCredentialAudited is UpdateCredential and AppendAudit in one
	// transaction, like UpdateClaimAudited: a key's revocation and its
	// audit event are stored together or not at all. When the update
	// does not apply (a stale version) the event is not stored either,
	// and c.Version moves only when both are stored.
	UpdateCredentialAudited(ctx context.Context, c *Credential, e *AuditEvent) (bool, error)
	// TouchCredential records a use of the credential: it sets LastUsedAt
	// to at, unless the stored time is already later, so it never moves
	// back. It is one cheap unconditional write, not a
	// compare-and-swap, and leaves Version alone, so it never makes an
	// administrator's update stale. A credential not in org answers
	// ErrNotFound; a zero at is an error.
	TouchCredential(ctx context.Context, org, id string, at time.Time) error
}

// Node is one running instance of serve. A node heartbeats while it runs;
// one that stops is known dead once its last heartbeat is older than the
// deployment's heartbeat timeout, and the claims it held are decided then
// rather than at the end of their leases.
type Node struct {
	// ID names this instance; Name the node, stable across its restarts.
	ID          string
	Name        string
	StartedAt   time.Time
	HeartbeatAt time.Time
}

// Dead reports whether the instance is known dead at now: retired by a
// restart under its name (its HeartbeatAt at the Unix epoch, see
// RetireNodes), or silent for after or longer. A positive after is the
// deployment's heartbeat timeout; with none, only retirement tells. The
// journal (a claim's holder) and the background work (a running job's
// node) judge a node by this one rule, so they never disagree at the
// boundary.
func (n *Node) Dead(now time.Time, after time.Duration) bool {
	if n.HeartbeatAt.UnixMicro() <= 0 {
		return true
	}
	return after > 0 && !now.Before(n.HeartbeatAt.Add(after))
}

// NodeStore is the storage of the deployment's nodes. Nodes belong to the
// operator, not to an organization: no method takes one.
type NodeStore interface {
	// InsertNode stores a new instance n, or answers an error wrapping
	// ErrExists when one with its ID is stored. It is the only way an
	// instance is stored: a node registers once, at start.
	InsertNode(ctx context.Context, n *Node) error
	// Heartbeat moves a live stored instance's HeartbeatAt forward (never
	// back); Name and StartedAt never change. It never stores an instance:
	// a retired one (see RetireNodes), or one retention removed after it
	// was retired or silent, stays dead, and its heartbeat changes nothing
	// and answers nil, since its claims are being or were decided.
	Heartbeat(ctx context.Context, n *Node) error
	// GetNode answers the instance, or ErrNotFound.
	GetNode(ctx context.Context, id string) (*Node, error)
	// RetireNodes marks every other instance named name as dead now (its
	// HeartbeatAt set to the Unix epoch), and answers how many it marked: a
	// node that restarts knows its earlier instances are gone, so their
	// claims need not wait for a heartbeat timeout.
	RetireNodes(ctx context.Context, name, except string) (int, error)
}

// Store is everything the invocation path persists, and the registry it
// resolves tools and authorization from.
type Store interface {
	ClaimStore
	ApprovalStore
	UsageStore
	SpendStore
	AuditStore
	CredentialStore
	CatalogStore
	GrantStore
	SessionStore
	NodeStore
	UpstreamSettingStore
	ConnectionStore
	PolicyBundleStore
	BrowserSessionStore
	AsyncCallStore
	StreamStore
}
