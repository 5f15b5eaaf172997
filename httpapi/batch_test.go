package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/internal/testclock"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// counted is what reached the invoker's far side in a batch fixture: the
// demo's handlers and previews, and the policy.
type counted struct {
	handlers, previews, asked atomic.Int64
	// ran, when set, is called after each handler returns.
	ran func()

	mu sync.Mutex
	// left is the time each handler was given, in order: how long its
	// context had before its deadline as it started.
	left []time.Duration
}

// countingPolicy is the grants policy, counting every question asked.
type countingPolicy struct {
	policy.Grants
	n *counted
}

func (p countingPolicy) Decide(ctx context.Context, in policy.Input) (policy.Decision, error) {
	p.n.asked.Add(1)
	return p.Grants.Decide(ctx, in)
}

// countingCatalogue is the demo catalogue with every handler and preview
// counted in n: each binding is the demo's, run through a wrapper that
// counts it.
func countingCatalogue(t testing.TB, n *counted) (*registry.Registry, *handler.Registry) {
	t.Helper()
	defs, bs, err := demo.New().Catalogue()
	if err != nil {
		t.Fatal(err)
	}
	own := handler.NewRegistry()
	if err := own.Register(bs...); err != nil {
		t.Fatal(err)
	}
	hs := handler.NewRegistry()
	for i, b := range bs {
		var opts []handler.Option
		if b.HasPreview() {
			opts = append(opts, handler.WithPreview(func(ctx context.Context, call handler.Call, args any) (string, error) {
				n.previews.Add(1)
				text, _, err := b.Preview(ctx, call, args)
				return text, err
			}))
		}
		if i == 0 {
			// The facts the demo registers, each once.
			for name, fn := range own.Facts() {
				opts = append(opts, handler.WithFact(name, fn))
			}
		}
		counting, err := handler.BindFunc(b.Key, func(ctx context.Context, call handler.Call, args any) (any, error) {
			n.handlers.Add(1)
			if d, ok := ctx.Deadline(); ok {
				n.mu.Lock()
				n.left = append(n.left, time.Until(d))
				n.mu.Unlock()
			}
			defer func() {
				if n.ran != nil {
					n.ran()
				}
			}()
			return b.Invoke(ctx, call, args)
		}, nil, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := hs.Register(counting); err != nil {
			t.Fatal(err)
		}
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: demotest.Bindings{Registry: hs}})
	if err != nil {
		t.Fatal(err)
	}
	return reg, hs
}

// newBatchFixture is newFixture over the counting catalogue and policy,
// with batches of at most maxBatch calls.
func newBatchFixture(t testing.TB, maxBatch int) (*fixture, *counted) {
	t.Helper()
	return newClockedBatchFixture(t, maxBatch, nil)
}

// newClockedBatchFixture is newBatchFixture whose door and invoker read
// now (nil is time.Now).
func newClockedBatchFixture(t testing.TB, maxBatch int, now func() time.Time) (*fixture, *counted) {
	t.Helper()
	n := &counted{}
	store, db := sqlitetest.NewDB(t)
	reg, hs := countingCatalogue(t, n)
	quiet := slog.New(slog.DiscardHandler)
	approvals := approval.New(approval.Config{Store: store, TTL: time.Hour})
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: countingPolicy{n: n}, Approvals: approvals, Logger: quiet, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	layer := &door.Door{Invoker: iv, Registry: reg, Store: store, Log: quiet, Now: now}
	api := &httpapi.Server{Door: layer, Store: store, Log: quiet, MaxBatch: maxBatch}
	f := &fixture{db: db, store: store, door: layer, api: api, srv: httptest.NewServer(api.Handler())}
	t.Cleanup(f.srv.Close)
	f.agent = mint(t, store, toolplane.CredentialAgent, "agent-support", nil, []string{"demo.search_tickets", "demo.add_note", "demo.refund_order"}, false)
	f.person = mint(t, store, toolplane.CredentialPerson, "ada", []string{"approver"}, nil, false)
	return f, n
}

