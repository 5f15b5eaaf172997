package connection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/invoke"
)

// Release answers the connection, with its secret, for one call the
// policy allowed (invoke.Broker). See the package documentation. The
// connection answered may be shared with other calls: it is read, never
// changed.
func (s *Broker) Release(ctx context.Context, r invoke.Release) (*toolplane.Released, error) {
	inv, d := r.Invocation, r.Tool
	c, err := s.pick(ctx, r, s.mem)
	if err != nil && isRefusal(err) {
		// What memory answered may lag a change another node just made
		// (a connection created, consented to, or widened): a refusal is
		// the store's to make. Memory only ever lags toward allowing
		// what was revoked within ConnectionSettle, which the revocation
		// waits out.
		c, err = s.pick(ctx, r, nil)
	}
	if err != nil {
		return nil, err
	}
	sec, released, err := s.secrets(ctx, c)
	if err != nil {
		return nil, s.consentLink(ctx, err, c, inv, d)
	}
	return &toolplane.Released{Connection: s.shownOnce(released), Secrets: sec}, nil
}

// isRefusal reports whether err is a *toolplane.ConnectionError. It is a
// function of its own so that the target errors.As needs is allocated
// only when there is an error to inspect, not on every release.
func isRefusal(err error) bool {
	var refused *toolplane.ConnectionError
	return errors.As(err, &refused)
}

// shownOnce answers shown(c), made once for each row memory keeps rather
// than on every call: the row kept is never changed, so neither is what
// it shows, and calls share it as they share the row. A row read afresh
// from the store replaces what was kept of its version.
func (s *Broker) shownOnce(c *toolplane.Connection) *toolplane.Connection {
	if d, ok := s.mem.version(c); ok && d.from == c {
		return d.shown
	}
	v := shown(c)
	s.mem.keepVersion(c, func(d *derived) { d.shown, d.from = v, c })
	return v
}

// consentLink answers err, linked to the person's new consent when it
// says c, a person's connection, needs one (connection_expired): the
// provider refused its grant on renewal, or the state is stored already.
func (s *Broker) consentLink(ctx context.Context, err error, c *toolplane.Connection, inv *toolplane.Invocation, d *toolplane.Definition) error {
	var ce *toolplane.ConnectionError
	if errors.As(err, &ce) && ce.Code == toolplane.CodeConnectionExpired && c.UserID != "" && ce.AuthorizationURL == "" {
		ce.AuthorizationURL = s.authorizeLink(ctx, inv, d)
	}
	return err
}

// pick answers the call's connection, checked against its scope and its
// application's consent, reading through mem (nil: the store).
func (s *Broker) pick(ctx context.Context, r invoke.Release, mem *memory) (*toolplane.Connection, error) {
	inv, d := r.Invocation, r.Tool
	c, err := s.chooseFor(ctx, mem, inv, d, r.Arguments)
	if err != nil {
		return nil, err
	}
	if err := s.checkScope(c, inv, d, r.Arguments); err != nil {
		return nil, err
	}
	if err := s.checkConsent(ctx, mem, c, inv, d); err != nil {
		return nil, err
	}
	return c, nil
}

// checkUsable refuses a connection that is not active: it waits for a
// new consent (connection_expired; consentLink links a person's to it),
// or it was revoked.
func checkUsable(c *toolplane.Connection) error {
	switch c.State {
	case toolplane.ConnectionActive:
		return nil
	case toolplane.ConnectionNeedsReauth:
		return &toolplane.ConnectionError{Code: toolplane.CodeConnectionExpired,
			Message: fmt.Sprintf("connection %s (%s) needs to be authorized again; nothing was done. Ask its owner to reconnect, then call again.", c.ID, c.Name)}
	default:
		return &toolplane.ConnectionError{Code: toolplane.CodeConnectionRevoked,
			Message: fmt.Sprintf("connection %s (%s) was revoked; nothing was done. It cannot be used again; an administrator or its owner must set up a new one.", c.ID, c.Name)}
	}
}

// secrets answers c's secrets in clear, the OAuth access token minted or
// refreshed when it is due, and c as it is stored after that.
func (s *Broker) secrets(ctx context.Context, c *toolplane.Connection) (toolplane.Secrets, *toolplane.Connection, error) {
	sec, err := s.material(ctx, c)
	if err != nil {
		return toolplane.Secrets{}, nil, err
	}
	switch c.Kind {
	case toolplane.ConnectionClientCredentials, toolplane.ConnectionAuthorizationCode:
		if sec.AccessToken == "" || !c.TokenExpiresAt.IsZero() && s.now().Add(s.cfg.RefreshBefore).After(c.TokenExpiresAt) {
			return s.renew(ctx, c, s.unexpired)
		}
	}
	return sec, c, nil
}

