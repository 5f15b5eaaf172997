package invoke_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/postgres/pgtest"
)

// onStores runs f on a fresh store of each database: SQLite always, and
// PostgreSQL when TOOLPLANE_TEST_POSTGRES is set.
func onStores(t *testing.T, f func(t *testing.T, s toolplane.Store)) {
	t.Helper()
	dsns := map[string]string{"sqlite": filepath.Join(t.TempDir(), "toolplane.db")}
	if dsn, ok := pgtest.LookupDSN(); ok {
		dsns["postgres"] = pgtest.SchemaDSN(t, dsn)
	} else {
		t.Log("PostgreSQL not tested: set " + pgtest.DSNVariable)
	}
	for name, dsn := range dsns {
		b, err := backend.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		if err := b.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, b.Store)
		})
	}
}

// auditOf answers the organization's audit events, oldest first.
func auditOf(t *testing.T, s toolplane.Store) []toolplane.AuditEvent {
	t.Helper()
	evs, _, err := s.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(evs)-1; i < j; i, j = i+1, j-1 {
		evs[i], evs[j] = evs[j], evs[i]
	}
	return evs
}

func TestDeadlineTooShortIsRefusedBeforeTheClaim(t *testing.T) {
	t.Parallel()
	onStores(t, func(t *testing.T, s toolplane.Store) {
		e := newEnvWith(t, newStore(t), func(c *invoke.Config) { c.Store = s },
			tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{})})
		for _, left := range []time.Duration{time.Millisecond, 0, -time.Hour} {
			in := inv("crm.update")
			in.Deadline = e.clock.Now().Add(left)
			r, err := e.iv.Invoke(context.Background(), "crm.update", args("to", "x"), in)
			code(t, r, err, toolplane.CodeDeadlineExceeded)
			if e.count("crm.update") != 0 {
				t.Fatalf("%v left: the handler ran", left)
			}
			key := invoke.Key(in, hashOf(t, args("to", "x")))
			if _, err := s.GetClaim(context.Background(), "org-1", "crm.update", key); !errors.Is(err, toolplane.ErrNotFound) {
				t.Fatalf("%v left: a claim was taken: %v", left, err)
			}
		}
		evs := auditOf(t, s)
		if len(evs) != 3 {
			t.Fatalf("audit events = %d, want one per refusal", len(evs))
		}
		for _, ev := range evs {
			if ev.Outcome != string(toolplane.CodeDeadlineExceeded) || ev.ParentID != "" {
				t.Fatalf("audit event = %+v", ev)
			}
		}
	})
}

func TestDeadlineFloorIsConfigurable(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, newStore(t), func(c *invoke.Config) { c.DeadlineFloor = time.Second },
		tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{})})
	in := inv("crm.get")
	in.Deadline = e.clock.Now().Add(900 * time.Millisecond)
	r, err := e.iv.Invoke(context.Background(), "crm.get", args(), in)
	code(t, r, err, toolplane.CodeDeadlineExceeded)
	in.Deadline = e.clock.Now().Add(1100 * time.Millisecond)
	r, err = e.iv.Invoke(context.Background(), "crm.get", args(), in)
	if err != nil || !r.OK {
		t.Fatalf("with more than the floor left: %+v, %v", r, err)
	}
}

// deadlineSeen records the time a handler's context gives it.
type deadlineSeen struct {
	mu   sync.Mutex
	left []time.Duration
}

func (d *deadlineSeen) fn(ctx context.Context, _ handler.Call, _ any) (any, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		return nil, errors.New("no deadline")
	}
	d.mu.Lock()
	d.left = append(d.left, time.Until(dl))
	d.mu.Unlock()
	return map[string]any{}, nil
}

func TestDeadlineNeverLoosensTheToolsTimeout(t *testing.T) {
	t.Parallel()
	seen := &deadlineSeen{}
	e := newEnv(t, newStore(t), tool{def: def("crm.get", toolplane.EffectRead), fn: seen.fn}) // timeout 2s
	for _, asked := range []time.Duration{10 * 365 * 24 * time.Hour, 500 * time.Millisecond} {
		in := inv("crm.get")
		in.Deadline = e.clock.Now().Add(asked)
		r, err := e.iv.Invoke(context.Background(), "crm.get", args(), in)
		if err != nil || !r.OK {
			t.Fatalf("%+v, %v", r, err)
		}
	}
	if got := seen.left; len(got) != 2 || got[0] > 2*time.Second || got[0] < time.Second || got[1] > 500*time.Millisecond {
		t.Fatalf("the handler's time = %v; want at most the tool's 2s for ten years asked, at most 500ms for 500ms", got)
	}
}

