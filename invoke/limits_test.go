package invoke_test

import (
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/ratelimit"
)

// fromDoor is inv as a door makes it: carrying the credential it admitted.
func fromDoor(agent string, tools ...string) *toolplane.Invocation {
	in := inv(tools...)
	in.AgentID, in.Principal.ID = agent, agent
	in.Credential = &toolplane.Credential{ID: "tpk_" + agent, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: agent, Tools: tools}
	return in
}

// Per agent and per tool, a fresh call from a door past its rate is
// answered rate_limited with its wait, and never reaches the handler; a
// call run from storage (no credential) is not counted again.
func TestCallLimitsPerAgentAndPerTool(t *testing.T) {
	t.Parallel()
	limited := def("crm.limited", toolplane.EffectRead, func(d *toolplane.Definition) {
		d.Execution = &toolplane.Execution{RatePerMinute: 2}
	})
	free := def("crm.free", toolplane.EffectRead)
	e := newEnvWith(t, newStore(t), func(c *invoke.Config) {
		c.CallLimits = &ratelimit.Calls{Shared: ratelimit.Local(), AgentPerMinute: 3}
	}, tool{def: limited, fn: ok(map[string]any{})}, tool{def: free, fn: ok(map[string]any{})})
	ctx := t.Context()
	call := func(name, agent string) toolplane.Result {
		t.Helper()
		r, err := e.iv.Invoke(ctx, name, args(), fromDoor(agent, "crm.limited", "crm.free"))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// The tool's rate: two a minute in the organization, whichever agent.
	mustOK(t, call("crm.limited", "agent-a"), nil)
	mustOK(t, call("crm.limited", "agent-b"), nil)
	r := call("crm.limited", "agent-c")
	if r.OK || r.Error.Code != toolplane.CodeRateLimited || r.Error.RetryAfter < 1 || r.Error.RetryAfter > 30 {
		t.Fatalf("third call of a tool of 2 a minute: %+v", r.Error)
	}
	if n := e.count("crm.limited"); n != 2 {
		t.Fatalf("the handler ran %d times, want 2", n)
	}
	// The agent's rate: three a minute, whichever tool (agent-a has made one).
	mustOK(t, call("crm.free", "agent-a"), nil)
	mustOK(t, call("crm.free", "agent-a"), nil)
	r = call("crm.free", "agent-a")
	if r.OK || r.Error.Code != toolplane.CodeRateLimited || r.Error.RetryAfter < 1 {
		t.Fatalf("fourth call of an agent of 3 a minute: %+v", r.Error)
	}
	mustOK(t, call("crm.free", "agent-b"), nil) // another agent has its own
	// A call from storage carries no credential: it was counted when made.
	stored := inv("crm.limited")
	r, err := e.iv.Invoke(ctx, "crm.limited", args(), stored)
	mustOK(t, r, err)
	// A minute later, both budgets are back.
	e.clock.Advance(time.Minute)
	mustOK(t, call("crm.limited", "agent-a"), nil)
}

// A write repeated after it was answered (a client retrying after a lost
// answer) is answered from the journal and spends no rate: past its
// tool's rate, the repeat still gets the stored result, and only a new
// call is refused.
func TestCallLimitsSpareARepeatedWrite(t *testing.T) {
	t.Parallel()
	w := def("crm.update", toolplane.EffectWrite, func(d *toolplane.Definition) {
		d.Execution = &toolplane.Execution{RatePerMinute: 1}
	})
	e := newEnvWith(t, newStore(t), func(c *invoke.Config) {
		c.CallLimits = &ratelimit.Calls{Shared: ratelimit.Local()}
	}, tool{def: w, fn: ok(map[string]any{"done": true})})
	call := func(to string) toolplane.Result {
		t.Helper()
		in := fromDoor("agent-a", "crm.update")
		r, err := e.iv.Invoke(t.Context(), "crm.update", args("to", to), in)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	mustOK(t, call("p1"), nil)
	if r := call("p1"); !r.OK || !r.Meta.Replayed {
		t.Fatalf("the repeat past the rate answered %+v, want the stored result replayed", r.Error)
	}
	if r := call("p2"); r.OK || r.Error.Code != toolplane.CodeRateLimited {
		t.Fatalf("a new write past the rate answered %+v, want rate_limited", r)
	}
	if n := e.count("crm.update"); n != 1 {
		t.Fatalf("the handler ran %d times, want 1", n)
	}
}

// An asynchronous call is counted when it is accepted: past its rate,
// Admit answers it refused, for the door to run it now and answer the
// refusal with its wait.
func TestCallLimitsCountAnAcceptedCall(t *testing.T) {
	t.Parallel()
	limited := def("crm.limited", toolplane.EffectRead, func(d *toolplane.Definition) {
		d.Execution = &toolplane.Execution{RatePerMinute: 1}
	})
	e := newEnvWith(t, newStore(t), func(c *invoke.Config) {
		c.CallLimits = &ratelimit.Calls{Shared: ratelimit.Local()}
	}, tool{def: limited, fn: ok(map[string]any{})})
	ctx := t.Context()
	if a, refused, err := e.iv.Admit(ctx, "crm.limited", []byte(`{}`), fromDoor("agent-a", "crm.limited")); err != nil || refused || a == nil {
		t.Fatalf("the first acceptance: %v, %v, %v", a, refused, err)
	}
	if _, refused, err := e.iv.Admit(ctx, "crm.limited", []byte(`{}`), fromDoor("agent-a", "crm.limited")); err != nil || !refused {
		t.Fatalf("the second acceptance in the minute: refused %v, %v; want refused", refused, err)
	}
	r, err := e.iv.InvokeJSON(ctx, "crm.limited", []byte(`{}`), fromDoor("agent-a", "crm.limited"))
	code(t, r, err, toolplane.CodeRateLimited)
}
