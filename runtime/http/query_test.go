package httpruntime

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/toolplane/toolplane"
)

// valuesEncoded is the query url.Values gives literal (the template's own
// query) and then pairs added in order: what build sent before it wrote
// the query itself.
func valuesEncoded(literal url.Values, pairs []queryPair) string {
	q := make(url.Values, len(literal)+len(pairs))
	for k, v := range literal {
		q[k] = append([]string(nil), v...)
	}
	for _, p := range pairs {
		q.Add(p.name, p.value)
	}
	return q.Encode()
}

// encodedQuery is build's query for literal and pairs added in order.
func encodedQuery(literal url.Values, added []queryPair) string {
	var pairs []queryPair
	for k, vs := range literal {
		for _, v := range vs {
			pairs = append(pairs, queryPair{k, v})
		}
	}
	return encodeQuery(append(pairs, added...))
}

var querySeeds = []struct {
	literal string
	pairs   []queryPair
}{
	{"", []queryPair{{"q", "blue widgets"}}},
	{"fixed=1", []queryPair{{"q", "a b"}, {"a", "x"}, {"q", "c&d"}}},
	{"b=2&b=3&b=4&a=1", []queryPair{{"b", "5"}, {"b", "6"}, {"c", ""}}},
	{"", []queryPair{{"é ü", "/?#[]@!$&'()*+,;="}, {"", ""}, {"k", "%zz"}}},
	{"x=%20&x=+", []queryPair{{"x", "1"}, {"X", "2"}}},
}

// TestBuildQueryAsValuesEncode holds the query build writes equal, byte
// for byte, to url.Values.Encode's for the same pairs.
func TestBuildQueryAsValuesEncode(t *testing.T) {
	t.Parallel()
	for _, s := range querySeeds {
		lit, err := url.ParseQuery(s.literal)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := encodedQuery(lit, s.pairs), valuesEncoded(lit, s.pairs); got != want {
			t.Errorf("%q + %v: wrote %q, url.Values %q", s.literal, s.pairs, got, want)
		}
	}
}

// FuzzBuildQueryAsValuesEncode is TestBuildQueryAsValuesEncode over fuzzed
// literal queries and three added pairs.
func FuzzBuildQueryAsValuesEncode(f *testing.F) {
	for _, s := range querySeeds {
		var n [6]string
		for i, p := range s.pairs[:min(3, len(s.pairs))] {
			n[2*i], n[2*i+1] = p.name, p.value
		}
		f.Add(s.literal, n[0], n[1], n[2], n[3], n[4], n[5])
	}
	f.Fuzz(func(t *testing.T, literal, n1, v1, n2, v2, n3, v3 string) {
		lit, err := url.ParseQuery(literal)
		if err != nil {
			return
		}
		pairs := []queryPair{{n1, v1}, {n2, v2}, {n3, v3}}
		if got, want := encodedQuery(lit, pairs), valuesEncoded(lit, pairs); got != want {
			t.Errorf("%q + %v: wrote %q, url.Values %q", literal, pairs, got, want)
		}
	})
}

// TestBuildLeavesTheTemplateQuery checks that a call's query values are
// not written into the template's own: a template naming one parameter
// three times holds its values in a slice with room to spare, and a call
// adding to that slice wrote its value into the room every call shares,
// where a concurrent call could read it as its own.
func TestBuildLeavesTheTemplateQuery(t *testing.T) {
	t.Parallel()
	d := &toolplane.Definition{
		Name: "billing.items", Version: "1.0.0", Connection: "billing", Effect: toolplane.EffectRead,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"t":{"type":"string"}}}`),
		Binding: toolplane.Binding{HTTP: &toolplane.HTTPBinding{
			Method: "GET", URL: "https://api.example.com/v1/items?tag=a&tag=b&tag=c",
			Query: map[string]string{"tag": "{t}"},
		}},
	}
	p, ps := compile(d)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	tags := p.target.query["tag"]
	room := tags[len(tags):cap(tags)]
	b, err := p.build(map[string]any{"t": "mine"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.url.RawQuery, "tag=a&tag=b&tag=c&tag=mine"; got != want {
		t.Errorf("query %q, want %q", got, want)
	}
	for _, v := range room {
		if v != "" {
			t.Errorf("the call's value %q was written into the template's query", v)
		}
	}
}
