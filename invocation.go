package toolplane

import (
	"encoding/json"
	"math"
	"time"
)

// Invocation is the ambient identity of one call: who is calling, for which
// run and step, under which grants and limits. The model supplies only the
// arguments; everything here is the runtime's.
type Invocation struct {
	OrganizationID string
	// UserID is the person the agent acts on behalf of, when there is one.
	UserID string
	// RunID is the run making the call; RootRunID the root of its run tree
	// (the tree a cost ceiling covers). RootRunID defaults to RunID.
	RunID     string
	RootRunID string
	// AgentID names the agent identity (or agent definition) calling.
	AgentID string
	// CredentialID is the credential the call was made with: a call run
	// later from storage (an approved call, a replay) is decided on that
	// key as it is then, revoked or narrowed since included.
	CredentialID string `json:",omitempty"`
	// Credential is the verified credential a door admitted the call
	// with, when the call comes fresh from a door: the invoker computes
	// the call's principal from it (the grants and the key as they are
	// now) without reading the key again. It is never stored: a call run
	// later from storage finds its key again by CredentialID.
	Credential *Credential `json:"-"`
	// TenantID is the tenant the call acts for, when the deployment
	// serves several; a grant scoped to tenants allows only their calls.
	TenantID string
	// StepPath is the workflow node making the call, or "agent".
	StepPath  string
	Principal Principal
	Ceilings  Ceilings
	// Deadline is when the caller's time is up (the deadline a door's
	// caller asked for, measured on the node that received it, or the
	// calling tool's own deadline for a tool-to-tool call); zero means
	// none. The invoker cuts the tool's timeout to it and refuses a call
	// left too little time before anything is claimed (deadline_exceeded).
	Deadline time.Time
	Source   Source
	// AuthorizedBy is the approval this call claims to be covered by. An
	// approval that does not cover the call is ignored, never trusted.
	AuthorizedBy string
	// IdempotencyKey is a caller-supplied key for this logical action. When
	// empty the key is derived from run, step and arguments hash.
	IdempotencyKey string
	// SessionRun is set when RunID is a door's session rather than a run
	// (or key) the caller named: a client that opens a session per call
	// cannot keep a run across them, so an approval the same agent filed
	// for the same call in another session is offered to this one instead
	// of a new filing (see approval.Service.Open).
	SessionRun bool `json:",omitempty"`
	// User is what the person the call acts for (UserID) is known by
	// beyond their id: their identity provider's claims, as the
	// deployment maps them. Nil when the call names no person, or the
	// person was named without claims (an on_behalf_of).
	User *User `json:",omitempty"`
	// AgentAttributes are the calling agent's attributes from its
	// credential (a token's mapped claims); a rule reads them.
	AgentAttributes map[string]any `json:",omitempty"`
	// AgentRoles are the roles of the credential the call was made with
	// (an agent's: act_for_users), kept with the call as AgentAttributes
	// are: a call run later from storage (an approved call, a replay) has
	// no Credential, and its rules must read the caller the call had.
	AgentRoles []string `json:",omitempty"`
	// Hops is how many more tool-to-tool hops this call may start below
	// it: a call it makes (a handler calling another tool, an upstream MCP
	// server calling back) has one fewer, and a call whose count is below
	// zero is refused (max_hops_exceeded). A door starts a call at what
	// its caller asked, capped by the platform's maximum (invoke.Config.
	// MaxHops), or at the maximum when it asked nothing; the invoker caps
	// it again, so a count forged upward is never trusted.
	Hops int
	// ParentID is the audit event id of the call that made this one, for
	// a tool-to-tool call the invoker derived from its parent; "" for a
	// call from a door. The child's audit event records it.
	ParentID string `json:",omitempty"`
	// TraceParent and TraceState are the W3C trace context (traceparent,
	// tracestate) of the caller of a call stored to run later (an
	// asynchronous call, an approved call's execution): when it runs, its
	// span continues the caller's trace. Empty for a call made now, whose
	// context carries its trace.
	TraceParent string `json:",omitempty"`
	TraceState  string `json:",omitempty"`
	// Contracts freezes what the run was shown: tool name to the
	// schema_hash of the contract. A call on a tool whose live contract
	// differs answers tool_changed; a tool absent here is read live.
	Contracts map[string]string
}

