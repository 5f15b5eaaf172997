// Package journal is the idempotency journal: the claim a write or send
// takes on its key before its handler runs, and the answer stored for it.
// It is written over toolplane.ClaimStore's compare-and-swap primitives, so
// every backend gets the same semantics from the same code.
//
// A call reads the journal before its policy decision and claims after it.
// The two steps answer different outcomes: only Read answers Absent, and
// only Claim answers Claimed. A read can go stale while a person
// deliberates, so the claim decides again.
//
// How a claim ends:
//
//	success, or a stable failure       complete: identical calls answer it
//	retryable failure, or a raise      release: nothing happened
//	timeout after dispatch             hold as uncertain (or, for a tool safe
//	                                   to replay, expire the lease so the next
//	                                   call runs it again)
//	refusal before dispatch            release
//
// A claim whose worker died is found by its expired lease, or sooner by
// its node's missed heartbeats (WatchNodes). It runs again
// only when the call provably never reached its handler (not dispatched),
// or when the tool is safe to replay and has attempts left; otherwise it
// becomes an uncertain action, never a silent duplicate.
package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/toolplane/toolplane"
)

// Outcome is what Read or Claim found.
type Outcome int

// The outcomes. Read answers Absent but never Claimed; Claim the reverse.
const (
	Absent Outcome = iota
	Claimed
	Completed
	Processing
	Conflict
	Uncertain
)

func (o Outcome) String() string {
	return [...]string{"absent", "claimed", "completed", "processing", "conflict", "uncertain"}[o]
}

// ErrLeaseLost: the claim changed under its holder (another worker took it
// over after the lease expired). The holder must not act on it.
var ErrLeaseLost = errors.New("claim lease lost")

// maxRaces bounds compare-and-swap retries; each retry means another worker
// changed the row, so a handful always suffices in practice.
const maxRaces = 8

// Journal runs the claim protocol over a store.
type Journal struct {
	store toolplane.ClaimStore
	now   func() time.Time
	// nodes and deadAfter, when set, judge a claim's holder by its node's
	// heartbeat as well as by its lease (see WatchNodes).
	nodes     toolplane.NodeStore
	deadAfter time.Duration
}

// New answers a journal over store; now is the clock (time.Now if nil).
func New(store toolplane.ClaimStore, now func() time.Time) *Journal {
	if now == nil {
		now = time.Now
	}
	return &Journal{store: store, now: now}
}

// WatchNodes makes the journal judge a processing claim's holder by its
// node's heartbeat: a claim whose node last heartbeated more than deadAfter
// ago is decided at once (released, run again or uncertain, as for an
// expired lease) instead of at the end of its lease. Call it before the
// journal is used.
func (j *Journal) WatchNodes(nodes toolplane.NodeStore, deadAfter time.Duration) {
	j.nodes, j.deadAfter = nodes, deadAfter
}

// Holder is what is known of the holder of a processing claim.
type Holder struct {
	// SilentSince, when not zero, is the last heartbeat of the holder's
	// node, which has since missed its heartbeats: presumed dead, not yet
	// known dead.
	SilentSince time.Time
	// DecidedBy is when the claim will be decided at the latest: when its
	// silent node counts as dead, or else when its lease ends.
	DecidedBy time.Time
}

// holder answers the node of a processing claim: whether it is known
// dead, and what a caller waiting on it can be told. self is the node
// instance asking: a claim it holds itself is never judged dead by it,
// since its own heartbeat can lag (a long pause, a slow disk) while its
// handler runs; its lease alone decides it.
func (j *Journal) holder(ctx context.Context, c *toolplane.Claim, self string, now time.Time) (dead bool, h Holder) {
	h.DecidedBy = c.LeaseUntil
	if j.nodes == nil || c.Node == "" || c.Node == self || c.Status != toolplane.ClaimProcessing {
		return false, h
	}
	n, err := j.nodes.GetNode(ctx, c.Node)
	if err != nil {
		// Unknown or unreadable: the lease alone decides, as before
		// nodes heartbeated.
		return false, h
	}
	if n.Dead(now, j.deadAfter) {
		return true, h
	}
	deadAt := n.HeartbeatAt.Add(j.deadAfter)
	// A node heartbeats several times within deadAfter; one silent for
	// half of it has missed more than one beat.
	if now.Sub(n.HeartbeatAt) > j.deadAfter/2 {
		h.SilentSince = n.HeartbeatAt
		if deadAt.Before(h.DecidedBy) {
			h.DecidedBy = deadAt
		}
	}
	return false, h
}

