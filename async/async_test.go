package async_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/async"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/registry"
)

type noteIn struct {
	Text string `json:"text"`
}

type noteOut struct {
	N int64 `json:"n"`
}

// rig is a service over a real store, with three tools: crm.add_note (a
// write counting its effects), crm.wait (a read that runs until its
// context ends or it is released) and crm.read (a read).
type rig struct {
	store   toolplane.Store
	iv      *invoke.Invoker
	svc     *async.Service
	effects atomic.Int64
	// byKey counts crm.add_note's effects by the caller's idempotency key
	// (a *atomic.Int64 each): a call told to stop while its write was in
	// flight may make its effect after the call reads uncertain, and
	// effects, the rig's total, would count it as the next call's.
	byKey sync.Map
	// started is told when crm.wait starts; release ends it.
	started chan struct{}
	release chan struct{}
	// sawEnd counts crm.wait handlers that saw their context end.
	sawEnd atomic.Int64
}

// stores answers a fresh store on each database: SQLite always,
// PostgreSQL when TOOLPLANE_TEST_POSTGRES is set.
func stores(t testing.TB) map[string]toolplane.Store {
	t.Helper()
	dsns := map[string]string{"sqlite": filepath.Join(t.TempDir(), "toolplane.db")}
	if dsn, ok := pgtest.LookupDSN(); ok {
		dsns["postgres"] = pgtest.SchemaDSN(t, dsn)
	}
	out := map[string]toolplane.Store{}
	for name, dsn := range dsns {
		b, err := backend.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		if err := b.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		out[name] = b.Store
	}
	return out
}

// onEach runs f on each store.
func onEach(t *testing.T, f func(t *testing.T, s toolplane.Store)) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, s)
		})
	}
}

type bindings struct{ *handler.Registry }

func (bindings) Connection(string) bool   { return false }
func (bindings) FactResolver(string) bool { return false }

func newRig(t *testing.T, s toolplane.Store, cfg async.Config) *rig {
	t.Helper()
	return newRigWith(t, s, cfg, policy.Grants{})
}

