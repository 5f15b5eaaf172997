package invoke_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/invoke"
)

func gated(name string) toolplane.Definition {
	return def(name, toolplane.EffectSend, func(d *toolplane.Definition) {
		d.Connection = "mailbox"
		d.Annotations.RequiresApproval = true
	})
}

func (e *env) resolve(id string, approve bool) {
	e.t.Helper()
	if _, err := e.approvals.Resolve(context.Background(), id, approval.Decision{Approve: approve, Reason: "checked"}, approverAlice, e.iv.CheckApproval); err != nil {
		e.t.Fatal(err)
	}
}

func TestApprovedCallExecutesOnResumeWithoutANewProposal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: gated("email.send"), fn: ok(map[string]any{"id": "m1"})})
	in := inv("email.send")
	ar := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo@acme.test"), in))
	if e.count("email.send") != 0 || ar.ExpiresAt.Sub(e.clock.Now()) != time.Hour {
		t.Fatalf("runs=%d expires=%v", e.count("email.send"), ar.ExpiresAt)
	}
	// The same call again before anyone answered: the same approval, not a second one.
	again := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo@acme.test"), in))
	if again.ID != ar.ID {
		t.Fatalf("a second approval was filed: %s vs %s", again.ID, ar.ID)
	}
	e.resolve(ar.ID, true)
	r := must(t).OK(e.iv.ExecuteApproved(context.Background(), "org-1", ar.ID))
	if e.count("email.send") != 1 || r.Meta.Replayed {
		t.Fatalf("runs=%d", e.count("email.send"))
	}
	// The model asks again anyway: one effect, the stored answer.
	r = must(t).OK(e.iv.Invoke(context.Background(), "email.send", args("to", "jo@acme.test"), in))
	if !r.Meta.Replayed || e.count("email.send") != 1 {
		t.Fatalf("replayed=%v runs=%d", r.Meta.Replayed, e.count("email.send"))
	}
	// And the resume runs twice (a retried job): still one effect.
	must(t).OK(e.iv.ExecuteApproved(context.Background(), "org-1", ar.ID))
	if e.count("email.send") != 1 {
		t.Fatalf("runs=%d", e.count("email.send"))
	}
}

func TestRejectedApprovalReturnsRejectedAndTheRunContinues(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: gated("email.send"), fn: ok(map[string]any{"id": "m1"})})
	in := inv("email.send")
	ar := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), in))
	e.resolve(ar.ID, false)
	r, err := e.iv.ExecuteApproved(context.Background(), "org-1", ar.ID)
	code(t, r, err, toolplane.CodeRejected)
	// A later identical proposal without the id reads the prior rejection
	// and files nothing new.
	r, err = e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), in)
	code(t, r, err, toolplane.CodeRejected)
	as, _, _ := e.store.ListApprovals(context.Background(), "org-1", toolplane.ApprovalPending, "", 10)
	if len(as) != 0 || e.count("email.send") != 0 {
		t.Fatalf("pending=%d runs=%d", len(as), e.count("email.send"))
	}
	// Another call of the run is decided as usual.
	must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "sam"), in))
}

func TestTwoGatedWritesFinishInThreePassesWithTwoEffects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: gated("email.send"), fn: ok(map[string]any{"id": "m"})})
	base := inv("email.send")
	call1, call2 := args("to", "jo@acme.test"), args("to", "sam@other.test")
	// pass drives one turn's two proposals the way a drain loop does: stop
	// at the first approval, hand authorized_by to every proposal.
	pass := func(authorizedBy string) *invoke.ApprovalRequired {
		for _, a := range []map[string]any{call1, call2} {
			in := *base
			in.AuthorizedBy = authorizedBy
			r, err := e.iv.Invoke(context.Background(), "email.send", a, &in)
			var ar *invoke.ApprovalRequired
			if errors.As(err, &ar) {
				return ar
			}
			must(t).OK(r, err)
		}
		return nil
	}
	a := pass("")
	if a == nil || e.count("email.send") != 0 {
		t.Fatal("pass 1 must stop at call 1 with nothing run")
	}
	e.resolve(a.ID, true)
	b := pass(a.ID)
	if b == nil || b.ID == a.ID || e.count("email.send") != 1 {
		t.Fatalf("pass 2 must run call 1 and stop at call 2: %+v runs=%d", b, e.count("email.send"))
	}
	e.resolve(b.ID, true)
	if c := pass(b.ID); c != nil {
		t.Fatalf("pass 3 stopped again: %+v", c)
	}
	if e.count("email.send") != 2 {
		t.Fatalf("effects = %d, want 2", e.count("email.send"))
	}
}

func TestNonCoveringAuthorizedByIsIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: gated("email.send"), fn: ok(map[string]any{"id": "m"})})
	in := inv("email.send")
	a := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), in))
	e.resolve(a.ID, true)
	other := *in
	other.AuthorizedBy = a.ID
	// Approval a covers "jo", not "sam": the call is decided live and asks
	// for its own approval; it is not denied.
	b := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "sam"), &other))
	if b.ID == a.ID || e.count("email.send") != 0 {
		t.Fatalf("b=%v runs=%d", b, e.count("email.send"))
	}
	// The same agent's same call in another run, naming the approval, is
	// the call it approved: it runs once, whichever run asks.
	for _, run := range []string{"run-2", "run-3"} {
		elsewhere := *in
		elsewhere.RunID, elsewhere.AuthorizedBy = run, a.ID
		must(t).OK(e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), &elsewhere))
	}
	if e.count("email.send") != 1 {
		t.Fatalf("the approved call ran %d times from other runs, want once", e.count("email.send"))
	}
}

func TestGrantRemovedWhileApprovalWaitedStillRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: gated("email.send"), fn: ok(map[string]any{"id": "m"})})
	in := inv("email.send")
	a := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), in))
	e.resolve(a.ID, true)
	revoked := *in
	revoked.Principal.Tools = nil
	revoked.AuthorizedBy = a.ID
	r, err := e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), &revoked)
	code(t, r, err, toolplane.CodeDenied)
	if e.count("email.send") != 0 {
		t.Fatal("an approval outlived the grant")
	}
}

func TestApprovalResolutionChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: gated("email.send"), fn: ok(map[string]any{"id": "m"})})
	in := inv("email.send")
	a := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), in))
	ctx := context.Background()
	if _, err := e.approvals.Resolve(ctx, a.ID, approval.Decision{Approve: true}, &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "mallory", Roles: []string{toolplane.RoleAuditor}}, e.iv.CheckApproval); !errors.Is(err, approval.ErrNotAuthorized) {
		t.Fatalf("unknown approver: %v", err)
	}
	if _, err := e.approvals.Resolve(ctx, a.ID, approval.Decision{Approve: true}, &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "agent-1", Roles: []string{toolplane.RoleApprover}}, e.iv.CheckApproval); !errors.Is(err, approval.ErrNotAuthorized) {
		t.Fatalf("self approval: %v", err)
	}
	if _, err := e.approvals.Resolve(ctx, a.ID, approval.Decision{Approve: true}, &toolplane.Credential{OrganizationID: "org-2", Kind: toolplane.CredentialPerson, Subject: "alice", Roles: []string{toolplane.RoleApprover}}, nil); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("another organization resolved it: %v", err)
	}
	// Tampered arguments are refused.
	stored, _ := e.store.GetApproval(ctx, "org-1", a.ID)
	tampered := *stored
	tampered.Arguments = []byte(`{"to":"eve"}`)
	if ok, err := e.store.UpdateApproval(ctx, &tampered); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := e.approvals.Resolve(ctx, a.ID, approval.Decision{Approve: true}, approverAlice, e.iv.CheckApproval); !errors.Is(err, approval.ErrTampered) {
		t.Fatalf("tampered: %v", err)
	}
	// Past its expiry the default (deny) applies.
	e.clock.Advance(2 * time.Hour)
	if _, err := e.approvals.Resolve(ctx, a.ID, approval.Decision{Approve: true}, approverAlice, e.iv.CheckApproval); !errors.Is(err, approval.ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
	r, err := e.iv.ExecuteApproved(ctx, "org-1", a.ID)
	code(t, r, err, toolplane.CodeRejected)
	if e.count("email.send") != 0 {
		t.Fatal("ran")
	}
}

