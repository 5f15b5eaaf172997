package invoke_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/invoke"
)

// session is the invocation an MCP door makes for a session the client did
// not name as its run.
func session(n int, tools ...string) *toolplane.Invocation {
	in := inv(tools...)
	in.RunID, in.SessionRun = fmt.Sprintf("session-%d", n), true
	return in
}

// A client that opens a session per call (the Inspector CLI, say) retries
// a gated call eight times: one approval is filed, every retry is told it
// still waits for that one, and once approved the call runs once,
// whichever session asks and though the approval's own execution runs too.
func TestEightSessionsFileOneApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: gated("email.send"), fn: ok(map[string]any{"id": "m"})})
	ctx := context.Background()
	var first *invoke.ApprovalRequired
	for i := range 8 {
		ar := must(t).Approval(e.iv.Invoke(ctx, "email.send", args("to", "jo"), session(i, "email.send")))
		if first == nil {
			first = ar
			if ar.Existing {
				t.Fatal("the first call was told an approval existed")
			}
			continue
		}
		if ar.ID != first.ID || !ar.Existing {
			t.Fatalf("session %d: approval %s (existing %v), want %s, existing", i, ar.ID, ar.Existing, first.ID)
		}
	}
	pending, _, err := e.store.ListApprovals(ctx, "org-1", toolplane.ApprovalPending, "", 100)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending approvals = %d (%v), want 1", len(pending), err)
	}
	e.resolve(first.ID, true)
	for i := 8; i < 11; i++ {
		r := must(t).OK(e.iv.Invoke(ctx, "email.send", args("to", "jo"), session(i, "email.send")))
		if r.Meta.Replayed != (i > 8) {
			t.Errorf("session %d after the approval: replayed = %v", i, r.Meta.Replayed)
		}
	}
	r := must(t).OK(e.iv.ExecuteApproved(ctx, "org-1", first.ID))
	if !r.Meta.Replayed || e.count("email.send") != 1 {
		t.Fatalf("effects = %d (the approval's execution replayed: %v), want 1", e.count("email.send"), r.Meta.Replayed)
	}

	// What is offered is only the same agent's same call: other arguments,
	// another agent, a run the caller named, another tenant, and a call past
	// the approval's expiry each ask for their own.
	otherAgent := session(20, "email.send")
	otherAgent.AgentID, otherAgent.Principal.ID = "agent-2", "agent-2"
	named := inv("email.send")
	named.RunID = "run-named"
	otherTenant := session(23, "email.send")
	otherTenant.TenantID = "tenant-b"
	for _, c := range []struct {
		name string
		args map[string]any
		in   *toolplane.Invocation
	}{
		{"other arguments", args("to", "sam"), session(21, "email.send")},
		{"another agent", args("to", "jo"), otherAgent},
		{"a named run", args("to", "jo"), named},
		{"another tenant", args("to", "jo"), otherTenant},
	} {
		if ar := must(t).Approval(e.iv.Invoke(ctx, "email.send", c.args, c.in)); ar.ID == first.ID || ar.Existing {
			t.Errorf("%s was offered approval %s", c.name, ar.ID)
		}
	}
	e.clock.Advance(2 * time.Hour) // past the approval's hour
	if ar := must(t).Approval(e.iv.Invoke(ctx, "email.send", args("to", "jo"), session(22, "email.send"))); ar.ID == first.ID || ar.Existing {
		t.Errorf("a call past the approval's expiry was offered it")
	}
	if e.count("email.send") != 1 {
		t.Fatalf("effects = %d, want 1", e.count("email.send"))
	}
}

