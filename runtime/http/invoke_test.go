package httpruntime_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	httpruntime "github.com/toolplane/toolplane/runtime/http"
)

// A write whose answer is lost is held uncertain, and an identical call
// is answered from the journal: the request is never sent a second time.
func TestLostWriteIsHeldAndNotSentAgain(t *testing.T) {
	t.Parallel()
	srv, hits := serve(t, answer{status: 0})
	d := httpDef("billing.charge", toolplane.EffectWrite, toolplane.HTTPBinding{Method: http.MethodPost, URL: srv.URL + "/v1/charges"})
	e := newEnv(t, d)
	args := map[string]any{"note": "one charge"}
	for i := range 2 {
		r := e.call(t, d.Name, args)
		if r.OK || r.Error.Code != toolplane.CodeUncertain {
			t.Fatalf("call %d: %+v, want uncertain", i+1, r.Error)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the server saw %d requests, want 1", n)
	}
	checkClaim(t, e, d.Name, args, held)
}

// A write whose binding names an idempotency header sends the call's key
// in it, and after a lost answer sends the request again with the same
// key: the downstream sees the key twice and makes one effect, and the
// call answers what it finally said.
func TestIdempotentWriteIsRetriedWithTheSameKey(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		keys    []string
		effects = map[string]string{} // key -> the answer it made
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		keys = append(keys, key)
		prior, seen := effects[key]
		if !seen {
			prior = `{"charge":"ch_1"}`
			effects[key] = prior
		}
		mu.Unlock()
		if !seen {
			drop(w) // the effect happened; its answer is lost
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, prior)
	}))
	t.Cleanup(srv.Close)
	d := httpDef("billing.charge", toolplane.EffectWrite, toolplane.HTTPBinding{
		Method: http.MethodPost, URL: srv.URL + "/v1/charges", IdempotencyHeader: "Idempotency-Key"})
	e := newEnv(t, d)
	args := map[string]any{"note": "one charge"}
	r := e.call(t, d.Name, args)
	if !r.OK {
		t.Fatalf("result %+v, want the charge", r.Error)
	}
	if got := r.Data.(map[string]any)["charge"]; got != "ch_1" {
		t.Errorf("answer %v, want ch_1", r.Data)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("keys sent %q, want one non-empty key twice", keys)
	}
	if len(effects) != 1 {
		t.Fatalf("%d effects, want 1", len(effects))
	}
	c := e.claim(t, d.Name, args)
	if c == nil || c.Status != toolplane.ClaimCompleted || httpruntime.DownstreamKey(c.Key) != keys[0] {
		t.Fatalf("claim %+v, want completed under the key whose digest was sent, %q", c, keys[0])
	}
	// The downstream learns nothing of who called: the key names the
	// agent and the run, the digest sent neither.
	for _, who := range []string{"agent-1", "run-1", c.Key} {
		if strings.Contains(keys[0], who) {
			t.Errorf("the key sent %q holds %q", keys[0], who)
		}
	}
}