// newRigWith is newRig deciding calls with pol.
func newRigWith(t *testing.T, s toolplane.Store, cfg async.Config, pol policy.Policy) *rig {
	t.Helper()
	r := &rig{store: s, started: make(chan struct{}, 16), release: make(chan struct{})}
	no := false
	def := func(name string, effect toolplane.Effect) toolplane.Definition {
		d, err := handler.Define[noteIn, noteOut](toolplane.Definition{
			Name: name, Version: "1.0.0", Description: "A tool of the asynchronous call tests.",
			Kind: toolplane.KindInternal, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}},
			Effect: effect,
		})
		if effect != toolplane.EffectRead {
			d.Repeatable = &no
		}
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	handlers := handler.NewRegistry()
	must := func(b *handler.Binding, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if err := handlers.Register(b); err != nil {
			t.Fatal(err)
		}
	}
	must(handler.Bind("crm.add_note", func(_ context.Context, c handler.Call, _ noteIn) (noteOut, error) {
		r.effectsOf(c.Invocation.IdempotencyKey).Add(1)
		return noteOut{N: r.effects.Add(1)}, nil
	}, nil))
	must(handler.Bind("crm.wait", func(ctx context.Context, _ handler.Call, _ noteIn) (noteOut, error) {
		r.started <- struct{}{}
		select {
		case <-ctx.Done():
			r.sawEnd.Add(1)
			return noteOut{}, ctx.Err()
		case <-r.release:
			return noteOut{N: 1}, nil
		}
	}, nil))
	must(handler.Bind("crm.read", func(context.Context, handler.Call, noteIn) (noteOut, error) {
		return noteOut{N: 7}, nil
	}, nil))
	reg, _, err := registry.Build([]toolplane.Definition{
		def("crm.add_note", toolplane.EffectWrite), def("crm.wait", toolplane.EffectRead), def("crm.read", toolplane.EffectRead),
	}, registry.Options{Bindings: bindings{handlers}})
	if err != nil {
		t.Fatal(err)
	}
	r.iv, err = invoke.New(invoke.Config{Registry: reg, Handlers: handlers, Store: s, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Invoker = s, r.iv
	if cfg.Poll == 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	r.svc, err = async.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// other answers a second service over the same store and invoker: another
// node.
func (r *rig) other(t *testing.T) *async.Service {
	t.Helper()
	svc, err := async.New(async.Config{Store: r.store, Invoker: r.iv, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// agent is the credential of the agent making the calls, in org.
func agent(org string) *toolplane.Credential {
	return &toolplane.Credential{ID: "key-1", OrganizationID: org, Subject: "agent-1", Kind: toolplane.CredentialAgent,
		Tools: []string{"crm.add_note", "crm.wait", "crm.read"}}
}

// inv answers a fresh door invocation of org's agent in run.
func inv(org, run, key string) *toolplane.Invocation {
	cred := agent(org)
	return &toolplane.Invocation{OrganizationID: org, RunID: run, StepPath: "agent", AgentID: cred.Subject, CredentialID: cred.ID,
		Credential: cred, Principal: toolplane.Principal{ID: cred.Subject}, IdempotencyKey: key, Source: toolplane.SourceREST}
}

func (r *rig) submit(t *testing.T, tool, org, key string) *async.Submission {
	t.Helper()
	sub, err := r.svc.Submit(t.Context(), async.Request{Tool: tool, Arguments: json.RawMessage(`{"text":"hello"}`), Invocation: inv(org, "run-1", key)})
	if err != nil {
		t.Fatal(err)
	}
	if sub.Ran {
		t.Fatalf("the call ran now: %+v, %v", sub.Result, sub.Err)
	}
	return sub
}

// effectsOf answers the counter of crm.add_note's effects made for the
// caller's key.
func (r *rig) effectsOf(key string) *atomic.Int64 {
	n, _ := r.byKey.LoadOrStore(key, new(atomic.Int64))
	return n.(*atomic.Int64)
}

func (r *rig) get(t *testing.T, org, id string) *toolplane.AsyncCall {
	t.Helper()
	c, err := r.store.GetAsyncCall(context.Background(), org, id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A submission retried with the same key is the one call already
// accepted, and however often its run is repeated (a worker retried, a
// node lost), the write happens once.
func TestASubmittedWriteAndItsRetryAreOneEffect(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newRig(t, s, async.Config{})
		first := r.submit(t, "crm.add_note", "org-1", "note-1")
		again := r.submit(t, "crm.add_note", "org-1", "note-1")
		if !again.Existing || again.Call.ID != first.Call.ID || first.Existing {
			t.Fatalf("the retry: %+v, first %+v", again, first)
		}
		if first.Call.Status != toolplane.AsyncQueued || len(first.Call.Invocation) == 0 {
			t.Fatalf("accepted: %+v", first.Call)
		}
		for range 3 {
			if err := r.svc.Run(t.Context(), "org-1", first.Call.ID, false); err != nil {
				t.Fatal(err)
			}
		}
		got := r.get(t, "org-1", first.Call.ID)
		if got.Status != toolplane.AsyncSucceeded || r.effects.Load() != 1 || got.StartedAt.IsZero() || got.EndedAt.IsZero() {
			t.Fatalf("after three runs: %+v, %d effects", got, r.effects.Load())
		}
		var res toolplane.Result
		if err := json.Unmarshal(got.Result, &res); err != nil || !res.OK {
			t.Fatalf("stored result %s: %v", got.Result, err)
		}
		// A second accepted call of the same key reaches the journal as
		// the same action: a new record is never a second effect.
		if err := s.InsertAsyncCall(t.Context(), &toolplane.AsyncCall{OrganizationID: "org-1", ID: "inv_copy", Tool: "crm.add_note",
			AgentID: "agent-1", Arguments: first.Call.Arguments, Invocation: first.Call.Invocation, Status: toolplane.AsyncQueued,
			CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := r.svc.Run(t.Context(), "org-1", "inv_copy", false); err != nil {
			t.Fatal(err)
		}
		if copyCall := r.get(t, "org-1", "inv_copy"); copyCall.Status != toolplane.AsyncSucceeded || r.effects.Load() != 1 {
			t.Fatalf("a copy of the call: %+v, %d effects", copyCall, r.effects.Load())
		}
	})
}

// A call that would be refused is not accepted: it runs now, and its
// refusal is its answer (and its audit event), as a synchronous call's.
func TestARefusedCallIsAnsweredNow(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newRig(t, s, async.Config{})
		for name, args := range map[string]string{"bad arguments": `{"text":5}`, "no such tool": `{}`} {
			tool := "crm.read"
			if name == "no such tool" {
				tool = "crm.nothing"
			}
			sub, err := r.svc.Submit(t.Context(), async.Request{Tool: tool, Arguments: json.RawMessage(args), Invocation: inv("org-1", "run-1", "")})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !sub.Ran || sub.Result.OK || sub.Call != nil {
				t.Fatalf("%s: %+v", name, sub)
			}
		}
		// A write without a run or key is the caller's malformed request.
		in := inv("org-1", "", "")
		_, err := r.svc.Submit(t.Context(), async.Request{Tool: "crm.add_note", Arguments: json.RawMessage(`{"text":"x"}`), Invocation: in})
		var needsRun *invoke.RunRequiredError
		if !errors.As(err, &needsRun) {
			t.Fatalf("a write without run or key: %v", err)
		}
	})
}

// A queued call cancelled never runs; a running call cancelled, from this
// node or another, sees its handler's context end and ends cancelled; an
// ended call stays as it ended.
func TestCancelIsCooperativeAndFinal(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newRig(t, s, async.Config{})
		owner := agent("org-1")

		queued := r.submit(t, "crm.add_note", "org-1", "cancel-queued")
		got, err := r.svc.Cancel(t.Context(), "org-1", queued.Call.ID, owner)
		if err != nil || got.Status != toolplane.AsyncCancelled {
			t.Fatalf("cancel of a queued call: %+v, %v", got, err)
		}
		if err := r.svc.Run(t.Context(), "org-1", queued.Call.ID, false); err != nil {
			t.Fatal(err)
		}
		if r.effects.Load() != 0 || r.get(t, "org-1", queued.Call.ID).Status != toolplane.AsyncCancelled {
			t.Fatalf("a cancelled call ran: %d effects", r.effects.Load())
		}

		for _, from := range []string{"this node", "another node"} {
			sub := r.submit(t, "crm.wait", "org-1", "")
			done := make(chan error, 1)
			go func() { done <- r.svc.Run(context.Background(), "org-1", sub.Call.ID, false) }()
			<-r.started
			canceller := r.svc
			if from == "another node" {
				canceller = r.other(t)
			}
			got, err := canceller.Cancel(t.Context(), "org-1", sub.Call.ID, owner)
			if err != nil || got.Status.Terminal() && got.Status != toolplane.AsyncCancelled {
				t.Fatalf("%s: cancel of a running call: %+v, %v", from, got, err)
			}
			if err := <-done; err != nil {
				t.Fatalf("%s: %v", from, err)
			}
			if end := r.get(t, "org-1", sub.Call.ID); end.Status != toolplane.AsyncCancelled || len(end.Result) != 0 {
				t.Fatalf("%s: after the cancel: %+v", from, end)
			}
		}
		// A handler told to stop is let go, not waited for: it sees the
		// end of its context as it returns.
		for deadline := time.Now().Add(5 * time.Second); r.sawEnd.Load() != 2 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if r.sawEnd.Load() != 2 {
			t.Fatalf("%d handlers saw their context end, want 2", r.sawEnd.Load())
		}

		ended := r.submit(t, "crm.read", "org-1", "")
		if err := r.svc.Run(t.Context(), "org-1", ended.Call.ID, false); err != nil {
			t.Fatal(err)
		}
		if got, err := r.svc.Cancel(t.Context(), "org-1", ended.Call.ID, owner); err != nil || got.Status != toolplane.AsyncSucceeded {
			t.Fatalf("cancel of an ended call: %+v, %v", got, err)
		}
	})
}

// A cancel racing completion ends in exactly one terminal state: the call
// was cancelled before it ran (no effect), it ran (one effect) and the
// cancel came too late, or the cancel stopped it while its write was in
// flight (uncertain); never two states, never none.
func TestACancelRacingCompletionEndsOnce(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newRig(t, s, async.Config{})
		owner := agent("org-1")
		cancelled := map[string]bool{} // keys of the calls that ended cancelled
		for i := range 20 {
			key := "race-" + strconv.Itoa(i)
			sub := r.submit(t, "crm.add_note", "org-1", key)
			var wg sync.WaitGroup
			wg.Go(func() {
				if err := r.svc.Run(context.Background(), "org-1", sub.Call.ID, false); err != nil {
					t.Error(err)
				}
			})
			wg.Go(func() {
				if _, err := r.svc.Cancel(context.Background(), "org-1", sub.Call.ID, owner); err != nil {
					t.Error(err)
				}
			})
			wg.Wait()
			got := r.get(t, "org-1", sub.Call.ID)
			// This call's effects alone: a previous call held uncertain may
			// make its own late.
			effect := r.effectsOf(key).Load()
			switch {
			case got.Status == toolplane.AsyncSucceeded && effect == 1:
			case got.Status == toolplane.AsyncCancelled && effect == 0:
				cancelled[key] = true
			case got.Status == toolplane.AsyncUncertain && effect <= 1:
				// Told to stop while its write was in flight: held for a
				// person to reconcile, as a timeout is.
			case got.Status == toolplane.AsyncRunning && got.CancelRequested:
				t.Fatalf("call %d left running", i)
			default:
				t.Fatalf("call %d ended %s with %d effects", i, got.Status, effect)
			}
		}
		// A call that ended cancelled never makes its effect later, and no
		// call makes two: the late writes of those held uncertain settle
		// within this wait.
		time.Sleep(200 * time.Millisecond)
		for i := range 20 {
			key := "race-" + strconv.Itoa(i)
			if n := r.effectsOf(key).Load(); n > 1 || cancelled[key] && n != 0 {
				t.Errorf("call %d (cancelled %v): %d effects in the end", i, cancelled[key], n)
			}
		}
	})
}

// Only the agent that made a call, and the people who run agents or
// administer the platform, read or cancel it; another organization never
// finds it.
func TestACallIsItsCallersAndTheirOrganizations(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newRig(t, s, async.Config{})
		sub := r.submit(t, "crm.read", "org-1", "")
		otherAgent := &toolplane.Credential{ID: "key-2", OrganizationID: "org-1", Subject: "agent-2", Kind: toolplane.CredentialAgent}
		stranger := agent("org-2")
		auditor := &toolplane.Credential{ID: "key-3", OrganizationID: "org-1", Subject: "ana", Kind: toolplane.CredentialPerson, Roles: []string{toolplane.RoleAuditor}}
		for name, who := range map[string]*toolplane.Credential{"another agent": otherAgent, "another organization": stranger} {
			if _, err := r.svc.Get(t.Context(), who.OrganizationID, sub.Call.ID, who); !errors.Is(err, toolplane.ErrNotFound) {
				t.Errorf("%s read it: %v", name, err)
			}
			if _, err := r.svc.Cancel(t.Context(), who.OrganizationID, sub.Call.ID, who); !errors.Is(err, toolplane.ErrNotFound) {
				t.Errorf("%s cancelled it: %v", name, err)
			}
		}
		if _, err := r.svc.Get(t.Context(), "org-1", sub.Call.ID, auditor); err != nil {
			t.Errorf("an auditor reads it: %v", err)
		}
		if _, err := r.svc.Cancel(t.Context(), "org-1", sub.Call.ID, auditor); !errors.Is(err, toolplane.ErrForbidden) {
			t.Errorf("an auditor cancelled it: %v", err)
		}
		if got := r.get(t, "org-1", sub.Call.ID); got.Status != toolplane.AsyncQueued {
			t.Fatalf("the call moved: %+v", got)
		}
	})
}

