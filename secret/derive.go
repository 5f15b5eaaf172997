package secret

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
)

// deriveRoot answers the root of the keys derived from one KEK.
func deriveRoot(kek []byte) []byte {
	m := hmac.New(sha256.New, kek)
	m.Write([]byte("toolplane keyring derivation root v1"))
	return m.Sum(nil)
}

// DeriveKey answers a 32-byte key for purpose ("notify link"), derived
// from the ring's key id: HMAC-SHA256 keyed by a one-way root of the KEK,
// over the purpose. Keys for two purposes are unrelated, and none reveals
// the KEK. A key signing something the platform checks later (a link) is
// derived from the current key, and checked with the key its id names, so
// a link stays valid while the key that signed it is in the ring. An id
// the ring does not hold answers an *UnknownKeyError.
func (k *Keyring) DeriveKey(id, purpose string) ([]byte, error) {
	root, ok := k.roots[id]
	if !ok {
		return nil, fmt.Errorf("derive key for %s: %w", purpose, &UnknownKeyError{ID: id})
	}
	m := hmac.New(sha256.New, root)
	m.Write([]byte(purpose))
	return m.Sum(nil), nil
}
