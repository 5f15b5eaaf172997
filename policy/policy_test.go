package policy_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/policy"
)

func invocation(tools ...string) *toolplane.Invocation {
	return &toolplane.Invocation{
		OrganizationID: "org-1", RunID: "run-1", AgentID: "agent-1", StepPath: "agent",
		Principal: toolplane.Principal{ID: "agent-1", Tools: tools},
	}
}

func tool(name string, requiresApproval bool) *toolplane.Definition {
	return &toolplane.Definition{Name: name, Annotations: toolplane.Annotations{RequiresApproval: requiresApproval}}
}

func TestEffectString(t *testing.T) {
	t.Parallel()
	for e, want := range map[policy.Effect]string{
		policy.Deny: "deny", policy.Allow: "allow", policy.RequireApproval: "require_approval",
	} {
		if got := e.String(); got != want {
			t.Errorf("Effect(%d).String() = %q, want %q", int(e), got, want)
		}
	}
	if policy.Deny != 0 {
		t.Errorf("the zero Effect is %v, want deny", policy.Effect(0))
	}
}

func TestGrantsDecide(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		deny    []string
		granted []string
		tool    *toolplane.Definition
		want    policy.Effect
		reason  string // the exact reason
		wantErr string // a fault of the policy: substring of the error
	}{
		{
			name: "granted tool is allowed", granted: []string{"crm.update"},
			tool: tool("crm.update", false), want: policy.Allow, reason: "granted",
		},
		{
			name: "granted tool among others is allowed", granted: []string{"crm.read", "crm.update", "mail.send"},
			tool: tool("crm.update", false), want: policy.Allow, reason: "granted",
		},
		{
			name: "deny pattern not matching leaves the grant", deny: []string{"payments.*"}, granted: []string{"crm.update"},
			tool: tool("crm.update", false), want: policy.Allow, reason: "granted",
		},
		{
			name: "principal without the tool is denied", granted: []string{"crm.read"},
			tool: tool("crm.update", false), want: policy.Deny, reason: "the principal is not granted crm.update",
		},
		{
			name: "principal with no tools is denied", tool: tool("crm.update", false),
			want: policy.Deny, reason: "the principal is not granted crm.update",
		},
		{
			name: "a grant is an exact name, not a prefix", granted: []string{"crm"},
			tool: tool("crm.update", false), want: policy.Deny, reason: "the principal is not granted crm.update",
		},
		{
			name: "deny glob beats a grant", deny: []string{"payments.*"}, granted: []string{"payments.refund_order"},
			tool: tool("payments.refund_order", false), want: policy.Deny,
			reason: "payments.refund_order is on the deny list (payments.*)",
		},
		{
			name: "deny glob beats requires_approval", deny: []string{"payments.*"}, granted: []string{"payments.refund_order"},
			tool: tool("payments.refund_order", true), want: policy.Deny,
			reason: "payments.refund_order is on the deny list (payments.*)",
		},
		{
			name: "the first matching deny pattern is named", deny: []string{"crm.*", "*.delete", "crm.delete"}, granted: []string{"crm.delete"},
			tool: tool("crm.delete", false), want: policy.Deny, reason: "crm.delete is on the deny list (crm.*)",
		},
		{
			name: "exact deny name", deny: []string{"mail.send"}, granted: []string{"mail.send"},
			tool: tool("mail.send", false), want: policy.Deny, reason: "mail.send is on the deny list (mail.send)",
		},
		{
			name: "requires_approval needs a person", granted: []string{"payments.refund_order"},
			tool: tool("payments.refund_order", true), want: policy.RequireApproval,
			reason: "payments.refund_order requires a person's approval",
		},
		{
			name: "requires_approval without the grant is denied", granted: []string{"crm.read"},
			tool: tool("payments.refund_order", true), want: policy.Deny,
			reason: "the principal is not granted payments.refund_order",
		},
		{
			name: "malformed deny pattern is an error", deny: []string{"payments.[", "crm.*"}, granted: []string{"crm.update"},
			tool: tool("crm.update", false), wantErr: `deny pattern "payments.["`,
		},
		{
			name: "malformed deny pattern is an error even for an ungranted tool", deny: []string{"["},
			tool: tool("crm.update", false), wantErr: `deny pattern "["`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := policy.Grants{Deny: tt.deny}
			d, err := g.Decide(context.Background(), policy.Input{Invocation: invocation(tt.granted...), Tool: tt.tool})
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("Decide = %+v, want an error", d)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %q does not contain %q", err, tt.wantErr)
				}
				if d != (policy.Decision{}) {
					t.Fatalf("a failed decision answered %+v", d)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			if d.Effect != tt.want || d.Reason != tt.reason {
				t.Fatalf("Decide = {%v %q}, want {%v %q}", d.Effect, d.Reason, tt.want, tt.reason)
			}
		})
	}
}

func TestGrantsImplementsPolicy(t *testing.T) {
	t.Parallel()
	var p policy.Policy = policy.Grants{}
	d, err := p.Decide(context.Background(), policy.Input{Invocation: invocation("a.b"), Tool: tool("a.b", false)})
	if err != nil || d.Effect != policy.Allow {
		t.Fatalf("Decide = %+v, %v", d, err)
	}
}

type ctxKey struct{}

