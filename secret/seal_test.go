package secret_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/secret"
)

func TestSealOpen(t *testing.T) {
	t.Parallel()
	k := ring(t, "k1")
	tests := []struct {
		name  string
		plain []byte
		aad   []byte
	}{
		{name: "empty", plain: nil, aad: secret.ConnectionAAD("org_a", "con_1")},
		{name: "one byte", plain: []byte{0}, aad: nil},
		{name: "token", plain: []byte("sk_live_51H8abcdefghijklmnop"), aad: secret.ConnectionAAD("org_a", "con_1")},
		{name: "200 bytes", plain: bytes.Repeat([]byte{0xa5}, 200), aad: []byte("x")},
		{name: "64 KiB", plain: bytes.Repeat([]byte("dsn"), 1<<16/3), aad: secret.StateAAD("st_1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sealed, err := k.Seal(tt.plain, tt.aad)
			if err != nil {
				t.Fatalf("Seal: %v", err)
			}
			if len(tt.plain) >= 8 && bytes.Contains(sealed, tt.plain) {
				t.Fatal("sealed bytes hold the plaintext")
			}
			if id, err := secret.KeyID(sealed); err != nil || id != "k1" {
				t.Errorf("KeyID = %q, %v; want k1", id, err)
			}
			got, err := k.Open(sealed, tt.aad)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if !bytes.Equal(got, tt.plain) {
				t.Errorf("Open = %d bytes, want the %d sealed", len(got), len(tt.plain))
			}
			again, err := k.Seal(tt.plain, tt.aad)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(again, sealed) {
				t.Error("two seals of the same plaintext are equal: data keys or nonces repeat")
			}
		})
	}
}

