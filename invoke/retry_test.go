package invoke_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/registry"
)

// attempts answers a handler that answers each attempt from script in
// turn (an error, or nil for an answer), counting in n, and keeping the
// key every attempt was given.
type attempts struct {
	mu     sync.Mutex
	script []error
	n      atomic.Int64
	keys   []string
}

func (a *attempts) fn(ctx context.Context, c handler.Call, _ any) (any, error) {
	i := int(a.n.Add(1)) - 1
	a.mu.Lock()
	a.keys = append(a.keys, c.Key)
	a.mu.Unlock()
	if i < len(a.script) && a.script[i] != nil {
		return nil, a.script[i]
	}
	if i >= len(a.script) && len(a.script) > 0 && a.script[len(a.script)-1] != nil {
		return nil, a.script[len(a.script)-1] // the last failure, for ever
	}
	return map[string]any{"ok": true}, nil
}

var (
	err503       = &handler.RetryableUpstream{Err: errors.New("HTTP 503")}
	mayHaveActed = handler.Uncertain("HTTP 502 after the request was sent").Retryable(0).Err()
)

func withExecution(e toolplane.Execution) func(*toolplane.Definition) {
	return func(d *toolplane.Definition) { d.Execution = &e }
}

func retrySafe(d *toolplane.Definition) { d.Retry = toolplane.RetrySafe }

// A read whose retry is safe is attempted again after a transient
// failure and answers the attempt that succeeded; one whose retry is none
// is attempted once.
func TestReadRetriedAfterATransientFailure(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		mutate []func(*toolplane.Definition)
		script []error
		want   toolplane.Code
		calls  int64
	}{
		{"503 then an answer", []func(*toolplane.Definition){retrySafe}, []error{err503, nil}, "", 2},
		{"unavailable then an answer", []func(*toolplane.Definition){retrySafe}, []error{&handler.Unavailable{Err: errors.New("down")}, nil}, "", 2},
		{"explained retryable then an answer", []func(*toolplane.Definition){retrySafe}, []error{handler.Explain(toolplane.CodeRetryableUpstream, "busy").Err(), nil}, "", 2},
		{"503 throughout, three attempts", []func(*toolplane.Definition){retrySafe}, []error{err503}, toolplane.CodeRetryableUpstream, 3},
		{"503 throughout, the budget's attempts", []func(*toolplane.Definition){retrySafe, withExecution(toolplane.Execution{MaxAttempts: 5, Backoff: toolplane.Duration(time.Millisecond)})}, []error{err503}, toolplane.CodeRetryableUpstream, 5},
		{"a business failure is not retried", []func(*toolplane.Definition){retrySafe}, []error{&handler.NotFound{Message: "no such order"}}, toolplane.CodeNotFound, 1},
		{"a refusal no attempt changes is not retried", []func(*toolplane.Definition){retrySafe}, []error{handler.Explain(toolplane.CodeUnavailable, "not served").Err()}, toolplane.CodeUnavailable, 1},
		{"retry none: once", nil, []error{err503, nil}, toolplane.CodeRetryableUpstream, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := &attempts{script: tt.script}
			e := newEnv(t, newStore(t), tool{def: def("crm.get", toolplane.EffectRead, tt.mutate...), fn: h.fn, opts: []handler.Option{handler.WithContextBound()}})
			r, err := e.iv.Invoke(context.Background(), "crm.get", args("to", "p1"), inv("crm.get"))
			if tt.want == "" {
				mustOK(t, r, err)
			} else {
				code(t, r, err, tt.want)
			}
			if got := h.n.Load(); got != tt.calls {
				t.Errorf("%d attempts, want %d", got, tt.calls)
			}
		})
	}
}

// A write whose binding declares nothing of its downstream is never
// attempted twice, whatever it met: its effect could happen twice.
func TestWriteWithoutKeyedDownstreamIsNeverRetried(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		fail   error
		want   toolplane.Code
		status toolplane.ClaimStatus
	}{
		{"a transient failure", err503, toolplane.CodeRetryableUpstream, ""},
		{"a failure that may have acted", mayHaveActed, toolplane.CodeUncertain, toolplane.ClaimUncertain},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newStore(t)
			h := &attempts{script: []error{tt.fail, nil}}
			e := newEnv(t, store, tool{def: def("crm.update", toolplane.EffectWrite, withExecution(toolplane.Execution{MaxAttempts: 3})), fn: h.fn})
			in, a := inv("crm.update"), args("to", "p1")
			r, err := e.iv.Invoke(context.Background(), "crm.update", a, in)
			code(t, r, err, tt.want)
			if got := h.n.Load(); got != 1 {
				t.Fatalf("%d attempts, want 1", got)
			}
			cl, err := claimOf(t, store, "crm.update", in, a)
			if tt.status == "" {
				if !errors.Is(err, toolplane.ErrNotFound) {
					t.Fatalf("claim %+v (%v), want it released", cl, err)
				}
				return
			}
			if err != nil || cl.Status != tt.status {
				t.Fatalf("claim %+v (%v), want %s", cl, err, tt.status)
			}
		})
	}
}

