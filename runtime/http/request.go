package httpruntime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
)

// plan is a binding compiled once: everything about the request that does
// not depend on the call.
type plan struct {
	method string
	target *target
	query  []param
	header []param
	// body is BodyArguments, BodyNone, or the name of the argument that
	// is the body.
	body, bodyArg string
	// consumed names the arguments the path, query and headers use: the
	// arguments body leaves out.
	consumed   map[string]bool
	output     []string
	hasOutput  bool
	status     string
	idempotent string
	maxBytes   int
	writes     bool
	// price is the tool's price, and priceAt its field's tokens in the
	// response body (see charge).
	price   *toolplane.Price
	priceAt []string
}

// param is one query parameter or header: a literal, or an argument.
type param struct {
	name, lit, arg string
	// vals is a literal header's value as every call sends it, shared:
	// net/http reads a request's header values and never writes them.
	vals []string
}

// built is a call's request in the parts every attempt sends again.
type built struct {
	url    *url.URL
	header http.Header
	body   []byte
	// target is where url points: the URL lives in the same allocation
	// as the rest.
	target url.URL
	// scrub removes the call's secrets from what the downstream answers,
	// kept here for the same reason.
	scrub scrubber
	// auth is the credential header's value, the header's slice of it
	// kept here too (its capacity one, so nothing appends into it).
	auth [1]string
}

// build encodes a call's arguments into its request. Every value reaches
// the request encoded (one path segment, a query value, a header value, the
// JSON body); an argument that cannot be encoded so answers *handler.Invalid
// naming it, and nothing is sent.
func (p *plan) build(args any, base *url.URL) (*built, error) {
	m, _ := args.(map[string]any)
	if args != nil && m == nil {
		return nil, &handler.Invalid{Message: "the arguments must be a JSON object"}
	}
	out := &built{target: url.URL{Scheme: p.target.scheme, Host: p.target.host}}
	u := &out.target
	// A path is sent under the connection's base URL: its scheme, host
	// and leading path.
	prefix, rawPrefix := "", ""
	if p.target.relative() {
		if base == nil {
			return nil, errors.New("http runtime: a relative URL needs the connection's base URL")
		}
		u.Scheme, u.Host = base.Scheme, base.Host
		prefix, rawPrefix = strings.TrimSuffix(base.Path, "/"), strings.TrimSuffix(base.EscapedPath(), "/")
	}
	// The placeholders' values, as they are and escaped, in order; the
	// path is then written at its length, and its escaped form only when
	// it differs from it (an id that needs no escaping, most often).
	var held [8]string
	vals, size, same := held[:0], 0, true
	for _, pc := range p.target.path {
		if pc.arg == "" {
			size += len(pc.raw)
			same = same && pc.raw == pc.plain
			continue
		}
		s, err := segment(pc.arg, m)
		if err != nil {
			return nil, err
		}
		esc := url.PathEscape(s)
		vals = append(vals, s, esc)
		size += len(esc)
		same = same && esc == s
	}
	u.Path = prefix + p.target.joinPath(vals, size, false)
	if !same || rawPrefix != prefix {
		if u.RawPath = rawPrefix + p.target.joinPath(vals, size, true); u.RawPath == u.Path {
			u.RawPath = ""
		}
	}

	if len(p.query) == 0 {
		u.RawQuery = p.target.rawQuery
	} else {
		// The pairs are kept on the stack and written at their length:
		// url.Values and its Encode were a map, a slice per name, a slice
		// of the sorted names and a growing text, for the same bytes.
		var held [8]queryPair
		pairs := held[:0]
		for k, vs := range p.target.query {
			for _, v := range vs {
				pairs = append(pairs, queryPair{k, v})
			}
		}
		for _, qp := range p.query {
			if qp.arg == "" {
				pairs = append(pairs, queryPair{qp.name, qp.lit})
				continue
			}
			var err error
			if pairs, err = appendQueryValues(pairs, qp.name, qp.arg, m[qp.arg]); err != nil {
				return nil, err
			}
		}
		u.RawQuery = encodeQuery(pairs)
	}

	h := make(http.Header, len(p.header)+4)
	for _, hp := range p.header {
		if hp.arg == "" {
			h[hp.name] = hp.vals
			continue
		}
		a, present := m[hp.arg]
		if !present || a == nil {
			continue
		}
		s, ok := scalar(a)
		if !ok {
			return nil, &handler.Invalid{Message: fmt.Sprintf("argument %s is sent as a header and must be a string, number or boolean", quoteName(hp.arg)), FieldPath: fieldPath(hp.arg)}
		}
		if strings.ContainsFunc(s, control) {
			return nil, &handler.Invalid{Message: fmt.Sprintf("argument %s is sent as a header and must not hold a control character (a line break, a NUL)", quoteName(hp.arg)), FieldPath: fieldPath(hp.arg)}
		}
		h[hp.name] = []string{s}
	}

	var body []byte
	switch {
	case p.bodyArg != "":
		v, present := m[p.bodyArg]
		if present {
			b, err := encode(v)
			if err != nil {
				return nil, &handler.Invalid{Message: fmt.Sprintf("argument %s cannot be sent as JSON: %v", quoteName(p.bodyArg), err), FieldPath: fieldPath(p.bodyArg)}
			}
			body = b
		}
	case p.body == BodyArguments:
		rest := make(map[string]any, len(m))
		for k, v := range m {
			if !p.consumed[k] {
				rest[k] = v
			}
		}
		b, err := encode(rest)
		if err != nil {
			return nil, &handler.Invalid{Message: fmt.Sprintf("the arguments cannot be sent as JSON: %v", err)}
		}
		body = b
	}
	out.url, out.header, out.body = u, h, body
	return out, nil
}

