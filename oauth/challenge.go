package oauth

import "strings"

// Challenge is one challenge of a WWW-Authenticate header (RFC 9110
// section 11.6.1): its scheme and either a token68 or its parameters.
type Challenge struct {
	// Scheme is as sent; schemes compare case-insensitively.
	Scheme string
	// Token68 is the challenge's single token, for schemes that send one.
	Token68 string
	// Params are the challenge's auth-params by lower-cased name, quoted
	// strings unquoted. A repeated name keeps its first value.
	Params map[string]string
}

// ParseChallenges parses a WWW-Authenticate header value into its
// challenges. It never fails: parsing stops at the first thing that
// cannot be part of a challenge, and what was parsed before is answered.
func ParseChallenges(header string) []Challenge {
	p := &challengeParser{s: header}
	var out []Challenge
	for {
		p.skip(" \t,")
		if p.i >= len(p.s) {
			return out
		}
		scheme := p.token()
		if scheme == "" {
			return out
		}
		c := Challenge{Scheme: scheme}
		if p.skip(" \t") > 0 {
			if t, ok := p.token68(); ok {
				c.Token68 = t
				out = append(out, c)
				continue
			}
		}
		for {
			save := p.i
			p.skip(" \t,")
			name := p.token()
			p.skip(" \t")
			if name == "" || !p.eat('=') {
				// Not a parameter: the next challenge's scheme, or the end.
				p.i = save
				break
			}
			p.skip(" \t")
			var v string
			if p.peek() == '"' {
				var ok bool
				if v, ok = p.quoted(); !ok {
					return append(out, c)
				}
			} else {
				v = p.token()
			}
			if c.Params == nil {
				c.Params = map[string]string{}
			}
			if k := strings.ToLower(name); !hasKey(c.Params, k) {
				c.Params[k] = v
			}
		}
		out = append(out, c)
	}
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// ResourceMetadataURL answers the resource_metadata parameter of a
// WWW-Authenticate header (RFC 9728 section 5.1): where a protected
// resource's metadata is, as an upstream MCP server tells it in its 401.
// A Bearer challenge's parameter is preferred to another scheme's.
func ResourceMetadataURL(header string) (string, bool) {
	var other string
	for _, c := range ParseChallenges(header) {
		v, ok := c.Params["resource_metadata"]
		if !ok || v == "" {
			continue
		}
		if strings.EqualFold(c.Scheme, "Bearer") {
			return v, true
		}
		if other == "" {
			other = v
		}
	}
	return other, other != ""
}

// challengeParser walks a header value byte by byte; every grammar
// element it reads is ASCII.
type challengeParser struct {
	s string
	i int
}

func (p *challengeParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *challengeParser) eat(b byte) bool {
	if p.peek() == b && p.i < len(p.s) {
		p.i++
		return true
	}
	return false
}

// skip passes over any of chars and answers how many it passed.
func (p *challengeParser) skip(chars string) int {
	start := p.i
	for p.i < len(p.s) && strings.IndexByte(chars, p.s[p.i]) >= 0 {
		p.i++
	}
	return p.i - start
}

// token reads a token (RFC 9110 section 5.6.2).
func (p *challengeParser) token() string {
	start := p.i
	for p.i < len(p.s) && isTchar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// token68 reads a token68 when one stands alone here: followed by the end
// or a comma. Otherwise it reads nothing.
func (p *challengeParser) token68() (string, bool) {
	start := p.i
	j := p.i
	for j < len(p.s) && isToken68(p.s[j]) {
		j++
	}
	if j == start {
		return "", false
	}
	for j < len(p.s) && p.s[j] == '=' {
		j++
	}
	k := j
	for k < len(p.s) && (p.s[k] == ' ' || p.s[k] == '\t') {
		k++
	}
	if k < len(p.s) && p.s[k] != ',' {
		return "", false
	}
	p.i = j
	return p.s[start:j], true
}

// quoted reads a quoted-string, answering its unescaped content; false
// when it is not closed.
func (p *challengeParser) quoted() (string, bool) {
	p.i++ // the opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), true
		case c == '\\' && p.i+1 < len(p.s):
			b.WriteByte(p.s[p.i+1])
			p.i += 2
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return "", false
}

func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func isToken68(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~+/", c) >= 0
}
