package invoke_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
)

// recording is a policy that keeps the facts it was given.
type recording struct {
	mu        sync.Mutex
	facts     []map[string]any
	sensitive [][]string
}

func (p *recording) Decide(_ context.Context, in policy.Input) (policy.Decision, error) {
	p.mu.Lock()
	p.facts = append(p.facts, in.Facts)
	p.sensitive = append(p.sensitive, in.Sensitive)
	p.mu.Unlock()
	return policy.Decision{Effect: policy.Allow, Reason: "recorded"}, nil
}

const sensitiveIn = `{"type":"object","additionalProperties":false,"properties":{"order_id":{"type":"string"},"to_account":{"type":"string","x-sensitive":true}}}`

func refundDef(name string, effect toolplane.Effect) toolplane.Definition {
	return def(name, effect, func(d *toolplane.Definition) {
		d.InputSchema = json.RawMessage(sensitiveIn)
		d.PolicyFacts = []string{"order_account"}
	})
}

// The facts a tool declares are resolved before the decision and handed
// to the policy; a resolver that fails, panics or runs past its deadline
// makes the call a fault (internal_error, stop fault): the policy is not
// asked, the handler does not run, no claim or approval is left behind,
// and the call's audit event records internal_error.
func TestPolicyFactsResolvedBeforeTheDecision(t *testing.T) {
	t.Parallel()
	slow := func(ctx context.Context, _ *toolplane.Invocation, _ *toolplane.Definition, _ any) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	account := func(_ context.Context, _ *toolplane.Invocation, _ *toolplane.Definition, args any) (any, error) {
		return "acct-" + args.(map[string]any)["order_id"].(string), nil
	}
	tests := []struct {
		name     string
		resolver policy.FactResolver
		effect   toolplane.Effect
		fault    bool
		slow     bool // the resolver waits out its deadline
	}{
		{"a write, resolved", account, toolplane.EffectWrite, false, false},
		{"a read, resolved", account, toolplane.EffectRead, false, false},
		{"a write, the resolver times out", slow, toolplane.EffectWrite, true, true},
		{"a read, the resolver times out", slow, toolplane.EffectRead, true, true},
		{"a write, the resolver fails", func(context.Context, *toolplane.Invocation, *toolplane.Definition, any) (any, error) {
			return nil, errors.New("orders database unreachable")
		}, toolplane.EffectWrite, true, false},
		{"a write, the resolver panics", func(context.Context, *toolplane.Invocation, *toolplane.Definition, any) (any, error) {
			panic("nil map")
		}, toolplane.EffectWrite, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newStore(t)
			pol := &recording{}
			e := newEnvWith(t, store, func(c *invoke.Config) {
				c.Policy = pol
				c.Facts = policy.Facts{"order_account": tt.resolver}
				// Only the slow resolver should meet the deadline: the
				// others are given one no loaded machine reaches.
				c.FactTimeout = 10 * time.Second
				if tt.slow {
					c.FactTimeout = 30 * time.Millisecond
				}
			}, tool{def: refundDef("payments.refund", tt.effect), fn: ok(map[string]any{"done": true})})
			in := inv("payments.refund")
			a := map[string]any{"order_id": "o-501", "to_account": "acct-evil"}
			r, err := e.iv.Invoke(context.Background(), "payments.refund", a, in)
			if !tt.fault {
				mustOK(t, r, err)
				if len(pol.facts) != 1 || pol.facts[0]["order_account"] != "acct-o-501" {
					t.Fatalf("the policy saw facts %v", pol.facts)
				}
				return
			}
			code(t, r, err, toolplane.CodeInternalError)
			if r.Stop != toolplane.StopFault {
				t.Errorf("stop = %q, want fault", r.Stop)
			}
			if len(pol.facts) != 0 || e.count("payments.refund") != 0 {
				t.Fatalf("after a fact's fault the policy decided %d time(s) and the handler ran %d", len(pol.facts), e.count("payments.refund"))
			}
			if tt.effect.Writes() {
				if cl, err := claimOf(t, store, "payments.refund", in, a); !errors.Is(err, toolplane.ErrNotFound) {
					t.Fatalf("a claim was left behind: %+v, %v", cl, err)
				}
			}
			evs, _, err := store.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{Tool: "payments.refund"}, "", 10)
			if err != nil || len(evs) != 1 || evs[0].Outcome != string(toolplane.CodeInternalError) {
				t.Fatalf("audit = %+v, %v; want one internal_error event", evs, err)
			}
		})
	}
}

// The resolved facts are recorded in the call's span, with every value the
// input schema marks x-sensitive (echoed by a resolver) and every
// credential-named field redacted.
func TestPolicyFactsInTheSpanRedacted(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	echo := func(_ context.Context, _ *toolplane.Invocation, _ *toolplane.Definition, args any) (any, error) {
		a := args.(map[string]any)
		return map[string]any{"account": "acct-o-501", "asked": "refund to " + a["to_account"].(string), "api_key": "sk-live-1"}, nil
	}
	e := newEnvWith(t, newStore(t), func(c *invoke.Config) {
		c.Policy = &recording{}
		c.Facts = policy.Facts{"order_account": echo}
		c.Tracer = tp.Tracer("test")
	}, tool{def: refundDef("payments.refund", toolplane.EffectWrite), fn: ok(map[string]any{})})
	must(t).OK(e.iv.Invoke(context.Background(), "payments.refund", map[string]any{"order_id": "o-501", "to_account": "acct-evil"}, inv("payments.refund")))
	spans := callSpans(rec.Ended())
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	var got string
	for _, kv := range spans[0].Attributes() {
		if kv.Key == "policy.facts" {
			got = kv.Value.AsString()
		}
	}
	if !strings.Contains(got, "acct-o-501") || strings.Contains(got, "acct-evil") || strings.Contains(got, "sk-live-1") {
		t.Fatalf("policy.facts = %s; want the account, and neither the sensitive argument nor the key", got)
	}
}

// The policy is told where the tool's x-sensitive arguments are, so that
// what records its decision (the audit event's policy document) keeps
// none of their values.
func TestThePolicyIsToldWhereSensitiveArgumentsAre(t *testing.T) {
	t.Parallel()
	pol := &recording{}
	e := newEnvWith(t, newStore(t), func(c *invoke.Config) {
		c.Policy = pol
		c.Facts = policy.Facts{"order_account": func(context.Context, *toolplane.Invocation, *toolplane.Definition, any) (any, error) {
			return "acct-o-501", nil
		}}
	}, tool{def: refundDef("payments.refund", toolplane.EffectWrite), fn: ok(map[string]any{})})
	must(t).OK(e.iv.Invoke(context.Background(), "payments.refund", map[string]any{"order_id": "o-501", "to_account": "acct-evil"}, inv("payments.refund")))
	if len(pol.sensitive) != 1 || strings.Join(pol.sensitive[0], ",") != "/to_account" {
		t.Fatalf("the policy was told sensitive arguments %v; want [/to_account]", pol.sensitive)
	}
}
