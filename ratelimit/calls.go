package ratelimit

import (
	"context"
	"net/url"
	"time"

	"github.com/toolplane/toolplane"
)

// The limits of Calls, as a CallRefusal names them.
const (
	// ScopeAgent is an agent identity's calls a minute within its
	// organization.
	ScopeAgent = "agent"
	// ScopeTool is a tool's calls a minute within an organization
	// (Execution.RatePerMinute).
	ScopeTool = "tool"
)

// Calls limits the fresh calls callers make through a door, per agent
// identity and per tool, on a Shared: the invoker asks it once a call's
// tool is resolved and its arguments validated, before anything is
// recorded (invoke.Config.CallLimits). A call run later from storage (an
// approved call, an asynchronous one) was counted when it was made.
type Calls struct {
	Shared *Shared
	// AgentPerMinute caps each agent identity's calls a minute within its
	// organization; 0 leaves them uncapped.
	AgentPerMinute int
}

// CallRefusal says which limit refused a call, and how long to wait.
type CallRefusal struct {
	Scope string
	Limit int
	Wait  time.Duration
}

// AdmitCall counts one call of tool made for inv at now, and answers nil,
// or the limit that refused it. The agent's limit is asked first: a call
// it refuses spends none of the tool's budget, but a call the tool's limit
// refuses has spent one of the agent's (it was a call the agent made).
func (c *Calls) AdmitCall(ctx context.Context, inv *toolplane.Invocation, tool *toolplane.Definition, now time.Time) *CallRefusal {
	if c == nil || c.Shared == nil {
		return nil
	}
	org := url.PathEscape(inv.OrganizationID)
	if c.AgentPerMinute > 0 && inv.AgentID != "" {
		q := Quota{Limit: c.AgentPerMinute, Window: time.Minute}
		if d := c.Shared.Take(ctx, ScopeAgent+":"+org+":"+url.PathEscape(inv.AgentID), q, now); !d.Allowed {
			return &CallRefusal{Scope: ScopeAgent, Limit: q.Limit, Wait: d.Wait(now)}
		}
	}
	if tool.Execution != nil && tool.Execution.RatePerMinute > 0 {
		q := Quota{Limit: tool.Execution.RatePerMinute, Window: time.Minute}
		if d := c.Shared.Take(ctx, ScopeTool+":"+org+":"+url.PathEscape(tool.Name), q, now); !d.Allowed {
			return &CallRefusal{Scope: ScopeTool, Limit: q.Limit, Wait: d.Wait(now)}
		}
	}
	return nil
}