// Holder answers what is known of the holder of c, a processing claim
// another caller found: for the answer that caller is given.
func (j *Journal) Holder(ctx context.Context, c *toolplane.Claim) Holder {
	_, h := j.holder(ctx, c, "", j.now())
	return h
}

// Request identifies a call's claim and what a new claim records.
type Request struct {
	OrganizationID string
	Tool           string
	Key            string
	RequestHash    string
	// MaxAttempts is how many handler starts the tool allows: its replay
	// max attempts, or 1.
	MaxAttempts int
	// Owner and Lease: who takes the claim, and for how long. Node names
	// the node instance the owner runs on.
	Owner      string
	Lease      time.Duration
	Node       string
	RunID      string
	StepPath   string
	Arguments  []byte
	Invocation []byte
}

// verdict is what an existing row means for this request.
type verdict int

const (
	vCompleted verdict = iota
	vUncertain
	vProcessing
	vConflict
	vReclaim     // lease expired and safe to run again
	vToUncertain // lease expired after dispatch: may have acted
)

// judge decides what c means for req; dead says the holder's node is
// known dead, which counts as an expired lease.
func judge(c *toolplane.Claim, req *Request, now time.Time, dead bool) verdict {
	if c.RequestHash != req.RequestHash {
		return vConflict
	}
	switch c.Status {
	case toolplane.ClaimCompleted:
		return vCompleted
	case toolplane.ClaimUncertain:
		return vUncertain
	}
	if now.Before(c.LeaseUntil) && !dead {
		return vProcessing
	}
	max := req.MaxAttempts
	if max < 1 {
		max = 1
	}
	if !c.Dispatched || c.Attempts < max {
		return vReclaim
	}
	return vToUncertain
}

// Read answers what the journal holds for the call. It changes nothing,
// except that a claim whose worker was lost after dispatch (and that the
// tool may not replay) is recorded as uncertain, the state it is already
// in. A claim whose worker died before dispatch reads as Absent.
func (j *Journal) Read(ctx context.Context, req Request) (Outcome, *toolplane.Claim, error) {
	c, err := j.store.GetClaim(ctx, req.OrganizationID, req.Tool, req.Key)
	if errors.Is(err, toolplane.ErrNotFound) {
		return Absent, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("read claim %s: %w", req.Key, err)
	}
	now := j.now()
	dead, _ := j.holder(ctx, c, req.Node, now)
	switch judge(c, &req, now, dead) {
	case vCompleted:
		return Completed, c, nil
	case vUncertain:
		return Uncertain, c, nil
	case vToUncertain:
		// The state is settled already (a lost worker after dispatch);
		// recording it now, with its audit event, puts it on the
		// uncertain list at once rather than at the next claim or sweep.
		// Losing the race to another writer changes nothing: the row says
		// at least as much, and whoever wrote it wrote its event.
		held, err := j.loseLease(ctx, c, toolplane.SourceTakeover)
		if err == nil {
			return Uncertain, held, nil
		}
		if !errors.Is(err, ErrLeaseLost) {
			return 0, nil, fmt.Errorf("hold %s: %w", req.Key, err)
		}
		return Uncertain, c, nil
	case vProcessing:
		return Processing, c, nil
	case vConflict:
		return Conflict, c, nil
	}
	return Absent, c, nil
}

