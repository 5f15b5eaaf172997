package httpruntime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
)

// The body forms a binding names.
const (
	BodyArguments = "arguments"
	BodyNone      = "none"
)

// The bounds of a response read.
const (
	// DefaultMaxResponseBytes is the response cap of a binding that names
	// none.
	DefaultMaxResponseBytes = 1 << 20
	// MaxResponseBytes is the largest cap a binding may name.
	MaxResponseBytes = 16 << 20
)

// methods are the methods a binding may use.
var methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// reservedHeaders are headers a binding may not set: the transport owns
// framing and routing (hop-by-hop headers, Host, Content-Length), the
// connection owns Authorization, and an idempotency header is named by
// idempotency_header alone, since net/http treats a request carrying one
// as safe to send twice.
var reservedHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Host": true, "Content-Length": true, "Authorization": true,
	"Idempotency-Key": true, "X-Idempotency-Key": true,
}

// Kind is the kind of binding the runtime runs: binding.http.
const Kind = toolplane.BindingHTTP

// Checks answers the runtime's contract as the registry reads it: its
// kind, the binding it runs and its checks, binding nothing (see
// Runtime.Contract).
func Checks() handler.Runtime {
	return handler.Runtime{Kind: Kind, Check: Check, Spec: func(b *toolplane.Binding) (any, bool) { return b.HTTP, b.HTTP != nil }}
}

// Check answers every problem of d's HTTP binding, for the registry to
// report when d is published; nil means the binding can run. It reads the
// definition only: which hosts a connection may reach is the connection's
// egress rules' business, checked when a call dials. It compiles the
// binding as Bind does, so what it accepts is what Bind runs.
func Check(d *toolplane.Definition) []toolplane.Problem {
	_, ps := compile(d)
	return ps
}

