package invoke

import "time"

// PathStage names a part of the invocation path whose time the Observer is
// told, so an operator can tell a slow tool from a slow platform.
type PathStage uint8

// The stages, in the order a call meets them. A stage's time runs from the
// end of the stage before it that the call reached, so a call's stages add
// up to its latency.
const (
	// StageValidate: the live principal, the tool's version and binding,
	// the frozen contract, the arguments against the schema and the batch
	// limit.
	StageValidate PathStage = iota
	// StageApproval: a covering approval looked up (authorized_by), and an
	// approval filed when the policy asks for one.
	StageApproval
	// StagePolicy: the policy facts resolved and the decision.
	StagePolicy
	// StageClaim: the journal's read, rates and deadlines, the traffic
	// admission, the claim of a write, and its completion.
	StageClaim
	// StageHandler: the connection released, the dispatch mark, and the
	// handler's attempts.
	StageHandler
	// StageBoundary: the output checked against its schema, metered usage
	// recorded, the result bounded and labelled.
	StageBoundary
	// StageAudit: the span closed and the audit event appended.
	StageAudit
	// StageCount is the number of stages.
	StageCount
)

var stageNames = [StageCount]string{"validate", "approval", "policy", "claim", "handler", "boundary", "audit"}

// String answers the stage's name, as the metrics label it.
func (s PathStage) String() string {
	if s < StageCount {
		return stageNames[s]
	}
	return "unknown"
}

// Observation is what the Observer is told of one ended call. Labels come
// from registered names where the call reached them: Tool is the
// registered name ("unknown" when no tool resolved) and Version empty
// then; Agent is the caller's agent identity as its credential named it.
type Observation struct {
	Organization, Agent, Tool, Version string
	// Outcome is "ok", a stable error code, approval_required, in_flight
	// or fault.
	Outcome string
	// Took is the call's whole latency.
	Took time.Duration
	// Stages holds the time spent in each stage; Reached marks the stages
	// the call reached (bit 1<<Stage), so an unreached one is not
	// recorded as an instant one.
	Stages  [StageCount]time.Duration
	Reached uint16
	// CostCents is what the call cost, as metered (0 when not metered).
	CostCents int64
	// CallerCut says an attempt ran out of its caller's time (a deadline
	// the caller passed, or its parent call's time left) rather than the
	// tool's own: what the call's end says of the tool, a reader of its
	// health leaves out, as its breaker does.
	CallerCut bool
}

// Observer is told of each call as it ends. ObserveCall must not keep o.
type Observer interface {
	ObserveCall(o *Observation)
}

// lap is mark's half for the Observer: it ends the stage the call is in
// and starts next, counting the time since the last lap (or the call's
// start) to the stage ended. A call refused midway counts its time to the
// stage it was in. It reads the clock once, and not at all when no
// Observer is told, and allocates nothing.
func (c *call) lap(next PathStage) {
	if c.iv.cfg.Observer == nil {
		return
	}
	now := c.iv.now()
	last := c.lapped
	if last.IsZero() {
		last = c.start
	}
	c.obs.Stages[c.in] += now.Sub(last)
	c.obs.Reached |= 1 << c.in
	c.lapped, c.in = now, next
}

// observed tells the Observer of the call's end, with outcome; the time
// since finish began is the audit stage's.
func (c *call) observed(outcome string) {
	iv := c.iv
	if iv.cfg.Observer == nil {
		return
	}
	c.lap(StageAudit)
	o := &c.obs
	o.Organization, o.Agent, o.Outcome = c.inv.OrganizationID, c.inv.AgentID, outcome
	// Only registered names become tool labels: a name a caller made up
	// must not grow the metrics without bound.
	o.Tool, o.Version = "unknown", ""
	if c.tool != nil {
		o.Tool, o.Version = c.tool.Def.Name, c.tool.Def.Version
	}
	o.Took = c.lapped.Sub(c.start)
	o.CostCents = c.audit.CostCents
	iv.cfg.Observer.ObserveCall(o)
}