// unexpired reports whether c's access token sec serves a call as it is:
// it is not due to be renewed.
func (s *Broker) unexpired(c *toolplane.Connection, sec toolplane.Secrets) bool {
	return sec.AccessToken != "" && s.now().Add(s.cfg.RefreshBefore).Before(c.TokenExpiresAt)
}

// The broker releases connections, is told of refused credentials, and
// renews them.
var (
	_ invoke.Broker   = (*Broker)(nil)
	_ invoke.Refusals = (*Broker)(nil)
	_ invoke.Renewals = (*Broker)(nil)
)

// Renew answers the connection released for a call with its OAuth access
// token renewed, once the downstream refused the token released
// (invoke.Renewals): a provider may end a token before the expiry it
// stated, and a refresh then serves the call without asking the person
// anything. The renewal is the one the broker makes before expiry, under
// the same lease, so a refusal seen on many calls or nodes at once costs
// one refresh: a call that finds the stored token already other than the
// refused one takes it as it is. A connection that is not an OAuth one,
// or holds no refresh token to renew with, answers nil: the refusal
// stands. A provider refusing the refresh marks the connection as
// needing a new consent, and the answer links to it.
func (s *Broker) Renew(ctx context.Context, r invoke.Release, refused *toolplane.Released) (*toolplane.Released, error) {
	inv, d := r.Invocation, r.Tool
	c, err := s.cfg.Store.GetConnection(ctx, inv.OrganizationID, refused.Connection.ID)
	if err != nil {
		return nil, fmt.Errorf("read connection %s: %w", refused.Connection.ID, err)
	}
	if err := checkUsable(c); err != nil {
		return nil, s.consentLink(ctx, err, c, inv, d)
	}
	sec, err := s.material(ctx, c)
	if err != nil {
		return nil, err
	}
	switch c.Kind {
	case toolplane.ConnectionClientCredentials:
	case toolplane.ConnectionAuthorizationCode:
		if sec.RefreshToken == "" {
			return nil, nil
		}
	default:
		return nil, nil
	}
	stale := refused.Secrets.AccessToken
	other := func(_ *toolplane.Connection, sec toolplane.Secrets) bool {
		return sec.AccessToken != "" && sec.AccessToken != stale
	}
	renewed := c
	if !other(c, sec) {
		sec, renewed, err = s.renew(ctx, c, other)
	}
	if err != nil {
		return nil, s.consentLink(ctx, err, c, inv, d)
	}
	return &toolplane.Released{Connection: shown(renewed), Secrets: sec}, nil
}

// refusedReason is the reason stored on a person's connection whose token
// the service it was released for refused.
const refusedReason = "the service a call went to refused its access token"

// Refused is told that the downstream refused the credential released for
// a call, before acting on it (invoke.Refusals). The broker renews a token
// before it expires, so a token refused is one the service no longer
// takes (revoked, or short of the scopes it wants): a person's
// authorization-code connection still holding it is stored as needing a
// new consent, and the call's answer, connection_expired, links to that
// consent. Another connection is left to its administrator; its call
// answers connection_expired naming it. A connection revoked meanwhile
// answers connection_revoked.
func (s *Broker) Refused(ctx context.Context, r invoke.Release, released *toolplane.Connection) *toolplane.ConnectionError {
	inv, d := r.Invocation, r.Tool
	c, err := s.cfg.Store.GetConnection(ctx, inv.OrganizationID, released.ID)
	if err != nil {
		s.log.WarnContext(ctx, "refused credential not recorded: read the connection", "connection", released.ID, "err", err)
		return nil
	}
	if c.State == toolplane.ConnectionRevoked {
		var ce *toolplane.ConnectionError
		errors.As(checkUsable(c), &ce)
		return ce
	}
	personal := c.Kind == toolplane.ConnectionAuthorizationCode && c.UserID != ""
	if personal && c.State == toolplane.ConnectionActive && c.Version == released.Version {
		// Still the token refused: a renewed one (another version) may
		// be taken, and is not thrown away.
		c.State, c.Reason, c.UpdatedAt = toolplane.ConnectionNeedsReauth, refusedReason, s.now()
		c.RefreshOwner, c.RefreshUntil = "", time.Time{}
		if _, err := s.update(ctx, c, s.change(c, "connection.needs_reauth", "broker", refusedReason)); err != nil {
			s.log.WarnContext(ctx, "refused credential not recorded", "connection", c.ID, "err", err)
		}
	}
	ce := &toolplane.ConnectionError{Code: toolplane.CodeConnectionExpired,
		Message: fmt.Sprintf("the service behind %s refused the credential of connection %s (%s); nothing was done. Ask its owner to reconnect, then call again.", d.Name, c.ID, c.Name)}
	if personal {
		ce.AuthorizationURL = s.authorizeLink(ctx, inv, d)
	}
	return ce
}
