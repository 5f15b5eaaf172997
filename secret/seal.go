package secret

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
)

// Version1 is the version byte of the sealed format this package writes.
//
// A sealed secret is the version byte followed by four fields, each
// preceded by its length as an unsigned varint (encoding/binary's
// AppendUvarint):
//
//	0x01
//	len | kek id          the key-encryption key that wrapped the data key
//	len | wrapped DEK     wrap nonce (12) | AES-256-GCM(KEK, DEK) (32+16)
//	len | nonce           the data nonce (12)
//	len | ciphertext      AES-256-GCM(DEK, plaintext) with its tag (16)
//
// Nothing may follow the ciphertext. The data key is sealed with the
// additional data 0x01 | len | kek id | aad, so a wrapped key opens only
// under the id it names and for the row it was sealed for; the plaintext
// with 0x01 | aad, which leaves it untouched when the data key is wrapped
// again under another key-encryption key.
const Version1 byte = 1

const (
	nonceSize   = 12
	tagSize     = 16
	wrappedSize = nonceSize + KeySize + tagSize
)

// ErrMalformed: the bytes are not a sealed secret of a known version.
var ErrMalformed = errors.New("sealed secret malformed")

// ErrAuthentication: a sealed secret did not authenticate: it was changed,
// or it was sealed for another row (other additional data), or its data
// key was wrapped by another key under the same id.
var ErrAuthentication = errors.New("sealed secret does not authenticate (tampered, or sealed for another row)")

// ErrUnknownKey: a sealed secret's data key was wrapped by a key-encryption
// key the keyring does not hold. The error is an *UnknownKeyError, which
// names the id.
var ErrUnknownKey = errors.New("key-encryption key not in the keyring")

// UnknownKeyError names the key-encryption key a sealed secret needs and
// the keyring lacks: a key removed before rotation finished, or a node
// started without the newest key. It wraps ErrUnknownKey.
type UnknownKeyError struct {
	ID string
}

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("sealed under key-encryption key %q, which the keyring does not hold", e.ID)
}

// Unwrap answers ErrUnknownKey.
func (e *UnknownKeyError) Unwrap() error { return ErrUnknownKey }

// sealed is a sealed secret taken apart; its slices alias the input.
type sealed struct {
	id         string
	wrapped    []byte
	nonce      []byte
	ciphertext []byte
}

// parse takes a sealed secret apart, checking every length, so garbage
// answers ErrMalformed and never reaches a cipher.
func parse(b []byte) (sealed, error) {
	var s sealed
	if len(b) == 0 || b[0] != Version1 {
		return s, ErrMalformed
	}
	rest := b[1:]
	field := func() ([]byte, bool) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return nil, false
		}
		f := rest[k : k+int(n)]
		rest = rest[k+int(n):]
		return f, true
	}
	id, ok1 := field()
	wrapped, ok2 := field()
	nonce, ok3 := field()
	ct, ok4 := field()
	if !ok1 || !ok2 || !ok3 || !ok4 || len(rest) != 0 {
		return s, ErrMalformed
	}
	if !validID(string(id)) || len(wrapped) != wrappedSize || len(nonce) != nonceSize || len(ct) < tagSize {
		return s, ErrMalformed
	}
	return sealed{id: string(id), wrapped: wrapped, nonce: nonce, ciphertext: ct}, nil
}

// wrapAAD is the additional data of a wrapped data key.
func wrapAAD(id string, aad []byte) []byte {
	b := make([]byte, 0, 2+len(id)+len(aad))
	b = append(b, Version1)
	b = binary.AppendUvarint(b, uint64(len(id)))
	b = append(b, id...)
	return append(b, aad...)
}

// dataAAD is the additional data of the plaintext.
func dataAAD(aad []byte) []byte {
	b := make([]byte, 0, 1+len(aad))
	b = append(b, Version1)
	return append(b, aad...)
}

// appendField appends one length-prefixed field.
func appendField(b, f []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(f)))
	return append(b, f...)
}

