package httpruntime

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/jsondec"
)

// answer reads a 2xx body as the tool's output. A JSON body is decoded
// (numbers kept exact) and the binding's output pointer selects from it;
// an empty body is an empty object, since a 204 says only that it worked.
// A body that is not JSON answers its text: the output schema then
// decides, and one that expects an object answers invalid_output. That is
// deliberate: for a write the effect happened, so the call must end with a
// stable answer that completes its claim, never one that frees it to run
// again.
//
// A priced tool's cost is reported to the meter here, from the whole body
// (see charge).
func (c *caller) answer(ctx context.Context, x *exchange, s *scrubber) any {
	p := c.plan
	var v any
	if body := bytes.TrimSpace(x.body); len(body) == 0 {
		v = map[string]any{}
	} else if decoded, ok := decode(body); ok {
		v = decoded
	} else {
		c.charge(ctx, nil)
		return s.value(string(x.body))
	}
	c.charge(ctx, v)
	if p.hasOutput {
		v = at(v, p.output)
	}
	if p.status != "" {
		if m, ok := v.(map[string]any); ok {
			m[p.status] = json.Number(strconv.Itoa(x.status))
		}
	}
	return s.value(v)
}

// charge reports a priced call's cost: the fixed price, or what the body
// states at the price's field (nil body: not JSON, so nothing is stated).
func (c *caller) charge(ctx context.Context, body any) {
	p := c.plan
	switch {
	case p.price == nil:
	case p.price.Field == "":
		handler.Charge(ctx, p.price)
	case body == nil:
		handler.Charge(ctx, p.price, nil)
	default:
		handler.Charge(ctx, p.price, at(body, p.priceAt))
	}
}

// decode reads one JSON value and nothing after it, numbers kept exact
// (json.Number), as encoding/json decodes it into an any with UseNumber.
func decode(b []byte) (any, bool) { return jsondec.Value(b) }

// at answers the value a JSON pointer's tokens name in v, or nil where
// there is none: the output schema then says what was missing.
func at(v any, tokens []string) any {
	for _, tok := range tokens {
		switch t := v.(type) {
		case map[string]any:
			v = t[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) || tok != strconv.Itoa(i) {
				return nil
			}
			v = t[i]
		default:
			return nil
		}
	}
	return v
}

// upstreamMessage answers what a failure's body says: its JSON "message"
// or "error" (a string, or an object's message), or else its text, cut to
// maxQuoted bytes.
func upstreamMessage(body []byte) string {
	var msg string
	var doc map[string]any
	if json.Unmarshal(body, &doc) == nil {
		switch e := doc["error"].(type) {
		case string:
			msg = e
		case map[string]any:
			msg, _ = e["message"].(string)
		}
		if m, ok := doc["message"].(string); ok && m != "" {
			msg = m
		}
	}
	if msg == "" {
		msg = string(body)
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// scrubber removes a call's released secret values from what the
// downstream answered: a service that echoes a request's key back (in an
// error, in a body) would otherwise hand it to the model. The boundary
// redacts credentials by their shape; this catches them by their value,
// whatever their shape.
type scrubber struct {
	// secrets are the values to remove, the longest first, so a secret
	// holding another is replaced whole.
	secrets []string
	// held is where secrets are kept when they fit: a token and its two
	// escaped forms, most often, and no slice of their own to allocate.
	held [4]string
	// r replaces them; it is built the first time a text holds one,
	// which most answers never do.
	r     *strings.Replacer
	build sync.Once
}

const redacted = "[redacted]"

func newScrubber(rel *toolplane.Released) *scrubber {
	s := &scrubber{}
	s.fill(rel)
	return s
}

// fill sets s, a zero scrubber, to remove rel's secrets.
func (s *scrubber) fill(rel *toolplane.Released) {
	s.secrets = s.held[:0]
	sec := rel.Secrets
	for _, v := range []toolplane.SecretString{sec.Token, sec.Password, sec.AccessToken, sec.RefreshToken, sec.ClientSecret, sec.DSN} {
		if v == "" {
			continue
		}
		// A downstream that put the value in a URL or a form before
		// quoting it back quotes it encoded.
		s.secrets = append(s.secrets, v.Reveal())
		for _, enc := range []string{url.QueryEscape(v.Reveal()), url.PathEscape(v.Reveal())} {
			if enc != v.Reveal() {
				s.secrets = append(s.secrets, enc)
			}
		}
	}
	if sec.Username != "" || sec.Password != "" {
		s.secrets = append(s.secrets, base64.StdEncoding.EncodeToString([]byte(sec.Username.Reveal()+":"+sec.Password.Reveal())))
	}
	sortLongestFirst(s.secrets)
}

func sortLongestFirst(ss []string) {
	for i := 1; i < len(ss); i++ {
		for j := i; j > 0 && len(ss[j]) > len(ss[j-1]); j-- {
			ss[j], ss[j-1] = ss[j-1], ss[j]
		}
	}
}

// scrub answers str without the secrets.
func (s *scrubber) scrub(str string) string {
	if !s.holds(str) {
		return str
	}
	s.build.Do(func() {
		pairs := make([]string, 0, 2*len(s.secrets))
		for _, v := range s.secrets {
			pairs = append(pairs, v, redacted)
		}
		s.r = strings.NewReplacer(pairs...)
	})
	return s.r.Replace(str)
}

func (s *scrubber) holds(str string) bool {
	for _, v := range s.secrets {
		if strings.Contains(str, v) {
			return true
		}
	}
	return false
}

// value scrubs every string of a decoded JSON value, keys included, in
// place.
func (s *scrubber) value(v any) any {
	if len(s.secrets) == 0 {
		return v
	}
	if str, ok := v.(string); ok {
		return s.scrub(str)
	}
	s.inside(v)
	return v
}

// inside scrubs the strings a decoded array or object holds, in place. A
// string is stored again only when scrubbing changed it: storing it back
// unchanged would box it anew, once for every string of every answer.
func (s *scrubber) inside(v any) {
	switch t := v.(type) {
	case []any:
		for i, item := range t {
			if str, ok := item.(string); ok {
				if clean := s.scrub(str); clean != str {
					t[i] = clean
				}
				continue
			}
			s.inside(item)
		}
	case map[string]any:
		var renamed []string
		for k, item := range t {
			if str, ok := item.(string); ok {
				if clean := s.scrub(str); clean != str {
					t[k] = clean
				}
			} else {
				s.inside(item)
			}
			if s.holds(k) {
				renamed = append(renamed, k)
			}
		}
		for _, k := range renamed {
			item := t[k]
			delete(t, k)
			t[s.scrub(k)] = item
		}
	}
}
