package apikey

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
)

// mint answers a fresh key's ID and secret, failing t on error.
func mint(t testing.TB) (id, secret string) {
	t.Helper()
	id, secret, err := New(toolplane.CredentialAgent)
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	return id, secret
}

func TestNewParseRoundTrip(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, kind := range []toolplane.CredentialKind{toolplane.CredentialAgent, toolplane.CredentialPerson} {
		t.Run(string(kind), func(t *testing.T) {
			for range 50 {
				id, secret, err := New(kind)
				if err != nil {
					t.Fatalf("New(%s) = %v", kind, err)
				}
				if !strings.HasPrefix(id, Prefix) || len(id) != len(Prefix)+24 {
					t.Fatalf("id %q: want %q and 24 hex digits", id, Prefix)
				}
				if raw, err := base64.RawURLEncoding.DecodeString(secret); err != nil || len(raw) != 32 {
					t.Fatalf("secret decodes to %d bytes, %v; want 32", len(raw), err)
				}
				if seen[id] || seen[secret] {
					t.Fatalf("New repeated an id or a secret")
				}
				seen[id], seen[secret] = true, true

				key := Key(id, secret)
				gotID, gotSecret, err := Parse(key)
				if err != nil || gotID != id || gotSecret != secret {
					t.Fatalf("Parse(Key(New())) = %q, %q, %v; want %q, %q", gotID, gotSecret, err, id, secret)
				}
			}
		})
	}
}

func TestNewRefusesUnknownKind(t *testing.T) {
	t.Parallel()
	for _, kind := range []toolplane.CredentialKind{"", "robot", "Agent", "person "} {
		if id, secret, err := New(kind); err == nil {
			t.Errorf("New(%q) = %q, %q, nil; want an error", kind, id, secret)
		}
	}
}

// TestParseSplitsByPosition: a secret may begin or end with '_' or '-',
// and still parses.
func TestParseSplitsByPosition(t *testing.T) {
	t.Parallel()
	id := Prefix + strings.Repeat("0a", 12)
	tests := []struct {
		name string
		raw  []byte
	}{
		{"all ones: underscores", bytes.Repeat([]byte{0xff}, 32)},
		{"dashes", bytes.Repeat([]byte{0xfb, 0xef, 0xbe}, 11)[:32]},
		{"all zeros", make([]byte, 32)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret := base64.RawURLEncoding.EncodeToString(tt.raw)
			gotID, gotSecret, err := Parse(Key(id, secret))
			if err != nil || gotID != id || gotSecret != secret {
				t.Fatalf("Parse(%s) = %q, %q, %v", Key(id, secret), gotID, gotSecret, err)
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	t.Parallel()
	// A fixed key, so every case is malformed whatever New would draw:
	// the id has letters to upper-case, the secret starts with neither
	// '_' nor '-'.
	hexID := "0123456789abcdef01234567"
	raw := make([]byte, 32)
	for i := range raw {
		raw[i] = byte(i)
	}
	id, secret := Prefix+hexID, base64.RawURLEncoding.EncodeToString(raw)
	good := Key(id, secret)
	if _, _, err := Parse(good); err != nil {
		t.Fatalf("Parse(%q) = %v", good, err)
	}
	tests := []struct{ name, key string }{
		{"empty", ""},
		{"prefix only", Prefix},
		{"id only", id},
		{"id and separator", id + "_"},
		{"secret only", secret},
		{"other prefix", "tpx_" + good[len(Prefix):]},
		{"upper-case prefix", "TPK_" + good[len(Prefix):]},
		{"no prefix, padded to length", "xxxx" + good[len(Prefix):]},
		{"upper-case id", Prefix + strings.ToUpper(hexID) + "_" + secret},
		{"non-hex id", Prefix + "g" + hexID[1:] + "_" + secret},
		{"short id", Prefix + hexID[2:] + "_" + secret + "AA"},
		{"other separator", id + "-" + secret},
		{"no separator", id + secret + "A"},
		{"short secret", good[:len(good)-1]},
		{"long secret", good + "A"},
		{"padded secret", good[:len(good)-1] + "="},
		{"standard base64 character", good[:len(good)-1] + "+"},
		{"slash", good[:len(good)-1] + "/"},
		{"non-canonical last character", good[:len(good)-1] + nonCanonical(good[len(good)-1])},
		{"leading space", " " + good[:len(good)-1]},
		{"trailing newline", good[:len(good)-1] + "\n"},
		{"bearer scheme", "Bearer " + good},
		{"non-ASCII", good[:len(good)-2] + "é"},
		{"NUL", good[:len(good)-1] + "\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotID, gotSecret, err := Parse(tt.key)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q) = %q, %q, %v; want ErrMalformed", tt.key, gotID, gotSecret, err)
			}
			if gotID != "" || gotSecret != "" {
				t.Errorf("Parse(%q) answered %q, %q with its error", tt.key, gotID, gotSecret)
			}
			if strings.Contains(err.Error(), secret[:8]) {
				t.Errorf("Parse error %q quotes the secret", err)
			}
		})
	}
}