func TestOpenWrongAAD(t *testing.T) {
	t.Parallel()
	k := ring(t, "k1")
	sealed, err := k.Seal([]byte("token"), secret.ConnectionAAD("org_a", "con_1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, aad := range [][]byte{
		secret.ConnectionAAD("org_a", "con_2"), // another row
		secret.ConnectionAAD("org_b", "con_1"), // another organization
		secret.StateAAD("con_1"),
		nil,
		[]byte("org_a/con_1\x00"),
	} {
		if _, err := k.Open(sealed, aad); !errors.Is(err, secret.ErrAuthentication) {
			t.Errorf("Open with aad %q = %v, want ErrAuthentication", aad, err)
		}
		if _, _, err := k.Rewrap(sealed, aad); !errors.Is(err, secret.ErrAuthentication) {
			t.Errorf("Rewrap with aad %q = %v, want ErrAuthentication", aad, err)
		}
	}
}

// fields answers the offsets of a sealed secret's fields as the format
// documents them: the version byte, then four length-prefixed fields.
func fields(t *testing.T, b []byte) (prefixes, starts, ends [4]int) {
	t.Helper()
	at := 1
	for i := range 4 {
		n, k := binary.Uvarint(b[at:])
		if k <= 0 {
			t.Fatalf("field %d: bad length", i)
		}
		prefixes[i] = at
		starts[i] = at + k
		ends[i] = at + k + int(n)
		at = ends[i]
	}
	if at != len(b) {
		t.Fatalf("%d bytes after the ciphertext", len(b)-at)
	}
	return prefixes, starts, ends
}

func TestOpenTampered(t *testing.T) {
	t.Parallel()
	k := ring(t, "k1", "k2")
	aad := secret.ConnectionAAD("org_a", "con_1")
	sealed, err := k.Seal([]byte("a token of some length"), aad)
	if err != nil {
		t.Fatal(err)
	}
	prefix, start, end := fields(t, sealed)
	const id, wrapped, nonce, ct = 0, 1, 2, 3
	if got := end[wrapped] - start[wrapped]; got != 60 {
		t.Fatalf("wrapped key is %d bytes, want 60", got)
	}
	if got := end[nonce] - start[nonce]; got != 12 {
		t.Fatalf("nonce is %d bytes, want 12", got)
	}
	flip := func(i int) func([]byte) []byte {
		return func(b []byte) []byte { b[i] ^= 0x01; return b }
	}
	tests := []struct {
		name   string
		change func([]byte) []byte
		want   error
	}{
		{name: "version", change: func(b []byte) []byte { b[0] = 2; return b }, want: secret.ErrMalformed},
		{name: "id length", change: flip(prefix[id]), want: secret.ErrMalformed},
		{name: "id to another key's", change: func(b []byte) []byte { b[start[id]+1] = '2'; return b }, want: secret.ErrAuthentication},
		{name: "id to an unknown key", change: func(b []byte) []byte { b[start[id]+1] = '9'; return b }, want: secret.ErrUnknownKey},
		{name: "id not an id", change: func(b []byte) []byte { b[start[id]] = '/'; return b }, want: secret.ErrMalformed},
		{name: "wrapped length", change: flip(prefix[wrapped]), want: secret.ErrMalformed},
		{name: "wrap nonce", change: flip(start[wrapped]), want: secret.ErrAuthentication},
		{name: "wrapped key", change: flip(start[wrapped] + 20), want: secret.ErrAuthentication},
		{name: "wrap tag", change: flip(end[wrapped] - 1), want: secret.ErrAuthentication},
		{name: "nonce length", change: flip(prefix[nonce]), want: secret.ErrMalformed},
		{name: "nonce", change: flip(start[nonce] + 5), want: secret.ErrAuthentication},
		{name: "ciphertext length", change: flip(prefix[ct]), want: secret.ErrMalformed},
		{name: "ciphertext", change: flip(start[ct]), want: secret.ErrAuthentication},
		{name: "tag", change: flip(len(sealed) - 1), want: secret.ErrAuthentication},
		{name: "truncated", change: func(b []byte) []byte { return b[:len(b)-1] }, want: secret.ErrMalformed},
		{name: "a ciphertext shorter than its tag", change: func(b []byte) []byte {
			b = b[:start[ct]+15]
			b[prefix[ct]] = 15 // its length, one byte below the tag's
			return b
		}, want: secret.ErrMalformed},
		{name: "trailing byte", change: func(b []byte) []byte { return append(b, 0) }, want: secret.ErrMalformed},
		{name: "empty", change: func([]byte) []byte { return nil }, want: secret.ErrMalformed},
		{name: "only version", change: func(b []byte) []byte { return b[:1] }, want: secret.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := tt.change(bytes.Clone(sealed))
			if _, err := k.Open(b, aad); !errors.Is(err, tt.want) {
				t.Errorf("Open = %v, want %v", err, tt.want)
			}
		})
	}
	// And every single bit, wherever it is, is noticed.
	for i := range len(sealed) * 8 {
		b := bytes.Clone(sealed)
		b[i/8] ^= 1 << (i % 8)
		if _, err := k.Open(b, aad); err == nil {
			t.Fatalf("Open accepted the sealed secret with bit %d flipped", i)
		}
	}
}

