// Package apikey owns the format of toolplane's API keys and the hashing of
// their secrets.
//
// A key reads
//
//	tpk_<id>_<secret>
//
// where <id> is 12 random bytes in lowercase hex and <secret> 32 random bytes
// in unpadded base64url (which may itself hold '_' and '-'). The ID part,
// "tpk_<id>", is public: it is the credential's ID (toolplane.Credential.ID)
// and may be logged. The secret is shown once, when the key is minted, and
// only its hash (Hash) is stored. Authentication parses the presented key,
// finds the credential by its ID and verifies the secret against the stored
// hash (Verify).
//
// Every key has exactly one spelling: Parse refuses anything New could not
// have made, so a key is never accepted in two forms.
package apikey

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"

	"github.com/toolplane/toolplane"
)

// Prefix begins every key and every credential ID. It lets a secret scanner
// recognise a leaked key, and a person tell a toolplane key from another.
const Prefix = "tpk_"

// ErrMalformed: a key New could not have made. Errors wrapping it never
// quote the key, which holds a secret.
var ErrMalformed = errors.New("malformed API key")

const (
	idBytes     = 12
	secretBytes = 32
	// idLen is the length of the ID part, prefix included.
	idLen = len(Prefix) + 2*idBytes
	// secretLen is the length of an encoded secret.
	secretLen = (secretBytes*8 + 5) / 6
	keyLen    = idLen + 1 + secretLen
)

// secretEncoding is unpadded base64url that refuses non-zero trailing bits,
// so each secret has one encoding.
var secretEncoding = base64.RawURLEncoding.Strict()

// New mints a key for a credential of kind and answers its ID and secret;
// Key joins them into the key the holder presents. The kind is not written
// into the key: what a key authenticates is what its stored credential
// says, never what its text claims.
func New(kind toolplane.CredentialKind) (id, secret string, err error) {
	switch kind {
	case toolplane.CredentialAgent, toolplane.CredentialPerson:
	default:
		return "", "", fmt.Errorf("apikey: unknown credential kind %q", kind)
	}
	var b [idBytes + secretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("apikey: %w", err)
	}
	return Prefix + hex.EncodeToString(b[:idBytes]), secretEncoding.EncodeToString(b[idBytes:]), nil
}

// Key answers the key made of an ID and a secret from New.
func Key(id, secret string) string { return id + "_" + secret }

// Parse splits a key into its ID and secret, or answers an error wrapping
// ErrMalformed for anything New could not have made. The key is split by
// position, not at underscores, because the secret may hold them.
func Parse(key string) (id, secret string, err error) {
	if len(key) != keyLen {
		return "", "", fmt.Errorf("%w: length %d, not %d", ErrMalformed, len(key), keyLen)
	}
	if !strings.HasPrefix(key, Prefix) {
		return "", "", fmt.Errorf("%w: no %q prefix", ErrMalformed, Prefix)
	}
	for i := len(Prefix); i < idLen; i++ {
		if c := key[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", "", fmt.Errorf("%w: id is not lowercase hex", ErrMalformed)
		}
	}
	if key[idLen] != '_' {
		return "", "", fmt.Errorf("%w: no separator after the id", ErrMalformed)
	}
	id, secret = key[:idLen], key[idLen+1:]
	// Decoded on the stack: DecodeString allocates its answer, and every
	// request presenting a key is parsed.
	var src [secretLen]byte
	var dst [secretLen * 6 / 8]byte // DecodedLen(secretLen)
	copy(src[:], secret)
	if n, err := secretEncoding.Decode(dst[:], src[:]); err != nil || n != secretBytes {
		return "", "", fmt.Errorf("%w: secret is not %d bytes of base64url", ErrMalformed, secretBytes)
	}
	return id, secret, nil
}

// params are Argon2id's cost parameters. Each hash records those it was
// made with, so the current ones can change without invalidating a key.
type params struct {
	time    uint32 // passes over memory
	memory  uint32 // KiB
	threads uint8
	keyLen  uint32
	saltLen int
}

