package invoke

import (
	"context"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// DefaultMaxHops is the default Config.MaxHops: how deep a chain of tool
// calls calling tools may go below a call from a door. Eight leaves room
// for any honest composition and stops a loop (tool A calling B calling A)
// after a few calls rather than when a node runs out of goroutines.
const DefaultMaxHops = 8

// DefaultDeadlineFloor is the default Config.DeadlineFloor: a call left
// less time than this is refused before anything is claimed. Five
// milliseconds is about what a journal claim and the dispatch mark cost
// on a busy database; a call with less left would be claimed only to be
// released again, or sent with no time to answer.
const DefaultDeadlineFloor = 5 * time.Millisecond

// MaxHops answers the platform's maximum of tool-to-tool hops: what a door
// starts a call at when its caller asked for none (and what caps one that
// asked for more).
func (iv *Invoker) MaxHops() int { return iv.cfg.MaxHops }

// parentKey is the context key of the call a handler runs for.
type parentKey struct{}

// parent is what a call hands the calls its handler makes: its invocation,
// its audit event's ID, and when its own time is up.
type parent struct {
	inv      *toolplane.Invocation
	id       string
	deadline time.Time
}

// withParent answers the handler's context of c: a tool the handler calls
// through the invoker with it (Invoke, InvokeJSON) is a call of c's, made
// for the same caller, within the time c's handler has left (measured on
// the invoker's clock) and with one hop fewer.
func (c *call) withParent(ctx context.Context) context.Context {
	return context.WithValue(ctx, parentKey{}, &parent{inv: c.inv, id: c.audit.ID, deadline: c.iv.now().Add(c.timeout())})
}

// nested answers the invocation of a call made with ctx: when ctx is a
// handler's (see withParent) the call is a tool-to-tool call of the
// handler's own call, and its invocation is derived from that call's,
// whatever inv says of who calls: the same organization, agent, principal,
// credential, person, tenant, run and step, at most the parent's remaining
// time and one hop fewer, its audit event naming the parent. inv may be
// nil; when set, only its idempotency key, approval, step and a tighter
// deadline are taken. A call made without a handler's context keeps inv.
// The context answered carries neither the parent's stream nor its
// parent: the child's handler has its own.
//
// A child of a call run from storage (an asynchronous or approved call,
// which holds no credential, only its key's id) is decided on the grants
// of now for the tool it names (Config.Principals), not on the parent's
// principal, which holds the parent's tool alone.
func (iv *Invoker) nested(ctx context.Context, name string, inv *toolplane.Invocation) (context.Context, *toolplane.Invocation, error) {
	p, ok := ctx.Value(parentKey{}).(*parent)
	if !ok || p == nil {
		if inv == nil {
			return ctx, nil, fmt.Errorf("%w: a call made outside a handler's context names no invocation", ErrFault)
		}
		return ctx, inv, nil
	}
	child := *p.inv
	child.ParentID = p.id
	child.Hops = p.inv.Hops - 1
	child.Deadline = p.deadline
	// The parent's approval and key name the parent's call, not this one.
	child.AuthorizedBy, child.IdempotencyKey = "", ""
	if child.Credential != nil {
		// Computed again for the tool this call names (callerPrincipal).
		child.Principal = toolplane.Principal{ID: child.Principal.ID}
	}
	if inv != nil {
		child.IdempotencyKey, child.AuthorizedBy = inv.IdempotencyKey, inv.AuthorizedBy
		if inv.StepPath != "" {
			child.StepPath = inv.StepPath
		}
		if !inv.Deadline.IsZero() && (child.Deadline.IsZero() || inv.Deadline.Before(child.Deadline)) {
			child.Deadline = inv.Deadline
		}
	}
	ctx = context.WithValue(ctx, parentKey{}, (*parent)(nil))
	ctx = context.WithValue(ctx, streamKey{}, nil)
	if child.Credential == nil && child.CredentialID != "" && iv.cfg.Principals != nil {
		child.Principal = toolplane.Principal{ID: child.Principal.ID, Tools: []string{name}}
		if err := iv.livePrincipal(ctx, &child); err != nil {
			return ctx, nil, err
		}
	}
	return ctx, &child, nil
}

// hops refuses, before anything is read or claimed, a call with no hop
// left (max_hops_exceeded); nil lets it go on. It caps the call's hops at
// the platform's maximum first: a count a caller forged upward is never
// trusted.
func (c *call) hops() *toolplane.Result {
	if c.inv.Hops > c.iv.cfg.MaxHops {
		inv := *c.inv
		inv.Hops = c.iv.cfg.MaxHops
		c.inv = &inv
	}
	if c.inv.Hops < 0 {
		r := toolplane.Fail(toolplane.CodeMaxHopsExceeded, fmt.Sprintf("%s was called with no tool-to-tool hop left (a chain of tools calling tools goes at most %d deep); it was not called and nothing was done. Do not retry it from within the chain; answer with what the chain has.", c.name, c.iv.cfg.MaxHops))
		return &r
	}
	return nil
}

// lateAlready reports whether the caller's deadline leaves the call less
// than the floor, before its tool is known: a call to be accepted now and
// run later is then run now instead, which refuses it (see Admit).
func (c *call) lateAlready() bool {
	d := c.inv.Deadline
	return !d.IsZero() && d.Sub(c.iv.now()) < c.iv.cfg.DeadlineFloor
}

// inTime refuses a call whose time left (the tool's timeout cut to its
// deadline) is below the floor; nil lets it go on. It is asked once the
// journal was read (a write whose answer is stored is answered that,
// whatever the time: a refusal saying nothing was done would be false)
// and again just before the claim, for the time spent deciding.
func (c *call) inTime() *toolplane.Result {
	if left := c.timeout(); left < c.iv.cfg.DeadlineFloor {
		return c.deadlineExceeded(left)
	}
	return nil
}

// deadlineExceeded answers a call refused because left is too little time.
func (c *call) deadlineExceeded(left time.Duration) *toolplane.Result {
	msg := fmt.Sprintf("the time left for this call (%v) is too short to make it; %s was not called and nothing was done. Ask again with a longer deadline, or answer without it.", max(left, 0).Round(time.Millisecond), c.name)
	if c.inv.ParentID != "" {
		msg = fmt.Sprintf("the calling tool's remaining time (%v) is too short to make this call; %s was not called and nothing was done.", max(left, 0).Round(time.Millisecond), c.name)
	}
	r := toolplane.Fail(toolplane.CodeDeadlineExceeded, msg)
	return &r
}

// lateForDispatch answers a call whose time ran out after its claim was
// taken and before it was sent (the claim is released): the caller's
// deadline, not the tool, is what was exceeded.
func (c *call) lateForDispatch() toolplane.Result {
	return toolplane.Fail(toolplane.CodeDeadlineExceeded, "the time left for this call ran out before it was sent; nothing was done")
}