// chain builds an environment of tools that call each other through the
// invoker from their handlers, as next says (a tool name, or "" to
// answer), recording what each nested call answered.
type chain struct {
	e       *env
	mu      sync.Mutex
	answers []toolplane.Result
	hops    []int
	before  func(name string) // run in a handler before its nested call
}

func newChain(t *testing.T, s toolplane.Store, tune func(*invoke.Config), next map[string]string) *chain {
	ch := &chain{}
	var tools []tool
	for name, callee := range next {
		tools = append(tools, tool{def: def(name, toolplane.EffectRead), fn: func(ctx context.Context, c handler.Call, _ any) (any, error) {
			ch.mu.Lock()
			ch.hops = append(ch.hops, c.Invocation.Hops)
			ch.mu.Unlock()
			if callee == "" {
				return map[string]any{}, nil
			}
			if ch.before != nil {
				ch.before(name)
			}
			r, err := ch.e.iv.Invoke(ctx, callee, args(), nil)
			if err != nil {
				return nil, err
			}
			ch.mu.Lock()
			ch.answers = append(ch.answers, r)
			ch.mu.Unlock()
			return map[string]any{"inner_ok": r.OK}, nil
		}})
	}
	ch.e = newEnvWith(t, newStore(t), func(c *invoke.Config) {
		if s != nil {
			c.Store = s
		}
		if tune != nil {
			tune(c)
		}
	}, tools...)
	return ch
}

func TestHopsCountDownThroughAHandlerChain(t *testing.T) {
	t.Parallel()
	onStores(t, func(t *testing.T, s toolplane.Store) {
		ch := newChain(t, s, nil, map[string]string{"loop.a": "loop.b", "loop.b": "loop.a"})
		in := inv("loop.a", "loop.b")
		in.Hops = 3
		r, err := ch.e.iv.Invoke(context.Background(), "loop.a", args(), in)
		if err != nil || !r.OK {
			t.Fatalf("the outer call = %+v, %v", r, err)
		}
		// a(3) -> b(2) -> a(1) -> b(0) -> a refused.
		if fmt.Sprint(ch.hops) != "[3 2 1 0]" {
			t.Fatalf("hops seen by the handlers = %v", ch.hops)
		}
		if len(ch.answers) == 0 || ch.answers[0].Error == nil || ch.answers[0].Error.Code != toolplane.CodeMaxHopsExceeded {
			t.Fatalf("the innermost answer = %+v; want max_hops_exceeded", ch.answers)
		}
		if ch.e.count("loop.a") != 2 || ch.e.count("loop.b") != 2 {
			t.Fatalf("runs a=%d b=%d, want 2 and 2", ch.e.count("loop.a"), ch.e.count("loop.b"))
		}
		// The trail: each call names the one that made it.
		evs := auditOf(t, s)
		if len(evs) != 5 {
			t.Fatalf("audit events = %d, want 5", len(evs))
		}
		byID := map[string]toolplane.AuditEvent{}
		var refused, top toolplane.AuditEvent
		for _, ev := range evs {
			byID[ev.ID] = ev
			switch {
			case ev.Outcome == string(toolplane.CodeMaxHopsExceeded):
				refused = ev
			case ev.ParentID == "":
				top = ev
			}
		}
		if top.Tool != "loop.a" || refused.Tool != "loop.a" {
			t.Fatalf("top %+v, refused %+v", top, refused)
		}
		depth, at := 0, refused
		for at.ParentID != "" {
			p, ok := byID[at.ParentID]
			if !ok {
				t.Fatalf("event %s names parent %s, which is not in the trail", at.ID, at.ParentID)
			}
			if p.Tool == at.Tool || p.AgentID != at.AgentID || p.RunID != at.RunID {
				t.Fatalf("parent %+v of %+v", p, at)
			}
			at, depth = p, depth+1
		}
		if at.ID != top.ID || depth != 4 {
			t.Fatalf("the refused call is %d below %s, want 4 below %s", depth, at.ID, top.ID)
		}
	})
}