// A write whose downstream honours the key it is sent is attempted again,
// even after an attempt that may have acted, and every attempt carries
// the call's one key; the downstream's answer ends the call.
func TestKeyedWriteIsRetriedWithTheSameKey(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	h := &attempts{script: []error{mayHaveActed, err503, nil}}
	e := newEnv(t, store, tool{def: def("crm.update", toolplane.EffectWrite), fn: h.fn, opts: []handler.Option{handler.WithKeyedDownstream()}})
	in, a := inv("crm.update"), args("to", "p1")
	must(t).OK(e.iv.Invoke(context.Background(), "crm.update", a, in))
	if got := h.n.Load(); got != 3 {
		t.Fatalf("%d attempts, want 3", got)
	}
	cl, err := claimOf(t, store, "crm.update", in, a)
	if err != nil || cl.Status != toolplane.ClaimCompleted {
		t.Fatalf("claim %+v (%v), want completed", cl, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range h.keys {
		if k == "" || k != cl.Key {
			t.Fatalf("keys %q, want the claim's key %q on every attempt", h.keys, cl.Key)
		}
	}
}

// A write whose definition declares replay (its downstream honours the
// key: a remote server's owner said so, or the handler's author) is
// attempted again within the call like a keyed one, under the same key.
func TestWriteDeclaringReplayIsRetriedWithTheSameKey(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	h := &attempts{script: []error{err503, nil}}
	d := def("crm.update", toolplane.EffectWrite)
	d.Replay = &toolplane.Replay{MaxAttempts: 3}
	d.Annotations.Idempotent = true
	e := newEnv(t, store, tool{def: d, fn: h.fn})
	in, a := inv("crm.update"), args("to", "p1")
	must(t).OK(e.iv.Invoke(context.Background(), "crm.update", a, in))
	if got := h.n.Load(); got != 2 {
		t.Fatalf("%d attempts, want 2", got)
	}
	cl, err := claimOf(t, store, "crm.update", in, a)
	if err != nil || cl.Status != toolplane.ClaimCompleted {
		t.Fatalf("claim %+v (%v), want completed", cl, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.keys) != 2 || h.keys[0] != cl.Key || h.keys[1] != cl.Key {
		t.Fatalf("keys %q, want the claim's key %q on both attempts", h.keys, cl.Key)
	}
}

// A downstream's Retry-After is waited when it fits the call's time; when
// it does not, the call stops at once with retryable_upstream, and the
// wait is passed on as its retry hint.
func TestRetryAfterWithinTheDeadline(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		after    time.Duration
		want     toolplane.Code
		calls    int64
		minTook  time.Duration
		maxTook  time.Duration
		wantHint int
	}{
		{"fits", 300 * time.Millisecond, "", 2, 300 * time.Millisecond, 2 * time.Second, 0},
		{"too long for the deadline", 10 * time.Second, toolplane.CodeRetryableUpstream, 1, 0, 500 * time.Millisecond, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := &attempts{script: []error{&handler.RetryableUpstream{Err: errors.New("HTTP 429"), After: tt.after}, nil}}
			e := newEnv(t, newStore(t), tool{def: def("crm.get", toolplane.EffectRead, retrySafe), fn: h.fn, opts: []handler.Option{handler.WithContextBound()}})
			start := time.Now()
			r, err := e.iv.Invoke(context.Background(), "crm.get", args("to", "p1"), inv("crm.get"))
			took := time.Since(start)
			if tt.want == "" {
				mustOK(t, r, err)
			} else {
				code(t, r, err, tt.want)
				if r.Error.RetryAfter != tt.wantHint {
					t.Errorf("retry_after_seconds %d, want %d", r.Error.RetryAfter, tt.wantHint)
				}
			}
			if got := h.n.Load(); got != tt.calls {
				t.Errorf("%d attempts, want %d", got, tt.calls)
			}
			if took < tt.minTook || took > tt.maxTook {
				t.Errorf("the call took %v, want %v to %v", took, tt.minTook, tt.maxTook)
			}
		})
	}
}

// Attempts and pauses stay inside the call's timeout: a downstream that
// keeps failing is tried no longer than the timeout allows, and an
// attempt that hangs is cut at its attempt timeout and tried again.
func TestAttemptsAndPausesStayInsideTheTimeout(t *testing.T) {
	t.Parallel()
	t.Run("failing fast", func(t *testing.T) {
		t.Parallel()
		// The tool's five attempts and their pauses (up to 1.5s) fit its
		// two seconds, but the caller leaves the call only 400ms.
		h := &attempts{script: []error{err503}}
		d := def("crm.get", toolplane.EffectRead, retrySafe, withExecution(toolplane.Execution{MaxAttempts: 5, Backoff: toolplane.Duration(100 * time.Millisecond)}))
		e := newEnv(t, newStore(t), tool{def: d, fn: h.fn, opts: []handler.Option{handler.WithContextBound()}})
		in := inv("crm.get")
		in.Deadline = e.clock.Now().Add(400 * time.Millisecond)
		start := time.Now()
		r, err := e.iv.Invoke(context.Background(), "crm.get", args("to", "p1"), in)
		took := time.Since(start)
		code(t, r, err, toolplane.CodeRetryableUpstream)
		if took > 400*time.Millisecond+200*time.Millisecond {
			t.Errorf("the call took %v, past its 400ms deadline", took)
		}
		if n := h.n.Load(); n < 1 || n > 5 {
			t.Errorf("%d attempts, want 1 to 5", n)
		}
	})
	for _, bound := range []bool{true, false} {
		name := map[bool]string{true: "hanging, context bound", false: "hanging, ignoring its context"}[bound]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int64
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			hang := func(ctx context.Context, _ handler.Call, _ any) (any, error) {
				n.Add(1)
				if bound {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				<-release
				return nil, nil
			}
			var opts []handler.Option
			if bound {
				opts = append(opts, handler.WithContextBound())
			}
			d := def("crm.get", toolplane.EffectRead, retrySafe,
				withExecution(toolplane.Execution{MaxAttempts: 3, AttemptTimeout: toolplane.Duration(100 * time.Millisecond), Backoff: toolplane.Duration(10 * time.Millisecond)}),
				func(d *toolplane.Definition) { d.Timeout = toolplane.Duration(time.Second) })
			e := newEnv(t, newStore(t), tool{def: d, fn: hang, opts: opts})
			start := time.Now()
			r, err := e.iv.Invoke(context.Background(), "crm.get", args("to", "p1"), inv("crm.get"))
			took := time.Since(start)
			code(t, r, err, toolplane.CodeTimeout)
			if got := n.Load(); got != 3 {
				t.Errorf("%d attempts, want 3", got)
			}
			// Three attempts of 100ms and two pauses of at most 10ms and
			// 20ms: well inside the second the call had.
			if took < 300*time.Millisecond || took > 800*time.Millisecond {
				t.Errorf("the call took %v, want about 300ms", took)
			}
		})
	}
}