// Claim takes the claim for the call. Claimed answers the row this worker
// now holds (Attempts counts earlier starts); the other outcomes answer the
// row found.
func (j *Journal) Claim(ctx context.Context, req Request) (Outcome, *toolplane.Claim, error) {
	for range maxRaces {
		now := j.now()
		c := &toolplane.Claim{
			// A claim's versions never repeat across its lifetimes: a row
			// released (or swept) and claimed again starts at a fresh random
			// version, so a stalled holder of the old row can never match
			// the new one and act on it.
			Version:        rand.Int64N(1 << 62),
			OrganizationID: req.OrganizationID, Tool: req.Tool, Key: req.Key,
			RequestHash: req.RequestHash, Status: toolplane.ClaimProcessing,
			Owner: req.Owner, LeaseUntil: now.Add(req.Lease), Node: req.Node,
			RunID: req.RunID, StepPath: req.StepPath, Arguments: req.Arguments,
			Invocation: req.Invocation, CreatedAt: now, UpdatedAt: now,
		}
		ok, err := j.store.InsertClaim(ctx, c)
		if err != nil {
			return 0, nil, fmt.Errorf("claim %s: %w", req.Key, err)
		}
		if ok {
			return Claimed, c, nil
		}
		old, err := j.store.GetClaim(ctx, req.OrganizationID, req.Tool, req.Key)
		if errors.Is(err, toolplane.ErrNotFound) {
			continue // released between the insert and the read
		}
		if err != nil {
			return 0, nil, fmt.Errorf("claim %s: %w", req.Key, err)
		}
		dead, _ := j.holder(ctx, old, req.Node, now)
		switch judge(old, &req, now, dead) {
		case vCompleted:
			return Completed, old, nil
		case vUncertain:
			return Uncertain, old, nil
		case vProcessing:
			return Processing, old, nil
		case vConflict:
			return Conflict, old, nil
		case vReclaim:
			next := *old
			next.Owner, next.LeaseUntil, next.Dispatched, next.UpdatedAt = req.Owner, now.Add(req.Lease), false, now
			next.Node = req.Node
			if req.Invocation != nil { // the attempt runs under its own caller's invocation
				next.Invocation = req.Invocation
			}
			ok, err := j.store.UpdateClaim(ctx, &next)
			if err != nil {
				return 0, nil, fmt.Errorf("reclaim %s: %w", req.Key, err)
			}
			if ok {
				return Claimed, &next, nil
			}
		case vToUncertain:
			held, err := j.loseLease(ctx, old, toolplane.SourceTakeover)
			if err == nil {
				return Uncertain, held, nil
			}
			if !errors.Is(err, ErrLeaseLost) {
				return 0, nil, fmt.Errorf("hold %s: %w", req.Key, err)
			}
		}
	}
	return 0, nil, fmt.Errorf("claim %s: %d concurrent changes in a row", req.Key, maxRaces)
}

// LostReason is why a claim whose worker was lost after dispatch is
// uncertain.
const LostReason = "the worker running the call was lost after the call reached its handler"

// loseLease records a claim whose worker was lost after dispatch as an
// uncertain action, with its audit event (from source) in the same
// transaction; ErrLeaseLost when the row changed meanwhile.
func (j *Journal) loseLease(ctx context.Context, c *toolplane.Claim, source toolplane.Source) (*toolplane.Claim, error) {
	return LoseLease(ctx, j.store, c, source, j.now())
}

// LoseLease records c, a processing claim whose worker was lost after
// dispatch, as an uncertain action at now, and its audit event (reached by
// source) in the same transaction; ErrLeaseLost when the row changed
// meanwhile, in which case no event is stored either. It is the one way a
// lost worker's claim becomes uncertain, whoever finds it: a call on the
// same key, or the lease sweep.
func LoseLease(ctx context.Context, store toolplane.ClaimStore, c *toolplane.Claim, source toolplane.Source, now time.Time) (*toolplane.Claim, error) {
	next := *c
	// The owner stays: it names the worker that was lost, which is what a
	// person reconciling the action asks first.
	next.Status, next.Reason, next.UpdatedAt = toolplane.ClaimUncertain, LostReason, now
	ev := ClaimEvent(c, string(toolplane.CodeUncertain), source, LostReason, now)
	ok, err := store.UpdateClaimAudited(ctx, &next, ev)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrLeaseLost
	}
	return &next, nil
}

// ClaimEvent answers the audit event of a state c reached at now without
// a call to answer (a sweep, a takeover): what the claim knows of its call
// (organization, tool, key, run, step, arguments hash, attempts, and,
// from its stored invocation, agent, user, principal, tenant and the key
// the call was made with), the outcome, why, and who reached it. It never
// carries the arguments themselves.
func ClaimEvent(c *toolplane.Claim, outcome string, source toolplane.Source, reason string, now time.Time) *toolplane.AuditEvent {
	ev := &toolplane.AuditEvent{
		ID: toolplane.NewID("aud_"), OrganizationID: c.OrganizationID, Tool: c.Tool,
		Source: source, Outcome: outcome, Reason: reason, CreatedAt: now,
	}
	fromClaim(ev, c)
	return ev
}

// fromClaim fills what ev does not say of its call from the claim on it.
func fromClaim(ev *toolplane.AuditEvent, c *toolplane.Claim) {
	if ev.RunID == "" {
		ev.RunID = c.RunID
	}
	if ev.Key == "" {
		ev.Key = c.Key
	}
	if ev.ArgumentsHash == "" {
		ev.ArgumentsHash = c.RequestHash
	}
	if ev.StepPath == "" {
		ev.StepPath = c.StepPath
	}
	if ev.Attempts == 0 {
		// The handler runs the claim counted, across takeovers.
		ev.Attempts = c.Attempts
	}
	if len(c.Invocation) == 0 {
		return
	}
	var inv toolplane.Invocation
	if json.Unmarshal(c.Invocation, &inv) != nil {
		return // the event still says what the claim itself knows
	}
	if ev.AgentID == "" {
		ev.AgentID = inv.AgentID
	}
	if ev.UserID == "" {
		ev.UserID = inv.UserID
	}
	if ev.PrincipalID == "" {
		ev.PrincipalID = inv.Principal.ID
	}
	if ev.TenantID == "" {
		ev.TenantID = inv.TenantID
	}
	if ev.KeyID == "" {
		ev.KeyID = inv.CredentialID
	}
}

