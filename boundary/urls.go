package boundary

import "strings"

// Credentials in URLs. A URL carries a credential in three places: its user
// info (a token rides as the user name as often as a password does), its
// path (webhook and relay services put the key there:
// "https://actions.example.com/mcp/sk-ak-…/sse") and its query
// ("?api_key=…"). One rule decides what of a URL is hidden, whether the URL
// is an upstream's address about to be logged or quoted in an error
// ([RedactURL]) or a URL quoted in text a model reads ([RedactSecrets]):
//
//   - the user info, whole: user name and password;
//   - every path segment that looks like a token: a known credential shape
//     (see [RedactSecrets]), or at least minPathTokenLen bytes of letters,
//     digits, '_' and '-' holding both a letter and a digit. Words
//     ("/mcp", "/v1/tools", "/sse") and numbers ("/issues/42") stay;
//   - query values. [RedactURL] hides every one: an address is
//     configuration, and a server's key is as often ?key=, ?sig= or ?code=
//     as ?token=. In text a model reads, a value is hidden when its name is
//     a credential's (see [IsCredentialKey]): a link's "?page=2" is what
//     the model needs to follow it.
//
// The scheme, host, port, the other path segments, the parameter names and
// the fragment stay, so a reader still sees which server is meant.

// minPathTokenLen is the length of the shortest path segment taken for a
// token by its characters alone: long enough that words and short ids are
// kept, short enough for the keys services put in paths.
const minPathTokenLen = 16

// span is a part [from, to) of a string.
type span struct{ from, to int }

// urlSecretSpans appends to spans the parts of the URL whose authority
// starts at s[at] (just past "://") that the URL rule hides in its user
// info and path, and answers where the path ends: at its query's '?', its
// fragment's '#', or the first byte that ends in. Parts already Redacted
// are not answered again.
func urlSecretSpans(s string, at int, ends *[256]bool, spans []span) ([]span, int) {
	e, userEnd := at, -1
	for e < len(s) && !ends[s[e]] && s[e] != '/' {
		if s[e] == '@' {
			userEnd = e // the user info ends at the authority's last '@'
		}
		e++
	}
	if userEnd > at && s[at:userEnd] != Redacted {
		spans = append(spans, span{at, userEnd})
	}
	for e < len(s) && s[e] == '/' {
		seg := e + 1
		e = seg
		for e < len(s) && !ends[s[e]] && s[e] != '/' {
			e++
		}
		if pathToken(s[seg:e]) {
			spans = append(spans, span{seg, e})
		}
	}
	return spans, e
}

// Where a URL's path ends: urlPathEnd marks the start of its query and of
// its fragment, urlTextEnd these and the bytes that end a value in text
// (white space, quotes, brackets), where a quoted URL stops.
var urlPathEnd, urlTextEnd = func() (path, text [256]bool) {
	path['?'], path['#'] = true, true
	for c := range 256 {
		text[c] = path[c] || valueEnd[c]
	}
	return path, text
}()

// pathToken reports whether a path segment looks like a token (see the
// rule above).
func pathToken(seg string) bool {
	if len(seg) < minPathTokenLen {
		if len(seg) >= minSecretLen-len("Bearer ") {
			_, shaped := redactShapes(seg)
			return shaped
		}
		return false
	}
	letter, digit := false, false
	for i := range len(seg) {
		c := seg[i]
		switch {
		case '0' <= c && c <= '9':
			digit = true
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			letter = true
		case c == '_' || c == '-':
		default:
			_, shaped := redactShapes(seg)
			return shaped
		}
	}
	return letter && digit
}

// RedactURL returns raw, a URL, with what the URL rule hides replaced by
// [Redacted]: its user info, its token-like path segments and the value of
// every query parameter. It is for an address from configuration, about to
// be logged or quoted in an error. A raw that is not "scheme://…" is
// Redacted whole.
func RedactURL(raw string) string {
	spans, ok := urlSecretParts(raw)
	if !ok {
		return Redacted
	}
	var b strings.Builder
	last := 0
	for _, p := range spans {
		b.WriteString(raw[last:p.from])
		b.WriteString(Redacted)
		last = p.to
	}
	b.WriteString(raw[last:])
	return b.String()
}

// URLSecrets answers the parts of raw, a URL, that [RedactURL] hides, as raw
// writes them and in order; none when raw is not a URL. A caller that must
// hide the same secrets in text quoting raw (an error of an HTTP client,
// say) looks for these.
func URLSecrets(raw string) []string {
	spans, _ := urlSecretParts(raw)
	parts := make([]string, len(spans))
	for i, p := range spans {
		parts[i] = raw[p.from:p.to]
	}
	return parts
}

// urlSecretParts answers the spans of raw that RedactURL hides, and false
// when raw is not a URL.
func urlSecretParts(raw string) ([]span, bool) {
	at, ok := urlAuthority(raw)
	if !ok {
		return nil, false
	}
	spans, e := urlSecretSpans(raw, at, &urlPathEnd, nil)
	if e < len(raw) && raw[e] == '?' {
		end := len(raw)
		if h := strings.IndexByte(raw[e:], '#'); h >= 0 {
			end = e + h
		}
		for p := e + 1; p < end; {
			amp := strings.IndexByte(raw[p:end], '&')
			next := end
			if amp >= 0 {
				next = p + amp
			}
			if eq := strings.IndexByte(raw[p:next], '='); eq >= 0 {
				if v := raw[p+eq+1 : next]; v != "" && v != Redacted {
					spans = append(spans, span{p + eq + 1, next})
				}
			}
			p = next + 1
		}
	}
	return spans, true
}

// urlAuthority answers where the authority of the URL raw starts (past
// "://"), or false when raw does not begin with a scheme and "://" or holds
// a byte no URL holds.
func urlAuthority(raw string) (at int, ok bool) {
	scheme, _, found := strings.Cut(raw, "://")
	if !found || scheme == "" {
		return 0, false
	}
	for i := range len(scheme) {
		c := scheme[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return 0, false
		}
	}
	for i := range len(raw) {
		if c := raw[i]; c <= ' ' || c == 0x7f {
			return 0, false
		}
	}
	return len(scheme) + 3, true
}
