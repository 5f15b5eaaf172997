package boundary

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Redacted is the value that replaces a credential. It is a fixed string
// rather than a removal so the model can see that the field exists and was
// withheld on purpose.
const Redacted = "[redacted]"

// The credential rule on names. A name is folded first (lowercased, with
// '-', '_', '.' and ' ' removed) so that the spellings vendors use for one
// field ("API_KEY", "apiKey", "x-api-key") read alike; then its ending
// decides. A name ending in a credential word is a credential whatever comes
// before it ("db_password", "github_token", "stripe_api_key"), while a name
// that merely contains one ("max_tokens", "token_count", "tokens_used")
// ends in another word and is kept.
var (
	// credentialEndings are the folded endings that make a name a
	// credential.
	credentialEndings = []string{
		"token", "secret", "secrets", "password", "passwords", "passwd", "pwd", "passphrase", "passcode",
		"credential", "credentials", "sessionid", "apikey", "secretkey", "privatekey", "accesskey", "signingkey", "encryptionkey", "masterkey",
		"cookie", "bearer",
	}
	// credentialExact are credential names matched whole only: as an
	// ending they would take in domain objects ("payment_authorization")
	// or other words ("oauth" names a protocol, not a secret).
	credentialExact = []string{"authorization", "proxyauthorization", "auth"}
	// notCredentialEndings end in a credential word but name a cursor,
	// which a model must be able to pass back to fetch the next page.
	notCredentialEndings = []string{"pagetoken", "nexttoken", "continuationtoken", "synctoken"}
)

// nameRule is one entry of the table IsCredentialKey consults.
type nameRule struct {
	word  string
	exact bool // the whole folded name must be word
	keep  bool // a name ending in word is not a credential
}

// longestRuleWord is the length of the longest word in the rules: the
// most of a name's folded ending the rules ever look at.
const longestRuleWord = len("proxyauthorization")

// shortestRuleWord is the length of the shortest word in the rules.
const shortestRuleWord = len("pwd")

// nameRules groups the rules by the last byte of their word, so a name is
// compared only with the few words that end as it does; the exceptions come
// first in each group. This check runs for every key of every answer.
var nameRules = func() (t [128][]nameRule) {
	add := func(words []string, r nameRule) {
		for _, w := range words {
			if len(w) > longestRuleWord || len(w) < shortestRuleWord {
				panic("boundary: credential word " + w + " outside the rule's lengths")
			}
			r.word = w
			t[w[len(w)-1]] = append(t[w[len(w)-1]], r)
		}
	}
	add(notCredentialEndings, nameRule{keep: true})
	add(credentialExact, nameRule{exact: true})
	add(credentialEndings, nameRule{})
	return t
}()