// The preview rules, seed 000's "a preview timeout or invalid result files
// the approval" and "a failing preview still creates the approval, with
// the generic render": a line the tool renders is folded and filed; a
// preview that fails, runs out of time, or answers an empty or over-long
// line still files the approval, whose line says the preview is
// unavailable and why (in the platform's words, never the preview's
// error) over the arguments, credentials redacted and x-sensitive values
// masked; only arguments the preview cannot read are refused, at their
// field, with nothing filed.
func TestPreviewRules(t *testing.T) {
	t.Parallel()
	const secret = "crm-down: token=sk_live_0123456789abcdefghij"
	// The arguments as the generic render shows them: the password
	// redacted by its name, the body masked as the schema marks it
	// x-sensitive, the recipient as it is.
	const shown = `email.send {"body":"[redacted]","password":"[redacted]","to":"jo"}`
	tests := []struct {
		name    string
		preview handler.PreviewFunc
		want    string         // the preview filed
		refused toolplane.Code // or the refusal, with nothing filed
	}{
		{"one line", func(context.Context, handler.Call, any) (string, error) {
			return "  send one message\n\tto   jo  ", nil
		}, "send one message to jo", ""},
		{"a failure files the generic render", func(context.Context, handler.Call, any) (string, error) { return "", errors.New(secret) },
			"preview unavailable: the tool's preview failed; " + shown, ""},
		{"a panic files the generic render", func(context.Context, handler.Call, any) (string, error) { panic(secret) },
			"preview unavailable: the tool's preview failed; " + shown, ""},
		{"an empty line files the generic render", func(context.Context, handler.Call, any) (string, error) { return " \n ", nil },
			"preview unavailable: the tool's preview was empty; " + shown, ""},
		{"over 512 bytes files the generic render", func(context.Context, handler.Call, any) (string, error) { return strings.Repeat("é", 300), nil },
			"preview unavailable: the tool's preview was longer than 512 bytes; " + shown, ""},
		{"a timeout files the generic render", func(ctx context.Context, _ handler.Call, _ any) (string, error) {
			<-ctx.Done()
			time.Sleep(20 * time.Millisecond) // answers after the invoker stopped waiting
			return "late", nil
		}, "preview unavailable: the tool's preview did not answer in time; " + shown, ""},
		{"arguments it cannot read file nothing", func(context.Context, handler.Call, any) (string, error) {
			return "", &handler.Invalid{Message: "to: not an address", FieldPath: "/to"}
		}, "", toolplane.CodeInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := gated("email.send")
			d.ApprovalPreview = true
			d.Timeout = toolplane.Duration(50 * time.Millisecond)
			d.InputSchema = json.RawMessage(strings.Replace(objectIn, `"body":{"type":"string"}`, `"body":{"type":"string","x-sensitive":true}`, 1))
			var logs syncbuf.Buffer
			e := newEnvWith(t, newStore(t), func(c *invoke.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) },
				tool{def: d, fn: ok(map[string]any{}), opts: []handler.Option{handler.WithPreview(tt.preview)}})
			// The operator's log says why the preview failed, never with
			// the secret its error quoted.
			defer func() {
				if strings.Contains(logs.String(), "sk_live_0123456789abcdefghij") {
					t.Errorf("the log shows the preview error's secret:\n%s", logs.String())
				}
			}()
			call := args("to", "jo", "body", "the quarterly numbers", "password", "hunter2-hunter2")
			r, err := e.iv.Invoke(context.Background(), "email.send", call, inv("email.send"))
			if tt.refused != "" {
				code(t, r, err, tt.refused)
				pending, _, lerr := e.store.ListApprovals(context.Background(), "org-1", toolplane.ApprovalPending, "", 10)
				if lerr != nil || len(pending) != 0 || e.count("email.send") != 0 {
					t.Fatalf("unreadable arguments filed %d approvals (%v), ran %d times", len(pending), lerr, e.count("email.send"))
				}
				if r.Error.FieldPath != "/to" {
					t.Fatalf("field_path = %q", r.Error.FieldPath)
				}
				return
			}
			a := must(t).Approval(r, err)
			stored, err := e.store.GetApproval(context.Background(), "org-1", a.ID)
			if err != nil {
				t.Fatal(err)
			}
			if stored.Preview != tt.want || a.Preview != tt.want {
				t.Fatalf("preview = %q, want %q", stored.Preview, tt.want)
			}
			for _, leak := range []string{"sk_live", "crm-down", "quarterly", "hunter2"} {
				if strings.Contains(stored.Preview, leak) {
					t.Fatalf("the preview shows %q: %q", leak, stored.Preview)
				}
			}
			if stored.ArgumentsHash != hashOf(t, call) || stored.Status != toolplane.ApprovalPending || stored.DefaultOnTimeout != "deny" {
				t.Fatalf("approval = %+v", stored)
			}
			if e.count("email.send") != 0 {
				t.Fatal("the call ran before anyone approved it")
			}
			// The person decides as for any approval: approved, the call
			// runs once.
			e.resolve(a.ID, true)
			must(t).OK(e.iv.ExecuteApproved(context.Background(), "org-1", a.ID))
			if e.count("email.send") != 1 {
				t.Fatalf("ran %d times after the approval", e.count("email.send"))
			}
		})
	}
}

