package apikey

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
)

// Authentication errors. ErrInvalid says nothing about why (unknown id,
// wrong secret, revoked, expired): a caller probing keys learns nothing.
var (
	ErrInvalid     = fmt.Errorf("API key not valid: %w", toolplane.ErrUnauthenticated)
	ErrUnavailable = errors.New("credentials cannot be checked")
)

// TokenVerifier verifies bearer tokens that are not API keys (JWTs). An
// invalid token answers an error wrapping toolplane.ErrUnauthenticated; any
// other error means the verifier could not decide.
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (*toolplane.Credential, error)
}

// Authenticator authenticates a bearer token: an API key against the
// store, anything else through Tokens when one is configured.
type Authenticator struct {
	Store  Getter
	Tokens TokenVerifier
	// Cache, when set, answers API keys that verified recently without
	// the store or Argon2id (see Cache for what that trades). It must
	// outlive the Authenticator: one per node, shared by every door.
	Cache *Cache
}

// Authenticate answers the credential token stands for at now.
func (a Authenticator) Authenticate(ctx context.Context, token string, now time.Time) (*toolplane.Credential, error) {
	if strings.HasPrefix(token, Prefix) || a.Tokens == nil {
		return a.Cache.Authenticate(ctx, a.Store, token, now)
	}
	cred, err := a.Tokens.Verify(ctx, token)
	if err != nil && !errors.Is(err, toolplane.ErrUnauthenticated) {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return cred, err
}

// Getter finds a credential by its id.
type Getter interface {
	GetCredential(ctx context.Context, id string) (*toolplane.Credential, error)
}

// Authenticate answers the credential a presented key authenticates at
// now: well formed, known, neither revoked nor expired, and its secret
// verifies. Every door (REST, MCP) authenticates through it.
func Authenticate(ctx context.Context, store Getter, key string, now time.Time) (*toolplane.Credential, error) {
	id, secret, err := Parse(key)
	if err != nil {
		return nil, ErrInvalid
	}
	return verify(ctx, store, id, secret, now)
}

// InForce answers the credential id names when it is neither revoked nor
// expired at now, for a call made earlier with it and run now; ErrInvalid
// when it is gone, revoked or expired. No secret is presented: the key
// authenticated when the call was made.
func InForce(ctx context.Context, store Getter, id string, now time.Time) (*toolplane.Credential, error) {
	cred, err := store.GetCredential(ctx, id)
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		return nil, ErrInvalid
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	case !cred.RevokedAt.IsZero(), expired(cred, now):
		return nil, ErrInvalid
	}
	return cred, nil
}

// verify is Authenticate after the key parsed: the store read and the
// Argon2id verification a Cache hit skips.
func verify(ctx context.Context, store Getter, id, secret string, now time.Time) (*toolplane.Credential, error) {
	cred, err := store.GetCredential(ctx, id)
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		return nil, ErrInvalid
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	case !cred.RevokedAt.IsZero(), expired(cred, now), !Verify(cred.Hash, secret):
		return nil, ErrInvalid
	}
	return cred, nil
}
