package boundary

import "strings"

// Credentials by their shape. A credential under a field named for what it
// is goes by IsCredentialKey; these are the ones that turn up where no name
// says so: a token pasted into a note, a key in an error message, a header
// echoed back in a log line. Only shapes that vendors made distinctive are
// recognised (a fixed prefix and a long run of token characters), so prose
// that talks about passwords is never touched, and the scan is one pass
// that looks further only where a word starts with a shape's first two
// bytes.

// minSecretLen is the length of the shortest shape recognised ("Bearer "
// and eight token characters); shorter strings are not scanned at all.
const minSecretLen = len("Bearer ") + 8

// wordByte reports whether c can be part of a token: letters, digits, '_'
// and '-'. A shape must start where no such byte precedes it, so
// "task_live_..." does not read as a Stripe key.
func wordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// wordBytes is wordByte as a table, for the scan's inner loop.
var wordBytes = func() (t [256]bool) {
	for c := range 256 {
		t[c] = wordByte(byte(c))
	}
	return t
}()

// secretPairs is a bitmap of the first two bytes a shape can begin with
// ("gh", "sk", "xo", "AK", "ey", "Be", "--", ...), indexed by the two bytes
// as one 16-bit number. The scan looks further only where a pair from it
// starts a word, which in prose and data is rare.
var secretPairs = func() (t [1 << 16 / 64]uint64) {
	for _, p := range []string{"gh", "gi", "sk", "rk", "xo", "AK", "AS", "--", "ey", "be", "Be", "bE", "BE"} {
		x := uint16(p[0])<<8 | uint16(p[1])
		t[x/64] |= 1 << (x % 64)
	}
	return t
}()

// RedactSecrets returns s with every recognised credential in it replaced by
// [Redacted], and whether it changed anything. It recognises, by shape,
// GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), Stripe keys
// (sk_live_, sk_test_, rk_live_, rk_test_), OpenAI-style keys (sk-), Slack
// tokens (xoxb-, xoxp-, xoxa-, xoxr-, xoxs-), AWS access key ids (AKIA and
// ASIA and sixteen more), PEM private key blocks, JSON Web Tokens (eyJ… .
// eyJ… . signature) and the credential after "Bearer "; and, by name, the
// value given to a credential-named field in text (see [redactPairs]:
// "db_password=hunter2", "password: hunter2", `"client_secret": "…"`, a
// URL's "?token=…" or "&access_token=…"); and, in every URL, its user info
// and the path segments that look like tokens (see [RedactURL]). The rest of
// the string is kept: a log line keeps its words, a field its name, a URL
// its host and ordinary path, and "Bearer " stays to say what was there.
func RedactSecrets(s string) (string, bool) {
	out, changed := redactShapes(s)
	// Only text that holds a separator can hold a named credential, and
	// IndexByte finds out at memory speed.
	if len(out) < minPairLen || strings.IndexByte(out, '=') < 0 && strings.IndexByte(out, ':') < 0 {
		return out, changed
	}
	if paired, ok := redactPairs(out); ok {
		return paired, true
	}
	return out, changed
}

// redactShapes is the part of RedactSecrets that goes by shape.
func redactShapes(s string) (string, bool) {
	if len(s) < minSecretLen {
		return s, false
	}
	var b strings.Builder
	last := 0
	inWord := false // s[i-1] is a word byte
	for i := 0; i+1 < len(s); i++ {
		c := s[i]
		if inWord {
			inWord = wordBytes[c]
			continue // not the start of a word: the common case
		}
		inWord = wordBytes[c]
		x := uint16(c)<<8 | uint16(s[i+1])
		if secretPairs[x/64]&(1<<(x%64)) == 0 {
			continue
		}
		from, to := matchSecret(s, i)
		if to == 0 {
			continue
		}
		if last == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[last:from])
		b.WriteString(Redacted)
		last = to
		// What follows now follows "[redacted]", which ends a word, so
		// it is scanned as the start of one: a second scan of the
		// answer would find nothing more.
		i, inWord = to-1, false
	}
	if last == 0 {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}

