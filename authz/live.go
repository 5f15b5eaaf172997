package authz

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/clientcert"
)

// Principals answers the live principal of an invocation (it is the
// invoker's invoke.Principals): of a fresh call, from the key the door
// verified for it; of a call run later from storage — an approved call, a
// replay — from the key found again, so it is decided on the grants and
// the key as they are now rather than as they were when the call was
// made. A tool stays
// in the principal only while the agent's grants allow it and the key the
// call was made with is still in force and admits it; the principal never
// gains a tool it did not hold when the call was made.
type Principals struct {
	Grants *Service
	// Keys finds the API key a call was made with.
	Keys apikey.Getter
	// Consents, when set, answers whether the OAuth consent a call was
	// made under (its credential ID is ConsentPrefix and the consent's)
	// still stands (authserver.ConsentInForce): a call run later under a
	// revoked consent holds no tool, as under a revoked key.
	Consents func(ctx context.Context, org, credentialID string, now time.Time) (bool, error)
	// CertificateRevoked, when set, reports whether the client
	// certificate serial a call was made with (its credential ID is
	// clientcert.CredentialPrefix and the serial) is revoked now: a call
	// run later for a revoked certificate holds no tool.
	CertificateRevoked func(serial string) bool
	// Now is the clock a key's expiry is read against; nil is time.Now.
	Now func() time.Time
}

// Principal answers inv's principal as it stands now.
func (p Principals) Principal(ctx context.Context, inv *toolplane.Invocation) (toolplane.Principal, error) {
	live := toolplane.Principal{ID: inv.Principal.ID}
	var key *toolplane.Credential
	switch {
	case inv.Credential != nil:
		// A fresh call: the door verified the key for this very request,
		// so it is not read again (the grants are this service's cached
		// view: no database read on the call's path).
		key = inv.Credential
	case strings.HasPrefix(inv.CredentialID, ConsentPrefix) && p.Consents != nil:
		ok, err := p.Consents(ctx, inv.OrganizationID, inv.CredentialID, p.now())
		switch {
		case err != nil:
			return toolplane.Principal{}, fmt.Errorf("consent %s: %w", inv.CredentialID, err)
		case !ok:
			return live, nil // revoked or ended: the consent holds nothing now
		}
	case strings.HasPrefix(inv.CredentialID, clientcert.CredentialPrefix) && p.CertificateRevoked != nil:
		if p.CertificateRevoked(strings.TrimPrefix(inv.CredentialID, clientcert.CredentialPrefix)) {
			return live, nil // revoked: the certificate holds nothing now
		}
	case strings.HasPrefix(inv.CredentialID, apikey.Prefix):
		c, err := apikey.InForce(ctx, p.Keys, inv.CredentialID, p.now())
		switch {
		case errors.Is(err, apikey.ErrInvalid):
			return live, nil // revoked, expired or gone: the key holds nothing now
		case err != nil:
			return toolplane.Principal{}, fmt.Errorf("key %s: %w", inv.CredentialID, err)
		}
		key = c
	}
	for _, name := range inv.Principal.Tools {
		if key != nil && !key.Admits(name) {
			continue
		}
		rng, granted, err := p.Grants.Pin(ctx, inv.OrganizationID, inv.AgentID, inv.TenantID, name)
		if err != nil {
			return toolplane.Principal{}, fmt.Errorf("grants of %s: %w", inv.AgentID, err)
		}
		if granted {
			live.Allow(name, rng)
		}
	}
	return live, nil
}

// ConsentPrefix starts the credential ID of a call made with an access
// token of toolplane's own authorization server (authserver.CredentialPrefix).
const ConsentPrefix = "oauth:"

func (p Principals) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}