// compile checks d's binding and answers its plan, or every problem
// that keeps it from running (and no plan). Each part of the binding is
// read once: what the checks parse is what the plan holds.
func compile(d *toolplane.Definition) (*plan, []toolplane.Problem) {
	var ps []toolplane.Problem
	add := func(field, msg, fix string) { ps = append(ps, toolplane.Problem{Field: field, Message: msg, Fix: fix}) }
	b := d.Binding.HTTP
	if b == nil {
		add("binding.http", "missing", "describe the request: method and url")
		return nil, ps
	}
	if d.Connection == "" {
		add("connection", "an http tool declares no connection", "name the provider whose connection the request goes through (connection: payments)")
	}
	props, err := properties(d.InputSchema)
	if err != nil {
		add("input_schema", "cannot be read for its properties: "+err.Error(), "give an object schema whose properties name the arguments")
	}
	isProp := func(name string) bool { return props[name] }
	p := &plan{
		method: b.Method, consumed: map[string]bool{},
		status: b.StatusField, idempotent: http.CanonicalHeaderKey(b.IdempotencyHeader),
		maxBytes: b.MaxResponseBytes, writes: d.Writes(),
	}
	if p.maxBytes == 0 {
		p.maxBytes = DefaultMaxResponseBytes
	}

	if !slices.Contains(methods, b.Method) {
		add("binding.http.method", fmt.Sprintf("%q is not a method an http tool uses", b.Method), "use GET, POST, PUT, PATCH or DELETE")
	}
	if p.target, err = parseURL(b.URL, isProp); err != nil {
		add("binding.http.url", err.Error(), "give an absolute http(s) URL, or a path (/orders/{order_id}) under the connection's base_url, whose {argument} placeholders are whole values in its path")
	} else {
		for _, pc := range p.target.path {
			if pc.arg != "" {
				p.consumed[pc.arg] = true
			}
		}
	}
	// templated answers a query parameter or header: an argument, which
	// the body then leaves out, or a literal.
	templated := func(name, v string) param {
		if isPlaceholder(v) {
			arg := v[1 : len(v)-1]
			p.consumed[arg] = true
			return param{name: name, arg: arg}
		}
		return param{name: name, lit: v}
	}
	for _, name := range sortedKeys(b.Query) {
		field := "binding.http.query." + name
		if name == "" {
			add("binding.http.query", "a query parameter has no name", "name every query parameter")
		}
		if err := checkTemplate(b.Query[name], isProp); err != nil {
			add(field, err.Error(), `give "{argument}" naming an input property, or a literal without braces`)
		}
		p.query = append(p.query, templated(name, b.Query[name]))
	}
	for _, name := range sortedKeys(b.Headers) {
		field := "binding.http.headers." + name
		canon := http.CanonicalHeaderKey(name)
		switch {
		case !token(name):
			add(field, fmt.Sprintf("%q is not a header name", name), "use letters, digits and - only")
		case reservedHeaders[canon]:
			add(field, fmt.Sprintf("%s is set by the platform, not by a binding", canon), "remove it: the connection presents the credential, the transport frames the request, and idempotency_header names the idempotency key's header")
		case b.IdempotencyHeader != "" && canon == http.CanonicalHeaderKey(b.IdempotencyHeader):
			add(field, fmt.Sprintf("%s is the idempotency header, which carries the call's key", canon), "remove it from headers")
		}
		if err := checkTemplate(b.Headers[name], isProp); err != nil {
			add(field, err.Error(), `give "{argument}" naming an input property, or a literal without braces`)
		} else if strings.ContainsFunc(b.Headers[name], control) {
			add(field, "holds a control character", "remove it")
		}
		hp := templated(canon, b.Headers[name])
		if hp.arg == "" {
			hp.vals = []string{hp.lit}
		}
		p.header = append(p.header, hp)
	}
	body := effectiveBody(b)
	switch {
	case body == BodyArguments || body == BodyNone:
		p.body = body
	case isPlaceholder(body):
		if p.bodyArg = body[1 : len(body)-1]; !isProp(p.bodyArg) {
			add("binding.http.body", fmt.Sprintf("%s is not a property of the input schema", p.bodyArg), "name an input property, or use \"arguments\" or \"none\"")
		}
	default:
		add("binding.http.body", fmt.Sprintf("%q is not a body form", b.Body), `use "arguments", "none" or "{argument}"`)
	}
	if d.Effect.Writes() && b.Method == http.MethodGet {
		// net/http sends a GET again on its own when a kept-alive
		// connection fails under it: a write must not be one.
		add("binding.http.method", "a write or send is not a GET, which the transport may send twice", "use POST, PUT, PATCH or DELETE")
	}
	if body != BodyNone && b.Method == http.MethodGet {
		add("binding.http.body", "a GET request carries no body", `set body: none, or pass the arguments in the query`)
	} else if body == BodyArguments && d.Effect == toolplane.EffectRead && b.Method != http.MethodPost {
		add("binding.http.body", fmt.Sprintf("a read sends its arguments as a body with %s", b.Method), "use POST for a read that sends a body (a search), or pass the arguments in the path and query")
	}
	if p.output, err = pointer(b.Output); err != nil {
		add("binding.http.output", err.Error(), "give a JSON pointer such as /data, or leave it empty for the whole body")
	}
	p.hasOutput = b.Output != ""
	if h := b.IdempotencyHeader; h != "" {
		switch {
		case !d.Effect.Writes():
			add("binding.http.idempotency_header", "a read has no idempotency key to send", "remove it, or declare the tool's effect write or send")
		case !token(h):
			add("binding.http.idempotency_header", fmt.Sprintf("%q is not a header name", h), "use letters, digits and - only, such as Idempotency-Key")
		case reservedHeaders[http.CanonicalHeaderKey(h)] && !idempotencyNames[http.CanonicalHeaderKey(h)]:
			add("binding.http.idempotency_header", fmt.Sprintf("%s is set by the platform", http.CanonicalHeaderKey(h)), "name the header the downstream reads its idempotency key from, such as Idempotency-Key")
		}
	}
	if b.MaxResponseBytes < 0 || b.MaxResponseBytes > MaxResponseBytes {
		add("binding.http.max_response_bytes", fmt.Sprintf("%d is outside 0..%d", b.MaxResponseBytes, MaxResponseBytes), "give a cap of at most 16 MiB, or 0 for the 1 MiB default")
	}
	if pr := d.Price; pr != nil && pr.Field != "" {
		if p.priceAt, err = pointer(pr.Field); err != nil || pr.Field == "" {
			add("price.field", fmt.Sprintf("%s is not a JSON pointer", strconv.Quote(pr.Field)), "give a JSON pointer into the response body, such as /usage/cost_cents")
		} else if why := unreachable(d, b, p.priceAt); why != "" {
			add("price.field", why, "point at a field the response body can hold, or change the output schema")
		}
	}
	p.price = d.Price
	if len(ps) > 0 {
		return nil, ps
	}
	return p, nil
}

