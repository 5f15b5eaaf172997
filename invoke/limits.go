package invoke

import (
	"context"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/ratelimit"
)

// CallLimits limits the fresh calls callers make through a door, per
// agent and per tool (ratelimit.Calls).
type CallLimits interface {
	// AdmitCall counts one call of tool made for inv at now, and answers
	// nil, or the limit that refused it.
	AdmitCall(ctx context.Context, inv *toolplane.Invocation, tool *toolplane.Definition, now time.Time) *ratelimit.CallRefusal
}

// limit answers the rate_limited refusal of a fresh call from a door past
// its agent's or its tool's rate, or nil. A call run later from storage
// (no credential: approved, asynchronous) was counted when it was made.
func (c *call) limit(ctx context.Context) *toolplane.Result {
	lim := c.iv.cfg.CallLimits
	if lim == nil || c.inv.Credential == nil {
		return nil
	}
	ref := lim.AdmitCall(ctx, c.inv, &c.tool.Def, c.iv.now())
	if ref == nil {
		return nil
	}
	// The wait the model is told is the one its retry hint carries.
	r := toolplane.FailAfter(toolplane.CodeRateLimited, "", ref.Wait)
	secs := r.Error.RetryAfter
	switch ref.Scope {
	case ratelimit.ScopeAgent:
		r.Error.Message = fmt.Sprintf("you have made your %d calls a minute; the call was not sent. Wait %d seconds before calling again.", ref.Limit, secs)
	default:
		r.Error.Message = fmt.Sprintf("%s takes at most %d calls a minute in this organization; the call was not sent. Wait %d seconds before calling it again.", c.tool.Model, ref.Limit, secs)
	}
	return &r
}
