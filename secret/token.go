package secret

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrToken: a signed token that is malformed, longer than allowed, signed
// under a key the ring no longer holds, or forged. Which is not said.
var ErrToken = errors.New("signed token not valid")

// Keyed is what a signed token binds: a value encoded as JSON that names
// the keyring key its signature's key derives from.
type Keyed interface{ KeyID() string }

// SignToken answers v signed for purpose:
// base64url(JSON of v) "." base64url(HMAC-SHA256 of it under the key
// derived from v.KeyID() for purpose). A one-click link, a link code:
// anything a person carries back and the server must know it made.
func (k *Keyring) SignToken(purpose string, v Keyed) (string, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	mac, err := k.tokenMAC(v.KeyID(), purpose, payload)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(mac), nil
}

// OpenToken decodes into v a token SignToken made for purpose, of at most
// maxLen bytes, once its signature checks under the key v then names. A
// token that does not is ErrToken; any other error is the keyring's.
func (k *Keyring) OpenToken(purpose, token string, maxLen int, v Keyed) error {
	if len(token) > maxLen {
		return ErrToken
	}
	p, m, ok := strings.Cut(strings.TrimSpace(token), ".")
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p)
	sig, err2 := enc.DecodeString(m)
	if !ok || err1 != nil || err2 != nil || json.Unmarshal(payload, v) != nil {
		return ErrToken
	}
	want, err := k.tokenMAC(v.KeyID(), purpose, payload)
	if errors.Is(err, ErrUnknownKey) || (err == nil && !hmac.Equal(sig, want)) {
		// A key retired from the ring signs nothing valid any more.
		return ErrToken
	}
	if err != nil {
		return fmt.Errorf("check token: %w", err)
	}
	return nil
}

// tokenMAC answers payload's HMAC-SHA256 under the key derived from the
// ring's key id for purpose.
func (k *Keyring) tokenMAC(id, purpose string, payload []byte) ([]byte, error) {
	key, err := k.DeriveKey(id, purpose)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	m := hmac.New(sha256.New, key)
	m.Write(payload)
	return m.Sum(nil), nil
}
