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

// Check answers every problem of d's HTTP binding, for the registry to
// report when d is published; nil means the binding can run. It reads the
// definition only: which hosts a connection may reach is the connection's
// egress rules' business, checked when a call dials. It compiles the
// binding as Bind does, so what it accepts is what Bind runs.
func Check(d *toolplane.Definition) []toolplane.Problem {
	_, ps := compile(d)
	return ps
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