// unreachable answers why a price pointer cannot name anything in the
// response body, where that is knowable: the output schema describes the
// body (no output pointer), or the part of it the output pointer selects
// (a price pointer under it), and closes an object the pointer walks into
// (additionalProperties: false) or makes a step a scalar. "" when it may.
func unreachable(d *toolplane.Definition, b *toolplane.HTTPBinding, tokens []string) string {
	out, err := pointer(b.Output)
	if err != nil || len(out) > len(tokens) || !slices.Equal(out, tokens[:len(out)]) {
		return ""
	}
	raw, walked := d.OutputSchema, "the output schema"
	for _, tok := range tokens[len(out):] {
		var doc struct {
			Type                 any                        `json:"type"`
			Properties           map[string]json.RawMessage `json:"properties"`
			AdditionalProperties json.RawMessage            `json:"additionalProperties"`
		}
		if json.Unmarshal(raw, &doc) != nil {
			return ""
		}
		if t, ok := doc.Type.(string); ok && t != "object" && t != "array" {
			return fmt.Sprintf("%s is a %s, which holds no field %s", walked, t, strconv.Quote(tok))
		}
		next, ok := doc.Properties[tok]
		if !ok {
			if string(bytes.TrimSpace(doc.AdditionalProperties)) == "false" {
				return fmt.Sprintf("%s allows no property %s", walked, strconv.Quote(tok))
			}
			return ""
		}
		raw, walked = next, fmt.Sprintf("the output schema's %s", strconv.Quote(tok))
	}
	return ""
}

// idempotencyNames are the reserved headers idempotency_header may name.
var idempotencyNames = map[string]bool{"Idempotency-Key": true, "X-Idempotency-Key": true}

// effectiveBody answers the binding's body form with its method's default.
func effectiveBody(b *toolplane.HTTPBinding) string {
	if b.Body != "" {
		return b.Body
	}
	switch b.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		return BodyArguments
	}
	return BodyNone
}

// properties answers the names of the top-level properties of an input
// schema.
func properties(raw json.RawMessage) (map[string]bool, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var doc struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(doc.Properties))
	for k := range doc.Properties {
		out[k] = true
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// isPlaceholder reports whether s is exactly one {name} placeholder.
func isPlaceholder(s string) bool {
	return len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}' && !strings.ContainsAny(s[1:len(s)-1], "{}")
}

// checkTemplate checks a query or header value template: one placeholder
// naming a property, or a literal holding no brace.
func checkTemplate(s string, isProp func(string) bool) error {
	if isPlaceholder(s) {
		if name := s[1 : len(s)-1]; !isProp(name) {
			return fmt.Errorf("{%s} is not a property of the input schema", name)
		}
		return nil
	}
	if strings.ContainsAny(s, "{}") {
		return fmt.Errorf("%q mixes a placeholder with text; a value is one {argument} or a literal", s)
	}
	return nil
}

// token reports whether s is an HTTP token (RFC 9110, 5.6.2): what a
// header name is made of.
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// control reports whether r is a control character, which a header
// value never carries: CR and LF would start a header of their own.
func control(r rune) bool { return r < 0x20 || r == 0x7f }