func TestAnApprovalCoversOneEffectNotTheSameArgumentsElsewhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: gated("email.send"), fn: ok(map[string]any{"id": "m"})})
	in := inv("email.send")
	a := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), in))
	e.resolve(a.ID, true)
	must(t).OK(e.iv.ExecuteApproved(context.Background(), "org-1", a.ID))
	// The same arguments at another step, or under another caller key, are
	// another action: without naming the approval each asks for its own.
	other := *in
	other.StepPath = "node-2"
	must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), &other))
	keyed := *in
	keyed.IdempotencyKey = "client-key"
	must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), &keyed))
	// Naming it, they are the call it approved, which has run: its result
	// is replayed, and the approval still made one effect.
	for _, named := range []toolplane.Invocation{other, keyed} {
		named.AuthorizedBy = a.ID
		r, err := e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), &named)
		must(t).OK(r, err)
		if !r.Meta.Replayed {
			t.Errorf("naming the approval at %s/%q ran the call again: %+v", named.StepPath, named.IdempotencyKey, r)
		}
	}
	if e.count("email.send") != 1 {
		t.Fatalf("one approval made %d effects", e.count("email.send"))
	}
}

func TestAnApprovedReadRuns(t *testing.T) {
	t.Parallel()
	d := def("crm.export", toolplane.EffectRead, func(d *toolplane.Definition) { d.Annotations.RequiresApproval = true })
	e := newEnv(t, newStore(t), tool{def: d, fn: ok(map[string]any{"rows": 3})})
	a := must(t).Approval(e.iv.Invoke(context.Background(), "crm.export", args("to", "all"), inv("crm.export")))
	e.resolve(a.ID, true)
	r := must(t).OK(e.iv.ExecuteApproved(context.Background(), "org-1", a.ID))
	if e.count("crm.export") != 1 || r.Data.(map[string]any)["rows"] == nil {
		t.Fatalf("runs=%d result=%+v", e.count("crm.export"), r)
	}
}

// grants is a live principal source whose grants a test changes.
type grants struct {
	mu    sync.Mutex
	tools []string
}