// rows answers how many rows table holds.
func (f *fixture) rows(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := f.db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// batchResults answers the results of a batch's answer.
func batchResults(t *testing.T, got map[string]any) []map[string]any {
	t.Helper()
	list, _ := got["results"].([]any)
	out := make([]map[string]any, len(list))
	for i, r := range list {
		out[i], _ = r.(map[string]any)
	}
	return out
}

// field answers the field of a result body's object at path, "" when
// absent.
func field(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		o, _ := v.(map[string]any)
		v = o[p]
	}
	return v
}

// addNote is a batch call adding a note to t-1001 under key.
func addNote(key string) map[string]any {
	return map[string]any{"tool": "demo.add_note", "arguments": map[string]any{"ticket_id": "t-1001", "text": "Shipped."}, "idempotency_key": key}
}

func search() map[string]any {
	return map[string]any{"tool": "demo.search_tickets", "arguments": map[string]any{"query": "cracked"}, "run_id": "run-b"}
}

// Seed 000: "An oversized batch has zero effects and reaches nothing." A
// batch refused whole (too many calls, a body past the bound, one call
// malformed or past an identifier's bound) is answered 400 before any of
// its calls runs: no handler, preview or policy question, and no claim,
// audit event, approval or usage row.
func TestAnOversizedBatchHasZeroEffectsAndReachesNothing(t *testing.T) {
	t.Parallel()
	const max = 3
	refund := map[string]any{"tool": "demo.refund_order", "arguments": map[string]any{"order_id": "o-502", "amount_cents": 1250, "reason": "charged twice"}, "run_id": "run-b"}
	calls := func(cs ...map[string]any) string { return toJSON(map[string]any{"calls": cs}) }
	tests := []struct {
		name, body, field, says string
	}{
		{"one call more than the limit", calls(refund, addNote("k-1"), search(), addNote("k-2")), "calls", "at most 3 calls"},
		{"no call", calls(), "calls", "at least one call"},
		{"no calls field", `{}`, "calls", "at least one call"},
		{"a body past the bound", calls(refund, map[string]any{"tool": "demo.add_note",
			"arguments": map[string]any{"ticket_id": "t-1001", "text": strings.Repeat("x", 1<<20)}, "run_id": "run-b"}), "", "too large"},
		{"a malformed call", calls(refund, addNote("k-1"), map[string]any{"tool": "demo.search_tickets", "args": map[string]any{}}), "calls[2]", "call 2 is not valid"},
		{"a call naming no tool", calls(refund, map[string]any{"arguments": map[string]any{}, "run_id": "run-b"}), "calls[1].tool", "call 1 names no tool"},
		{"a call that is not an object", `{"calls":[` + toJSON(refund) + `,"demo.add_note"]}`, "calls[1]", "call 1 is not valid"},
		{"a call past an identifier's bound", calls(refund, map[string]any{"tool": "demo.add_note", "arguments": map[string]any{"ticket_id": "t-1001", "text": "x"},
			"run_id": strings.Repeat("r", toolplane.MaxRunLen+1)}), "calls[1].run_id", "call 1: run_id"},
		{"a call past the tool name's bound", calls(refund, map[string]any{"tool": "demo." + strings.Repeat("x", toolplane.MaxNameLen)}), "calls[1].tool", "call 1: tool"},
		{"a body that is not JSON", `{"calls":[`, "", "not valid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, n := newBatchFixture(t, max)
			status, got := f.do(t, "POST", "/v1/invoke:batch", f.agent, tt.body)
			e, _ := got["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if status != http.StatusBadRequest || errCode(got) != "invalid_request" || e["field_path"] != tt.field && tt.field != "" || !strings.Contains(msg, tt.says) {
				t.Fatalf("%d %.300v; want 400 invalid_request at %q saying %q", status, got, tt.field, tt.says)
			}
			if h, p, a := n.handlers.Load(), n.previews.Load(), n.asked.Load(); h != 0 || p != 0 || a != 0 {
				t.Errorf("the refused batch reached %d handlers, %d previews, asked the policy %d times; want none", h, p, a)
			}
			for _, table := range []string{"claims", "audit_events", "approvals", "usage"} {
				if rows := f.rows(t, table); rows != 0 {
					t.Errorf("the refused batch left %d rows in %s; want none", rows, table)
				}
			}
		})
	}
	// The same calls within the limit run: the fixture counts what it
	// should.
	f, n := newBatchFixture(t, max)
	status, got := f.do(t, "POST", "/v1/invoke:batch", f.agent, calls(refund, addNote("k-1"), search()))
	if rs := batchResults(t, got); status != http.StatusOK || len(rs) != 3 || rs[0]["status"] != 202.0 || rs[1]["status"] != 200.0 || rs[2]["status"] != 200.0 {
		t.Fatalf("a batch within the limit: %d %v", status, got)
	}
	if h, p := n.handlers.Load(), n.previews.Load(); h != 2 || p != 1 || n.asked.Load() == 0 {
		t.Errorf("a batch within the limit ran %d handlers and %d previews, asking the policy %d times; want 2, 1, some", h, p, n.asked.Load())
	}
	if f.rows(t, "approvals") != 1 || f.rows(t, "claims") == 0 {
		t.Errorf("a batch within the limit filed %d approvals and %d claims", f.rows(t, "approvals"), f.rows(t, "claims"))
	}
}