// pointer splits a JSON pointer (RFC 6901) into its unescaped tokens.
func pointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("%q is not a JSON pointer: it starts with /", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, tok := range parts {
		for j := 0; j < len(tok); j++ {
			if tok[j] == '~' && (j+1 == len(tok) || tok[j+1] != '0' && tok[j+1] != '1') {
				return nil, fmt.Errorf("%q is not a JSON pointer: ~ is written ~0, / is written ~1", p)
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// fieldPath answers the JSON pointer of a top-level argument.
func fieldPath(name string) string {
	return "/" + strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}

// target is a parsed URL template: where the request goes (scheme and
// host, fixed) and the path whose placeholders the arguments fill.
type target struct {
	scheme, host string
	// path is the path's pieces in order: literals as written (escaped)
	// and, between them, placeholders.
	path []piece
	// query is the template's own query, literal.
	query url.Values
	// rawQuery is query encoded, what a call with no query parameters of
	// its own sends.
	rawQuery string
}

// piece is a literal run of a path (raw as written, unescaped) or a
// placeholder (arg).
type piece struct {
	raw, plain string
	arg        string
}

// parseURL parses a URL template. Placeholders may stand only in the
// path, and isProp must know each. A template that is a path alone
// (/orders/{id}) is relative: the base URL of the connection a call goes
// through gives its scheme, host and leading path (see relative).
func parseURL(raw string, isProp func(string) bool) (*target, error) {
	if toolplane.RelativeURL(raw) {
		return parseRelative(raw, isProp)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse refuses a brace in the host with its own words; say
		// what the binding did wrong instead.
		if i := strings.Index(raw, "://"); i >= 0 {
			if auth, _, _ := strings.Cut(raw[i+3:], "/"); strings.ContainsAny(auth, "{}") {
				return nil, fmt.Errorf("%q has a placeholder in its host; only the path takes arguments", raw)
			}
		}
		return nil, fmt.Errorf("%q is not a URL: %v", raw, unwrapURLError(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q is not an absolute http or https URL", raw)
	case u.Host == "" || u.Opaque != "":
		return nil, fmt.Errorf("%q names no host", raw)
	case u.User != nil:
		return nil, fmt.Errorf("%q carries user information; the connection holds the credential", raw)
	case strings.Contains(raw, "#"):
		return nil, fmt.Errorf("%q has a fragment, which is never sent", raw)
	case strings.ContainsAny(u.Host, "{}"):
		return nil, fmt.Errorf("%q has a placeholder in its host; only the path takes arguments", raw)
	case strings.ContainsAny(u.RawQuery, "{}"):
		return nil, fmt.Errorf("%q has a placeholder in its query; name query parameters in query", raw)
	}
	t := &target{scheme: u.Scheme, host: u.Host}
	if t.query, err = url.ParseQuery(u.RawQuery); err != nil {
		return nil, fmt.Errorf("%q has a query that cannot be read: %v", raw, err)
	}
	t.rawQuery = t.query.Encode()
	// The path as written, between the host and the query.
	rest := raw[strings.Index(raw, "://")+3:]
	path := ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		path, _, _ = strings.Cut(rest[i:], "?")
	}
	return t, t.parsePath(raw, path, isProp)
}

// parseRelative parses a URL template that is a path, with its query.
func parseRelative(raw string, isProp func(string) bool) (*target, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%q is not a URL path: %v", raw, unwrapURLError(err))
	case strings.Contains(raw, "#"):
		return nil, fmt.Errorf("%q has a fragment, which is never sent", raw)
	case strings.ContainsAny(u.RawQuery, "{}"):
		return nil, fmt.Errorf("%q has a placeholder in its query; name query parameters in query", raw)
	}
	t := &target{}
	if t.query, err = url.ParseQuery(u.RawQuery); err != nil {
		return nil, fmt.Errorf("%q has a query that cannot be read: %v", raw, err)
	}
	t.rawQuery = t.query.Encode()
	path, _, _ := strings.Cut(raw, "?")
	// A path stays under the base URL's leading path: a connection given
	// https://api.example.com/tenants/acme is not climbed out of by the
	// tool's own text (an argument is one escaped segment already).
	for _, seg := range strings.Split(path, "/") {
		if plain, err := url.PathUnescape(seg); err == nil && (plain == "." || plain == "..") {
			return nil, fmt.Errorf("%q has a %q segment; a path is sent under the connection's base URL and cannot climb out of it", raw, plain)
		}
	}
	return t, t.parsePath(raw, path, isProp)
}

// relative reports whether t is a path the connection's base URL
// completes.
func (t *target) relative() bool { return t.host == "" }

// parsePath reads the path of template raw into t's pieces.
func (t *target) parsePath(raw, path string, isProp func(string) bool) error {
	for path != "" {
		open := strings.IndexByte(path, '{')
		if close := strings.IndexByte(path, '}'); close >= 0 && (open < 0 || close < open) {
			return fmt.Errorf("%q has a } with no {", raw)
		}
		if open < 0 {
			if err := t.literal(path); err != nil {
				return fmt.Errorf("%q: %v", raw, err)
			}
			break
		}
		if open > 0 {
			if err := t.literal(path[:open]); err != nil {
				return fmt.Errorf("%q: %v", raw, err)
			}
		}
		end := strings.IndexByte(path[open:], '}')
		if end < 0 {
			return fmt.Errorf("%q has a { with no }", raw)
		}
		name := path[open+1 : open+end]
		switch {
		case name == "" || strings.ContainsAny(name, "{/"):
			return fmt.Errorf("%q has a placeholder without a name", raw)
		case !isProp(name):
			return fmt.Errorf("{%s} in the path is not a property of the input schema", name)
		}
		t.path = append(t.path, piece{arg: name})
		path = path[open+end+1:]
	}
	return nil
}

func (t *target) literal(raw string) error {
	plain, err := url.PathUnescape(raw)
	if err != nil {
		return fmt.Errorf("its path holds a bad escape: %v", err)
	}
	t.path = append(t.path, piece{raw: raw, plain: plain})
	return nil
}

// unwrapURLError answers the reason of a *url.Error, which otherwise
// repeats the URL.
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// quoteName answers an argument's name for a message.
func quoteName(name string) string { return strconv.Quote(name) }
