package httpruntime_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	httpruntime "github.com/toolplane/toolplane/runtime/http"
)

// Check refuses every binding the runtime could not run safely, naming
// the field, and passes the ones it can.
func TestCheck(t *testing.T) {
	t.Parallel()
	const base = "https://api.example.com/v1/items/{id}"
	for _, tt := range []struct {
		name   string
		effect toolplane.Effect
		b      toolplane.HTTPBinding
		mutate func(*toolplane.Definition)
		field  string // "" passes
	}{
		{name: "a read", b: toolplane.HTTPBinding{Method: "GET", URL: base, Query: map[string]string{"q": "{q}", "limit": "10"}, Headers: map[string]string{"X-Trace": "{trace}"}, Output: "/data/0", StatusField: "status"}},
		{name: "a write with its key header", effect: toolplane.EffectWrite, b: toolplane.HTTPBinding{Method: "POST", URL: "http://127.0.0.1:8080/v1/charges", IdempotencyHeader: "Idempotency-Key", MaxResponseBytes: 16 << 20}},
		{name: "a search posts its arguments", b: toolplane.HTTPBinding{Method: "POST", URL: "https://api.example.com/search"}},
		{name: "one argument as the body", effect: toolplane.EffectWrite, b: toolplane.HTTPBinding{Method: "PUT", URL: base, Body: "{tags}"}},
		{name: "a placeholder inside a segment", b: toolplane.HTTPBinding{Method: "GET", URL: "https://api.example.com/files/{id}.json"}},
		{name: "no connection", b: toolplane.HTTPBinding{Method: "GET", URL: base}, mutate: func(d *toolplane.Definition) { d.Connection = "" }, field: "connection"},
		{name: "method", b: toolplane.HTTPBinding{Method: "get", URL: base}, field: "binding.http.method"},
		{name: "a write by GET", effect: toolplane.EffectWrite, b: toolplane.HTTPBinding{Method: "GET", URL: base, Body: "none"}, field: "binding.http.method"},
		{name: "method HEAD", b: toolplane.HTTPBinding{Method: "HEAD", URL: base}, field: "binding.http.method"},
		{name: "relative URL not a path", b: toolplane.HTTPBinding{Method: "GET", URL: "v1/items"}, field: "binding.http.url"},
		{name: "scheme-relative URL", b: toolplane.HTTPBinding{Method: "GET", URL: "//evil.example/v1/items"}, field: "binding.http.url"},
		{name: "ftp URL", b: toolplane.HTTPBinding{Method: "GET", URL: "ftp://example.com/x"}, field: "binding.http.url"},
		{name: "user info", b: toolplane.HTTPBinding{Method: "GET", URL: "https://user:pw@api.example.com/x"}, field: "binding.http.url"},
		{name: "fragment", b: toolplane.HTTPBinding{Method: "GET", URL: "https://api.example.com/x#top"}, field: "binding.http.url"},
		{name: "placeholder in the host", b: toolplane.HTTPBinding{Method: "GET", URL: "https://{id}.example.com/x"}, field: "binding.http.url"},
		{name: "placeholder as the host", b: toolplane.HTTPBinding{Method: "GET", URL: "https://{id}/x"}, field: "binding.http.url"},
		{name: "placeholder in the URL's query", b: toolplane.HTTPBinding{Method: "GET", URL: "https://api.example.com/x?q={q}"}, field: "binding.http.url"},
		{name: "placeholder not a property", b: toolplane.HTTPBinding{Method: "GET", URL: "https://api.example.com/x/{nope}"}, field: "binding.http.url"},
		{name: "unclosed placeholder", b: toolplane.HTTPBinding{Method: "GET", URL: "https://api.example.com/x/{id"}, field: "binding.http.url"},
		{name: "empty placeholder", b: toolplane.HTTPBinding{Method: "GET", URL: "https://api.example.com/x/{}"}, field: "binding.http.url"},
		{name: "query placeholder not a property", b: toolplane.HTTPBinding{Method: "GET", URL: base, Query: map[string]string{"q": "{nope}"}}, field: "binding.http.query.q"},
		{name: "query mixes text and a placeholder", b: toolplane.HTTPBinding{Method: "GET", URL: base, Query: map[string]string{"q": "x{q}"}}, field: "binding.http.query.q"},
		{name: "header placeholder not a property", b: toolplane.HTTPBinding{Method: "GET", URL: base, Headers: map[string]string{"X-A": "{nope}"}}, field: "binding.http.headers.X-A"},
		{name: "header name", b: toolplane.HTTPBinding{Method: "GET", URL: base, Headers: map[string]string{"X A": "1"}}, field: "binding.http.headers.X A"},
		{name: "Authorization", b: toolplane.HTTPBinding{Method: "GET", URL: base, Headers: map[string]string{"authorization": "Bearer x"}}, field: "binding.http.headers.authorization"},
		{name: "Host", b: toolplane.HTTPBinding{Method: "GET", URL: base, Headers: map[string]string{"Host": "evil.example.com"}}, field: "binding.http.headers.Host"},
		{name: "hop-by-hop", b: toolplane.HTTPBinding{Method: "GET", URL: base, Headers: map[string]string{"Transfer-Encoding": "chunked"}}, field: "binding.http.headers.Transfer-Encoding"},
		{name: "Content-Length", b: toolplane.HTTPBinding{Method: "GET", URL: base, Headers: map[string]string{"Content-Length": "1"}}, field: "binding.http.headers.Content-Length"},
		{name: "the idempotency header", effect: toolplane.EffectWrite, b: toolplane.HTTPBinding{Method: "POST", URL: base, IdempotencyHeader: "X-Request-Key", Headers: map[string]string{"x-request-key": "{id}"}}, field: "binding.http.headers.x-request-key"},
		{name: "an idempotency key by hand", effect: toolplane.EffectWrite, b: toolplane.HTTPBinding{Method: "POST", URL: base, Headers: map[string]string{"Idempotency-Key": "{id}"}}, field: "binding.http.headers.Idempotency-Key"},
		{name: "literal header with a line break", b: toolplane.HTTPBinding{Method: "GET", URL: base, Headers: map[string]string{"X-A": "a\r\nb"}}, field: "binding.http.headers.X-A"},
		{name: "body form", effect: toolplane.EffectWrite, b: toolplane.HTTPBinding{Method: "POST", URL: base, Body: "everything"}, field: "binding.http.body"},
		{name: "body argument not a property", effect: toolplane.EffectWrite, b: toolplane.HTTPBinding{Method: "POST", URL: base, Body: "{nope}"}, field: "binding.http.body"},
		{name: "GET with a body", b: toolplane.HTTPBinding{Method: "GET", URL: base, Body: "arguments"}, field: "binding.http.body"},
		{name: "a read PUTs its arguments", b: toolplane.HTTPBinding{Method: "PUT", URL: base}, field: "binding.http.body"},
		{name: "output pointer", b: toolplane.HTTPBinding{Method: "GET", URL: base, Output: "data"}, field: "binding.http.output"},
		{name: "output pointer escape", b: toolplane.HTTPBinding{Method: "GET", URL: base, Output: "/a~2"}, field: "binding.http.output"},
		{name: "idempotency header on a read", b: toolplane.HTTPBinding{Method: "GET", URL: base, IdempotencyHeader: "Idempotency-Key"}, field: "binding.http.idempotency_header"},
		{name: "idempotency header is Authorization", effect: toolplane.EffectWrite, b: toolplane.HTTPBinding{Method: "POST", URL: base, IdempotencyHeader: "Authorization"}, field: "binding.http.idempotency_header"},
		{name: "response cap above 16 MiB", b: toolplane.HTTPBinding{Method: "GET", URL: base, MaxResponseBytes: 16<<20 + 1}, field: "binding.http.max_response_bytes"},
		{name: "negative response cap", b: toolplane.HTTPBinding{Method: "GET", URL: base, MaxResponseBytes: -1}, field: "binding.http.max_response_bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			effect := tt.effect
			if effect == "" {
				effect = toolplane.EffectRead
			}
			d := httpDef("billing.item", effect, tt.b)
			if tt.mutate != nil {
				tt.mutate(&d)
			}
			ps := httpruntime.Check(&d)
			if tt.field == "" {
				if len(ps) > 0 {
					t.Fatalf("problems %v, want none", ps)
				}
				return
			}
			if len(ps) != 1 || ps[0].Field != tt.field || ps[0].Message == "" || ps[0].Fix == "" {
				t.Fatalf("problems %v, want one at %s", ps, tt.field)
			}
			// A binding Check refuses is never bound.
			_, err := httpruntime.New(httpruntime.Config{Client: plainClient(t)}).Bind(&d)
			if !errors.Is(err, toolplane.ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Bind: %v, want ErrInvalid naming %s", err, tt.field)
			}
		})
	}
}

// A definition without an http binding is one problem, not a panic.
func TestCheckWithoutBinding(t *testing.T) {
	t.Parallel()
	d := httpDef("billing.item", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: "https://x.example"})
	d.Binding.HTTP = nil
	if ps := httpruntime.Check(&d); len(ps) != 1 || ps[0].Field != "binding.http" {
		t.Fatalf("problems %v", ps)
	}
}