func TestFactsResolve(t *testing.T) {
	t.Parallel()
	errLookup := errors.New("crm unavailable")
	inv := invocation("payments.refund_order")
	args := map[string]any{"order": "o_1"}

	// constant answers v after checking it was called with this call's
	// context, invocation, tool and arguments.
	constant := func(v any) policy.FactResolver {
		return func(ctx context.Context, gotInv *toolplane.Invocation, gotTool *toolplane.Definition, gotArgs any) (any, error) {
			if ctx.Value(ctxKey{}) != "call" {
				return nil, errors.New("resolver got another context")
			}
			if gotInv != inv || gotTool == nil || gotTool.Name != "payments.refund_order" || !reflect.DeepEqual(gotArgs, args) {
				return nil, errors.New("resolver got another call")
			}
			return v, nil
		}
	}
	failing := func(context.Context, *toolplane.Invocation, *toolplane.Definition, any) (any, error) {
		return nil, errLookup
	}
	var undeclaredCalled bool
	undeclared := func(context.Context, *toolplane.Invocation, *toolplane.Definition, any) (any, error) {
		undeclaredCalled = true
		return nil, nil
	}

	tests := []struct {
		name     string
		facts    policy.Facts
		declared []string
		want     map[string]any
		wantErr  string
		wantIs   error
	}{
		{
			name: "no declared facts", facts: policy.Facts{"order_total": undeclared},
			want: nil,
		},
		{
			name: "no declared facts and no resolvers", facts: nil,
			want: nil,
		},
		{
			name: "each declared fact is answered",
			facts: policy.Facts{
				"order_total": constant(int64(4200)), "customer_tier": constant("gold"), "unused": undeclared,
			},
			declared: []string{"order_total", "customer_tier"},
			want:     map[string]any{"order_total": int64(4200), "customer_tier": "gold"},
		},
		{
			name: "a nil value is still an answer", facts: policy.Facts{"refunds_today": constant(nil)},
			declared: []string{"refunds_today"}, want: map[string]any{"refunds_today": nil},
		},
		{
			name: "an unregistered fact is an error", facts: policy.Facts{"order_total": constant(1)},
			declared: []string{"order_total", "fraud_score"},
			wantErr:  `policy fact "fraud_score": no resolver is registered`,
		},
		{
			name: "a resolver error is wrapped", facts: policy.Facts{"order_total": constant(1), "fraud_score": failing},
			declared: []string{"order_total", "fraud_score"},
			wantErr:  `policy fact "fraud_score"`, wantIs: errLookup,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not parallel: the cases share undeclaredCalled.
			undeclaredCalled = false
			def := tool("payments.refund_order", true)
			def.PolicyFacts = tt.declared
			ctx := context.WithValue(context.Background(), ctxKey{}, "call")
			got, err := tt.facts.Resolve(ctx, inv, def, args)
			if undeclaredCalled {
				t.Fatal("a fact the tool did not declare was resolved")
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve error = %v, want one containing %q", err, tt.wantErr)
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Fatalf("Resolve error %v does not wrap %v", err, tt.wantIs)
				}
				if got != nil {
					t.Fatalf("a failed Resolve answered %v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Resolve = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestFactsFactResolverReportsRegistration(t *testing.T) {
	t.Parallel()
	f := policy.Facts{"order_total": func(context.Context, *toolplane.Invocation, *toolplane.Definition, any) (any, error) {
		return 1, nil
	}}
	tests := []struct {
		name string
		want bool
	}{
		{"order_total", true},
		{"fraud_score", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := f.FactResolver(tt.name); got != tt.want {
			t.Errorf("FactResolver(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	if policy.Facts(nil).FactResolver("order_total") {
		t.Error("nil Facts reports a resolver")
	}
}

// A fact is bounded in time: a resolver that runs past its deadline, one
// that ignores its context altogether, one that panics and one that fails
// each answer a *FactError, never a value a rule could decide on.
func TestFactsResolveWithinBoundsEachFact(t *testing.T) {
	t.Parallel()
	inv := &toolplane.Invocation{OrganizationID: "org-a"}
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	tests := []struct {
		name    string
		r       policy.FactResolver
		timeout bool
	}{
		{"honours its context", func(ctx context.Context, _ *toolplane.Invocation, _ *toolplane.Definition, _ any) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, true},
		{"ignores its context", func(context.Context, *toolplane.Invocation, *toolplane.Definition, any) (any, error) {
			<-block
			return "late", nil
		}, true},
		{"panics", func(context.Context, *toolplane.Invocation, *toolplane.Definition, any) (any, error) {
			panic("lookup table missing")
		}, false},
		{"fails", func(context.Context, *toolplane.Invocation, *toolplane.Definition, any) (any, error) {
			return nil, errors.New("crm unreachable")
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			def := tool("payments.refund_order", true)
			def.PolicyFacts = []string{"order_account"}
			start := time.Now()
			got, err := policy.Facts{"order_account": tt.r}.ResolveWithin(context.Background(), 20*time.Millisecond, inv, def, nil)
			var fe *policy.FactError
			if !errors.As(err, &fe) || fe.Fact != "order_account" || got != nil {
				t.Fatalf("ResolveWithin = %v, %v; want a *FactError for order_account and no facts", got, err)
			}
			if errors.Is(err, policy.ErrFactTimeout) != tt.timeout {
				t.Fatalf("error %v: timeout = %v, want %v", err, !tt.timeout, tt.timeout)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("the deadline of 20ms was kept for %v", took)
			}
		})
	}
}
