package connection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/oauth"
	"github.com/toolplane/toolplane/secret"
)

// refreshLease is how long a node holds the right to refresh a
// connection's token; a node that dies holding it delays the next refresh
// by at most this long.
const refreshLease = 30 * time.Second

// renew mints (client credentials) or refreshes (authorization code) c's
// access token, once across nodes: the node whose compare-and-swap takes
// the refresh lease asks the provider; any other waits for its answer and
// reads the new token from the store, until renewed says the stored token
// is one the renewal was for.
func (s *Broker) renew(ctx context.Context, c *toolplane.Connection, renewed func(*toolplane.Connection, toolplane.Secrets) bool) (toolplane.Secrets, *toolplane.Connection, error) {
	// c may be what the broker's memory keeps, which calls share: the
	// lease and the new token are written on a copy.
	own := *c
	c = &own
	deadline := s.now().Add(refreshLease)
	for {
		now := s.now()
		// A lease is respected whoever holds it, this node included:
		// calls on one node renew at once as much as calls on two, and
		// a second refresh would spend the refresh token the first
		// already spent, which a provider rotating them refuses.
		leased := c.RefreshOwner != "" && c.RefreshUntil.After(now)
		if !leased {
			c.RefreshOwner, c.RefreshUntil = s.cfg.Node, now.Add(refreshLease)
			ok, err := s.update(ctx, c, nil)
			if err != nil {
				return toolplane.Secrets{}, nil, fmt.Errorf("lease the refresh of connection %s: %w", c.ID, err)
			}
			if ok {
				return s.refresh(ctx, c)
			}
		} else if now.After(deadline) {
			return toolplane.Secrets{}, nil, &toolplane.ConnectionError{Code: toolplane.CodeUnavailable,
				Message: fmt.Sprintf("the token of connection %s is being renewed and the renewal did not finish in time; nothing was done. Try again shortly.", c.ID)}
		} else {
			select {
			case <-ctx.Done():
				return toolplane.Secrets{}, nil, ctx.Err()
			case <-time.After(25 * time.Millisecond):
			}
		}
		fresh, err := s.current(ctx, c)
		if err != nil {
			return toolplane.Secrets{}, nil, err
		}
		c = fresh
		sec, err := s.material(ctx, c)
		if err != nil {
			return toolplane.Secrets{}, nil, err
		}
		if renewed(c, sec) {
			return sec, c, nil // another node renewed it
		}
	}
}

// refresh asks the provider for a new access token under the lease c
// holds, and stores what it answered: the token, or what its refusal
// leaves.
func (s *Broker) refresh(ctx context.Context, c *toolplane.Connection) (toolplane.Secrets, *toolplane.Connection, error) {
	sec, err := s.material(ctx, c)
	if err != nil {
		return toolplane.Secrets{}, nil, err
	}
	app, appSec := c, sec
	if c.Kind == toolplane.ConnectionAuthorizationCode {
		if app, appSec, err = s.application(ctx, c, sec); err != nil {
			return toolplane.Secrets{}, nil, err
		}
	}
	tok, err := s.oauth.renew(ctx, c, sec, app, appSec)
	// Whatever the provider answered, what is stored next ends the lease.
	c.RefreshOwner, c.RefreshUntil = "", time.Time{}
	if err != nil {
		return toolplane.Secrets{}, nil, s.storeRefusal(ctx, c, err)
	}
	return s.storeToken(ctx, c, sec, tok)
}

// storeToken stores tok, the token the provider issued c under its lease,
// with sec, c's secrets, and answers them with c as stored. A connection
// revoked or changed while the provider answered is the store's to
// decide: it is read again.
func (s *Broker) storeToken(ctx context.Context, c *toolplane.Connection, sec toolplane.Secrets, tok token) (toolplane.Secrets, *toolplane.Connection, error) {
	sec.AccessToken = tok.access
	if tok.refresh != "" {
		sec.RefreshToken = tok.refresh
	}
	// What Vault keeps is never sealed here too: only the token.
	kept := minted(c, sec)
	var err error
	if c.Secret, err = secret.SealSecrets(s.cfg.Keys, c.OrganizationID, c.ID, kept); err != nil {
		return toolplane.Secrets{}, nil, fmt.Errorf("seal the token of connection %s: %w", c.ID, err)
	}
	c.TokenExpiresAt, c.UpdatedAt = tok.expiry, s.now()
	if len(tok.scopes) > 0 {
		c.Scopes = tok.scopes
	}
	ok, err := s.update(context.WithoutCancel(ctx), c, nil)
	if err != nil {
		return toolplane.Secrets{}, nil, fmt.Errorf("store the token of connection %s: %w", c.ID, err)
	}
	if !ok {
		fresh, err := s.current(ctx, c)
		if err != nil {
			return toolplane.Secrets{}, nil, err
		}
		return s.secrets(ctx, fresh)
	}
	s.mem.keepVersion(c, func(d *derived) { d.opened = &kept })
	return sec, c, nil
}

// storeRefusal stores what the provider's refusal (or failure) to renew
// c's token leaves, the lease released with it, and answers the call's
// refusal: a grant refused needs the person's new consent; a client
// secret kept in Vault refused is corrected there, and c stays as it is;
// anything else may pass, and a call may be tried again.
func (s *Broker) storeRefusal(ctx context.Context, c *toolplane.Connection, err error) error {
	if c.Config.Vault != nil {
		// What the provider refused may be Vault's, and is corrected
		// there: the next call reads Vault again rather than wait out
		// the cache.
		s.vaulted.Delete(c.ID)
	}
	var ge *grantError
	var pe *oauth.ProviderError
	switch {
	case c.Config.Vault != nil && (errors.As(err, &ge) || errors.As(err, &pe) && pe.Code == "invalid_client"):
		// The connection stays as it is: its client secret is Vault's.
		s.releaseLease(ctx, c)
		s.log.WarnContext(ctx, "provider refused the client secret kept in Vault", "connection", c.ID, "vault", c.Config.Vault.String(), "err", err)
		return &toolplane.ConnectionError{Code: toolplane.CodeConnectionExpired,
			Message: fmt.Sprintf("the provider of connection %s refused the client secret kept in Vault at %s; nothing was done. Ask an administrator to correct it there.", c.ID, c.Config.Vault)}
	case errors.As(err, &ge):
		c.State, c.Reason, c.UpdatedAt = toolplane.ConnectionNeedsReauth, "the provider refused the grant: "+ge.reason, s.now()
		if _, uerr := s.update(context.WithoutCancel(ctx), c, s.change(c, "connection.needs_reauth", "broker", c.Reason)); uerr != nil {
			return fmt.Errorf("store connection %s needing a new consent: %w", c.ID, uerr)
		}
		return checkUsable(c)
	default:
		s.releaseLease(ctx, c)
		s.log.WarnContext(ctx, "token renewal failed", "connection", c.ID, "err", err)
		return &toolplane.ConnectionError{Code: toolplane.CodeUnavailable,
			Message: fmt.Sprintf("the provider of connection %s did not renew its token; nothing was done. Try again later.", c.ID)}
	}
}

// releaseLease stores c with its refresh lease released and nothing else
// changed, so another call may renew at once. A release not stored is
// only logged: the lease runs out by itself.
func (s *Broker) releaseLease(ctx context.Context, c *toolplane.Connection) {
	if _, err := s.update(context.WithoutCancel(ctx), c, nil); err != nil {
		s.log.WarnContext(ctx, "refresh lease not released", "connection", c.ID, "err", err)
	}
}