func TestHopsForgedUpwardAreCapped(t *testing.T) {
	t.Parallel()
	ch := newChain(t, nil, func(c *invoke.Config) { c.MaxHops = 2 }, map[string]string{"loop.a": "loop.b", "loop.b": "loop.a"})
	in := inv("loop.a", "loop.b")
	in.Hops = 1 << 30
	if _, err := ch.e.iv.Invoke(context.Background(), "loop.a", args(), in); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ch.hops) != "[2 1 0]" {
		t.Fatalf("hops seen by the handlers = %v; want the platform's 2 at the top", ch.hops)
	}
	if ch.answers[0].Error == nil || ch.answers[0].Error.Code != toolplane.CodeMaxHopsExceeded {
		t.Fatalf("the innermost answer = %+v", ch.answers[0])
	}
}

func TestHopsBelowZeroAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{})})
	in := inv("crm.get")
	in.Hops = -1
	r, err := e.iv.Invoke(context.Background(), "crm.get", args(), in)
	code(t, r, err, toolplane.CodeMaxHopsExceeded)
	if e.count("crm.get") != 0 {
		t.Fatal("the handler ran")
	}
}

func TestChildInheritsTheParentsRemainingTime(t *testing.T) {
	t.Parallel()
	seen := &deadlineSeen{}
	var e *env
	var mu sync.Mutex
	var inner []toolplane.Result
	var spend time.Duration
	parent := def("outer.run", toolplane.EffectRead) // timeout 2s
	child := def("inner.get", toolplane.EffectRead, func(d *toolplane.Definition) { d.Timeout = toolplane.Duration(time.Minute) })
	e = newEnv(t, newStore(t),
		tool{def: parent, fn: func(ctx context.Context, c handler.Call, _ any) (any, error) {
			e.clock.Advance(spend) // the parent spends part of its time
			r, err := e.iv.Invoke(ctx, "inner.get", args(), nil)
			mu.Lock()
			inner = append(inner, r)
			mu.Unlock()
			return map[string]any{}, err
		}},
		tool{def: child, fn: seen.fn})
	in := inv("outer.run", "inner.get")
	in.Hops = 1
	spend = 1500 * time.Millisecond
	if r, err := e.iv.Invoke(context.Background(), "outer.run", args(), in); err != nil || !r.OK {
		t.Fatalf("%+v, %v", r, err)
	}
	if len(seen.left) != 1 || seen.left[0] > 500*time.Millisecond || !inner[0].OK {
		t.Fatalf("the child's time = %v (answer %+v); want at most the 500ms its parent had left, not its own minute", seen.left, inner)
	}
	// A parent with less than the floor left: the child is refused.
	spend = 1998 * time.Millisecond
	if r, err := e.iv.Invoke(context.Background(), "outer.run", args(), in); err != nil || !r.OK {
		t.Fatalf("%+v, %v", r, err)
	}
	if e.count("inner.get") != 1 || inner[1].Error == nil || inner[1].Error.Code != toolplane.CodeDeadlineExceeded {
		t.Fatalf("the child = %+v after %d runs; want deadline_exceeded, not run", inner[1], e.count("inner.get"))
	}
}

func TestChildInheritsTheCaller(t *testing.T) {
	t.Parallel()
	var e *env
	var got *toolplane.Invocation
	e = newEnv(t, newStore(t),
		tool{def: def("outer.run", toolplane.EffectRead), fn: func(ctx context.Context, _ handler.Call, _ any) (any, error) {
			// What the handler passes of its own is not who calls.
			r, err := e.iv.Invoke(ctx, "inner.get", args(), &toolplane.Invocation{OrganizationID: "org-2", AgentID: "someone", Hops: 99, StepPath: "lookup"})
			if err == nil && !r.OK {
				err = fmt.Errorf("inner: %+v", r.Error)
			}
			return map[string]any{}, err
		}},
		tool{def: def("inner.get", toolplane.EffectRead), fn: func(_ context.Context, c handler.Call, _ any) (any, error) {
			got = c.Invocation
			return map[string]any{}, nil
		}})
	in := inv("outer.run", "inner.get")
	in.UserID, in.TenantID, in.Hops = "user-1", "tenant-1", 4
	if r, err := e.iv.Invoke(context.Background(), "outer.run", args(), in); err != nil || !r.OK {
		t.Fatalf("%+v, %v", r, err)
	}
	if got == nil || got.OrganizationID != "org-1" || got.AgentID != "agent-1" || got.Principal.ID != "agent-1" ||
		got.RunID != "run-1" || got.UserID != "user-1" || got.TenantID != "tenant-1" || got.Hops != 3 ||
		got.StepPath != "lookup" || got.ParentID == "" {
		t.Fatalf("the child's invocation = %+v", got)
	}
}

func TestInvokeWithoutInvocationOutsideAHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{})})
	if _, err := e.iv.Invoke(context.Background(), "crm.get", args(), nil); !errors.Is(err, invoke.ErrFault) {
		t.Fatalf("err = %v, want a fault", err)
	}
}

// slowClaims is a store whose claims take the time given: the call's
// deadline passes between its claim and its dispatch.
type slowClaims struct {
	toolplane.Store
	advance func()
}

func (s slowClaims) InsertClaim(ctx context.Context, c *toolplane.Claim) (bool, error) {
	ok, err := s.Store.InsertClaim(ctx, c)
	s.advance()
	return ok, err
}

func TestDeadlinePassedAfterTheClaimReleasesIt(t *testing.T) {
	t.Parallel()
	var e *env
	store := newStore(t)
	e = newEnvWith(t, store, func(c *invoke.Config) {
		c.Store = slowClaims{Store: store, advance: func() { e.clock.Advance(time.Second) }}
	}, tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{})})
	in := inv("crm.update")
	in.Deadline = e.clock.Now().Add(500 * time.Millisecond)
	r, err := e.iv.Invoke(context.Background(), "crm.update", args("to", "x"), in)
	code(t, r, err, toolplane.CodeDeadlineExceeded)
	if e.count("crm.update") != 0 {
		t.Fatal("the handler ran")
	}
	if _, err := claimOf(t, store, "crm.update", in, args("to", "x")); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("the claim was kept: %v", err)
	}
	// A handler that runs past its time still answers timeout.
	slow := def("crm.slow", toolplane.EffectRead, func(d *toolplane.Definition) { d.Timeout = toolplane.Duration(20 * time.Millisecond) })
	e2 := newEnv(t, newStore(t), tool{def: slow, fn: func(ctx context.Context, _ handler.Call, _ any) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	r, err = e2.iv.Invoke(context.Background(), "crm.slow", args(), inv("crm.slow"))
	code(t, r, err, toolplane.CodeTimeout)
}

// A write whose answer the journal holds is answered that, whatever the
// time left: a refusal saying nothing was done would be false.
func TestAStoredAnswerIsAnsweredWhateverTheTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{})})
	in := inv("crm.update")
	if r, err := e.iv.Invoke(context.Background(), "crm.update", args("to", "x"), in); err != nil || !r.OK {
		t.Fatalf("%+v, %v", r, err)
	}
	in.Deadline = e.clock.Now().Add(time.Millisecond)
	r, err := e.iv.Invoke(context.Background(), "crm.update", args("to", "x"), in)
	if err != nil || !r.OK || !r.Meta.Replayed || e.count("crm.update") != 1 {
		t.Fatalf("the repeat with a millisecond left = %+v, %v after %d runs; want the stored answer", r, err, e.count("crm.update"))
	}
}

// An invocation stored before hops were recorded (an approval, an
// asynchronous call, a replayable claim filed before) has no hop count:
// its call may still call tools, up to the platform's maximum, rather
// than having every tool call it makes refused.
func TestStoredInvocationFromBeforeHopsMayCallTools(t *testing.T) {
	t.Parallel()
	ch := newChain(t, nil, nil, map[string]string{"flow.a": "flow.b", "flow.b": ""})
	stored := []byte(`{"OrganizationID":"org-1","RunID":"run-1","AgentID":"agent-1","StepPath":"agent","Principal":{"ID":"agent-1","Tools":["flow.a","flow.b"]},"Source":"sdk"}`)
	in, err := approval.DecodeInvocation(stored)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.e.iv.Invoke(context.Background(), "flow.a", args(), in); err != nil {
		t.Fatal(err)
	}
	if len(ch.answers) != 1 || ch.answers[0].Error != nil {
		t.Fatalf("the stored call's one child call answered %+v (hops seen %v), want it run", ch.answers, ch.hops)
	}
	if len(ch.hops) == 0 || ch.hops[0] != invoke.DefaultMaxHops {
		t.Fatalf("hops seen %v, want the stored call capped at %d", ch.hops, invoke.DefaultMaxHops)
	}
}
