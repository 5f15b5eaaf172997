package authserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
)

// reload bounds how long a node signs with the key it read: another
// node's rotation reaches it within this, and an unknown key id in a
// token makes it read again at once (at most once per reloadMin).
const (
	reload    = time.Minute
	reloadMin = time.Second
)

// keyRing holds the signing keys: the newest unretired one signs, every
// unretired one verifies. Private halves are sealed in the store and
// opened here only.
type keyRing struct {
	store toolplane.OAuthStore
	kek   *secret.Keyring
	now   func() time.Time

	mu      sync.Mutex
	signer  *jose.JSONWebKey
	public  map[string]*jose.JSONWebKey
	order   []string
	loaded  time.Time
	tried   time.Time
	loadErr error
}

func keyAAD(id string) []byte { return secret.StateAAD("oauth-signing-key:" + id) }

// load reads the keys, making the first when there is none. The lock is
// held by the caller.
func (k *keyRing) load(ctx context.Context) error {
	now := k.now()
	k.tried = now
	rows, err := k.store.OAuthSigningKeys(ctx)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		row, err := k.mint(ctx)
		if err != nil {
			return err
		}
		rows = []toolplane.OAuthSigningKey{*row}
	}
	public := make(map[string]*jose.JSONWebKey, len(rows))
	order := make([]string, 0, len(rows))
	var signer *jose.JSONWebKey
	for i, row := range rows {
		var pub jose.JSONWebKey
		if err := json.Unmarshal(row.Public, &pub); err != nil {
			return fmt.Errorf("signing key %s: %w", row.ID, err)
		}
		public[row.ID], order = &pub, append(order, row.ID)
		if i == 0 {
			der, err := k.kek.Open(row.Sealed, keyAAD(row.ID))
			if err != nil {
				return fmt.Errorf("open signing key %s: %w", row.ID, err)
			}
			priv, err := x509.ParsePKCS8PrivateKey(der)
			if err != nil {
				return fmt.Errorf("signing key %s: %w", row.ID, err)
			}
			signer = &jose.JSONWebKey{Key: priv, KeyID: row.ID, Algorithm: string(jose.ES256), Use: "sig"}
		}
	}
	k.signer, k.public, k.order, k.loaded = signer, public, order, now
	return nil
}

// mint makes, seals and stores a new signing key.
func (k *keyRing) mint(ctx context.Context) (*toolplane.OAuthSigningKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	id := toolplane.NewID("oak_")
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	sealed, err := k.kek.Seal(der, keyAAD(id))
	if err != nil {
		return nil, fmt.Errorf("seal signing key: %w", err)
	}
	pub, err := json.Marshal(jose.JSONWebKey{Key: &priv.PublicKey, KeyID: id, Algorithm: string(jose.ES256), Use: "sig"})
	if err != nil {
		return nil, err
	}
	row := &toolplane.OAuthSigningKey{ID: id, Sealed: sealed, Public: pub, CreatedAt: k.now()}
	if err := k.store.InsertOAuthSigningKey(ctx, row); err != nil {
		return nil, err
	}
	return row, nil
}

// current answers the key to sign with.
func (k *keyRing) current(ctx context.Context) (*jose.JSONWebKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.signer == nil || k.now().Sub(k.loaded) > reload {
		if err := k.load(ctx); err != nil && k.signer == nil {
			return nil, err
		}
	}
	return k.signer, nil
}

// verifying answers the public key id names, reading the keys again when
// it is unknown (another node rotated).
func (k *keyRing) verifying(ctx context.Context, id string) (*jose.JSONWebKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if key, ok := k.public[id]; ok && k.now().Sub(k.loaded) <= reload {
		return key, nil
	}
	if k.public == nil || k.now().Sub(k.tried) >= reloadMin {
		if err := k.load(ctx); err != nil {
			return nil, err
		}
	}
	key, ok := k.public[id]
	if !ok {
		return nil, fmt.Errorf("unknown signing key: %w", toolplane.ErrUnauthenticated)
	}
	return key, nil
}

// published answers the JWKS: every unretired key's public half.
func (k *keyRing) published(ctx context.Context) (jose.JSONWebKeySet, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.public == nil || k.now().Sub(k.loaded) > reload {
		if err := k.load(ctx); err != nil && k.public == nil {
			return jose.JSONWebKeySet{}, err
		}
	}
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(k.order))}
	for _, id := range k.order {
		set.Keys = append(set.Keys, *k.public[id])
	}
	return set, nil
}

// rotate makes a new signing key and retires every key older than the
// one it replaces, which keeps verifying the tokens it signed until they
// expire (at most an access token's life; the next rotation retires it).
func (k *keyRing) rotate(ctx context.Context) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	rows, err := k.store.OAuthSigningKeys(ctx)
	if err != nil {
		return "", err
	}
	row, err := k.mint(ctx)
	if err != nil {
		return "", err
	}
	for i, old := range rows {
		if i == 0 {
			continue
		}
		if _, err := k.store.RetireOAuthSigningKey(ctx, old.ID, k.now()); err != nil {
			return row.ID, err
		}
	}
	return row.ID, k.load(ctx)
}
