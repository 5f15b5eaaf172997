package httpruntime_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	httpruntime "github.com/toolplane/toolplane/runtime/http"
)

// bind answers d's binding over a plain client.
func bind(t testing.TB, d toolplane.Definition) *handler.Binding {
	t.Helper()
	b, err := httpruntime.New(httpruntime.Config{Client: plainClient(t)}).Bind(&d)
	if err != nil {
		t.Fatal(err)
	}
	if b.Key != "http:"+d.Name+"@"+d.Version || !b.ContextBound() {
		t.Fatalf("binding %s, context bound %v", b.Key, b.ContextBound())
	}
	return b
}

// The connection's secret is presented under its scheme, beside the
// platform's own headers.
func TestCredentialSchemes(t *testing.T) {
	t.Parallel()
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("ann:pw-1"))
	for _, tt := range []struct {
		name   string
		kind   toolplane.ConnectionKind
		config toolplane.ConnectionConfig
		sec    toolplane.Secrets
		header string
		want   string // "" expects the call refused before sending
	}{
		{"bearer by default", toolplane.ConnectionStatic, toolplane.ConnectionConfig{}, toolplane.Secrets{Token: "t-1"}, "Authorization", "Bearer t-1"},
		{"bearer", toolplane.ConnectionStatic, toolplane.ConnectionConfig{Auth: toolplane.AuthBearer}, toolplane.Secrets{Token: "t-1"}, "Authorization", "Bearer t-1"},
		{"client credentials", toolplane.ConnectionClientCredentials, toolplane.ConnectionConfig{}, toolplane.Secrets{AccessToken: "at-1", ClientSecret: "cs"}, "Authorization", "Bearer at-1"},
		{"authorization code", toolplane.ConnectionAuthorizationCode, toolplane.ConnectionConfig{}, toolplane.Secrets{AccessToken: "at-2", RefreshToken: "rt"}, "Authorization", "Bearer at-2"},
		{"basic", toolplane.ConnectionStatic, toolplane.ConnectionConfig{Auth: toolplane.AuthBasic}, toolplane.Secrets{Username: "ann", Password: "pw-1"}, "Authorization", basic},
		{"api key header", toolplane.ConnectionStatic, toolplane.ConnectionConfig{Auth: toolplane.AuthHeader, Header: "x-api-key"}, toolplane.Secrets{Token: "k-1"}, "X-Api-Key", "k-1"},
		{"no token", toolplane.ConnectionStatic, toolplane.ConnectionConfig{}, toolplane.Secrets{}, "", ""},
		{"oauth without an access token", toolplane.ConnectionClientCredentials, toolplane.ConnectionConfig{}, toolplane.Secrets{Token: "t"}, "", ""},
		{"unknown scheme", toolplane.ConnectionStatic, toolplane.ConnectionConfig{Auth: "digest"}, toolplane.Secrets{Token: "t"}, "", ""},
		{"key header is Host", toolplane.ConnectionStatic, toolplane.ConnectionConfig{Auth: toolplane.AuthHeader, Header: "Host"}, toolplane.Secrets{Token: "t"}, "", ""},
		{"token with a line break", toolplane.ConnectionStatic, toolplane.ConnectionConfig{}, toolplane.Secrets{Token: "t\r\nX: y"}, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got atomic.Value
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				got.Store(r.Header.Clone())
				_, _ = io.WriteString(w, `{}`)
			}))
			t.Cleanup(srv.Close)
			b := bind(t, httpDef("billing.item", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: srv.URL + "/x"}))
			rel := &toolplane.Released{Connection: &toolplane.Connection{ID: "con_x", Kind: tt.kind, Config: tt.config}, Secrets: tt.sec}
			_, err := b.Invoke(context.Background(), handler.Call{Released: rel}, map[string]any{})
			if tt.want == "" {
				o := b.Classify(err)
				if err == nil || o.Kind != handler.Release || o.Result.Error.Code != toolplane.CodeUnavailable || hits.Load() != 0 {
					t.Fatalf("err %v, outcome %+v, %d requests; want unavailable before sending", err, o, hits.Load())
				}
				if !strings.Contains(o.Result.Error.Message, "con_x") || strings.Contains(o.Result.Error.Message, "t\r\n") {
					t.Errorf("message %q should name the connection only", o.Result.Error.Message)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			h := got.Load().(http.Header)
			if h.Get(tt.header) != tt.want {
				t.Errorf("%s = %q, want %q", tt.header, h.Get(tt.header), tt.want)
			}
			if h.Get("User-Agent") != "toolplane" || h.Get("Accept") != "application/json" {
				t.Errorf("User-Agent %q, Accept %q", h.Get("User-Agent"), h.Get("Accept"))
			}
		})
	}
}