// joinPath writes the path from its literal pieces and vals, the
// placeholders' values each followed by its escaped form: escaped, the
// pieces as written and the values escaped; else both as they read.
// size is at least the escaped path's length.
func (t *target) joinPath(vals []string, size int, escaped bool) string {
	var b strings.Builder
	b.Grow(size)
	for _, pc := range t.path {
		switch {
		case pc.arg != "":
			if escaped {
				b.WriteString(vals[1])
			} else {
				b.WriteString(vals[0])
			}
			vals = vals[2:]
		case escaped:
			b.WriteString(pc.raw)
		default:
			b.WriteString(pc.plain)
		}
	}
	return b.String()
}

// segment answers the value of a path placeholder: a scalar's string form,
// never empty, "." or "..", which a server would read as path structure
// even encoded.
func segment(name string, m map[string]any) (string, error) {
	v, present := m[name]
	if !present || v == nil {
		return "", &handler.Invalid{Message: fmt.Sprintf("argument %s is required: it is part of the request's path", quoteName(name)), FieldPath: fieldPath(name)}
	}
	s, ok := scalar(v)
	if !ok {
		return "", &handler.Invalid{Message: fmt.Sprintf("argument %s is part of the request's path and must be a string, number or boolean", quoteName(name)), FieldPath: fieldPath(name)}
	}
	switch s {
	case "", ".", "..":
		return "", &handler.Invalid{Message: fmt.Sprintf("argument %s is part of the request's path and cannot be %q", quoteName(name), s), FieldPath: fieldPath(name)}
	}
	return s, nil
}

// queryPair is one name and value of a request's query.
type queryPair struct{ name, value string }

// encodeQuery writes pairs as url.Values.Encode writes the Values they
// add up to: sorted by name, a name's values in the order they were
// added, each name and value escaped by url.QueryEscape. It sorts and
// escapes pairs in place.
func encodeQuery(pairs []queryPair) string {
	// Stable: a name's values keep their order, as in its Values slice.
	slices.SortStableFunc(pairs, func(a, b queryPair) int { return strings.Compare(a.name, b.name) })
	size := 0
	for i := range pairs {
		pairs[i].name, pairs[i].value = url.QueryEscape(pairs[i].name), url.QueryEscape(pairs[i].value)
		size += len(pairs[i].name) + len(pairs[i].value) + 2
	}
	var b strings.Builder
	b.Grow(size)
	for i, pr := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(pr.name)
		b.WriteByte('=')
		b.WriteString(pr.value)
	}
	return b.String()
}

// appendQueryValues appends to pairs the values of the query placeholder
// name, filled by argument arg, whose value is v: none when it is absent
// or null, one for a scalar, one per item for an array of scalars.
func appendQueryValues(pairs []queryPair, name, arg string, v any) ([]queryPair, error) {
	switch t := v.(type) {
	case nil:
		return pairs, nil
	case []any:
		for _, item := range t {
			s, ok := scalar(item)
			if !ok {
				return nil, &handler.Invalid{Message: fmt.Sprintf("argument %s is sent in the query, so its items must be strings, numbers or booleans", quoteName(arg)), FieldPath: fieldPath(arg)}
			}
			pairs = append(pairs, queryPair{name, s})
		}
		return pairs, nil
	}
	s, ok := scalar(v)
	if !ok {
		return nil, &handler.Invalid{Message: fmt.Sprintf("argument %s is sent in the query and must be a string, number, boolean or array of them", quoteName(arg)), FieldPath: fieldPath(arg)}
	}
	return append(pairs, queryPair{name, s}), nil
}

// scalar answers the string form of a JSON scalar. A number keeps its
// exact text: validation hands numbers over as json.Number, and 1e400 or
// 0.1 must reach the downstream as the caller wrote them.
func scalar(v any) (string, bool) {
	switch t := v.(type) {
	case string:
		return t, true
	case json.Number:
		return t.String(), true
	case bool:
		return strconv.FormatBool(t), true
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return "", false
		}
		return strconv.FormatFloat(t, 'f', -1, 64), true
	case float32:
		if math.IsInf(float64(t), 0) || math.IsNaN(float64(t)) {
			return "", false
		}
		return strconv.FormatFloat(float64(t), 'f', -1, 32), true
	case int:
		return strconv.Itoa(t), true
	case int64:
		return strconv.FormatInt(t, 10), true
	case int32:
		return strconv.FormatInt(int64(t), 10), true
	case uint64:
		return strconv.FormatUint(t, 10), true
	}
	return "", false
}

// encode writes v as JSON: numbers as their text, and <, > and & as they
// are, since the body is the downstream's and not a page.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
