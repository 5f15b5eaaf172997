package httpruntime

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
)

// FuzzBuild builds requests from arbitrary argument values: it never
// panics, never sends to another host than the template's, keeps each
// path value in its one segment, and never lets a control character into
// a header.
func FuzzBuild(f *testing.F) {
	d := &toolplane.Definition{
		Name: "billing.item", Version: "1.0.0", Connection: "billing", Effect: toolplane.EffectWrite,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{},"q":{},"h":{},"b":{},"n":{}}}`),
		Binding: toolplane.Binding{HTTP: &toolplane.HTTPBinding{
			Method: "POST", URL: "https://api.example.com:8443/v1/items/{id}/x{n}y?fixed=1",
			Query: map[string]string{"q": "{q}"}, Headers: map[string]string{"X-H": "{h}"},
		}},
	}
	p, ps := compile(d)
	if len(ps) > 0 {
		f.Fatal(ps)
	}
	for _, seed := range [][5]string{
		{"w1", "a b", "h", `{"k":1}`, "1"},
		{"../admin", "?x=1#f", "a\r\nX: y", `[1,2]`, `1e400`},
		{"@evil.com", "//evil.com/", "\x00", `"s"`, "."},
		{"%2F..%2F", "&q=2", "é", `null`, `""`},
		{"a/b", "", "", `{"id":"x"}`, `{}`},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3], seed[4])
	}
	f.Fuzz(func(t *testing.T, id, q, h, bodyJSON, nJSON string) {
		args := map[string]any{"id": id, "q": q, "h": h}
		for name, raw := range map[string]string{"b": bodyJSON, "n": nJSON} {
			dec := json.NewDecoder(strings.NewReader(raw))
			dec.UseNumber()
			var v any
			if dec.Decode(&v) == nil {
				args[name] = v
			}
		}
		b, err := p.build(args, nil)
		if err != nil {
			var inv *handler.Invalid
			if !errors.As(err, &inv) || inv.FieldPath == "" {
				t.Fatalf("build refused with %v, want an invalid argument named", err)
			}
			return
		}
		if b.url.Host != "api.example.com:8443" || b.url.Scheme != "https" || b.url.User != nil {
			t.Fatalf("request to %s://%s", b.url.Scheme, b.url.Host)
		}
		// The URL as sent, read back, is the same place.
		u, err := url.Parse(b.url.String())
		if err != nil {
			t.Fatalf("%s: %v", b.url, err)
		}
		if u.Host != "api.example.com:8443" || u.Fragment != "" {
			t.Fatalf("%s reads back as host %q, fragment %q", b.url, u.Host, u.Fragment)
		}
		// The request is sent from the URL itself, not its text read
		// back: both must write the same request line.
		if b.url.RequestURI() != u.RequestURI() {
			t.Fatalf("%s writes %q, and read back %q", b.url, b.url.RequestURI(), u.RequestURI())
		}
		segs := strings.Split(u.EscapedPath(), "/")
		if len(segs) != 5 || segs[1] != "v1" || segs[2] != "items" {
			t.Fatalf("path %s has the wrong segments", u.EscapedPath())
		}
		if got, _ := url.PathUnescape(segs[3]); got != id {
			t.Fatalf("segment %q reads back as %q, want %q", segs[3], got, id)
		}
		if got := u.Query(); got.Get("fixed") != "1" || len(got["fixed"]) != 1 || got.Get("q") != q && q != "" {
			t.Fatalf("query %v, want fixed=1 and q=%q", got, q)
		}
		for name, vs := range b.header {
			for _, v := range vs {
				if strings.ContainsFunc(name+v, control) {
					t.Fatalf("header %q: %q holds a control character", name, v)
				}
			}
		}
	})
}