// A wait ends when the call ends, whether it ends before the wait is set
// up, while it waits on this node, or on another node (read by polling).
func TestAWaitCannotMissTheEnd(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newRig(t, s, async.Config{})
		owner := agent("org-1")

		early := r.submit(t, "crm.read", "org-1", "")
		if err := r.svc.Run(t.Context(), "org-1", early.Call.ID, false); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got, err := r.svc.Wait(t.Context(), "org-1", early.Call.ID, owner, 10*time.Second)
		if err != nil || got.Status != toolplane.AsyncSucceeded || time.Since(start) > 2*time.Second {
			t.Fatalf("a wait after the end: %+v, %v after %s", got, err, time.Since(start))
		}

		for _, where := range []string{"this node", "another node"} {
			sub := r.submit(t, "crm.read", "org-1", "")
			runner := r.svc
			if where == "another node" {
				runner = r.other(t)
			}
			go func() {
				time.Sleep(50 * time.Millisecond)
				if err := runner.Run(context.Background(), "org-1", sub.Call.ID, false); err != nil {
					t.Error(err)
				}
			}()
			start := time.Now()
			got, err := r.svc.Wait(t.Context(), "org-1", sub.Call.ID, owner, 10*time.Second)
			if err != nil || got.Status != toolplane.AsyncSucceeded || time.Since(start) > 5*time.Second {
				t.Fatalf("%s: %+v, %v after %s", where, got, err, time.Since(start))
			}
		}

		// A call that does not end: the wait answers it as it stands.
		stuck := r.submit(t, "crm.read", "org-1", "")
		got, err = r.svc.Wait(t.Context(), "org-1", stuck.Call.ID, owner, 100*time.Millisecond)
		if err != nil || got.Status != toolplane.AsyncQueued {
			t.Fatalf("a wait that runs out: %+v, %v", got, err)
		}
	})
}