func (g *grants) Principal(_ context.Context, inv *toolplane.Invocation) (toolplane.Principal, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return toolplane.Principal{ID: inv.Principal.ID, Tools: append([]string(nil), g.tools...)}, nil
}

func TestGrantRemovedWhileApprovalWaitedRefusesTheResume(t *testing.T) {
	t.Parallel()
	live := &grants{tools: []string{"email.send"}}
	e := newEnvWith(t, newStore(t), func(c *invoke.Config) { c.Principals = live }, tool{def: gated("email.send"), fn: ok(map[string]any{"id": "m"})})
	a := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), inv("email.send")))
	e.resolve(a.ID, true)
	live.mu.Lock()
	live.tools = nil // the grant is removed while the approval waited
	live.mu.Unlock()
	r, err := e.iv.ExecuteApproved(context.Background(), "org-1", a.ID)
	code(t, r, err, toolplane.CodeDenied)
	if e.count("email.send") != 0 {
		t.Fatal("the stored grant outlived the live one")
	}
}

func TestSameCallAfterApprovalBeforeItsExecutionRunsOnceAndFilesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: gated("email.send"), fn: ok(map[string]any{"id": "m1"})})
	in := inv("email.send")
	ar := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo@acme.test"), in))
	e.resolve(ar.ID, true)
	// The model asks again, without authorized_by, before the approval's
	// background execution: the approved call runs, nothing new is filed.
	r := must(t).OK(e.iv.Invoke(context.Background(), "email.send", args("to", "jo@acme.test"), in))
	if r.Meta.Replayed || e.count("email.send") != 1 {
		t.Fatalf("replayed=%v runs=%d", r.Meta.Replayed, e.count("email.send"))
	}
	pending, _, err := e.approvals.List(context.Background(), toolplane.ApprovalPending, "", 10, approverAlice)
	if err != nil || len(pending) != 0 {
		t.Fatalf("pending approvals after the approved call ran: %v %v", pending, err)
	}
	// The background execution then finds it done.
	r = must(t).OK(e.iv.ExecuteApproved(context.Background(), "org-1", ar.ID))
	if !r.Meta.Replayed || e.count("email.send") != 1 {
		t.Fatalf("resume: replayed=%v runs=%d", r.Meta.Replayed, e.count("email.send"))
	}
	// Other arguments are another call: that one waits for a person.
	must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "al@acme.test"), in))
}

// A person's approval is of the call made for that person: the same agent
// making the same call in the same run for another person is another
// call, which waits for an approval of its own, whether it names the
// first one in authorized_by or not, and a rejection for one person does
// not answer for another.
func TestApprovalForOnePersonDoesNotCoverAnother(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: gated("email.send"), fn: ok(map[string]any{"id": "m1"})})
	forSam, forAnn := inv("email.send"), inv("email.send")
	forSam.UserID, forAnn.UserID = "sam", "ann"
	sams := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo@acme.test"), forSam))
	e.resolve(sams.ID, true)
	// Before the approval's own execution ran: ann's call is not sam's.
	anns := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo@acme.test"), forAnn))
	if anns.ID == sams.ID || e.count("email.send") != 0 {
		t.Fatalf("ann's call was taken for sam's: approval %s (sam's %s), runs=%d", anns.ID, sams.ID, e.count("email.send"))
	}
	naming := *forAnn
	naming.AuthorizedBy = sams.ID
	if ar := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo@acme.test"), &naming)); ar.ID != anns.ID || e.count("email.send") != 0 {
		t.Fatalf("ann's call naming sam's approval: approval %s, runs=%d", ar.ID, e.count("email.send"))
	}
	// Sam's rejected call does not answer for ann's.
	lee := inv("email.send")
	lee.UserID = "lee"
	lees := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "kim@acme.test"), lee))
	e.resolve(lees.ID, false)
	kit := inv("email.send")
	kit.UserID = "kit"
	must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "kim@acme.test"), kit))
}