// storedHops is what an invocation stored before hops were recorded
// decodes with: as many as a call may have, which the invoker caps at
// the platform's maximum. Reading its absence as zero would refuse every
// tool call the approved or queued call makes.
const storedHops = math.MaxInt32

// UnmarshalJSON reads a stored invocation. One stored before hops were
// recorded (no "Hops") gets the platform's maximum, not none.
func (inv *Invocation) UnmarshalJSON(b []byte) error {
	type stored Invocation // its fields, without this method
	s := stored{Hops: storedHops}
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*inv = Invocation(s)
	return nil
}

// EffectiveRootRunID answers the run tree a ceiling covers.
func (inv *Invocation) EffectiveRootRunID() string {
	if inv.RootRunID != "" {
		return inv.RootRunID
	}
	return inv.RunID
}

// Principal is the identity a call is decided for. Tools holds the platform
// names the principal may call: already the intersection of the agent's
// grants and the caller's rights.
type Principal struct {
	ID    string
	Tools []string
	// Pins holds, for the tools the principal's grants pin to a version
	// range, that range ("^2.1.0"); a tool not in it gets its default
	// version.
	Pins map[string]string
}

// Allow adds tool to what the principal holds, pinned to the version range
// rng when it is not empty.
func (p *Principal) Allow(tool, rng string) {
	p.Tools = append(p.Tools, tool)
	if rng != "" {
		if p.Pins == nil {
			p.Pins = map[string]string{}
		}
		p.Pins[tool] = rng
	}
}

// Holds reports whether the principal holds the tool name.
func (p Principal) Holds(tool string) bool {
	for _, t := range p.Tools {
		if t == tool {
			return true
		}
	}
	return false
}

// Ceilings are the limits a call is checked against. MaxCostCents is the
// run tree's whole budget (the meter answers the tree's whole spend, so a
// total compares against a total); zero means no cost ceiling.
type Ceilings struct {
	MaxCostCents int64
}

// CostCeiling answers the cost ceiling of a run: the lower of what the
// caller asked for and the operator's cap, where either is set (0: none).
// A caller may tighten its own budget, never loosen the operator's.
func CostCeiling(asked, cap int64) int64 {
	switch {
	case asked <= 0:
		return max(cap, 0)
	case cap <= 0:
		return asked
	default:
		return min(asked, cap)
	}
}

// Source says which door a call came in by. Every door reaches the same
// invoker; the source is recorded, never branched on for a decision.
type Source string

// The sources.
const (
	SourceREST   Source = "rest"
	SourceMCP    Source = "mcp"
	SourceSDK    Source = "sdk"
	SourceResume Source = "resume"
	SourceWorker Source = "worker"
	// SourceSweep: the background sweep of claims whose holder was lost
	// reached the state, not a call.
	SourceSweep Source = "sweep"
	// SourceTakeover: a call on the same key found the claim's holder lost
	// and recorded the state it was in; the call itself is audited apart.
	SourceTakeover Source = "takeover"
	// SourceSettlement: a handler stopped at its timeout settled its call
	// late.
	SourceSettlement Source = "settlement"
	// SourceReconcile: a person reconciled an uncertain action.
	SourceReconcile Source = "reconcile"
	// SourceWebhook: a vendor's verified callback reached the state (a
	// provider job's ending).
	SourceWebhook Source = "webhook"
	// SourceControl: a person changed what calls may do (decided an
	// approval, minted or revoked a key, changed grants, published
	// rules), through whichever door; the control-plane trail's source.
	SourceControl Source = "control"
)

// User is what the platform knows of a person a call acts for beyond
// their id, read from their identity provider's claims as the deployment
// maps them (a claim name to roles, to groups, to the manager, to
// attributes). Rules read it; the grants of each group in Groups stand
// for the person beside their own.
type User struct {
	Roles      []string       `json:"roles,omitempty"`
	Groups     []string       `json:"groups,omitempty"`
	Manager    string         `json:"manager,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

// The _meta keys of an MCP tools/call that carry the time and the hops a
// caller gives a call (a REST call's timeout_ms and remaining_hops): the
// MCP door reads them, and the platform sends them on a call to an
// upstream MCP server, so that one calling back into the platform passes
// on what its call had left.
const (
	MetaTimeoutMS     = "toolplane/timeout_ms"
	MetaRemainingHops = "toolplane/remaining_hops"
)
