package boundary

import (
	"encoding/json"
	"maps"
	"strings"
	"unicode/utf8"
)

// Redacted is the value that replaces a credential. It is a fixed string
// rather than a removal so the model can see that the field exists and was
// withheld on purpose.
const Redacted = "[redacted]"

// credentialNames are the folded key names whose values are credentials.
// They are compared whole: "max_tokens" names a number, not a token.
var credentialNames = []string{
	"token", "accesstoken", "refreshtoken", "idtoken", "sessiontoken", "bearertoken",
	"apikey", "xapikey",
	"secret", "clientsecret",
	"password", "passwd",
	"authorization", "proxyauthorization",
	"privatekey",
	"cookie", "setcookie",
}

// longestCredentialKey is the length of the longest folded credential name;
// a key that folds to more bytes cannot be one.
const longestCredentialKey = len("proxyauthorization")

// credentialNamesByLen groups credentialNames by length. This check runs for
// every key of every answer, and most keys are rejected by their length
// alone, without hashing or building a string.
var credentialNamesByLen = func() (t [longestCredentialKey + 1][]string) {
	for _, name := range credentialNames {
		t[len(name)] = append(t[len(name)], name)
	}
	return t
}()

// isCredentialName reports whether a folded key name is a credential name.
func isCredentialName(folded []byte) bool {
	if len(folded) >= len(credentialNamesByLen) {
		return false
	}
	for _, name := range credentialNamesByLen[len(folded)] {
		if string(folded) == name {
			return true
		}
	}
	return false
}

// IsCredentialKey reports whether an object key names a credential. The name
// is folded first: lowercased, with '-', '_', '.' and ' ' removed, so the
// spellings vendors use for one field ("API_KEY", "apiKey", "x-api-key")
// all match, while names that merely contain a credential word
// ("max_tokens", "token_count") do not.
func IsCredentialKey(name string) bool {
	// Lowercasing maps one rune to one rune, so a name of fewer bytes
	// than the shortest credential name cannot fold into one.
	if len(name) < len("token") {
		return false
	}
	var buf [longestCredentialKey]byte
	n := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z':
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case isKeySeparator(rune(c)):
			continue
		case c >= utf8.RuneSelf:
			return isCredentialKeyUnicode(name)
		default:
			// A digit or other ASCII symbol survives folding, and no
			// credential name has one.
			return false
		}
		if n == len(buf) {
			// Lowercasing never shortens a name, so what follows
			// cannot bring it back within reach.
			return false
		}
		buf[n] = c
		n++
	}
	return isCredentialName(buf[:n])
}

// isCredentialKeyUnicode folds with full Unicode lowercasing, which maps a
// few non-ASCII letters (the Kelvin sign, for one) onto ASCII ones.
func isCredentialKeyUnicode(name string) bool {
	folded := strings.Map(func(r rune) rune {
		if isKeySeparator(r) {
			return -1
		}
		return r
	}, strings.ToLower(name))
	return isCredentialName([]byte(folded))
}

func isKeySeparator(r rune) bool {
	return r == '-' || r == '_' || r == '.' || r == ' '
}

// Redact returns v with the value of every credential-named key, at any
// depth, replaced by [Redacted]. The value is replaced whatever it holds, a
// string, a number or a whole object, because the key is what marks it.
//
// v should be a plain tree; anything else is normalised first so that no
// value escapes the rule by having an unusual type. Subtrees without a
// credential key are shared with v, not copied.
func Redact(v any) any {
	out, _ := redact(v)
	return out
}

func redact(v any) (any, bool) {
	switch t := v.(type) {
	case nil, bool, string, json.Number:
		return v, false
	case map[string]any:
		var out map[string]any
		for k, val := range t {
			var nv any
			if IsCredentialKey(k) {
				if s, ok := val.(string); ok && s == Redacted {
					continue
				}
				nv = Redacted
			} else {
				var changed bool
				if nv, changed = redact(val); !changed {
					continue
				}
			}
			if out == nil {
				out = maps.Clone(t)
			}
			out[k] = nv
		}
		if out == nil {
			return v, false
		}
		return out, true
	case []any:
		var out []any
		for i, el := range t {
			ne, changed := redact(el)
			if changed && out == nil {
				out = make([]any, len(t))
				copy(out, t[:i])
			}
			if out != nil {
				out[i] = ne
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	}
	out, _ := redact(Normalize(v))
	return out, true
}