// credentialTail applies the rules to the folded ending of a name; whole
// says whether tail is the entire folded name.
func credentialTail(tail []byte, whole bool) bool {
	if len(tail) < shortestRuleWord || tail[len(tail)-1] >= 128 {
		return false
	}
	for _, r := range nameRules[tail[len(tail)-1]] {
		if len(tail) < len(r.word) || string(tail[len(tail)-len(r.word):]) != r.word {
			continue
		}
		switch {
		case r.keep:
			return false
		case r.exact:
			if whole && len(tail) == len(r.word) {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// IsCredentialKey reports whether an object key names a credential: after
// folding (lowercased, '-', '_', '.' and ' ' removed) it ends in a
// credential word ("token", "secret", "password", "apikey", "privatekey",
// ...), as "GITHUB_TOKEN", "db-password" and "stripeApiKey" do, or is one
// of the header names matched whole ("Authorization"). Names that end in
// another word ("max_tokens", "token_count", "next_page_token") are not
// credentials. The same rule names the credentials in the query of a URL
// quoted in text (see [RedactSecrets]).
func IsCredentialKey(name string) bool {
	// Lowercasing maps one rune to one rune, so a name of fewer bytes
	// than the shortest word cannot fold into one.
	if len(name) < shortestRuleWord {
		return false
	}
	// Fold from the end: only the ending matters, and a long name need
	// not be folded whole.
	var buf [longestRuleWord]byte
	n := 0
	i := len(name) - 1
	for ; i >= 0 && n < len(buf); i-- {
		c := name[i]
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case isKeySeparator(rune(c)):
			continue
		case c >= utf8.RuneSelf:
			return isCredentialKeyUnicode(name)
		}
		n++
		buf[len(buf)-n] = c
	}
	whole := true
	for ; i >= 0; i-- {
		// The window is full; the name is whole only if nothing but
		// separators is left.
		if !isKeySeparator(rune(name[i])) {
			whole = false
			break
		}
	}
	return credentialTail(buf[len(buf)-n:], whole)
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
	return credentialTail([]byte(folded), true)
}

func isKeySeparator(r rune) bool {
	return r == '-' || r == '_' || r == '.' || r == ' '
}

// Redact returns v with the value of every credential-named key (see
// [IsCredentialKey]), at any depth, replaced by [Redacted], and every
// credential recognised by its shape inside a string (see [RedactSecrets])
// replaced in place. A named value is replaced whatever it holds, a string,
// a number or a whole object, because the key is what marks it.
//
// This is the one redaction rule: results, span arguments and the messages
// a handler's errors carry all go through it.
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
	case nil, bool, json.Number:
		return v, false
	case string:
		if s, changed := RedactSecrets(t); changed {
			return s, true
		}
		return v, false
	case map[string]any:
		var (
			out     map[string]any
			renamed []string
		)
		for k, val := range t {
			if _, changed := RedactSecrets(k); changed {
				renamed = append(renamed, k)
			}
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
		if len(renamed) > 0 {
			if out == nil {
				out = maps.Clone(t)
			}
			renameKeys(out, renamed, func(k string) string { s, _ := RedactSecrets(k); return s })
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

// RedactJSON returns the JSON text raw with Redact applied, for showing
// stored arguments to a person: an approval's or an uncertain action's.
// What is stored is not changed; only what is shown. Text that is not JSON
// is shown as Redacted, never as it is.
func RedactJSON(raw []byte) []byte {
	if len(raw) == 0 {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return Encode(nil, Redacted)
	}
	return Encode(nil, Redact(v))
}

// Hide answers v with every string that contains one of values replaced
// by [Redacted], at any depth; v itself is left as it was. It is how a
// recorder keeps out values known to be secret by where they came from
// (an argument a tool's input schema marks x-sensitive) rather than by
// their name or shape, wherever they were copied to. Empty values are
// ignored.
func Hide(v any, values []string) any {
	values = slices.DeleteFunc(slices.Clone(values), func(s string) bool { return s == "" })
	if len(values) == 0 {
		return v
	}
	return hide(v, values)
}

func hide(v any, values []string) any {
	switch x := v.(type) {
	case string:
		for _, s := range values {
			if strings.Contains(x, s) {
				return Redacted
			}
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		var renamed []string
		for k, e := range x {
			out[k] = hide(e, values)
			if hide(k, values) != k {
				renamed = append(renamed, k)
			}
		}
		renameKeys(out, renamed, func(string) string { return Redacted })
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = hide(e, values)
		}
		return out
	}
	return v
}

// renameKeys gives each key of m in keys the name rename answers for it:
// a key can hold a secret as well as a value can (an object whose keys a
// caller or a downstream chooses), and a secret is no more shown as a
// name than as a value. Keys are renamed in sorted order, and a name
// already taken gets " (2)", " (3)", ..., so no entry is lost and the same
// tree is always renamed alike.
func renameKeys(m map[string]any, keys []string, rename func(string) string) {
	slices.Sort(keys)
	for _, k := range keys {
		v := m[k]
		delete(m, k)
		name := rename(k)
		for n := 2; ; n++ {
			if _, taken := m[name]; !taken {
				break
			}
			name = rename(k) + " (" + strconv.Itoa(n) + ")"
		}
		m[name] = v
	}
}