// Seal seals plain for the row aad names (see ConnectionAAD): under a
// fresh random data key, itself wrapped by the current key-encryption key.
// Opening it needs the same aad, so sealed bytes copied to another row do
// not open there.
func (k *Keyring) Seal(plain, aad []byte) ([]byte, error) {
	var dek [KeySize]byte
	rand.Read(dek[:])
	defer clear(dek[:])
	data, err := newAEAD(dek[:])
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	var nonce [nonceSize]byte
	rand.Read(nonce[:])
	wrapped, err := k.wrap(dek[:], aad)
	if err != nil {
		return nil, err
	}
	id := k.current
	out := make([]byte, 0, 1+4*binary.MaxVarintLen32+len(id)+wrappedSize+nonceSize+len(plain)+tagSize)
	out = append(out, Version1)
	out = appendField(out, []byte(id))
	out = appendField(out, wrapped)
	out = appendField(out, nonce[:])
	out = binary.AppendUvarint(out, uint64(len(plain)+tagSize))
	return data.Seal(out, nonce[:], plain, dataAAD(aad)), nil
}

// wrap wraps dek under the current key-encryption key for aad: the wrap
// nonce followed by the sealed key.
func (k *Keyring) wrap(dek, aad []byte) ([]byte, error) {
	kek, ok := k.keys[k.current]
	if !ok {
		return nil, fmt.Errorf("seal: %w", &UnknownKeyError{ID: k.current})
	}
	out := make([]byte, nonceSize, wrappedSize)
	rand.Read(out)
	return kek.Seal(out, out[:nonceSize], dek, wrapAAD(k.current, aad)), nil
}

// unwrap answers the data key of s into dst, which must hold KeySize
// bytes.
func (k *Keyring) unwrap(dst []byte, s sealed, aad []byte) error {
	kek, ok := k.keys[s.id]
	if !ok {
		return &UnknownKeyError{ID: s.id}
	}
	dek, err := kek.Open(dst[:0], s.wrapped[:nonceSize], s.wrapped[nonceSize:], wrapAAD(s.id, aad))
	if err != nil || len(dek) != KeySize {
		clear(dst)
		return ErrAuthentication
	}
	return nil
}

// Open answers the plaintext of a sealed secret, with any key of the
// keyring. aad must be the one it was sealed with. Bytes that are not a
// sealed secret answer ErrMalformed, a data key wrapped by a key the ring
// lacks an *UnknownKeyError, and anything changed ErrAuthentication.
func (k *Keyring) Open(b, aad []byte) ([]byte, error) {
	s, err := parse(b)
	if err != nil {
		return nil, err
	}
	var dek [KeySize]byte
	defer clear(dek[:])
	if err := k.unwrap(dek[:], s, aad); err != nil {
		return nil, err
	}
	data, err := newAEAD(dek[:])
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	plain, err := data.Open(nil, s.nonce, s.ciphertext, dataAAD(aad))
	if err != nil {
		return nil, ErrAuthentication
	}
	return plain, nil
}

// Rewrap wraps a sealed secret's data key again under the current
// key-encryption key, leaving its nonce and ciphertext as they are, and
// reports whether it changed anything: a secret already under the current
// key answers itself, unchanged. Either way the wrapped data key is
// authenticated first, so a secret Rewrap accepts opens (unless its
// ciphertext alone was changed, which only Open sees). The answer never
// aliases b.
func (k *Keyring) Rewrap(b, aad []byte) (out []byte, changed bool, err error) {
	s, err := parse(b)
	if err != nil {
		return nil, false, err
	}
	var dek [KeySize]byte
	defer clear(dek[:])
	if err := k.unwrap(dek[:], s, aad); err != nil {
		return nil, false, err
	}
	if s.id == k.current {
		return append([]byte(nil), b...), false, nil
	}
	wrapped, err := k.wrap(dek[:], aad)
	if err != nil {
		return nil, false, err
	}
	out = make([]byte, 0, len(b)+len(k.current))
	out = append(out, Version1)
	out = appendField(out, []byte(k.current))
	out = appendField(out, wrapped)
	out = appendField(out, s.nonce)
	out = appendField(out, s.ciphertext)
	return out, true, nil
}

// KeyID answers the id of the key-encryption key that wrapped a sealed
// secret's data key, without opening it, or ErrMalformed.
func KeyID(b []byte) (string, error) {
	s, err := parse(b)
	if err != nil {
		return "", err
	}
	return s.id, nil
}