// nonCanonical answers a base64url character that decodes to the same
// bytes as c in the last position of a 43-character secret (whose last
// character carries 2 padding bits), but is not the canonical one.
func nonCanonical(c byte) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	return string(alphabet[strings.IndexByte(alphabet, c)^1])
}

func TestHashVerify(t *testing.T) {
	t.Parallel()
	_, secret := mint(t)
	_, other := mint(t)
	hash := Hash(secret)
	tests := []struct {
		name, secret string
		want         bool
	}{
		{"the secret", secret, true},
		{"another key's secret", other, false},
		{"empty", "", false},
		{"one character changed", secret[:10] + string(secret[10]^1) + secret[11:], false},
		{"one character short", secret[:len(secret)-1], false},
		{"one character more", secret + "A", false},
		{"the whole key", Key(Prefix+strings.Repeat("0", 24), secret), false},
		{"upper-cased", strings.ToUpper(secret), strings.ToUpper(secret) == secret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Verify(hash, tt.secret); got != tt.want {
				t.Errorf("Verify(Hash(secret), %s) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}

func TestHashNeverContainsTheSecret(t *testing.T) {
	t.Parallel()
	for range 20 {
		_, secret := mint(t)
		raw, _ := base64.RawURLEncoding.DecodeString(secret)
		hash := Hash(secret)
		for _, form := range []string{secret, string(raw), base64.RawStdEncoding.EncodeToString(raw), secret[:16], secret[len(secret)-16:]} {
			if bytes.Contains(hash, []byte(form)) {
				t.Fatalf("Hash(%q) = %q holds the secret", secret, hash)
			}
		}
	}
}

func TestHashIsSalted(t *testing.T) {
	t.Parallel()
	_, secret := mint(t)
	a, b := Hash(secret), Hash(secret)
	if bytes.Equal(a, b) {
		t.Fatalf("two hashes of one secret are equal: %q", a)
	}
	pa, saltA, sumA, okA := decode(string(a))
	pb, saltB, sumB, okB := decode(string(b))
	if !okA || !okB {
		t.Fatalf("hashes do not decode: %q, %q", a, b)
	}
	if len(saltA) != 16 || bytes.Equal(saltA, saltB) || bytes.Equal(sumA, sumB) {
		t.Errorf("salts %x, %x and sums %x, %x: want two different 16-byte salts and sums", saltA, saltB, sumA, sumB)
	}
	if pa != pb || pa != current {
		t.Errorf("parameters %+v, %+v; want %+v", pa, pb, current)
	}
	if !Verify(a, secret) || !Verify(b, secret) {
		t.Errorf("a salted hash does not verify")
	}
}

// TestVerifyRecordedParameters: a hash verifies under the parameters it
// records, so the current ones can change without invalidating a key.
func TestVerifyRecordedParameters(t *testing.T) {
	t.Parallel()
	_, secret := mint(t)
	for _, p := range []params{
		{time: 3, memory: 1024, threads: 1, keyLen: 32, saltLen: 16},
		{time: 1, memory: 4 * 1024, threads: 2, keyLen: 16, saltLen: 8},
		{time: 2, memory: 64, threads: 4, keyLen: 64, saltLen: 32},
	} {
		h := hashWith(p, secret)
		if !Verify(h, secret) {
			t.Errorf("hash with %+v does not verify: %q", p, h)
		}
		if Verify(h, secret+"x") {
			t.Errorf("hash with %+v verifies a wrong secret", p)
		}
	}
	if got := string(Hash(secret)); !strings.HasPrefix(got, "$argon2id$v=19$m=2048,t=1,p=1$") {
		t.Errorf("Hash = %q, want the current parameters recorded", got)
	}
}

func TestVerifyMalformedHash(t *testing.T) {
	t.Parallel()
	_, secret := mint(t)
	good := string(Hash(secret))
	parts := strings.Split(good, "$") // "", alg, version, cost, salt, sum
	with := func(i int, v string) string {
		p := append([]string(nil), parts...)
		p[i] = v
		return strings.Join(p, "$")
	}
	flip := func(s string) string {
		b := []byte(s)
		if b[0] == 'A' {
			b[0] = 'B'
		} else {
			b[0] = 'A'
		}
		return string(b)
	}
	tests := []struct{ name, hash string }{
		{"nil", ""},
		{"the secret itself", secret},
		{"truncated", good[:len(good)-4]},
		{"trailing dollar", good + "$"},
		{"argon2i", with(1, "argon2i")},
		{"argon2d", with(1, "argon2d")},
		{"other version", with(2, "v=16")},
		{"cost out of order", with(3, "t=1,m=2048,p=1")},
		{"cost missing", with(3, "m=2048,t=1")},
		{"zero passes", with(3, "m=2048,t=0,p=1")},
		{"zero threads", with(3, "m=2048,t=1,p=0")},
		{"too little memory for the threads", with(3, "m=8,t=1,p=2")},
		{"memory over the limit", with(3, "m=4194304,t=1,p=1")},
		{"passes over the limit", with(3, "m=2048,t=1000,p=1")},
		{"threads over the limit", with(3, "m=2048,t=1,p=255")},
		{"negative", with(3, "m=-2048,t=1,p=1")},
		{"signed", with(3, "m=+2048,t=1,p=1")},
		{"overflowing", with(3, "m=2048,t=4294967297,p=1")},
		{"salt not base64", with(4, "!!!!")},
		{"salt too short", with(4, "AAAA")},
		{"salt padded", with(4, parts[4]+"==")},
		{"sum too short", with(5, "AAAA")},
		{"sum not base64", with(5, "****")},
		{"salt tampered", with(4, flip(parts[4]))},
		{"sum tampered", with(5, flip(parts[5]))},
		{"other cost", with(3, "m=1024,t=1,p=1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if Verify([]byte(tt.hash), secret) {
				t.Errorf("Verify(%q, the secret) = true, want false", tt.hash)
			}
		})
	}
	if Verify(nil, secret) || Verify(nil, "") {
		t.Error("Verify(nil hash) = true")
	}
}

func FuzzParse(f *testing.F) {
	id, secret, err := New(toolplane.CredentialPerson)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(Key(id, secret))
	f.Add("")
	f.Add(Prefix + strings.Repeat("f", 24) + "_" + strings.Repeat("_", 43))
	f.Fuzz(func(t *testing.T, key string) {
		id, secret, err := Parse(key)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if Key(id, secret) != key {
			t.Fatalf("Key(Parse(%q)) = %q", key, Key(id, secret))
		}
	})
}

func FuzzVerify(f *testing.F) {
	f.Add([]byte("$argon2id$v=19$m=8,t=1,p=1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA"), "s")
	f.Add([]byte(""), "")
	f.Fuzz(func(t *testing.T, hash []byte, secret string) {
		Verify(hash, secret) // must not panic
	})
}

func BenchmarkVerify(b *testing.B) {
	_, secret := mint(b)
	hash := Hash(secret)
	b.ReportAllocs()
	for b.Loop() {
		if !Verify(hash, secret) {
			b.Fatal("Verify = false")
		}
	}
}

func BenchmarkHash(b *testing.B) {
	_, secret := mint(b)
	b.ReportAllocs()
	for b.Loop() {
		Hash(secret)
	}
}