// A write whose first attempt hangs past its attempt timeout may have
// acted: with a keyed downstream it is attempted again, under the same
// key, and the answer of the second ends it.
func TestKeyedWriteRetriedAfterAnAttemptTimeout(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	var n atomic.Int64
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	fn := func(ctx context.Context, _ handler.Call, _ any) (any, error) {
		if n.Add(1) == 1 {
			<-release // ignores its context
		}
		return map[string]any{"ok": true}, nil
	}
	d := def("crm.update", toolplane.EffectWrite, withExecution(toolplane.Execution{AttemptTimeout: toolplane.Duration(100 * time.Millisecond)}))
	e := newEnv(t, store, tool{def: d, fn: fn, opts: []handler.Option{handler.WithKeyedDownstream()}})
	in, a := inv("crm.update"), args("to", "p1")
	must(t).OK(e.iv.Invoke(context.Background(), "crm.update", a, in))
	if got := n.Load(); got != 2 {
		t.Fatalf("%d attempts, want 2", got)
	}
	if cl, err := claimOf(t, store, "crm.update", in, a); err != nil || cl.Status != toolplane.ClaimCompleted {
		t.Fatalf("claim %+v (%v), want completed", cl, err)
	}
}

// A keyed write whose first attempt may have acted and whose last was
// refused ends uncertain: the refusal says nothing of the first, and
// releasing the key would let the effect happen twice.
func TestEarlierAttemptThatMayHaveActedLeavesTheCallUncertain(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	h := &attempts{script: []error{mayHaveActed, &handler.RetryableUpstream{Err: errors.New("HTTP 429")}}}
	e := newEnv(t, store, tool{def: def("crm.update", toolplane.EffectWrite, withExecution(toolplane.Execution{MaxAttempts: 2})), fn: h.fn,
		opts: []handler.Option{handler.WithKeyedDownstream()}})
	in, a := inv("crm.update"), args("to", "p1")
	r, err := e.iv.Invoke(context.Background(), "crm.update", a, in)
	code(t, r, err, toolplane.CodeUncertain)
	if got := h.n.Load(); got != 2 {
		t.Fatalf("%d attempts, want 2", got)
	}
	if cl, err := claimOf(t, store, "crm.update", in, a); err != nil || cl.Status != toolplane.ClaimUncertain {
		t.Fatalf("claim %+v (%v), want uncertain", cl, err)
	}
}