// signer signs with a fixed secret, as the tests' stand-in for the
// organization's rotating one.
type signer struct{}

func (signer) Headers(_ context.Context, org, delivery string, body []byte, now time.Time) (http.Header, error) {
	h := http.Header{}
	h.Set("X-Test-Org", org)
	h.Set("X-Test-Delivery", delivery)
	h.Set("X-Test-Length", strconv.Itoa(len(body)))
	return h, nil
}

// A callback is posted signed when the call ends, retried until the
// receiver acknowledges it, recorded delivered; a receiver that never
// does leaves it expired on the last attempt. A callback URL on a private
// or metadata address, or not https, is refused at submission.
func TestCallbacksAreSignedRetriedAndGuarded(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		var (
			mu     sync.Mutex
			bodies []string
			heads  []http.Header
			fail   atomic.Int64
		)
		fail.Store(1)
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			b, _ := io.ReadAll(req.Body)
			mu.Lock()
			bodies, heads = append(bodies, string(b)), append(heads, req.Header.Clone())
			mu.Unlock()
			if fail.Add(-1) >= 0 {
				http.Error(w, "not yet", http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		defer recv.Close()
		r := newRig(t, s, async.Config{Signer: signer{}, AllowCIDRs: []string{"127.0.0.1/32"}})

		for _, bad := range []string{"http://10.0.0.8/cb", "https://169.254.169.254/latest", "ftp://example.com/x", "https://user:pw@example.com/cb", "/relative"} {
			_, err := r.svc.Submit(t.Context(), async.Request{Tool: "crm.read", Arguments: json.RawMessage(`{"text":"x"}`),
				Invocation: inv("org-1", "run-1", ""), CallbackURL: bad})
			if !errors.Is(err, async.ErrCallback) || !errors.Is(err, toolplane.ErrInvalid) {
				t.Errorf("callback %s: %v, want ErrCallback", bad, err)
			}
		}
		sub, err := r.svc.Submit(t.Context(), async.Request{Tool: "crm.read", Arguments: json.RawMessage(`{"text":"x"}`),
			Invocation: inv("org-1", "run-1", ""), CallbackURL: recv.URL + "/cb"})
		if err != nil {
			t.Fatal(err)
		}
		id := sub.Call.ID
		if err := r.svc.Run(t.Context(), "org-1", id, false); err != nil {
			t.Fatal(err)
		}
		if got := r.get(t, "org-1", id); got.CallbackState != toolplane.CallbackPending {
			t.Fatalf("after the end: %+v", got)
		}
		if err := r.svc.Deliver(t.Context(), "org-1", id, async.Attempt{N: 1}); err == nil {
			t.Fatal("a refused delivery answered no error")
		}
		if err := r.svc.Deliver(t.Context(), "org-1", id, async.Attempt{N: 2}); err != nil {
			t.Fatal(err)
		}
		got := r.get(t, "org-1", id)
		if got.CallbackState != toolplane.CallbackDelivered || got.CallbackAttempts != 2 {
			t.Fatalf("after the second attempt: %+v", got)
		}
		if err := r.svc.Deliver(t.Context(), "org-1", id, async.Attempt{N: 3}); err != nil || len(bodies) != 2 {
			t.Fatalf("a delivered callback was posted again: %v, %d posts", err, len(bodies))
		}
		var cb async.Callback
		if err := json.Unmarshal([]byte(bodies[1]), &cb); err != nil || cb.ID != id || cb.Status != toolplane.AsyncSucceeded || len(cb.Result) == 0 {
			t.Fatalf("callback body %s: %v", bodies[1], err)
		}
		if h := heads[1]; h.Get("X-Test-Org") != "org-1" || h.Get("X-Test-Delivery") != id || h.Get("X-Test-Length") != strconv.Itoa(len(bodies[1])) {
			t.Fatalf("callback headers %v", h)
		}

		// A receiver that never acknowledges: expired on the last attempt.
		fail.Store(1 << 30)
		sub, err = r.svc.Submit(t.Context(), async.Request{Tool: "crm.read", Arguments: json.RawMessage(`{"text":"y"}`),
			Invocation: inv("org-1", "run-1", ""), CallbackURL: recv.URL + "/cb"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.svc.Run(t.Context(), "org-1", sub.Call.ID, false); err != nil {
			t.Fatal(err)
		}
		if err := r.svc.Deliver(t.Context(), "org-1", sub.Call.ID, async.Attempt{N: 5, Last: true}); err != nil {
			t.Fatal(err)
		}
		if got := r.get(t, "org-1", sub.Call.ID); got.CallbackState != toolplane.CallbackExpired || got.Status != toolplane.AsyncSucceeded {
			t.Fatalf("a callback given up: %+v", got)
		}
	})
}

// A worker that finds a call running on a node that still heartbeats (a
// job River took back while its first run went on) leaves it to that
// node; once that node is known dead, the call is taken over, and its
// write happens once.
func TestACallRunningOnALiveNodeIsLeftToIt(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newRig(t, s, async.Config{Node: "node-self", NodeDeadAfter: 10 * time.Second})
		now := time.Now()
		other := &toolplane.Node{ID: "node-other-" + strconv.FormatInt(now.UnixNano(), 36), Name: "other", StartedAt: now, HeartbeatAt: now}
		if err := s.InsertNode(t.Context(), other); err != nil {
			t.Fatal(err)
		}
		sub := r.submit(t, "crm.add_note", "org-1", "runner-1")
		if ok, err := s.MoveAsyncCall(t.Context(), "org-1", sub.Call.ID, toolplane.AsyncLive,
			toolplane.AsyncMove{To: toolplane.AsyncRunning, Runner: other.ID, At: now}); err != nil || !ok {
			t.Fatalf("taken by the other node: %v, %v", ok, err)
		}
		var again *async.Again
		if err := r.svc.Run(t.Context(), "org-1", sub.Call.ID, false); !errors.As(err, &again) || r.effects.Load() != 0 {
			t.Fatalf("a call running on a live node: %v, %d effects", err, r.effects.Load())
		}
		// The other node restarts: its instance is retired, known dead.
		if _, err := s.RetireNodes(t.Context(), other.Name, "node-next"); err != nil {
			t.Fatal(err)
		}
		if err := r.svc.Run(t.Context(), "org-1", sub.Call.ID, false); err != nil {
			t.Fatal(err)
		}
		got := r.get(t, "org-1", sub.Call.ID)
		if got.Status != toolplane.AsyncSucceeded || got.Runner != "node-self" || r.effects.Load() != 1 {
			t.Fatalf("taken over from a dead node: %+v, %d effects", got, r.effects.Load())
		}
	})
}