// The output pointer selects the output, and the status field adds the
// status to an object output.
func TestOutputSelection(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, answer{status: 202, body: `{"data":[{"id":"a","n":1.50},{"id":"b/c"}],"next":null}`})
	for _, tt := range []struct {
		output, status string
		want           string
	}{
		{"", "", `{"data":[{"id":"a","n":1.50},{"id":"b/c"}],"next":null}`},
		{"/data/0", "code", `{"code":202,"id":"a","n":1.50}`},
		{"/data/1/id", "code", `"b/c"`},
		{"/data/2", "", `null`},
		{"/data/01", "", `null`},
		{"/next", "", `null`},
		{"/missing/x", "", `null`},
	} {
		b := bind(t, httpDef("billing.item", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: srv.URL + "/x", Output: tt.output, StatusField: tt.status}))
		out, err := b.Invoke(context.Background(), handler.Call{Released: connection()}, map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(out)
		if string(raw) != tt.want {
			t.Errorf("output %q: %s, want %s", tt.output, raw, tt.want)
		}
	}
}

// A read honours the downstream's Retry-After when it fits the deadline,
// and does not wait past it when it does not: the call stops at once with
// retryable_upstream, passing the wait on as its retry hint.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		retryAfter func() string
		timeout    time.Duration
		wantOK     bool
		minTook    time.Duration
		wantHits   int64
		wantHint   int
	}{
		{"seconds that fit", func() string { return "1" }, 3 * time.Second, true, time.Second, 2, 0},
		{"a date that fits", func() string { return time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat) }, 4 * time.Second, true, time.Second, 2, 0},
		{"seconds past the deadline", func() string { return "10" }, 2 * time.Second, false, 0, 1, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) == 1 {
					w.Header().Set("Retry-After", tt.retryAfter())
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				_, _ = io.WriteString(w, `{"ok":true}`)
			}))
			t.Cleanup(srv.Close)
			d := httpDef("billing.item", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: srv.URL + "/x"}, func(d *toolplane.Definition) {
				d.Retry = toolplane.RetrySafe
				d.Timeout = toolplane.Duration(tt.timeout)
			})
			e := newEnv(t, d)
			start := time.Now()
			r := e.call(t, d.Name, map[string]any{})
			took := time.Since(start)
			if r.OK != tt.wantOK || hits.Load() != tt.wantHits {
				t.Fatalf("result %+v after %d requests; want ok %v after %d", r.Error, hits.Load(), tt.wantOK, tt.wantHits)
			}
			if took < tt.minTook {
				t.Errorf("retried after %v, before the %v asked", took, tt.minTook)
			}
			if !tt.wantOK {
				if took > time.Second {
					t.Errorf("gave up after %v; a wait past the deadline is not taken", took)
				}
				if r.Error.Code != toolplane.CodeRetryableUpstream || r.Error.RetryAfter != tt.wantHint {
					t.Errorf("error %+v, want retryable_upstream with retry_after_seconds %d", r.Error, tt.wantHint)
				}
			}
		})
	}
}

// Each Invoke sends the request once and reports what the invoker's retry
// loop reads: a transient ending, the downstream's Retry-After, and
// whether the attempt may have acted.
func TestOneAttemptReportsItsEnding(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		effect toolplane.Effect
		header string // the binding's idempotency header
		status int
		after  string
		kind   handler.OutcomeKind
		retry  bool
		wait   time.Duration
	}{
		{"read 503", toolplane.EffectRead, "", 503, "", handler.Release, true, 0},
		{"read 503 with Retry-After", toolplane.EffectRead, "", 503, "7", handler.Release, true, 7 * time.Second},
		{"read 429", toolplane.EffectRead, "", 429, "2", handler.Release, true, 2 * time.Second},
		{"read 404", toolplane.EffectRead, "", 404, "", handler.Definite, false, 0},
		{"read 501", toolplane.EffectRead, "", 501, "", handler.Release, false, 0},
		{"write 502", toolplane.EffectWrite, "", 502, "3", handler.Held, true, 3 * time.Second},
		{"write 429", toolplane.EffectWrite, "", 429, "", handler.Release, true, 0},
		{"keyed write 503", toolplane.EffectWrite, "Idempotency-Key", 503, "", handler.Held, true, 0},
		{"write 409", toolplane.EffectWrite, "", 409, "", handler.Definite, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				if tt.after != "" {
					w.Header().Set("Retry-After", tt.after)
				}
				w.WriteHeader(tt.status)
			}))
			t.Cleanup(srv.Close)
			b := bind(t, httpDef("billing.item", tt.effect, toolplane.HTTPBinding{Method: http.MethodPost, URL: srv.URL + "/x", IdempotencyHeader: tt.header}))
			if keyed := tt.header != ""; b.KeyedDownstream() != keyed {
				t.Errorf("keyed downstream %v, want %v", b.KeyedDownstream(), keyed)
			}
			_, err := b.Invoke(context.Background(), handler.Call{Key: "k-1", Released: connection()}, map[string]any{})
			if err == nil || hits.Load() != 1 {
				t.Fatalf("err %v after %d requests, want one failed request", err, hits.Load())
			}
			o := b.Classify(err)
			if o.Kind != tt.kind || o.Retry != tt.retry || o.After != tt.wait {
				t.Errorf("outcome kind %v retry %v after %v, want %v %v %v", o.Kind, o.Retry, o.After, tt.kind, tt.retry, tt.wait)
			}
		})
	}
}