func TestOpenUnknownKey(t *testing.T) {
	t.Parallel()
	sealed, err := ring(t, "k-old").Seal([]byte("token"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []*secret.Keyring{ring(t, "k-new"), ring(t, "k-new", "k-other")} {
		_, err = k.Open(sealed, nil)
		var unknown *secret.UnknownKeyError
		if !errors.As(err, &unknown) || unknown.ID != "k-old" || !errors.Is(err, secret.ErrUnknownKey) {
			t.Fatalf("Open with %v = %v, want an UnknownKeyError naming k-old", k, err)
		}
		if !strings.Contains(err.Error(), "k-old") {
			t.Errorf("error %q does not name the key", err)
		}
	}
	// The same id holding another key is not an unknown key: it fails to
	// authenticate.
	if _, err := ring(t, "k-old").Open(sealed, nil); !errors.Is(err, secret.ErrAuthentication) {
		t.Errorf("Open under another key of the same id = %v, want ErrAuthentication", err)
	}
}

func TestRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := newKey(t), newKey(t)
	parse := func(text string) *secret.Keyring {
		k, err := secret.ParseKeyring(text)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	before := parse("old " + oldKey)
	during := parse("new " + newKey + "\nold " + oldKey)
	after := parse("new " + newKey)
	aad := secret.ConnectionAAD("org_a", "con_1")
	plain := []byte("refresh-token-value")

	sealed, err := before.Seal(plain, aad)
	if err != nil {
		t.Fatal(err)
	}
	// While both keys are held, what the old one wrapped still opens.
	if got, err := during.Open(sealed, aad); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open during rotation = %q, %v", got, err)
	}
	if _, err := after.Open(sealed, aad); !errors.Is(err, secret.ErrUnknownKey) {
		t.Fatalf("Open without the old key = %v, want ErrUnknownKey", err)
	}

	// Rewrap with only the old key held changes nothing.
	same, changed, err := before.Rewrap(sealed, aad)
	if err != nil || changed || !bytes.Equal(same, sealed) {
		t.Fatalf("Rewrap under the current key = changed %v, %v", changed, err)
	}

	rewrapped, changed, err := during.Rewrap(sealed, aad)
	if err != nil || !changed {
		t.Fatalf("Rewrap = changed %v, %v; want changed", changed, err)
	}
	if id, _ := secret.KeyID(rewrapped); id != "new" {
		t.Errorf("rewrapped under %q, want new", id)
	}
	_, start, end := fields(t, sealed)
	_, rstart, rend := fields(t, rewrapped)
	for _, f := range []int{2, 3} { // nonce and ciphertext
		if !bytes.Equal(sealed[start[f]:end[f]], rewrapped[rstart[f]:rend[f]]) {
			t.Errorf("field %d changed by Rewrap", f)
		}
	}
	if got, err := after.Open(rewrapped, aad); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open with only the new key = %q, %v", got, err)
	}
	if _, err := after.Open(rewrapped, secret.ConnectionAAD("org_a", "con_2")); !errors.Is(err, secret.ErrAuthentication) {
		t.Errorf("rewrapped secret opened for another row: %v", err)
	}
	again, changed, err := during.Rewrap(rewrapped, aad)
	if err != nil || changed || !bytes.Equal(again, rewrapped) {
		t.Errorf("second Rewrap = changed %v, %v; want unchanged", changed, err)
	}
	if _, _, err := after.Rewrap(sealed, aad); !errors.Is(err, secret.ErrUnknownKey) {
		t.Errorf("Rewrap without the old key = %v, want ErrUnknownKey", err)
	}
}

func FuzzOpen(f *testing.F) {
	k := ring(f, "k1", "k0")
	aad := secret.ConnectionAAD("org_a", "con_1")
	good, err := k.Seal([]byte("token"), aad)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, aad)
	f.Add(good[:len(good)-3], aad)
	f.Add([]byte{1, 2, 'k', '1', 60}, aad)
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, []byte(nil))
	f.Add([]byte{}, []byte("x"))
	f.Fuzz(func(t *testing.T, b, aad []byte) {
		plain, err := k.Open(b, aad)
		if err == nil {
			// Only what was sealed opens: the seed, for its own row.
			if !bytes.Equal(b, good) || !bytes.Equal(plain, []byte("token")) {
				t.Fatalf("Open accepted %x", b)
			}
		} else if !errors.Is(err, secret.ErrMalformed) && !errors.Is(err, secret.ErrAuthentication) && !errors.Is(err, secret.ErrUnknownKey) {
			t.Fatalf("Open = %v, not one of the package's errors", err)
		}
		out, _, err := k.Rewrap(b, aad)
		if err == nil {
			if got, err := k.Open(out, aad); err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("Rewrap accepted %x but its answer does not open: %v", b, err)
			}
		}
	})
}

// BenchmarkSeal seals a 200-byte secret.
func BenchmarkSeal(b *testing.B) {
	k := ring(b, "k1")
	plain := bytes.Repeat([]byte("s"), 200)
	aad := secret.ConnectionAAD("org_0123456789", "con_0123456789")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Seal(plain, aad); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen opens a 200-byte secret: what every call through a
// connection pays.
func BenchmarkOpen(b *testing.B) {
	k := ring(b, "k1", "k0")
	aad := secret.ConnectionAAD("org_0123456789", "con_0123456789")
	sealed, err := k.Seal(bytes.Repeat([]byte("s"), 200), aad)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Open(sealed, aad); err != nil {
			b.Fatal(err)
		}
	}
}
