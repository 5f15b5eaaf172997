package secret

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
)

// KeySize is the size of a key-encryption key and of a data key: AES-256.
const KeySize = 32

// maxIDLen bounds a key id: it is stored in every sealed secret.
const maxIDLen = 64

// EnvID is the id given to a keyring that TOOLPLANE_KEK holds as one bare
// base64 key.
const EnvID = "env"

// ErrKeyring: a keyring's text, file or environment variable is not
// usable. The error says which line or file and why, never a key.
var ErrKeyring = toolplane.Refine(toolplane.ErrInvalid, "keyring not valid")

// Keyring is the key-encryption keys (KEKs) a node holds, by id. The
// current one wraps every data key sealed from now on; every one of them
// opens what it wrapped. A Keyring never changes once made, so one is
// safe for concurrent use; a node takes a new one (a new key, an old key
// retired) when it restarts.
type Keyring struct {
	current string
	keys    map[string]cipher.AEAD
	// roots are what DeriveKey derives from, one per key: a one-way
	// function of the key, so a derived key never gives the KEK away.
	roots map[string][]byte
}

// Current answers the current key's id.
func (k *Keyring) Current() string { return k.current }

// IDs answers every key's id, sorted.
func (k *Keyring) IDs() []string {
	ids := make([]string, 0, len(k.keys))
	for id := range k.keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Has reports whether the ring holds the key with that id.
func (k *Keyring) Has(id string) bool {
	_, ok := k.keys[id]
	return ok
}

// String names the keys, never their material.
func (k *Keyring) String() string {
	return fmt.Sprintf("keyring(current %s; keys %s)", k.current, strings.Join(k.IDs(), ", "))
}

// validID reports whether id may name a key: 1 to 64 letters, digits,
// dots, dashes and underscores, so it reads plainly in a log line and a
// file.
func validID(id string) bool {
	if id == "" || len(id) > maxIDLen {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// newAEAD answers AES-256-GCM under key.
func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// decodeKey decodes one base64 key of KeySize bytes. Its errors name what
// is wrong with the text, never the text.
func decodeKey(text string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, errors.New("is not standard base64")
	}
	if len(key) != KeySize {
		n := len(key)
		clear(key)
		return nil, fmt.Errorf("is %d bytes, want %d", n, KeySize)
	}
	return key, nil
}

// ParseKeyring reads a keyring from text: one key a line, as its id and
// its 32 bytes in standard base64, separated by blanks:
//
//	# the first key is the current one
//	k2026-03 q3Jd...=
//	k2025-11 8fXa...=
//
// Blank lines and lines starting with # are skipped. A duplicate id, a key
// that is not 32 bytes, or an id that is not 1 to 64 letters, digits, '.',
// '-' or '_' is refused with an error wrapping ErrKeyring that names the
// line and never the key.
func ParseKeyring(text string) (*Keyring, error) {
	k := &Keyring{keys: map[string]cipher.AEAD{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%w: line %d: want an id and a base64 key, found %d fields", ErrKeyring, n, len(fields))
		}
		id := fields[0]
		if !validID(id) {
			return nil, fmt.Errorf("%w: line %d: key id is not 1 to %d letters, digits, '.', '-' or '_'", ErrKeyring, n, maxIDLen)
		}
		if err := k.add(id, fields[1]); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrKeyring, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyring, err)
	}
	if len(k.keys) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrKeyring)
	}
	return k, nil
}

// add decodes and adds one key; the first added is the current one.
func (k *Keyring) add(id, encoded string) error {
	if _, dup := k.keys[id]; dup {
		return fmt.Errorf("key id %s is listed twice", id)
	}
	key, err := decodeKey(encoded)
	if err != nil {
		return fmt.Errorf("key %s %w", id, err)
	}
	aead, err := newAEAD(key)
	defer clear(key)
	if err != nil {
		return fmt.Errorf("key %s: %w", id, err)
	}
	k.keys[id] = aead
	if k.roots == nil {
		k.roots = map[string][]byte{}
	}
	k.roots[id] = deriveRoot(key)
	if k.current == "" {
		k.current = id
	}
	return nil
}

// LoadKeyring answers the keyring of a node: from env, the value of
// TOOLPLANE_KEK, when it is set, otherwise from the file at path. env holds
// keyring text (see ParseKeyring) or one bare base64 key, which gets the id
// "env". The file must be readable by its owner only (mode 0600), as ssh
// wants of a private key; otherwise it is refused with the chmod that
// fixes it. Setting both, or neither, is refused: a node must not seal
// under a key its operator did not mean.
func LoadKeyring(env, path string) (*Keyring, error) {
	env = strings.TrimSpace(env)
	switch {
	case env != "" && path != "":
		return nil, fmt.Errorf("%w: both TOOLPLANE_KEK and a key file (%s) are given: keep one", ErrKeyring, path)
	case env != "":
		if !strings.ContainsAny(env, " \t\n") {
			k := &Keyring{keys: map[string]cipher.AEAD{}}
			if err := k.add(EnvID, env); err != nil {
				return nil, fmt.Errorf("%w: TOOLPLANE_KEK: %w", ErrKeyring, err)
			}
			return k, nil
		}
		k, err := ParseKeyring(env)
		if err != nil {
			return nil, fmt.Errorf("TOOLPLANE_KEK: %w", err)
		}
		return k, nil
	case path != "":
		return loadFile(path)
	}
	return nil, fmt.Errorf("%w: no key-encryption key: set TOOLPLANE_KEK or name a key file", ErrKeyring)
}

// loadFile reads a keyring file after checking who may read it.
func loadFile(path string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: key file: %w", ErrKeyring, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: key file: %w", ErrKeyring, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: key file %s is not a regular file", ErrKeyring, path)
	}
	if err := checkPrivate(ErrKeyring, "key file", path, uint32(info.Mode().Perm())); err != nil {
		return nil, err
	}
	// A keyring is a few lines; the bound keeps a wrong path (a device, a
	// log) from being read whole.
	text, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: key file %s: %w", ErrKeyring, path, err)
	}
	defer clear(text)
	k, err := ParseKeyring(string(text))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// EnsureKeyFile creates a key file at path holding one fresh random key,
// readable by its owner only, unless a file is there already, which it
// never overwrites nor follows if it is a symbolic link. It reports
// whether it created the file. The embedded default calls it at first
// start, beside its database.
func EnsureKeyFile(path string) (created bool, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, fmt.Errorf("key file: %w", err)
	}
	key := make([]byte, KeySize)
	rand.Read(key)
	defer clear(key)
	suffix := make([]byte, 3)
	rand.Read(suffix)
	// The id says when the key was made, so an operator rotating reads
	// which key is older; the suffix keeps two made the same day apart.
	id := "k" + time.Now().UTC().Format("20060102") + "-" + hex.EncodeToString(suffix)
	text := "# toolplane key-encryption keys: one \"<id> <base64 key>\" a line, the first is current.\n" +
		"# Keep this file private (chmod 600) and backed up: without it no connection secret opens.\n" +
		id + " " + base64.StdEncoding.EncodeToString(key) + "\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("key file: %w", err)
	}
	_, werr := f.WriteString(text)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(path)
		return false, fmt.Errorf("write key file %s: %w", path, err)
	}
	return true, nil
}