// A read without retry: safe is sent once, and a write without an
// idempotency header is never sent twice, whatever it met.
func TestNoRetryUnlessSafe(t *testing.T) {
	t.Parallel()
	srv, hits := serve(t, answer{status: 503})
	for _, effect := range []toolplane.Effect{toolplane.EffectRead, toolplane.EffectWrite} {
		hits.Store(0)
		d := httpDef("billing.item", effect, toolplane.HTTPBinding{Method: http.MethodPost, URL: srv.URL + "/x"}, func(d *toolplane.Definition) {
			d.Retry = toolplane.RetryNone
		})
		e := newEnv(t, d)
		r := e.call(t, d.Name, map[string]any{"note": "once"})
		if r.OK || hits.Load() != 1 {
			t.Errorf("%s: result %+v after %d requests, want one failed request", effect, r.Error, hits.Load())
		}
	}
}

// Without a released connection the call is a wiring fault, never a
// request without its credential.
func TestNoReleasedConnectionIsAFault(t *testing.T) {
	t.Parallel()
	srv, hits := serve(t, answer{status: 200, body: `{}`})
	b := bind(t, httpDef("billing.item", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: srv.URL + "/x"}))
	_, err := b.Invoke(context.Background(), handler.Call{}, map[string]any{})
	if err == nil || b.Classify(err).Kind != handler.Fault || hits.Load() != 0 {
		t.Fatalf("err %v, %d requests; want a fault and nothing sent", err, hits.Load())
	}
}

// A write that names an idempotency header is never sent without a key
// to put in it: a second attempt would then be a second effect.
func TestIdempotentWriteNeedsItsKey(t *testing.T) {
	t.Parallel()
	srv, hits := serve(t, answer{status: 201, body: `{}`})
	b := bind(t, httpDef("billing.charge", toolplane.EffectWrite, toolplane.HTTPBinding{
		Method: http.MethodPost, URL: srv.URL + "/x", IdempotencyHeader: "Idempotency-Key"}))
	for _, key := range []string{"", "k\r\nX-Admin: 1"} {
		_, err := b.Invoke(context.Background(), handler.Call{Key: key, Released: connection()}, map[string]any{})
		if err == nil || b.Classify(err).Kind != handler.Fault {
			t.Errorf("key %q: err %v, want a fault", key, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("%d requests sent without a usable key", hits.Load())
	}
}

// Every attempt of a retried call sends the same header: the credential
// once, and a cookie jar's cookies once, however many attempts went
// before it.
func TestRetrySendsTheSameHeader(t *testing.T) {
	t.Parallel()
	for _, withJar := range []bool{false, true} {
		t.Run(map[bool]string{false: "no jar", true: "a cookie jar"}[withJar], func(t *testing.T) {
			t.Parallel()
			var (
				hits atomic.Int64
				seen [2]http.Header
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := hits.Add(1)
				if n <= 2 {
					seen[n-1] = r.Header.Clone()
				}
				if n == 1 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				_, _ = io.WriteString(w, `{"ok":true}`)
			}))
			t.Cleanup(srv.Close)
			client := &http.Client{Transport: srv.Client().Transport}
			if withJar {
				jar, err := cookiejar.New(nil)
				if err != nil {
					t.Fatal(err)
				}
				u, _ := url.Parse(srv.URL)
				jar.SetCookies(u, []*http.Cookie{{Name: "s", Value: "1"}})
				client.Jar = jar
			}
			rt := httpruntime.New(httpruntime.Config{Client: func(*toolplane.Released) (*http.Client, error) { return client, nil }})
			d := httpDef("billing.item", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: srv.URL + "/x"}, func(d *toolplane.Definition) {
				d.Retry = toolplane.RetrySafe
			})
			b, err := rt.Bind(&d)
			if err != nil {
				t.Fatal(err)
			}
			// Two attempts, as the invoker's loop makes them.
			if _, err := b.Invoke(context.Background(), handler.Call{Released: connection()}, map[string]any{}); err == nil || !b.Classify(err).Retry {
				t.Fatalf("first attempt: err %v, want a transient failure", err)
			}
			if _, err := b.Invoke(context.Background(), handler.Call{Released: connection()}, map[string]any{}); err != nil || hits.Load() != 2 {
				t.Fatalf("err %v after %d requests, want an answer to the second", err, hits.Load())
			}
			for i, h := range seen {
				if got := h.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+token {
					t.Errorf("attempt %d: Authorization %q, want the bearer token once", i+1, got)
				}
				want := []string(nil)
				if withJar {
					want = []string{"s=1"}
				}
				if got := h.Values("Cookie"); !slices.Equal(got, want) {
					t.Errorf("attempt %d: Cookie %q, want %q", i+1, got, want)
				}
			}
		})
	}
}
