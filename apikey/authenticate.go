package apikey

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// Authentication errors. ErrInvalid says nothing about why (unknown id,
// wrong secret, revoked, expired): a caller probing keys learns nothing.
var (
	ErrInvalid     = errors.New("API key not valid")
	ErrUnavailable = errors.New("credentials cannot be checked")
)

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
	cred, err := store.GetCredential(ctx, id)
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		return nil, ErrInvalid
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	case !cred.RevokedAt.IsZero(), !cred.ExpiresAt.IsZero() && !now.Before(cred.ExpiresAt), !Verify(cred.Hash, secret):
		return nil, ErrInvalid
	}
	return cred, nil
}
