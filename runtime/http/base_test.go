package httpruntime_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	httpruntime "github.com/toolplane/toolplane/runtime/http"
)

// A tool whose URL is a path is sent under its connection's base URL:
// scheme, host and leading path from the connection, the path and query
// from the tool, each argument one escaped segment; a connection without a
// base URL sends nothing and says why.
func TestAPathIsSentUnderTheConnectionsBaseURL(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.EscapedPath()+"?"+r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	withBase := func(base string) *toolplane.Released {
		rel := connection()
		con := *rel.Connection
		con.Config.BaseURL = base
		rel.Connection = &con
		return rel
	}
	for _, tt := range []struct {
		name, base, url string
		args            map[string]any
		want            string
	}{
		{"a base with no path", srv.URL, "/orders/{id}", map[string]any{"id": "o-1"}, "/orders/o-1?"},
		{"a base with a path", srv.URL + "/api/v2", "/orders/{id}", map[string]any{"id": "o-1"}, "/api/v2/orders/o-1?"},
		{"a base ending in a slash", srv.URL + "/api/", "/orders/{id}", map[string]any{"id": "a/b c"}, "/api/orders/a%2Fb%20c?"},
		{"a base with an escaped path", srv.URL + "/a%2Fb", "/x", map[string]any{}, "/a%2Fb/x?"},
		{"the tool's own query", srv.URL, "/orders?expand=items", map[string]any{}, "/orders?expand=items"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := bind(t, httpDef("billing.item", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: tt.url}))
			if _, err := b.Invoke(context.Background(), handler.Call{Released: withBase(tt.base)}, tt.args); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if last := got[len(got)-1]; last != tt.want {
				t.Errorf("sent %s, want %s", last, tt.want)
			}
		})
	}

	before := len(got)
	e := newEnv(t, httpDef("billing.item", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: "/orders/{id}"}))
	e.broker.rel = withBase("")
	r := e.call(t, "billing.item", map[string]any{"id": "o-1"})
	if r.OK || r.Error == nil || r.Error.Code != toolplane.CodeUnavailable || !strings.Contains(r.Error.Message, "has no base_url") {
		t.Fatalf("without a base URL: %+v, want unavailable naming base_url", r.Error)
	}
	if len(got) != before {
		t.Fatal("a request was sent without a base URL")
	}
}

// A path is a URL only under a connection: it is checked like an absolute
// URL's path, and what a path cannot be is refused at registration.
func TestCheckOfARelativeURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		url, problem string
	}{
		{"/orders/{id}", ""},
		{"/orders/{id}?expand=items", ""},
		{"/orders/{nope}", "not a property"},
		{"/orders#top", "fragment"},
		{"/orders?x={id}", "placeholder in its query"},
		{"//evil.example/orders", "not an absolute"},
		{"/../../admin/{id}", `".." segment`},
		{"/orders/%2e%2e/admin", `".." segment`},
		{"/orders/./{id}", `"." segment`},
		{"/orders/..x/{id}", ""},
		{"orders/{id}", "not an absolute"},
	} {
		ps := httpruntime.Check(ptr(httpDef("billing.item", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: tt.url})))
		var msgs []string
		for _, p := range ps {
			msgs = append(msgs, p.String())
		}
		all := strings.Join(msgs, "; ")
		if (tt.problem == "") != (len(ps) == 0) || !strings.Contains(all, tt.problem) {
			t.Errorf("%s: problems %q, want one holding %q", tt.url, all, tt.problem)
		}
	}
}

func ptr[T any](v T) *T { return &v }