// noMCP denies every call that comes by the MCP door (a rule on
// context.source) and decides the others by their grants.
type noMCP struct{}

func (noMCP) Decide(ctx context.Context, in policy.Input) (policy.Decision, error) {
	if in.Invocation.Source == toolplane.SourceMCP {
		return policy.Decision{Effect: policy.Deny, Reason: "no calls over MCP"}, nil
	}
	return policy.Grants{}.Decide(ctx, in)
}

// A call run later is decided on the door it came by: a rule on the door
// that denies it now denies it when it runs, so asking for async is no
// way around the rule.
func TestAnAsyncCallIsDecidedOnItsDoor(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newRigWith(t, s, async.Config{}, noMCP{})
		in := inv("org-1", "run-1", "door-1")
		in.Source = toolplane.SourceMCP
		sub, err := r.svc.Submit(t.Context(), async.Request{Tool: "crm.add_note", Arguments: json.RawMessage(`{"text":"x"}`), Invocation: in})
		if err != nil || sub.Ran {
			t.Fatalf("submit: %+v, %v", sub, err)
		}
		if err := r.svc.Run(t.Context(), "org-1", sub.Call.ID, false); err != nil {
			t.Fatal(err)
		}
		if got := r.get(t, "org-1", sub.Call.ID); got.Status != toolplane.AsyncFailed || got.Code != string(toolplane.CodeDenied) || r.effects.Load() != 0 {
			t.Fatalf("a call over MCP run later: %s %s, %d effects", got.Status, got.Code, r.effects.Load())
		}
	})
}