// current is what Hash uses: Argon2id over 2 MiB, one pass, one thread. It
// verifies in about 2 ms on one core of an AMD EPYC (BenchmarkVerify; 1 MiB
// took 1 ms there, 4 MiB 4 ms). A secret is 256 random bits, which no amount
// of guessing finds whatever the hash costs; the cost is defense in depth,
// so a leaked table cannot be tested against candidate secrets at the speed
// of a fast hash, and it stays low because every authenticated request pays
// it, on one core and in 2 MiB.
var current = params{time: 1, memory: 2 * 1024, threads: 1, keyLen: 32, saltLen: 16}

// limits bound what Verify accepts from a stored hash: far above what Hash
// writes, low enough that one tampered row cannot make a verification take
// a machine's memory or minutes.
var limits = struct {
	maxTime, maxMemory               uint32
	maxThreads                       uint8
	minKey, maxKey, minSalt, maxSalt int
}{maxTime: 16, maxMemory: 64 * 1024, maxThreads: 16, minKey: 16, maxKey: 64, minSalt: 8, maxSalt: 64}

// Hash answers the stored form of secret: an Argon2id hash under a fresh
// random 16-byte salt, in the PHC string format
//
//	$argon2id$v=19$m=<KiB>,t=<passes>,p=<threads>$<salt>$<hash>
//
// (salt and hash in unpadded standard base64), so the parameters and salt
// travel with it. Two hashes of one secret differ.
func Hash(secret string) []byte { return hashWith(current, secret) }

func hashWith(p params, secret string) []byte {
	salt := make([]byte, p.saltLen)
	if _, err := rand.Read(salt); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // the runtime's source never fails
	}
	sum := argon2.IDKey([]byte(secret), salt, p.time, p.memory, p.threads, p.keyLen)
	b64 := base64.RawStdEncoding
	return fmt.Appendf(nil, "$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.memory, p.time, p.threads, b64.EncodeToString(salt), b64.EncodeToString(sum))
}

// Verify reports whether secret is the one hash was made from, comparing
// the derived hash in constant time. A hash Hash could not have made (with
// any parameters within limits) verifies nothing.
func Verify(hash []byte, secret string) bool {
	p, salt, want, ok := decode(string(hash))
	if !ok {
		return false
	}
	got := argon2.IDKey([]byte(secret), salt, p.time, p.memory, p.threads, p.keyLen)
	return subtle.ConstantTimeCompare(got, want) == 1
}

// decode parses a hash in Hash's format and checks its parameters against
// limits.
func decode(s string) (p params, salt, sum []byte, ok bool) {
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return p, nil, nil, false
	}
	cost := strings.Split(parts[3], ",")
	if len(cost) != 3 {
		return p, nil, nil, false
	}
	m, okM := number(cost[0], "m=", limits.maxMemory)
	t, okT := number(cost[1], "t=", limits.maxTime)
	th, okP := number(cost[2], "p=", uint32(limits.maxThreads))
	if !okM || !okT || !okP || t == 0 || th == 0 || m < 8*th {
		return p, nil, nil, false
	}
	var err error
	if salt, err = base64.RawStdEncoding.Strict().DecodeString(parts[4]); err != nil ||
		len(salt) < limits.minSalt || len(salt) > limits.maxSalt {
		return p, nil, nil, false
	}
	if sum, err = base64.RawStdEncoding.Strict().DecodeString(parts[5]); err != nil ||
		len(sum) < limits.minKey || len(sum) > limits.maxKey {
		return p, nil, nil, false
	}
	return params{time: t, memory: m, threads: uint8(th), keyLen: uint32(len(sum)), saltLen: len(salt)}, salt, sum, true
}

// number parses "<name><decimal>" with the decimal at most max.
func number(s, name string, max uint32) (uint32, bool) {
	digits, ok := strings.CutPrefix(s, name)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 32)
	if err != nil || n > uint64(max) {
		return 0, false
	}
	return uint32(n), true
}
