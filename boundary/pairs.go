package boundary

import "strings"

// Credentials by the name text gives them. A configuration line, a
// connection string, a URL or a JSON document quoted in an error message
// names its credentials the way an object's keys do: "db_password=hunter2",
// "password: hunter2", `"client_secret": "…"`, "?access_token=…". The name
// before the separator is judged by the rule on keys ([IsCredentialKey]),
// so "max_tokens: 5" and "next_page_token=abc" are kept as they are, and
// only the value after it is replaced. A URL's user info and path carry
// credentials without a name; they go by the URL rule (see urls.go):
// "scheme://user:password@host/hooks/<token>" loses its user info and its
// token.

// minPairLen is the length of the shortest text that can hold a named
// credential: the shortest credential word, a separator and one byte.
const minPairLen = shortestRuleWord + 2

// redactPairs returns s with the value of every credential-named field and
// what the URL rule hides of every URL replaced by Redacted, and whether it changed
// anything. It looks only at the separators ('=', ':') s holds; a value
// already Redacted is left, so a second scan finds nothing more.
func redactPairs(s string) (string, bool) {
	var b strings.Builder
	last := 0
	// The next '=' and the next ':' at or after i, each found by
	// IndexByte, which runs at memory speed, and looked for again only
	// once the scan has passed it; -1 once there is none.
	eq, colon := indexFrom(s, '=', 0), indexFrom(s, ':', 0)
	for i := 0; i < len(s); {
		if eq >= 0 && eq < i {
			eq = indexFrom(s, '=', i)
		}
		if colon >= 0 && colon < i {
			colon = indexFrom(s, ':', i)
		}
		j := eq
		if j < 0 || colon >= 0 && colon < j {
			j = colon
		}
		if j < 0 {
			break
		}
		if s[j] == ':' && strings.HasPrefix(s[j+1:], "//") {
			// A URL: its user info and path go by the URL rule, and
			// the scan goes on at its query, whose values go by
			// their names.
			var spans []span
			spans, i = urlSecretSpans(s, j+3, &urlTextEnd, spans)
			for _, p := range spans {
				if last == 0 {
					b.Grow(len(s))
				}
				b.WriteString(s[last:p.from])
				b.WriteString(Redacted)
				last = p.to
			}
			continue
		}
		from, to, next := pairValue(s, j)
		if to > from {
			if last == 0 {
				b.Grow(len(s))
			}
			b.WriteString(s[last:from])
			b.WriteString(Redacted)
			last = to
		}
		i = next
	}
	if last == 0 {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}

// indexFrom is strings.IndexByte from s[i].
func indexFrom(s string, c byte, i int) int {
	if j := strings.IndexByte(s[i:], c); j >= 0 {
		return i + j
	}
	return -1
}

// pairValue looks at the separator s[j]: it answers the span [from, to) of
// the credential it introduces (empty when it introduces none), and where
// the scan goes on.
func pairValue(s string, j int) (from, to, next int) {
	// The name: back over spaces, a closing quote (escaped, in JSON
	// quoted inside text), and name bytes.
	k := j
	for k > 0 && s[k-1] == ' ' {
		k--
	}
	if k > 0 && (s[k-1] == '"' || s[k-1] == '\'') {
		k--
		if k > 0 && s[k-1] == '\\' {
			k--
		}
	}
	// Every credential word ends in a letter that ends few names; most
	// separators stop here.
	if k == 0 || s[k-1] >= 128 || len(nameRules[s[k-1]|0x20]) == 0 {
		return 0, 0, j + 1
	}
	end := k
	for k > 0 && nameByte(s[k-1]) {
		k--
	}
	if k == end || !IsCredentialKey(s[k:end]) {
		return 0, 0, j + 1
	}
	// A URL's query parameter ends at its fragment too.
	query := k > 0 && (s[k-1] == '?' || s[k-1] == '&')
	v := j + 1
	for v < len(s) && (s[v] == ' ' || s[v] == '\t') {
		v++
	}
	from, to = valueSpan(s, v)
	if query {
		if h := strings.IndexByte(s[from:to], '#'); h >= 0 {
			to = from + h
		}
	}
	if to <= from {
		return 0, 0, max(to, j+1)
	}
	// An authorization scheme keeps its word, as the shape rule keeps
	// "Bearer ": "Authorization: Basic [redacted]".
	if word := s[from:to]; to < len(s) && s[to] == ' ' && isAuthScheme(word) {
		w := to
		for w < len(s) && s[w] == ' ' {
			w++
		}
		if f, t := valueSpan(s, w); t > f && s[w] != '"' && s[w] != '\'' {
			from, to = f, t
		}
	}
	if s[from:to] == Redacted {
		return 0, 0, to
	}
	return from, to, to
}

// valueSpan answers the span of the value that starts at s[v]: inside its
// quotes when it is quoted, up to the first byte that ends a value
// otherwise. A value that begins with Redacted was redacted already and
// answers just that.
func valueSpan(s string, v int) (from, to int) {
	if v >= len(s) {
		return v, v
	}
	switch {
	case s[v] == '"' || s[v] == '\'':
		q := s[v]
		e := v + 1
		for e < len(s) && s[e] != q && s[e] != '\n' {
			if s[e] == '\\' {
				e++
			}
			e++
		}
		return v + 1, min(e, len(s))
	case s[v] == '\\' && v+1 < len(s) && s[v+1] == '"':
		// A JSON string quoted inside text: \"value\".
		e := strings.Index(s[v+2:], `\"`)
		if e < 0 {
			return v + 2, len(s)
		}
		return v + 2, v + 2 + e
	case strings.HasPrefix(s[v:], Redacted):
		return v, v + len(Redacted)
	}
	e := v
	for e < len(s) && !valueEnd[s[e]] {
		e++
	}
	return v, e
}

// valueEnd marks the bytes that end an unquoted value: white space, the
// separators of a query string, a list, a header or an object, and quotes.
var valueEnd = func() (t [256]bool) {
	for _, c := range []byte(" \t\r\n\f\v&,;\"'<>(){}\\") {
		t[c] = true
	}
	return t
}()

// isAuthScheme reports whether w is an HTTP authorization scheme that
// precedes the credential rather than being it.
func isAuthScheme(w string) bool {
	for _, scheme := range [...]string{"bearer", "basic", "token", "digest", "bot"} {
		if strings.EqualFold(w, scheme) {
			return true
		}
	}
	return false
}

// nameByte reports whether c can be part of a field's name in text.
func nameByte(c byte) bool { return wordBytes[c] || c == '.' }