// A token an agent holds for one person never reads, lists or cancels a
// call the agent made for another person.
func TestATokenForOnePersonNeverReadsAnothersCalls(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newRig(t, s, async.Config{})
		forWhom := func(person string) *toolplane.Credential {
			return &toolplane.Credential{ID: "jwt:agent-1:" + person, OrganizationID: "org-1", Subject: "agent-1",
				Kind: toolplane.CredentialAgent, ActsFor: person, Tools: []string{"crm.read"}}
		}
		alice, bob := forWhom("alice"), forWhom("bob")
		in := &toolplane.Invocation{OrganizationID: "org-1", UserID: "alice", RunID: "run-1", StepPath: "agent", AgentID: "agent-1",
			CredentialID: alice.ID, Credential: alice, Principal: toolplane.Principal{ID: "agent-1"}, Source: toolplane.SourceREST}
		sub, err := r.svc.Submit(t.Context(), async.Request{Tool: "crm.read", Arguments: json.RawMessage(`{"text":"alice's"}`), Invocation: in})
		if err != nil || sub.Ran || sub.Call.UserID != "alice" {
			t.Fatalf("submit: %+v, %v", sub, err)
		}
		if _, err := r.svc.Get(t.Context(), "org-1", sub.Call.ID, bob); !errors.Is(err, toolplane.ErrNotFound) {
			t.Errorf("bob's token read alice's call: %v", err)
		}
		if cs, err := r.svc.List(t.Context(), "org-1", bob, "", 10); err != nil || len(cs) != 0 {
			t.Errorf("bob's token lists %d calls, %v", len(cs), err)
		}
		if _, err := r.svc.Cancel(t.Context(), "org-1", sub.Call.ID, bob); !errors.Is(err, toolplane.ErrNotFound) {
			t.Errorf("bob's token cancelled alice's call: %v", err)
		}
		if _, err := r.svc.Get(t.Context(), "org-1", sub.Call.ID, alice); err != nil {
			t.Errorf("alice's token reads her call: %v", err)
		}
		if cs, err := r.svc.List(t.Context(), "org-1", alice, "", 10); err != nil || len(cs) != 1 {
			t.Errorf("alice's token lists %d calls, %v", len(cs), err)
		}
	})
}