// update writes a change to a claim this worker holds, with its audit
// event in the same transaction when ev is not nil.
func (j *Journal) update(ctx context.Context, c *toolplane.Claim, what string, ev *toolplane.AuditEvent, change func(*toolplane.Claim)) error {
	next := *c
	change(&next)
	next.UpdatedAt = j.now()
	var ok bool
	var err error
	if ev != nil {
		ok, err = j.store.UpdateClaimAudited(ctx, &next, ev)
	} else {
		ok, err = j.store.UpdateClaim(ctx, &next)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, c.Key, err)
	}
	if !ok {
		return fmt.Errorf("%s %s: %w", what, c.Key, ErrLeaseLost)
	}
	*c = next
	return nil
}

// Dispatch records, durably and before the handler starts, that the call is
// about to reach its handler, and counts the attempt. A store that writes
// the mark as a change of its own fields (toolplane.ClaimDispatcher) is
// asked to: the same one conditional write, without the row's arguments
// and invocation sent and written again.
func (j *Journal) Dispatch(ctx context.Context, c *toolplane.Claim) error {
	d, ok := j.store.(toolplane.ClaimDispatcher)
	if !ok {
		return j.update(ctx, c, "dispatch", nil, func(n *toolplane.Claim) {
			n.Dispatched = true
			n.Attempts++
		})
	}
	next := *c
	next.Dispatched, next.UpdatedAt = true, j.now()
	next.Attempts++
	ok, err := d.DispatchClaim(ctx, &next)
	if err != nil {
		return fmt.Errorf("dispatch %s: %w", c.Key, err)
	}
	if !ok {
		return fmt.Errorf("dispatch %s: %w", c.Key, ErrLeaseLost)
	}
	*c = next
	return nil
}

// Complete stores the call's answer; every identical call answers it. ev,
// when not nil, is the call's audit event, stored in the same transaction.
//
// The completed claim keeps no arguments and no invocation: they are kept
// for a worker to run the call again after its own was lost, for the event
// of a state reached without the caller (a takeover, a sweep), and for a
// person reconciling an uncertain action, and a completed claim is none of
// these; it answers identical calls with its result, and its audit event
// holds what the trail says of the call. Dropping them is most of the
// row's size.
func (j *Journal) Complete(ctx context.Context, c *toolplane.Claim, result []byte, ev *toolplane.AuditEvent) error {
	cc, ok := j.store.(toolplane.ClaimCompleter)
	if !ok || ev == nil {
		return j.update(ctx, c, "complete", ev, func(n *toolplane.Claim) {
			n.Status, n.Result, n.Owner = toolplane.ClaimCompleted, result, ""
			n.Arguments, n.Invocation = nil, nil
		})
	}
	// The same change, written as the fields it changes: the key, run,
	// step and node are not sent and bound again (ClaimCompleter).
	next := *c
	next.Status, next.Result, next.Owner = toolplane.ClaimCompleted, result, ""
	next.Arguments, next.Invocation = nil, nil
	next.UpdatedAt = j.now()
	ok, err := cc.CompleteClaimAudited(ctx, &next, ev)
	if err != nil {
		return fmt.Errorf("complete %s: %w", c.Key, err)
	}
	if !ok {
		return fmt.Errorf("complete %s: %w", c.Key, ErrLeaseLost)
	}
	*c = next
	return nil
}

// Hold makes the claim an uncertain action: the effect may have happened.
// ev, when not nil, is the call's audit event, stored in the same
// transaction.
func (j *Journal) Hold(ctx context.Context, c *toolplane.Claim, reason string, ev *toolplane.AuditEvent) error {
	return j.update(ctx, c, "hold", ev, func(n *toolplane.Claim) {
		n.Status, n.Reason = toolplane.ClaimUncertain, reason
	})
}

// Expire ends this worker's lease at once, keeping the attempt count, so
// the next identical call of a tool safe to replay runs it again (or, out
// of attempts, finds it uncertain). ev, when not nil, is the call's audit
// event, stored in the same transaction.
func (j *Journal) Expire(ctx context.Context, c *toolplane.Claim, ev *toolplane.AuditEvent) error {
	return j.update(ctx, c, "expire", ev, func(n *toolplane.Claim) {
		n.LeaseUntil = j.now().Add(-time.Microsecond)
	})
}