// matchSecret reports the span [from, to) of a credential that starts at
// s[i], or to == 0 when none does. from is past what the redaction keeps
// (the "Bearer " of a bearer credential).
func matchSecret(s string, i int) (from, to int) {
	rest := s[i:]
	switch rest[0] {
	case 'g':
		if strings.HasPrefix(rest, "github_pat_") {
			return i, tokenEnd(s, i+len("github_pat_"), 22)
		}
		if len(rest) > 4 && rest[1] == 'h' && rest[3] == '_' && strings.IndexByte("pousr", rest[2]) >= 0 {
			return i, tokenEnd(s, i+4, 30)
		}
	case 's', 'r':
		for _, p := range [...]string{"sk_live_", "sk_test_", "rk_live_", "rk_test_"} {
			if strings.HasPrefix(rest, p) {
				return i, tokenEnd(s, i+len(p), 16)
			}
		}
		if strings.HasPrefix(rest, "sk-") {
			return i, tokenEnd(s, i+len("sk-"), 32)
		}
	case 'x':
		if len(rest) > 5 && strings.HasPrefix(rest, "xox") && rest[4] == '-' && strings.IndexByte("bpars", rest[3]) >= 0 {
			return i, tokenEnd(s, i+5, 10)
		}
	case 'A':
		if strings.HasPrefix(rest, "AKIA") || strings.HasPrefix(rest, "ASIA") {
			j := i + 4
			for j < len(s) && j-i < 20 && ('A' <= s[j] && s[j] <= 'Z' || '0' <= s[j] && s[j] <= '9') {
				j++
			}
			if j-i == 20 && (j == len(s) || !wordByte(s[j])) {
				return i, j
			}
		}
	case '-':
		return i, pemEnd(s, i)
	case 'e':
		return i, jwtEnd(s, i)
	case 'B', 'b':
		if len(rest) > len("bearer ") && strings.EqualFold(rest[:len("bearer")], "bearer") && rest[len("bearer")] == ' ' {
			at := i + len("bearer ")
			for at < len(s) && s[at] == ' ' {
				at++
			}
			end := at
			for end < len(s) && bearerByte(s[end]) {
				end++
			}
			if end-at >= 8 {
				return at, end
			}
		}
	}
	return 0, 0
}

// tokenEnd answers the end of the run of token characters from s[at], or 0
// when the run is shorter than minRun.
func tokenEnd(s string, at, minRun int) int {
	end := at
	for end < len(s) && wordByte(s[end]) {
		end++
	}
	if end-at < minRun {
		return 0
	}
	return end
}

// bearerByte reports whether c can be part of a bearer credential: the
// token68 characters of RFC 7235.
func bearerByte(c byte) bool {
	return wordByte(c) || c == '.' || c == '~' || c == '+' || c == '/' || c == '='
}

// jwtEnd answers the end of a JSON Web Token starting at s[i] (a header and
// a payload that are base64url JSON objects, so both begin "eyJ", and a
// signature, which an unsigned token leaves empty), or 0.
func jwtEnd(s string, i int) int {
	j := i
	for part := range 3 {
		if part < 2 && !strings.HasPrefix(s[j:], "eyJ") {
			return 0
		}
		start := j
		for j < len(s) && (wordByte(s[j])) {
			j++
		}
		if part < 2 {
			if j-start < 10 || j >= len(s) || s[j] != '.' {
				return 0
			}
			j++
		}
	}
	return j
}

// pemEnd answers the end of a PEM private key block starting at s[i]: its
// END line when there is one, the end of s when it was cut off. It answers 0
// for any other PEM block: a certificate or a public key is not a secret.
func pemEnd(s string, i int) int {
	const begin = "-----BEGIN "
	if !strings.HasPrefix(s[i:], begin) {
		return 0
	}
	line := s[i+len(begin):]
	if nl := strings.IndexByte(line, '\n'); nl >= 0 {
		line = line[:nl]
	}
	label, ok := strings.CutSuffix(strings.TrimRight(line, "\r"), "-----")
	if !ok || !strings.HasSuffix(label, "PRIVATE KEY") {
		return 0
	}
	end := "-----END " + label + "-----"
	if at := strings.Index(s[i:], end); at >= 0 {
		return i + at + len(end)
	}
	return len(s)
}