// With an idempotency header, what the downstream finally answers ends
// the call when it is an answer for the request (a 2xx; a definite 4xx
// when no earlier attempt may have acted); when it never is, and an
// attempt may have acted, the write is uncertain.
func TestIdempotentWriteEndsOnTheLastAnswer(t *testing.T) {
	t.Parallel()
	const lost = 0
	for _, tt := range []struct {
		name     string
		sequence []int // the status of each attempt in turn; lost drops it
		want     toolplane.Code
		claim    string
	}{
		{"lost, then taken", []int{lost, 201}, "", completed},
		{"failing throughout", []int{503, 503, 503}, toolplane.CodeUncertain, held},
		{"lost, then refused for rate", []int{lost, 429, 429}, toolplane.CodeUncertain, held},
		{"refused for rate throughout", []int{429, 429, 429}, toolplane.CodeRetryableUpstream, released},
		// A 502 may have acted; the 409 that follows may be the
		// downstream saying the first request is still in progress (the
		// Idempotency-Key draft's answer): uncertain, never a definite
		// conflict that would let the model try again under a new key.
		{"failed, then a conflict", []int{502, 409}, toolplane.CodeUncertain, held},
		{"lost, then a definite refusal", []int{lost, 422}, toolplane.CodeUncertain, held},
		{"a definite refusal at once", []int{422}, toolplane.CodeInvalidInput, completed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var (
				n    atomic.Int64
				mu   sync.Mutex
				keys = map[string]bool{}
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys[r.Header.Get("Idempotency-Key")] = true
				mu.Unlock()
				i := int(n.Add(1)) - 1
				if i >= len(tt.sequence) {
					t.Errorf("attempt %d, past the %d expected", i+1, len(tt.sequence))
					w.WriteHeader(http.StatusTeapot)
					return
				}
				if tt.sequence[i] == lost {
					drop(w)
					return
				}
				w.WriteHeader(tt.sequence[i])
				_, _ = io.WriteString(w, `{"charge":"ch_1"}`)
			}))
			t.Cleanup(srv.Close)
			d := httpDef("billing.charge", toolplane.EffectWrite, toolplane.HTTPBinding{
				Method: http.MethodPost, URL: srv.URL + "/v1/charges", IdempotencyHeader: "Idempotency-Key"})
			e := newEnv(t, d)
			args := map[string]any{"note": "one charge"}
			r := e.call(t, d.Name, args)
			checkResult(t, tt.name, r, tt.want, false, "")
			if got := n.Load(); got != int64(len(tt.sequence)) {
				t.Errorf("%d attempts, want %d", got, len(tt.sequence))
			}
			mu.Lock()
			if len(keys) != 1 || keys[""] {
				t.Errorf("keys sent %v, want one", keys)
			}
			mu.Unlock()
			checkClaim(t, e, d.Name, args, tt.claim)
		})
	}
}

