package secret_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
)

// newKey answers a fresh random key in base64.
func newKey(t testing.TB) string {
	t.Helper()
	b := make([]byte, secret.KeySize)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// ring parses a keyring of the given ids, each with a fresh key, the
// first current.
func ring(t testing.TB, ids ...string) *secret.Keyring {
	t.Helper()
	var text strings.Builder
	for _, id := range ids {
		text.WriteString(id + " " + newKey(t) + "\n")
	}
	k, err := secret.ParseKeyring(text.String())
	if err != nil {
		t.Fatalf("ParseKeyring: %v", err)
	}
	return k
}

func TestParseKeyring(t *testing.T) {
	t.Parallel()
	a, b := newKey(t), newKey(t)
	short := base64.StdEncoding.EncodeToString(make([]byte, 16))
	long := base64.StdEncoding.EncodeToString(make([]byte, 48))
	tests := []struct {
		name    string
		text    string
		current string
		ids     []string
		// wantErr is a part of the error's text; keys it must not show
		// are checked for every error.
		wantErr string
	}{
		{name: "one key", text: "k1 " + a, current: "k1", ids: []string{"k1"}},
		{name: "first is current", text: "new " + a + "\nold " + b + "\n", current: "new", ids: []string{"new", "old"}},
		{name: "comments and blanks", text: "# keys\n\n  \t\n  k2026-03.a_b " + a + "  \n# old\nk1\t" + b, current: "k2026-03.a_b", ids: []string{"k1", "k2026-03.a_b"}},
		{name: "empty", text: "", wantErr: "no key"},
		{name: "only comments", text: "# nothing\n\n", wantErr: "no key"},
		{name: "duplicate id", text: "k1 " + a + "\nk1 " + b, wantErr: "line 2: key id k1 is listed twice"},
		{name: "short key", text: "k1 " + short, wantErr: "line 1: key k1 is 16 bytes, want 32"},
		{name: "long key", text: "k1 " + a + "\nk2 " + long, wantErr: "line 2: key k2 is 48 bytes, want 32"},
		{name: "not base64", text: "k1 " + a[:10] + "!" + a[11:], wantErr: "key k1 is not standard base64"},
		{name: "bare key", text: a, wantErr: "line 1: want an id and a base64 key, found 1 fields"},
		{name: "three fields", text: "k1 " + a + " " + b, wantErr: "found 3 fields"},
		{name: "id with slash", text: "k/1 " + a, wantErr: "key id is not"},
		{name: "id too long", text: strings.Repeat("k", 65) + " " + a, wantErr: "key id is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k, err := secret.ParseKeyring(tt.text)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseKeyring = %v, want an error", k)
				}
				if !errors.Is(err, secret.ErrKeyring) || !errors.Is(err, toolplane.ErrInvalid) {
					t.Errorf("error %v is not ErrKeyring and ErrInvalid", err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not say %q", err, tt.wantErr)
				}
				for _, key := range []string{a, b, a[:12], b[:12], short, long} {
					if strings.Contains(err.Error(), key) {
						t.Errorf("error %q shows key material", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseKeyring: %v", err)
			}
			if k.Current() != tt.current || !slices.Equal(k.IDs(), tt.ids) {
				t.Errorf("current %s ids %v, want %s %v", k.Current(), k.IDs(), tt.current, tt.ids)
			}
			if s := k.String(); strings.Contains(s, a) || strings.Contains(s, b) {
				t.Errorf("String() = %q shows key material", s)
			}
		})
	}
}

// writeFile writes a keyring file with mode.
func writeFile(t *testing.T, text string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kek")
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

func TestLoadKeyring(t *testing.T) {
	t.Parallel()
	a, b := newKey(t), newKey(t)
	private := writeFile(t, "# ring\nf1 "+a+"\nf0 "+b+"\n", 0o600)
	tests := []struct {
		name    string
		env     string
		path    string
		current string
		wantErr string
		unix    bool
	}{
		{name: "bare env key", env: " " + a + "\n", current: secret.EnvID},
		{name: "env keyring", env: "e2 " + a + "\ne1 " + b, current: "e2"},
		{name: "private file", path: private, current: "f1"},
		{name: "bad env key", env: a[:20], wantErr: "TOOLPLANE_KEK"},
		{name: "both", env: a, path: private, wantErr: "keep one"},
		{name: "neither", wantErr: "set TOOLPLANE_KEK or name a key file"},
		{name: "missing file", path: filepath.Join(t.TempDir(), "absent"), wantErr: "no such file"},
		{name: "directory", path: t.TempDir(), wantErr: "not a regular file"},
		{name: "group readable", path: writeFile(t, "f1 "+a, 0o640), wantErr: "chmod 600", unix: true},
		{name: "world readable", path: writeFile(t, "f1 "+a, 0o604), wantErr: "chmod 600", unix: true},
		{name: "group writable", path: writeFile(t, "f1 "+a, 0o620), wantErr: "accessible by group or others", unix: true},
		{name: "bad file line", path: writeFile(t, "f1 "+a+"\nf1 "+b, 0o600), wantErr: "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.unix && runtime.GOOS == "windows" {
				t.Skip("permission bits do not say who reads a file on windows")
			}
			k, err := secret.LoadKeyring(tt.env, tt.path)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("LoadKeyring = %v, want an error", k)
				}
				if !errors.Is(err, secret.ErrKeyring) {
					t.Errorf("error %v is not ErrKeyring", err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not say %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), a[:12]) || strings.Contains(err.Error(), b[:12]) {
					t.Errorf("error %q shows key material", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadKeyring: %v", err)
			}
			if k.Current() != tt.current {
				t.Errorf("current %s, want %s", k.Current(), tt.current)
			}
		})
	}
}

func TestEnsureKeyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "data", "kek")
	created, err := secret.EnsureKeyFile(path)
	if err != nil || !created {
		t.Fatalf("EnsureKeyFile = %v, %v; want created", created, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", info.Mode().Perm())
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := secret.LoadKeyring("", path)
	if err != nil {
		t.Fatalf("LoadKeyring of the created file: %v", err)
	}
	if len(k.IDs()) != 1 {
		t.Errorf("created ring holds %v, want one key", k.IDs())
	}

	created, err = secret.EnsureKeyFile(path)
	if err != nil || created {
		t.Fatalf("EnsureKeyFile again = %v, %v; want left alone", created, err)
	}
	again, _ := os.ReadFile(path)
	if string(again) != string(first) {
		t.Error("EnsureKeyFile overwrote an existing key file")
	}

	// Two files are two keys.
	other := filepath.Join(t.TempDir(), "kek")
	if _, err := secret.EnsureKeyFile(other); err != nil {
		t.Fatal(err)
	}
	k2, err := secret.LoadKeyring("", other)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := k2.Seal([]byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Open(sealed, nil); err == nil {
		t.Error("a key from another EnsureKeyFile opened this one's secret")
	}
}

func TestEnsureKeyFileRefusesLink(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on windows")
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "planted")
	link := filepath.Join(dir, "kek")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	created, err := secret.EnsureKeyFile(link)
	if created {
		t.Fatal("EnsureKeyFile created a key through a planted link")
	}
	if err != nil {
		t.Fatalf("EnsureKeyFile: %v", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link's target exists (%v): the key was written through it", err)
	}
}

func FuzzParseKeyring(f *testing.F) {
	key := newKey(f)
	f.Add("k1 " + key)
	f.Add("# c\n\nk1 " + key + "\nk1 " + key)
	f.Add("k1 " + key[:40])
	f.Add(key)
	f.Add("k/1 " + key + " x")
	f.Fuzz(func(t *testing.T, text string) {
		k, err := secret.ParseKeyring(text)
		if err == nil {
			if !k.Has(k.Current()) || len(k.IDs()) == 0 {
				t.Fatalf("ParseKeyring answered a ring without its current key: %v", k)
			}
			return
		}
		if !errors.Is(err, secret.ErrKeyring) {
			t.Fatalf("ParseKeyring = %v, not ErrKeyring", err)
		}
		// An error names lines and ids, never a key: no key field long
		// enough to hide one appears in it, but where its line's id does.
		for line := range strings.Lines(text) {
			fields := strings.Fields(line)
			if len(fields) < 2 {
				continue
			}
			msg := strings.ReplaceAll(err.Error(), fields[0], "")
			for _, field := range fields[1:] {
				if len(field) >= 16 && strings.Contains(msg, field) {
					t.Fatalf("error %q shows the field %q", err, field)
				}
			}
		}
	})
}