// Each call of a batch is decided and answered on its own, in order, as
// the single call would be. Seed 000: "A denial does not stop the call
// beside it": a call the grants deny answers denied, and the calls around
// it run. A call waiting for approval answers its approval_required (202)
// while the others run. A write repeated in a second batch under the same
// idempotency key replays its first answer, with one effect.
func TestADenialDoesNotStopTheCallBesideIt(t *testing.T) {
	t.Parallel()
	f, n := newBatchFixture(t, 0)
	denied := map[string]any{"tool": "demo.analyze_text", "arguments": map[string]any{"text": "x"}, "run_id": "run-b"}
	refund := map[string]any{"tool": "demo.refund_order", "arguments": map[string]any{"order_id": "o-502", "amount_cents": 1250, "reason": "charged twice"}, "run_id": "run-b"}
	notGranted := map[string]any{"tool": "demo.search_tickets", "arguments": map[string]any{"query": "x"}, "run_id": "run-b", "on_behalf_of": "ada"}
	status, got := f.do(t, "POST", "/v1/invoke:batch", f.agent, toJSON(map[string]any{"calls": []any{search(), denied, addNote("k-1"), refund, notGranted}}))
	rs := batchResults(t, got)
	if status != http.StatusOK || len(rs) != 5 {
		t.Fatalf("the batch: %d %v", status, got)
	}
	tests := []struct {
		name   string
		status float64
		check  func(body map[string]any) bool
	}{
		{"the search before the denial runs", 200, func(b map[string]any) bool { return b["ok"] == true }},
		{"the ungranted tool is denied", 200, func(b map[string]any) bool { return b["ok"] == false && field(b, "error", "code") == "denied" }},
		{"the write after the denial runs", 200, func(b map[string]any) bool { return b["ok"] == true && field(b, "meta", "replayed") != true }},
		{"the refund waits for approval", 202, func(b map[string]any) bool {
			id, _ := field(b, "approval", "id").(string)
			return id != "" && strings.Contains(b["message"].(string), id)
		}},
		{"a person named without act_for_users is refused as the single call is", 403, func(b map[string]any) bool {
			return field(b, "error", "code") == "denied" && field(b, "error", "field_path") == "on_behalf_of" && field(b, "error", "request_id") != ""
		}},
	}
	for i, tt := range tests {
		body, _ := rs[i]["body"].(map[string]any)
		if rs[i]["status"] != tt.status || !tt.check(body) {
			t.Errorf("calls[%d], %s: %v", i, tt.name, rs[i])
		}
	}
	if h := n.handlers.Load(); h != 2 {
		t.Errorf("the batch ran %d handlers; want 2 (the search and the write)", h)
	}

	// The same write, in a second batch under the same key, replays.
	status, got = f.do(t, "POST", "/v1/invoke:batch", f.agent, toJSON(map[string]any{"calls": []any{addNote("k-1"), search()}}))
	rs = batchResults(t, got)
	if body, _ := rs[0]["body"].(map[string]any); status != http.StatusOK || len(rs) != 2 || body["ok"] != true || field(body, "meta", "replayed") != true {
		t.Fatalf("the write repeated in a second batch: %d %v", status, got)
	}
	if h := n.handlers.Load(); h != 3 {
		t.Errorf("after the second batch %d handlers ran; want 3 (the write once, the search twice)", h)
	}

	// A person's key calls nothing, batch or not.
	if status, got := f.do(t, "POST", "/v1/invoke:batch", f.person, toJSON(map[string]any{"calls": []any{search()}})); status != http.StatusForbidden || errCode(got) != "denied" {
		t.Errorf("a person's batch: %d %v", status, got)
	}
}