// claimStores answers a migrated platform store on each database the
// tests run on: SQLite always, PostgreSQL when TOOLPLANE_TEST_POSTGRES is
// set.
func claimStores(t *testing.T) map[string]toolplane.Store {
	t.Helper()
	ctx := context.Background()
	dsns := map[string]string{"sqlite": t.TempDir() + "/toolplane.db"}
	if dsn, ok := pgtest.LookupDSN(); ok {
		dsns["postgres"] = pgtest.SchemaDSN(t, dsn)
	} else {
		t.Log("PostgreSQL not tested: set " + pgtest.DSNVariable)
	}
	out := map[string]toolplane.Store{}
	for name, dsn := range dsns {
		b, err := backend.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		if err := b.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		out[name] = b.Store
	}
	return out
}

// TestWriteAttemptsShareOneClaimAndKey: a write's attempts run under one
// claim and one key; when the last failure is transient the claim is
// released (nothing was done, an identical call runs afresh), and when it
// is a business failure the claim completes with it (an identical call
// is answered from the journal) — on SQLite and PostgreSQL.
func TestWriteAttemptsShareOneClaimAndKey(t *testing.T) {
	t.Parallel()
	for name, store := range claimStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, tt := range []struct {
				name   string
				script []error
				want   toolplane.Code
				calls  int64
				status toolplane.ClaimStatus // "" for released
			}{
				{"transient throughout: released", []error{err503}, toolplane.CodeRetryableUpstream, 3, ""},
				{"transient, then a business failure: completed", []error{err503, &handler.Conflict{Message: "already refunded"}}, toolplane.CodeConflict, 2, toolplane.ClaimCompleted},
				{"transient, then an answer: completed", []error{err503, nil}, "", 2, toolplane.ClaimCompleted},
			} {
				t.Run(tt.name, func(t *testing.T) {
					h := &attempts{script: tt.script}
					d := def("crm.update", toolplane.EffectWrite, withExecution(toolplane.Execution{Backoff: toolplane.Duration(time.Millisecond)}))
					iv := claimInvoker(t, store, d, h.fn, handler.WithKeyedDownstream())
					in := inv("crm.update")
					in.OrganizationID, in.RunID = toolplane.NewID("org_"), toolplane.NewID("run_")
					a := args("to", "p1")
					r, err := iv.Invoke(context.Background(), "crm.update", a, in)
					if tt.want == "" {
						mustOK(t, r, err)
					} else {
						code(t, r, err, tt.want)
					}
					if got := h.n.Load(); got != tt.calls {
						t.Fatalf("%d attempts, want %d", got, tt.calls)
					}
					key := invoke.Key(in, hashOf(t, a))
					h.mu.Lock()
					for _, k := range h.keys {
						if k != key {
							t.Errorf("keys %q, want %q on every attempt", h.keys, key)
							break
						}
					}
					h.mu.Unlock()
					cl, err := store.GetClaim(context.Background(), in.OrganizationID, "crm.update", key)
					switch {
					case tt.status == "" && !errors.Is(err, toolplane.ErrNotFound):
						t.Fatalf("claim %+v (%v), want released", cl, err)
					case tt.status != "" && (err != nil || cl.Status != tt.status || cl.Attempts != 1):
						t.Fatalf("claim %+v (%v), want %s after one dispatch", cl, err, tt.status)
					}
					// An identical call: a released key runs afresh; a
					// completed one is answered from the journal.
					before := h.n.Load()
					r, err = iv.Invoke(context.Background(), "crm.update", a, in)
					if err != nil {
						t.Fatal(err)
					}
					if ran := h.n.Load() > before; ran != (tt.status == "") || (tt.status != "" && !r.Meta.Replayed) {
						t.Fatalf("identical call ran the handler %v, replayed %v", ran, r.Meta.Replayed)
					}
				})
			}
		})
	}
}

// claimInvoker answers an invoker over store running d with fn.
func claimInvoker(t *testing.T, store toolplane.Store, d toolplane.Definition, fn handler.Func, opts ...handler.Option) *invoke.Invoker {
	t.Helper()
	hs := handler.NewRegistry()
	b, err := handler.BindFunc(d.Binding.Handler.Key, fn, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.Register(b); err != nil {
		t.Fatal(err)
	}
	reg, _, err := registry.Build([]toolplane.Definition{d}, registry.Options{Bindings: bindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{},
		Node: "test", LeaseMargin: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return iv
}