// Release removes the claim: nothing happened, and the next identical call
// runs afresh.
func (j *Journal) Release(ctx context.Context, c *toolplane.Claim) error {
	ok, err := j.store.DeleteClaim(ctx, c.OrganizationID, c.Tool, c.Key, c.Version)
	if err != nil {
		return fmt.Errorf("release %s: %w", c.Key, err)
	}
	if !ok {
		return fmt.Errorf("release %s: %w", c.Key, ErrLeaseLost)
	}
	return nil
}

// ErrNotUncertain: a reconciliation named a claim that is not uncertain
// (settled already, or never uncertain). It is a toolplane.ErrConflict.
var ErrNotUncertain = toolplane.Refine(toolplane.ErrConflict, "claim is not an uncertain action")

// Settle completes an uncertain claim with result, recording who settled
// it, and ev, its audit event, in the same transaction (ev's fields the
// caller leaves empty are filled from the claim). It refuses a claim that
// is not uncertain.
func (j *Journal) Settle(ctx context.Context, org, tool, key string, result []byte, by, note string, ev *toolplane.AuditEvent) (*toolplane.Claim, error) {
	for range maxRaces {
		c, err := j.store.GetClaim(ctx, org, tool, key)
		if err != nil {
			return nil, fmt.Errorf("settle %s: %w", key, err)
		}
		if c.Status != toolplane.ClaimUncertain {
			return nil, fmt.Errorf("settle %s: %w (it is %s)", key, ErrNotUncertain, c.Status)
		}
		next := *c
		next.Status, next.Result, next.ReconciledBy, next.Note, next.UpdatedAt = toolplane.ClaimCompleted, result, by, note, j.now()
		e := *ev
		fromClaim(&e, c)
		ok, err := j.store.UpdateClaimAudited(ctx, &next, &e)
		if err != nil {
			return nil, fmt.Errorf("settle %s: %w", key, err)
		}
		if ok {
			return &next, nil
		}
	}
	// Others kept changing the claim: a conflict the caller may retry,
	// told apart from a store that does not answer.
	return nil, fmt.Errorf("settle %s: %w: %d concurrent changes in a row", key, toolplane.ErrConflict, maxRaces)
}

// Drop removes an uncertain claim whose effect is known not to have
// happened (a stopped handler that settled late with a failure that made
// no effect): like a release, the next identical call runs afresh. ev is
// its audit event, stored in the same transaction (filled from the claim
// as in Settle).
func (j *Journal) Drop(ctx context.Context, org, tool, key string, ev *toolplane.AuditEvent) error {
	c, err := j.store.GetClaim(ctx, org, tool, key)
	if err != nil {
		return fmt.Errorf("drop %s: %w", key, err)
	}
	if c.Status != toolplane.ClaimUncertain {
		return fmt.Errorf("drop %s: %w (it is %s)", key, ErrNotUncertain, c.Status)
	}
	e := *ev
	fromClaim(&e, c)
	ok, err := j.store.DeleteClaimAudited(ctx, org, tool, key, c.Version, &e)
	if err != nil {
		return fmt.Errorf("drop %s: %w", key, err)
	}
	if !ok {
		return fmt.Errorf("drop %s: %w", key, ErrLeaseLost)
	}
	return nil
}

// Get answers the claim on a key.
func (j *Journal) Get(ctx context.Context, org, tool, key string) (*toolplane.Claim, error) {
	return j.store.GetClaim(ctx, org, tool, key)
}

// Uncertain lists the organization's uncertain actions, oldest first.
func (j *Journal) Uncertain(ctx context.Context, org, after string, limit int) ([]toolplane.Claim, string, error) {
	return j.store.ListClaims(ctx, org, toolplane.ClaimUncertain, after, limit)
}

// CountUncertain answers how many of org's claims are uncertain, counting
// at most limit (past it, limit): by the store's bounded count when it
// keeps one (toolplane.OrgClaimCounter), else by a page of at most limit.
func (j *Journal) CountUncertain(ctx context.Context, org string, limit int) (int, error) {
	if cc, ok := j.store.(toolplane.OrgClaimCounter); ok {
		return cc.CountOrgClaims(ctx, org, toolplane.ClaimUncertain, limit)
	}
	cs, _, err := j.store.ListClaims(ctx, org, toolplane.ClaimUncertain, "", limit)
	return len(cs), err
}