// authorized_by naming another session's approval of the same call runs
// it once; naming one that does not authorize the call says why, and the
// call asks for its own approval.
func TestAuthorizedByAcrossSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tools := []tool{{def: gated("email.send"), fn: ok(map[string]any{"id": "m"})}, {def: gated("email.forward"), fn: ok(map[string]any{"id": "f"})}}

	t.Run("approved in another session runs once", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, newStore(t), tools...)
		a := must(t).Approval(e.iv.Invoke(ctx, "email.send", args("to", "jo"), session(1, "email.send")))
		e.resolve(a.ID, true)
		for i := 2; i < 5; i++ {
			// A named run too: the caller named the approval.
			in := inv("email.send")
			in.RunID, in.AuthorizedBy = fmt.Sprintf("run-%d", i), a.ID
			must(t).OK(e.iv.Invoke(ctx, "email.send", args("to", "jo"), in))
		}
		if e.count("email.send") != 1 {
			t.Fatalf("effects = %d, want 1", e.count("email.send"))
		}
	})

	tests := []struct {
		name string
		// setup files the approval to name and answers its id.
		setup func(e *env) string
		call  func() (string, map[string]any, *toolplane.Invocation)
		why   string
	}{
		{"unknown", func(*env) string { return "apr_nope" },
			func() (string, map[string]any, *toolplane.Invocation) {
				return "email.send", args("to", "jo"), session(2, "email.send")
			}, "no approval apr_nope exists"},
		{"another agent's", approved(args("to", "jo"), "email.send"),
			func() (string, map[string]any, *toolplane.Invocation) {
				in := session(2, "email.send")
				in.AgentID, in.Principal.ID = "agent-2", "agent-2"
				return "email.send", args("to", "jo"), in
			}, "another agent's call"},
		{"on behalf of another person", approved(args("to", "jo"), "email.send"),
			func() (string, map[string]any, *toolplane.Invocation) {
				in := session(2, "email.send")
				in.UserID = "user-bo"
				return "email.send", args("to", "jo"), in
			}, "on behalf of another person"},
		{"for another tenant", func(e *env) string {
			in := session(1, "email.send")
			in.TenantID = "tenant-a"
			a := must(e.t).Approval(e.iv.Invoke(ctx, "email.send", args("to", "jo"), in))
			e.resolve(a.ID, true)
			return a.ID
		}, func() (string, map[string]any, *toolplane.Invocation) {
			in := session(2, "email.send")
			in.TenantID = "tenant-b"
			return "email.send", args("to", "jo"), in
		}, "for another tenant"},
		{"another tool's", approved(args("to", "jo"), "email.send"),
			func() (string, map[string]any, *toolplane.Invocation) {
				return "email.forward", args("to", "jo"), session(2, "email.forward")
			}, "another tool (email.send)"},
		{"other arguments'", approved(args("to", "jo"), "email.send"),
			func() (string, map[string]any, *toolplane.Invocation) {
				return "email.send", args("to", "sam"), session(2, "email.send")
			}, "other arguments"},
		{"rejected", func(e *env) string {
			a := must(e.t).Approval(e.iv.Invoke(ctx, "email.send", args("to", "jo"), session(1, "email.send")))
			e.resolve(a.ID, false)
			return a.ID
		}, func() (string, map[string]any, *toolplane.Invocation) {
			return "email.send", args("to", "jo"), session(2, "email.send")
		}, "a person rejected approval"},
		{"expired", func(e *env) string {
			a := must(e.t).Approval(e.iv.Invoke(ctx, "email.send", args("to", "jo"), session(1, "email.send")))
			e.clock.Advance(2 * time.Hour)
			return a.ID
		}, func() (string, map[string]any, *toolplane.Invocation) {
			return "email.send", args("to", "jo"), session(2, "email.send")
		}, "expired at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, newStore(t), tools...)
			id := tt.setup(e)
			name, a, in := tt.call()
			in.AuthorizedBy = id
			ar := must(t).Approval(e.iv.Invoke(ctx, name, a, in))
			if ar.ID == id || !strings.Contains(ar.Ignored, tt.why) {
				t.Fatalf("approval %s, ignored %q; want a new approval saying %q", ar.ID, ar.Ignored, tt.why)
			}
			if e.count("email.send")+e.count("email.forward") != 0 {
				t.Fatal("an ignored authorized_by ran the call")
			}
		})
	}
}

// approved answers a setup that files and approves agent-1's call of tool
// with a, in a session of its own.
func approved(a map[string]any, tool string) func(e *env) string {
	return func(e *env) string {
		ar := must(e.t).Approval(e.iv.Invoke(context.Background(), tool, a, session(1, tool)))
		if _, err := e.approvals.Resolve(context.Background(), ar.ID, approval.Decision{Approve: true}, approverAlice, e.iv.CheckApproval); err != nil {
			e.t.Fatal(err)
		}
		return ar.ID
	}
}