// A batch spends the key's rate budget call by call, as that many
// requests would: the request's admission pays for its first call, each
// further call spends one more, and a call past the budget answers 429
// rate_limited in its place, with when to retry, while the calls within
// it run. The next request is refused as the budget is spent.
func TestABatchSpendsTheBudgetOfItsCalls(t *testing.T) {
	t.Parallel()
	f, n := newBatchFixture(t, 0)
	f.door.Limiter = ratelimit.New(3, time.Hour)
	calls := []any{search(), search(), search(), search()}
	status, got := f.do(t, "POST", "/v1/invoke:batch", f.agent, toJSON(map[string]any{"calls": calls}))
	rs := batchResults(t, got)
	if status != http.StatusOK || len(rs) != 4 {
		t.Fatalf("the batch: %d %v", status, got)
	}
	for i, want := range []float64{200, 200, 200, 429} {
		if rs[i]["status"] != want {
			t.Errorf("calls[%d]: %v; want %v", i, rs[i], want)
		}
	}
	if body, _ := rs[3]["body"].(map[string]any); field(body, "error", "code") != "rate_limited" || rs[3]["retry_after"] == nil {
		t.Errorf("the call past the budget: %v", rs[3])
	}
	if h := n.handlers.Load(); h != 3 {
		t.Errorf("%d handlers ran; want the 3 within the budget", h)
	}
	if status, got := f.do(t, "POST", "/v1/tools/demo.search_tickets/invoke", f.agent, toJSON(search())); status != http.StatusTooManyRequests {
		t.Errorf("a call after the batch spent the budget: %d %v", status, got)
	}
}

// The limit is the server's to set: a batch of exactly MaxBatch calls
// runs, and the default is DefaultMaxBatch.
func TestABatchOfTheLimitRuns(t *testing.T) {
	t.Parallel()
	for _, max := range []int{1, 0} {
		f, n := newBatchFixture(t, max)
		want := max
		if max == 0 {
			want = httpapi.DefaultMaxBatch
		}
		calls := make([]any, want)
		for i := range calls {
			calls[i] = search()
		}
		status, got := f.do(t, "POST", "/v1/invoke:batch", f.agent, toJSON(map[string]any{"calls": calls}))
		if rs := batchResults(t, got); status != http.StatusOK || len(rs) != want || n.handlers.Load() != int64(want) {
			t.Errorf("MaxBatch %d: a batch of %d: %d, %d results, %d handlers", max, want, status, len(rs), n.handlers.Load())
		}
		status, got = f.do(t, "POST", "/v1/invoke:batch", f.agent, toJSON(map[string]any{"calls": append(calls, search())}))
		if e, _ := got["error"].(map[string]any); status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(e["message"]), fmt.Sprintf("at most %d calls", want)) {
			t.Errorf("MaxBatch %d: a batch of %d: %d %v", max, want+1, status, got)
		}
	}
}