// A cancel asked while the call is being decided holds even when the
// decision sends the call back to wait for a person: once approved, it
// does not run.
func TestACancelAskedWhileDecidingHolds(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newRig(t, s, async.Config{})
		sub := r.submit(t, "crm.add_note", "org-1", "decide-1")
		ctx, org, id := t.Context(), "org-1", sub.Call.ID
		now := r.get(t, org, id).CreatedAt
		if ok, err := s.MoveAsyncCall(ctx, org, id, toolplane.AsyncLive, toolplane.AsyncMove{To: toolplane.AsyncRunning, Runner: "node-x", At: now}); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if c, err := r.svc.Cancel(ctx, org, id, agent(org)); err != nil || !c.CancelRequested {
			t.Fatalf("cancel: %+v, %v", c, err)
		}
		// The decision: wait for a person, back to queued.
		if ok, err := s.MoveAsyncCall(ctx, org, id, []toolplane.AsyncStatus{toolplane.AsyncRunning},
			toolplane.AsyncMove{To: toolplane.AsyncQueued, ApprovalID: "apr_1", At: now}); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if got := r.get(t, org, id); got.Runner != "" {
			t.Fatalf("back to queued, its runner stays: %+v", got)
		}
		if err := r.svc.Run(ctx, org, id, false); err != nil {
			t.Fatal(err)
		}
		if got := r.get(t, org, id); got.Status != toolplane.AsyncCancelled || r.effects.Load() != 0 {
			t.Fatalf("a call cancelled while it was decided: %s, %d effects", got.Status, r.effects.Load())
		}
	})
}
