package connection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/oauth"
	"github.com/toolplane/toolplane/secret"
)

// ChoiceArgument is the argument a tool declares when the model may choose
// among several connections of its provider: the connection's ID, never
// a credential.
const ChoiceArgument = "connection_id"

// connectionIDs is the shape of a connection's ID (see toolplane.NewID).
var connectionIDs = regexp.MustCompile(`^con_[0-9a-z]{1,64}$`)

// maxCandidates bounds how many connections of one provider a call looks
// through; an organization with more must have the model choose.
const maxCandidates = 50

// Release answers the connection, with its secret, for one call the
// policy allowed (invoke.Broker). See the package documentation. The
// connection answered may be shared with other calls: it is read, never
// changed.
func (s *Service) Release(ctx context.Context, r invoke.Release) (*toolplane.Released, error) {
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
func (s *Service) shownOnce(c *toolplane.Connection) *toolplane.Connection {
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
func (s *Service) consentLink(ctx context.Context, err error, c *toolplane.Connection, inv *toolplane.Invocation, d *toolplane.Definition) error {
	var ce *toolplane.ConnectionError
	if errors.As(err, &ce) && ce.Code == toolplane.CodeConnectionExpired && c.UserID != "" && ce.AuthorizationURL == "" {
		ce.AuthorizationURL = s.authorizeLink(ctx, inv, d)
	}
	return err
}

// pick answers the call's connection, checked against its scope and its
// application's consent, reading through mem (nil: the store).
func (s *Service) pick(ctx context.Context, r invoke.Release, mem *memory) (*toolplane.Connection, error) {
	inv, d := r.Invocation, r.Tool
	c, err := s.choose(ctx, mem, inv, d, r.Arguments)
	if err != nil {
		return nil, err
	}
	if err := s.admits(c, inv, d, r.Arguments); err != nil {
		return nil, err
	}
	if err := s.consented(ctx, mem, c, inv, d); err != nil {
		return nil, err
	}
	return c, nil
}

// choose picks the call's connection among the organization's connections
// of the tool's provider: the one the model named by connection_id, or
// else the person's own (for a call made for a person), or else the
// organization's shared one, when there is exactly one usable.
func (s *Service) choose(ctx context.Context, mem *memory, inv *toolplane.Invocation, d *toolplane.Definition, args any) (*toolplane.Connection, error) {
	org, provider, user := inv.OrganizationID, d.Connection, inv.UserID
	if id, ok := chosen(args); ok {
		c, err := mem.get(ctx, s.cfg.Store, org, id)
		switch {
		case errors.Is(err, toolplane.ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("read connection %s: %w", id, err)
		case c.Provider == provider && usableBy(c, user):
			return c, usable(c, s.authorizeLink(ctx, inv, d))
		}
		// The model reads the refusal as the platform's words: the value
		// it sent is repeated only when it has a connection ID's shape,
		// never as text of its choosing.
		named := "the connection_id given"
		if connectionIDs.MatchString(id) {
			named = id
		}
		return nil, &toolplane.ConnectionError{Code: toolplane.CodeConnectionRequired,
			Message: fmt.Sprintf("%s is not a connection of %s this call may use; call again with one of the connection_id values you were shown, or without connection_id", named, provider)}
	}
	// Revoked connections stay in the store for good, and an
	// organization rotating a connection piles them up: the ones a call
	// may use are read by state, never from a page where revoked ones
	// could crowd them out.
	//
	// A call made for no person takes the one active shared connection
	// whatever waits beside it, so the connections waiting for a new
	// consent are read only when none is active: one read per call, not
	// two. A person's own connection waiting for consent must be seen
	// whenever the call is a person's, since it keeps the shared one
	// from being borrowed.
	states := []toolplane.ConnectionState{toolplane.ConnectionActive, toolplane.ConnectionNeedsReauth}
	if user == "" {
		states = states[:1]
	}
	all, err := s.candidates(ctx, mem, org, provider, states...)
	if err != nil {
		return nil, err
	}
	personal := user != "" && hasApp(all)
	candidates := func(all []toolplane.Connection) []*toolplane.Connection {
		var own, shared []*toolplane.Connection
		for i := range all {
			c := &all[i]
			switch {
			case c.UserID != "" && c.UserID == user:
				own = append(own, c)
			case c.UserID == "" && c.Kind != toolplane.ConnectionAuthorizationCode:
				shared = append(shared, c)
			}
		}
		if len(own) > 0 || personal {
			// A person's own connection serves their calls; where the
			// provider takes a person's consent, their calls never
			// borrow the organization's.
			return own
		}
		return shared
	}
	var active, waiting []*toolplane.Connection
	for _, c := range candidates(all) {
		if c.State == toolplane.ConnectionActive {
			active = append(active, c)
		} else {
			waiting = append(waiting, c)
		}
	}
	if user == "" && len(active) == 0 {
		more, err := s.candidates(ctx, mem, org, provider, toolplane.ConnectionNeedsReauth)
		if err != nil {
			return nil, err
		}
		waiting = candidates(more)
	}
	switch len(active) {
	case 1:
		return active[0], nil
	case 0:
		if len(waiting) > 0 {
			return nil, usable(waiting[0], s.authorizeLink(ctx, inv, d))
		}
		// Nothing usable: a revoked connection, when the call would
		// have had one, says why better than none.
		revoked, err := s.candidates(ctx, mem, org, provider, toolplane.ConnectionRevoked)
		if err != nil {
			return nil, err
		}
		if cs := candidates(revoked); len(cs) > 0 {
			return nil, usable(cs[len(cs)-1], "")
		}
		return nil, &toolplane.ConnectionError{Code: toolplane.CodeConnectionRequired,
			Message:          fmt.Sprintf("%s needs a connection to %s, and none is set up for this call; nothing was done. Ask the user to connect, then call again.", d.Name, provider),
			AuthorizationURL: s.authorizeLink(ctx, inv, d)}
	}
	ids := make([]string, 0, len(active))
	for _, c := range active {
		ids = append(ids, c.ID+" ("+c.Name+")")
	}
	return nil, &toolplane.ConnectionError{Code: toolplane.CodeConnectionAmbiguous,
		Message: fmt.Sprintf("%s can use several connections to %s: %s. Call again with connection_id set to the one meant; nothing was done.", d.Name, provider, strings.Join(ids, ", "))}
}

// candidates answers the organization's connections of provider in the
// states given, at most maxCandidates of each.
func (s *Service) candidates(ctx context.Context, mem *memory, org, provider string, states ...toolplane.ConnectionState) ([]toolplane.Connection, error) {
	var all []toolplane.Connection
	for _, st := range states {
		cs, _, err := mem.list(ctx, s.cfg.Store, org, listQuery{provider: provider, state: st}, maxCandidates)
		if err != nil {
			return nil, fmt.Errorf("list connections of %s: %w", provider, err)
		}
		if all == nil {
			all = cs // shared with memory, and clipped: appending copies
		} else {
			all = append(all, cs...)
		}
	}
	return all, nil
}

// chosen answers the connection_id argument, when the call names one.
func chosen(args any) (string, bool) {
	m, ok := args.(map[string]any)
	if !ok {
		return "", false
	}
	id, ok := m[ChoiceArgument].(string)
	return id, ok && id != ""
}

// usableBy reports whether a call made for user (none: "") may use c: a
// shared connection serves every call, a person's own only theirs, and an
// OAuth application's row none.
func usableBy(c *toolplane.Connection, user string) bool {
	if c.UserID != "" {
		return c.UserID == user
	}
	return c.Kind != toolplane.ConnectionAuthorizationCode
}

// hasApp reports whether the provider takes a person's consent: the
// organization holds its OAuth application.
func hasApp(cs []toolplane.Connection) bool {
	return slices.ContainsFunc(cs, func(c toolplane.Connection) bool {
		return c.Kind == toolplane.ConnectionAuthorizationCode && c.UserID == "" && c.State == toolplane.ConnectionActive
	})
}

// usable answers the refusal of a connection that is not active.
func usable(c *toolplane.Connection, link string) error {
	switch c.State {
	case toolplane.ConnectionActive:
		return nil
	case toolplane.ConnectionNeedsReauth:
		e := &toolplane.ConnectionError{Code: toolplane.CodeConnectionExpired,
			Message: fmt.Sprintf("connection %s (%s) needs to be authorized again; nothing was done. Ask its owner to reconnect, then call again.", c.ID, c.Name)}
		if c.UserID != "" {
			e.AuthorizationURL = link
		}
		return e
	default:
		return &toolplane.ConnectionError{Code: toolplane.CodeConnectionRevoked,
			Message: fmt.Sprintf("connection %s (%s) was revoked; nothing was done. It cannot be used again; an administrator or its owner must set up a new one.", c.ID, c.Name)}
	}
}

// admits checks the connection's scope for the call, a second enforcement
// point beside the policy: the tool, the agent, the amount, and the host
// an HTTP tool sends to.
func (s *Service) admits(c *toolplane.Connection, inv *toolplane.Invocation, d *toolplane.Definition, args any) error {
	deny := func(format string, a ...any) error {
		return &toolplane.ConnectionError{Code: toolplane.CodeDenied, Message: fmt.Sprintf(format, a...) + "; nothing was done"}
	}
	sc := c.Scope
	if len(sc.Tools) > 0 && !slices.ContainsFunc(sc.Tools, func(p string) bool { ok, _ := path.Match(p, d.Name); return ok }) {
		return deny("connection %s may not be used by %s", c.ID, d.Name)
	}
	if len(sc.Agents) > 0 && !slices.Contains(sc.Agents, inv.AgentID) {
		return deny("connection %s may not be used by agent %s", c.ID, inv.AgentID)
	}
	if sc.MaxAmountCentsPerCall > 0 {
		name := sc.AmountArgument
		if name == "" {
			name = "amount_cents"
		}
		if m, ok := args.(map[string]any); ok {
			if v, present := m[name]; present {
				n, ok := amount(v)
				if !ok || n.Cmp(big.NewInt(sc.MaxAmountCentsPerCall)) > 0 {
					return deny("%s is above the %d cents connection %s allows per call", name, sc.MaxAmountCentsPerCall, c.ID)
				}
			}
		}
	}
	if h := d.Binding.HTTP; h != nil {
		sent := h.URL
		if toolplane.RelativeURL(h.URL) {
			// A path is sent under the connection's base URL.
			if sent = c.Config.BaseURL; sent == "" {
				return deny("%s's URL is a path, and connection %s has no base_url to send it under", d.Name, c.ID)
			}
		}
		host, ok := s.hosts.host(sent)
		if !ok {
			return deny("the tool's URL does not parse")
		}
		p, err := s.egress(c)
		if err != nil {
			return err
		}
		if err := p.CheckHost(host); err != nil {
			return deny("%s sends to %s, which connection %s does not allow", d.Name, host, c.ID)
		}
	}
	return nil
}

// egress answers c's compiled egress rules, compiling them once per
// connection version: a policy carries a transport of its own, too much
// to build on every call for one host check.
func (s *Service) egress(c *toolplane.Connection) (*egress.Policy, error) {
	if d, ok := s.mem.version(c); ok && d.policy != nil {
		return d.policy, nil
	}
	p, err := egress.Compile(c.Config.Egress)
	if err != nil {
		return nil, fmt.Errorf("connection %s: egress rules: %w", c.ID, err)
	}
	s.mem.keepVersion(c, func(d *derived) { d.policy = p })
	return p, nil
}

// amount reads an argument as a whole number of cents.
func amount(v any) (*big.Int, bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case float64:
		s = fmt.Sprintf("%.0f", x)
		if float64(int64(x)) != x {
			return nil, false
		}
	case int:
		return big.NewInt(int64(x)), true
	case int64:
		return big.NewInt(x), true
	case string:
		s = x
	default:
		return nil, false
	}
	n, ok := new(big.Int).SetString(s, 10)
	return n, ok
}

// secrets answers c's secrets in clear, the OAuth access token minted or
// refreshed when it is due, and c as it is stored after that.
func (s *Service) secrets(ctx context.Context, c *toolplane.Connection) (toolplane.Secrets, *toolplane.Connection, error) {
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
func (s *Service) unexpired(c *toolplane.Connection, sec toolplane.Secrets) bool {
	return sec.AccessToken != "" && s.now().Add(s.cfg.RefreshBefore).Before(c.TokenExpiresAt)
}

// open answers c's secrets, opening its seal once per connection version.
func (s *Service) open(c *toolplane.Connection) (toolplane.Secrets, error) {
	if d, ok := s.mem.version(c); ok && d.opened != nil {
		return *d.opened, nil
	}
	sec, err := secret.OpenSecrets(s.cfg.Keys, c.OrganizationID, c.ID, c.Secret)
	if err != nil {
		return toolplane.Secrets{}, fmt.Errorf("open the secret of connection %s: %w", c.ID, err)
	}
	s.mem.keepVersion(c, func(d *derived) { d.opened = &sec })
	return sec, nil
}

// refreshLease is how long a node holds the right to refresh a
// connection's token; a node that dies holding it delays the next refresh
// by at most this long.
const refreshLease = 30 * time.Second

// renew mints (client credentials) or refreshes (authorization code) c's
// access token, once across nodes: the node whose compare-and-swap takes
// the refresh lease asks the provider; any other waits for its answer and
// reads the new token from the store, until renewed says the stored token
// is one the renewal was for.
func (s *Service) renew(ctx context.Context, c *toolplane.Connection, renewed func(*toolplane.Connection, toolplane.Secrets) bool) (toolplane.Secrets, *toolplane.Connection, error) {
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
		fresh, err := s.cfg.Store.GetConnection(ctx, c.OrganizationID, c.ID)
		if err != nil {
			return toolplane.Secrets{}, nil, fmt.Errorf("read connection %s: %w", c.ID, err)
		}
		if err := usable(fresh, ""); err != nil {
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
// holds, and stores it (or the connection's need of a new consent).
func (s *Service) refresh(ctx context.Context, c *toolplane.Connection) (toolplane.Secrets, *toolplane.Connection, error) {
	sec, err := s.material(ctx, c)
	if err != nil {
		return toolplane.Secrets{}, nil, err
	}
	app := c
	if c.Kind == toolplane.ConnectionAuthorizationCode && c.Config.App != "" {
		if app, err = s.cfg.Store.GetConnection(ctx, c.OrganizationID, c.Config.App); err != nil {
			return toolplane.Secrets{}, nil, fmt.Errorf("read the application of connection %s: %w", c.ID, err)
		}
	}
	appSec := sec
	if app != c {
		if appSec, err = s.open(app); err != nil {
			return toolplane.Secrets{}, nil, err
		}
	}
	var tok token
	if c.Kind == toolplane.ConnectionClientCredentials {
		tok, err = s.oauth.clientCredentials(ctx, c, sec)
	} else {
		tok, err = s.oauth.refresh(ctx, app, appSec, sec.RefreshToken)
	}
	c.RefreshOwner, c.RefreshUntil = "", time.Time{}
	var ge *grantError
	if err != nil && c.Config.Vault != nil {
		// What the provider refused may be Vault's, and is corrected
		// there: the next call reads Vault again rather than wait out
		// the cache.
		s.vaulted.Delete(c.ID)
	}
	var pe *oauth.ProviderError
	switch {
	case c.Config.Vault != nil && (errors.As(err, &ge) || errors.As(err, &pe) && pe.Code == "invalid_client"):
		// The connection stays as it is: its client secret is Vault's.
		if _, uerr := s.update(context.WithoutCancel(ctx), c, nil); uerr != nil {
			s.log.WarnContext(ctx, "refresh lease not released", "connection", c.ID, "err", uerr)
		}
		s.log.WarnContext(ctx, "provider refused the client secret kept in Vault", "connection", c.ID, "vault", c.Config.Vault.String(), "err", err)
		return toolplane.Secrets{}, nil, &toolplane.ConnectionError{Code: toolplane.CodeConnectionExpired,
			Message: fmt.Sprintf("the provider of connection %s refused the client secret kept in Vault at %s; nothing was done. Ask an administrator to correct it there.", c.ID, c.Config.Vault)}
	case errors.As(err, &ge):
		c.State, c.Reason, c.UpdatedAt = toolplane.ConnectionNeedsReauth, "the provider refused the grant: "+ge.reason, s.now()
		if _, uerr := s.update(context.WithoutCancel(ctx), c, s.change(c, "connection.needs_reauth", "broker", c.Reason)); uerr != nil {
			return toolplane.Secrets{}, nil, fmt.Errorf("store connection %s needing a new consent: %w", c.ID, uerr)
		}
		return toolplane.Secrets{}, nil, usable(c, "")
	case err != nil:
		if _, uerr := s.update(context.WithoutCancel(ctx), c, nil); uerr != nil {
			s.log.WarnContext(ctx, "refresh lease not released", "connection", c.ID, "err", uerr)
		}
		s.log.WarnContext(ctx, "token renewal failed", "connection", c.ID, "err", err)
		return toolplane.Secrets{}, nil, &toolplane.ConnectionError{Code: toolplane.CodeUnavailable,
			Message: fmt.Sprintf("the provider of connection %s did not renew its token; nothing was done. Try again later.", c.ID)}
	}
	sec.AccessToken = tok.access
	if tok.refresh != "" {
		sec.RefreshToken = tok.refresh
	}
	// What Vault keeps is never sealed here too: only the token.
	kept := minted(c, sec)
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
		// Revoked or changed while the provider answered: the stored
		// connection decides.
		fresh, err := s.cfg.Store.GetConnection(ctx, c.OrganizationID, c.ID)
		if err != nil {
			return toolplane.Secrets{}, nil, fmt.Errorf("read connection %s: %w", c.ID, err)
		}
		if err := usable(fresh, ""); err != nil {
			return toolplane.Secrets{}, nil, err
		}
		return s.secrets(ctx, fresh)
	}
	s.mem.keepVersion(c, func(d *derived) { d.opened = &kept })
	return sec, c, nil
}

// consented refuses a person's connection whose application now asks for
// scopes the person did not grant: scope creep is never absorbed silently;
// the person consents again.
func (s *Service) consented(ctx context.Context, mem *memory, c *toolplane.Connection, inv *toolplane.Invocation, d *toolplane.Definition) error {
	if c.Kind != toolplane.ConnectionAuthorizationCode || c.Config.App == "" {
		return nil
	}
	app, err := mem.get(ctx, s.cfg.Store, c.OrganizationID, c.Config.App)
	if err != nil {
		return fmt.Errorf("read the application of connection %s: %w", c.ID, err)
	}
	if err := usable(app, ""); err != nil {
		return err
	}
	if missing := missingScopes(app.Config.RequestScope, c.Scopes); len(missing) > 0 {
		return &toolplane.ConnectionError{Code: toolplane.CodeConnectionExpired,
			Message:          fmt.Sprintf("connection %s must be authorized again for the scopes %s; nothing was done. Ask the user to reconnect, then call again.", c.ID, strings.Join(missing, " ")),
			AuthorizationURL: s.authorizeLink(ctx, inv, d)}
	}
	return nil
}

// secretSeal seals sec as c's secret.
func secretSeal(s *Service, c *toolplane.Connection, sec toolplane.Secrets) ([]byte, error) {
	b, err := secret.SealSecrets(s.cfg.Keys, c.OrganizationID, c.ID, sec)
	if err != nil {
		return nil, fmt.Errorf("seal the secret of connection %s: %w", c.ID, err)
	}
	return b, nil
}

// The broker is told of refused credentials, and renews them.
var (
	_ invoke.Refusals = (*Service)(nil)
	_ invoke.Renewals = (*Service)(nil)
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
func (s *Service) Renew(ctx context.Context, r invoke.Release, refused *toolplane.Released) (*toolplane.Released, error) {
	inv, d := r.Invocation, r.Tool
	c, err := s.cfg.Store.GetConnection(ctx, inv.OrganizationID, refused.Connection.ID)
	if err != nil {
		return nil, fmt.Errorf("read connection %s: %w", refused.Connection.ID, err)
	}
	if err := usable(c, ""); err != nil {
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
func (s *Service) Refused(ctx context.Context, r invoke.Release, released *toolplane.Connection) *toolplane.ConnectionError {
	inv, d := r.Invocation, r.Tool
	c, err := s.cfg.Store.GetConnection(ctx, inv.OrganizationID, released.ID)
	if err != nil {
		s.log.WarnContext(ctx, "refused credential not recorded: read the connection", "connection", released.ID, "err", err)
		return nil
	}
	if c.State == toolplane.ConnectionRevoked {
		var ce *toolplane.ConnectionError
		errors.As(usable(c, ""), &ce)
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