// A body that arrives too slowly is bounded by the call's deadline: a
// read answers timeout, a write (whose request was taken) is uncertain.
func TestSlowBodyPastTheDeadline(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"items":[`)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(srv.Close)
	for _, tt := range []struct {
		effect toolplane.Effect
		method string
		want   toolplane.Code
	}{
		{toolplane.EffectRead, http.MethodGet, toolplane.CodeTimeout},
		{toolplane.EffectWrite, http.MethodPost, toolplane.CodeUncertain},
	} {
		d := httpDef("billing.list", tt.effect, toolplane.HTTPBinding{Method: tt.method, URL: srv.URL + "/v1/items"}, func(d *toolplane.Definition) {
			d.Timeout = toolplane.Duration(300 * time.Millisecond)
		})
		e := newEnv(t, d)
		start := time.Now()
		args := map[string]any{"note": "x"}
		r := e.call(t, d.Name, args)
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: the call took %v, past its 300ms deadline", tt.effect, took)
		}
		if r.OK || r.Error.Code != tt.want {
			t.Errorf("%s: result %+v, want %s", tt.effect, r.Error, tt.want)
		}
		if tt.effect.Writes() {
			checkClaim(t, e, d.Name, args, held)
		}
	}
}

// A body past the cap is never decoded: a read fails saying the cap, and
// a write, whose effect happened, is held rather than freed to run again.
func TestOversizedBody(t *testing.T) {
	t.Parallel()
	big := `{"blob":"` + strings.Repeat("x", 4096) + `"}`
	srv, _ := serve(t, answer{status: 200, body: big})
	for _, tt := range []struct {
		effect toolplane.Effect
		method string
		want   toolplane.Code
	}{
		{toolplane.EffectRead, http.MethodGet, toolplane.CodeUnavailable},
		{toolplane.EffectWrite, http.MethodPost, toolplane.CodeUncertain},
	} {
		d := httpDef("billing.blob", tt.effect, toolplane.HTTPBinding{Method: tt.method, URL: srv.URL + "/blob", MaxResponseBytes: 1024})
		e := newEnv(t, d)
		args := map[string]any{"note": "x"}
		r := e.call(t, d.Name, args)
		if r.OK || r.Error.Code != tt.want || !strings.Contains(r.Error.Message, "1024-byte cap") {
			t.Errorf("%s: result %+v, want %s stating the cap", tt.effect, r.Error, tt.want)
		}
		if tt.effect.Writes() {
			checkClaim(t, e, d.Name, args, held)
		}
	}
	// At the cap exactly, the body is read.
	exact := `{"blob":"` + strings.Repeat("x", 1024-len(`{"blob":""}`)) + `"}`
	srv2, _ := serve(t, answer{status: 200, body: exact})
	d := httpDef("billing.blob", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: srv2.URL + "/blob", MaxResponseBytes: 1024})
	if r := newEnv(t, d).call(t, d.Name, map[string]any{}); !r.OK {
		t.Errorf("a body of exactly the cap: %+v", r.Error)
	}
}

// An argument carrying a line break meant for a header is refused naming
// the argument, and nothing is sent.
func TestHeaderInjectionIsRefused(t *testing.T) {
	t.Parallel()
	srv, hits := serve(t, answer{status: 200, body: `{}`})
	d := httpDef("billing.lookup", toolplane.EffectRead, toolplane.HTTPBinding{
		Method: http.MethodGet, URL: srv.URL + "/v1/lookup", Headers: map[string]string{"X-Trace": "{trace}"}})
	e := newEnv(t, d)
	for _, evil := range []string{"a\r\nX-Admin: yes", "a\nb", "a\x00b", "a\rb"} {
		r := e.call(t, d.Name, map[string]any{"trace": evil})
		if r.OK || r.Error.Code != toolplane.CodeInvalidInput || r.Error.FieldPath != "/trace" {
			t.Errorf("%q: result %+v, want invalid_input at /trace", evil, r.Error)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server saw %d requests, want none", n)
	}
}

// A path argument is one encoded segment: "../admin" stays inside the
// segment it was given, and "." or ".." alone are refused.
func TestPathValuesAreOneSegment(t *testing.T) {
	t.Parallel()
	var uri atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uri.Store(r.RequestURI)
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(srv.Close)
	d := httpDef("billing.item", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: srv.URL + "/v1/items/{id}/detail"})
	e := newEnv(t, d)
	for _, tt := range []struct{ id, uri string }{
		{"../admin", "/v1/items/..%2Fadmin/detail"},
		{"a/b?c#d", "/v1/items/a%2Fb%3Fc%23d/detail"},
		{"%2e%2e", "/v1/items/%252e%252e/detail"},
		{"sp ace", "/v1/items/sp%20ace/detail"},
	} {
		if r := e.call(t, d.Name, map[string]any{"id": tt.id}); !r.OK {
			t.Errorf("%q: %+v", tt.id, r.Error)
			continue
		}
		if got := uri.Load(); got != tt.uri {
			t.Errorf("%q reached %v, want %s", tt.id, got, tt.uri)
		}
	}
	for _, bad := range []string{"..", ".", ""} {
		r := e.call(t, d.Name, map[string]any{"id": bad})
		if r.OK || r.Error.Code != toolplane.CodeInvalidInput || r.Error.FieldPath != "/id" {
			t.Errorf("%q: result %+v, want invalid_input at /id", bad, r.Error)
		}
	}
}

// Numbers reach the downstream as the caller wrote them, in the query and
// in the body, and the arguments the path and query took are not in the
// body.
func TestNumbersAndBodyAreExact(t *testing.T) {
	t.Parallel()
	var got struct {
		query string
		body  []byte
		ctype string
	}
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got.query, got.body, got.ctype = r.URL.RawQuery, b, r.Header.Get("Content-Type")
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	d := httpDef("billing.pay", toolplane.EffectWrite, toolplane.HTTPBinding{
		Method: http.MethodPost, URL: srv.URL + "/v1/pay/{id}?v=2", Query: map[string]string{"n": "{n}", "tag": "{tags}", "mode": "fast"}})
	e := newEnv(t, d)
	raw := `{"id":"p1","n":12345678901234567890.5,"tags":["a","b&c"],"amount":0.10000000000000000001,"note":"<b>&"}`
	r, err := e.iv.InvokeJSON(context.Background(), d.Name, []byte(raw), inv(d.Name))
	if err != nil || !r.OK {
		t.Fatalf("invoke: %v %+v", err, r.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "mode=fast&n=12345678901234567890.5&tag=a&tag=b%26c&v=2"; got.query != want {
		t.Errorf("query %q, want %q", got.query, want)
	}
	if want := `{"amount":0.10000000000000000001,"note":"<b>&"}`; string(got.body) != want {
		t.Errorf("body %s, want %s", got.body, want)
	}
	if got.ctype != "application/json" {
		t.Errorf("content type %q", got.ctype)
	}
	var v map[string]any
	if err := json.Unmarshal(got.body, &v); err != nil {
		t.Errorf("body is not JSON: %v", err)
	}
}

// The connection's token is presented to the downstream and appears
// nowhere the model reads, even when the downstream echoes it back in a
// refusal or an answer, in whatever shape.
func TestTheTokenNeverReachesTheModel(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		status int
		echo   func(auth string) string
	}{
		{"refusal echoing the header", 400, func(a string) string { return `{"message":"bad request with ` + a + `"}` }},
		{"refusal echoing the bare token", 422, func(a string) string { return "key " + strings.TrimPrefix(a, "Bearer ") + " is not valid" }},
		{"refused credential", 401, func(a string) string { return `{"error":"` + strings.TrimPrefix(a, "Bearer ") + ` expired"}` }},
		{"server error", 500, func(a string) string { return "crashed on " + a }},
		{"answer echoing the token", 200, func(a string) string {
			return `{"echo":"` + strings.TrimPrefix(a, "Bearer ") + `","` + strings.TrimPrefix(a, "Bearer ") + `":1}`
		}},
		{"answer that is text", 200, func(a string) string { return "your key " + strings.TrimPrefix(a, "Bearer ") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var sawToken atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				auth := r.Header.Get("Authorization")
				sawToken.Store(auth == "Bearer "+token)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.echo(auth))
			}))
			t.Cleanup(srv.Close)
			for _, effect := range []toolplane.Effect{toolplane.EffectRead, toolplane.EffectWrite} {
				d := httpDef("billing.echo", effect, toolplane.HTTPBinding{Method: http.MethodPost, URL: srv.URL + "/echo"}, func(d *toolplane.Definition) {
					d.OutputSchema = json.RawMessage(`true`)
				})
				e := newEnv(t, d)
				args := map[string]any{"note": "x"}
				r := e.call(t, d.Name, args)
				if !sawToken.Load() {
					t.Fatalf("%s: the downstream was not presented the token", effect)
				}
				raw, _ := json.Marshal(r)
				if strings.Contains(string(raw), token) {
					t.Errorf("%s: the result holds the token: %s", effect, raw)
				}
				if c := e.claim(t, d.Name, args); c != nil && strings.Contains(string(c.Result)+c.Reason, token) {
					t.Errorf("%s: the journal holds the token: %s %s", effect, c.Result, c.Reason)
				}
			}
		})
	}
}

// A read whose retry is safe, answered 503 and then 200, answers the
// second attempt: the runtime sends once per attempt and the invoker's
// loop sends again; with an attempt timeout, a downstream that hangs on
// the first attempt is cut at it and the second answers.
func TestReadRetriedByTheInvoker(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		first func(w http.ResponseWriter, r *http.Request)
	}{
		{"503, then an answer", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }},
		{"a hang past the attempt timeout, then an answer", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 {
					tt.first(w, r)
					return
				}
				_, _ = io.WriteString(w, `{"id":"p1"}`)
			}))
			t.Cleanup(srv.Close)
			d := httpDef("billing.item", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: srv.URL + "/x"}, func(d *toolplane.Definition) {
				d.Retry = toolplane.RetrySafe
				d.Execution = &toolplane.Execution{AttemptTimeout: toolplane.Duration(300 * time.Millisecond), Backoff: toolplane.Duration(20 * time.Millisecond)}
			})
			e := newEnv(t, d)
			start := time.Now()
			r := e.call(t, d.Name, map[string]any{})
			if !r.OK || n.Load() != 2 {
				t.Fatalf("result %+v after %d requests, want the second's answer", r.Error, n.Load())
			}
			if took := time.Since(start); took > 1500*time.Millisecond {
				t.Errorf("the call took %v", took)
			}
		})
	}
}