// BenchmarkBatch compares fifty read calls sent as fifty requests with the
// same fifty sent as one batch, on the embedded store: an op is the fifty
// calls either way.
func BenchmarkBatch(b *testing.B) {
	const n = 50
	f, _ := newBatchFixture(b, n)
	// The key cache a server runs with: a request then costs its key's
	// digest, not an Argon2id run.
	f.door.Keys = apikey.NewCache(apikey.DefaultCacheSize, apikey.DefaultCacheTTL)
	// The single call's body: the batch call's fields but its tool.
	single := search()
	delete(single, "tool")
	one := toJSON(single)
	calls := make([]any, n)
	for i := range calls {
		calls[i] = search()
	}
	batch := toJSON(map[string]any{"calls": calls})
	send := func(path, body string) {
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.agent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	b.Run("requests", func(b *testing.B) {
		for b.Loop() {
			for range n {
				send("/v1/tools/demo.search_tickets/invoke", one)
			}
		}
	})
	b.Run("batch", func(b *testing.B) {
		for b.Loop() {
			send("/v1/invoke:batch", batch)
		}
	})
}

// A caller that goes away mid-batch ends it: the call under way finishes
// as any call does, and the calls after it are not made, nor recorded as
// refused one by one.
func TestABatchEndsWithItsCaller(t *testing.T) {
	t.Parallel()
	f, n := newBatchFixture(t, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n.ran = cancel
	body := toJSON(map[string]any{"calls": []map[string]any{addNote("k-1"), addNote("k-2"), addNote("k-3")}})
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/invoke:batch", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.agent)
	f.api.Handler().ServeHTTP(httptest.NewRecorder(), req)
	if got := n.handlers.Load(); got != 1 {
		t.Fatalf("handlers run = %d, want 1: the calls after the caller left ran", got)
	}
	if rows := f.rows(t, "claims"); rows != 1 {
		t.Errorf("claims = %d, want the one call's", rows)
	}
	if rows := f.rows(t, "audit_events"); rows != 1 {
		t.Errorf("audit events = %d, want the one call's (none for calls never made)", rows)
	}
}

// A batch's deadline is its request's: the Request-Timeout header bounds
// every call of it (with each call's own timeout_ms, the tighter), and
// every deadline counts from when the door read the request, so a call
// after a slow one gets only the time left, or is refused for lack of it.
func TestABatchCallGetsOnlyTheTimeLeft(t *testing.T) {
	t.Parallel()
	searchFor := func(q string, timeoutMS int) map[string]any {
		c := map[string]any{"tool": "demo.search_tickets", "arguments": map[string]any{"query": q}}
		if timeoutMS > 0 {
			c["timeout_ms"] = timeoutMS
		}
		return c
	}
	tests := []struct {
		name   string
		header string
		calls  []map[string]any
		// code is the second call's error code ("" when it ran); left
		// bounds the time it was given, when it ran.
		code string
		left time.Duration
	}{
		{"the header's time is spent", "5", []map[string]any{searchFor("cracked", 0), searchFor("late", 0)}, "deadline_exceeded", 0},
		{"the calls' own time is spent", "", []map[string]any{searchFor("cracked", 5000), searchFor("late", 5000)}, "deadline_exceeded", 0},
		{"the header is the tighter", "5", []map[string]any{searchFor("cracked", 60000), searchFor("late", 60000)}, "deadline_exceeded", 0},
		{"the header's time is left", "8", []map[string]any{searchFor("cracked", 0), searchFor("late", 0)}, "", 2 * time.Second},
		{"the call's own time is left", "", []map[string]any{searchFor("cracked", 8000), searchFor("late", 8000)}, "", 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := testclock.New(time.Now())
			f, n := newClockedBatchFixture(t, 10, clock.Now)
			// The first call takes six seconds of the door's clock.
			var first atomic.Bool
			n.ran = func() {
				if first.CompareAndSwap(false, true) {
					clock.Advance(6 * time.Second)
				}
			}
			h := map[string]string{}
			if tt.header != "" {
				h["Request-Timeout"] = tt.header
			}
			status, got := f.doWith(t, "/v1/invoke:batch", f.agent, toJSON(map[string]any{"calls": tt.calls}), h)
			if status != http.StatusOK {
				t.Fatalf("%d %v", status, got)
			}
			res := batchResults(t, got)
			if code, _ := field(res[1], "body", "error", "code").(string); code != tt.code {
				t.Fatalf("the second call: %v, want code %q", res[1], tt.code)
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			if tt.code != "" {
				if len(n.left) != 1 {
					t.Fatalf("handlers given time: %v, want the first call's alone", n.left)
				}
				return
			}
			if len(n.left) != 2 || n.left[1] > tt.left || n.left[1] < tt.left/2 {
				t.Fatalf("handlers given %v, want the second about %v (what the first left)", n.left, tt.left)
			}
		})
	}
}
