package connection

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
)

// The paths of the authorization a person completes in a browser, under
// the deployment's base URL.
const (
	StartPath    = "/v1/connections/oauth/start"
	CallbackPath = "/v1/connections/oauth/callback"
)

// An authorization goes through two single-use states. The start state is
// what a link names: only the person it is for, signed in to a browser
// session, can open it; they are sent to the provider, and their browser
// is given a nonce (a cookie the door sets) that the callback state is
// bound to. The callback state is the OAuth state parameter: it carries
// the PKCE verifier, the hash of that nonce and who started it, sealed,
// so a callback completed in another browser than the one that was sent
// to the provider (a stolen or replayed callback URL) is refused.

// pending is the sealed content of a callback state.
type pending struct {
	Verifier  string `json:"v"`
	NonceHash string `json:"n"`
	// StartedBy is the credential of the signed-in person who started
	// the authorization (an API key's ID, or "oidc:<issuer>:<subject>"):
	// the consent's record names it.
	StartedBy string `json:"s,omitempty"`
}

// Authorize starts the consent of the person by to the OAuth application
// app (a connection of kind oauth2_authorization_code held by the
// organization): it answers the link the person opens in their browser.
func (s *Admin) Authorize(ctx context.Context, by *toolplane.Credential, appID string) (string, error) {
	if by == nil || by.Kind != toolplane.CredentialPerson || by.Subject == "" {
		return "", toolplane.Refuse(by, ErrNotAuthorized, "connecting an account needs the person's own key")
	}
	app, err := s.cfg.Store.GetConnection(ctx, by.OrganizationID, appID)
	if err != nil {
		return "", err
	}
	if !isApp(app) {
		return "", fmt.Errorf("%w: connection %s is not an OAuth application people connect their accounts to", toolplane.ErrInvalid, appID)
	}
	if err := checkUsable(app); err != nil {
		return "", fmt.Errorf("%w: %v", toolplane.ErrConflict, err)
	}
	return s.startLink(ctx, app, by.Subject)
}

// isApp reports whether c is an organization's OAuth application: the
// row people's authorization-code connections are consented through.
func isApp(c *toolplane.Connection) bool {
	return c.Kind == toolplane.ConnectionAuthorizationCode && c.UserID == ""
}

// authorizeLink answers the link where the person a call is made for
// connects their account to the tool's provider, or "" when the call names
// no person or the organization holds no application for the provider.
func (s *core) authorizeLink(ctx context.Context, inv *toolplane.Invocation, d *toolplane.Definition) string {
	if inv.UserID == "" || s.cfg.BaseURL == "" {
		return ""
	}
	apps, _, err := s.cfg.Store.ListConnections(ctx, inv.OrganizationID, toolplane.ConnectionFilter{Provider: d.Connection, State: toolplane.ConnectionActive}, "", maxCandidates)
	if err != nil {
		s.log.WarnContext(ctx, "no authorization link: list connections", "provider", d.Connection, "err", err)
		return ""
	}
	for i := range apps {
		if isApp(&apps[i]) {
			link, err := s.startLink(ctx, &apps[i], inv.UserID)
			if err != nil {
				s.log.WarnContext(ctx, "no authorization link", "connection", apps[i].ID, "err", err)
				return ""
			}
			return link
		}
	}
	return ""
}

// startLink stores a start state for user and app and answers its link.
func (s *core) startLink(ctx context.Context, app *toolplane.Connection, user string) (string, error) {
	now := s.now()
	st := &toolplane.OAuthState{
		ID: rand.Text(), OrganizationID: app.OrganizationID, ConnectionID: app.ID, UserID: user,
		CreatedAt: now, ExpiresAt: now.Add(s.cfg.StateTTL),
	}
	if err := s.cfg.Store.InsertOAuthState(ctx, st); err != nil {
		return "", fmt.Errorf("store authorization state: %w", err)
	}
	return s.cfg.BaseURL + StartPath + "?" + url.Values{"state": {st.ID}}.Encode(), nil
}

// Start takes a start state (single use) for the person by, signed in to
// the browser that opened the link, and answers where the browser goes
// (the provider's consent page) and the nonce the door sets as the
// browser's cookie for the callback. A link for anyone else is refused
// with ErrNotYours and stays usable by its own person: a link forwarded,
// or shown to someone it was not meant for, connects nobody else's
// account.
func (s *Admin) Start(ctx context.Context, by *toolplane.Credential, startID string) (redirect, nonce string, err error) {
	if by == nil || by.Kind != toolplane.CredentialPerson || by.Subject == "" {
		return "", "", toolplane.Refuse(by, ErrNotYours, "connecting an account needs the person signed in")
	}
	st, err := s.cfg.Store.TakeOAuthState(ctx, startID, s.now())
	if err != nil {
		if errors.Is(err, toolplane.ErrNotFound) {
			return "", "", fmt.Errorf("%w: this authorization link was already used or has expired; ask for a new one", ErrState)
		}
		return "", "", fmt.Errorf("take authorization state: %w", err)
	}
	if len(st.Verifier) != 0 || st.ConnectionID == "" {
		return "", "", fmt.Errorf("%w: this is not an authorization link", ErrState)
	}
	if st.OrganizationID != by.OrganizationID || st.UserID != by.Subject {
		// Put back for its person, who may still open it; the take made
		// sure two people never both hold it meanwhile.
		if err := s.cfg.Store.InsertOAuthState(context.WithoutCancel(ctx), st); err != nil {
			s.log.WarnContext(ctx, "authorization link opened by another person is lost", "connection", st.ConnectionID, "err", err)
		}
		s.log.WarnContext(ctx, "authorization link opened by another person", "connection", st.ConnectionID, "by", by.ID)
		return "", "", toolplane.Refuse(by, ErrNotYours, "this authorization link is for another person; sign in as that person, or ask for a link of your own")
	}
	app, err := s.cfg.Store.GetConnection(ctx, st.OrganizationID, st.ConnectionID)
	if err != nil {
		return "", "", fmt.Errorf("read connection %s: %w", st.ConnectionID, err)
	}
	if err := checkUsable(app); err != nil {
		return "", "", fmt.Errorf("%w: %v", toolplane.ErrConflict, err)
	}
	appSec, err := s.open(app)
	if err != nil {
		return "", "", err
	}
	redirectURI := s.cfg.BaseURL + CallbackPath
	link, state, verifier, err := s.oauth.start(ctx, app, appSec, redirectURI)
	if err != nil {
		return "", "", err
	}
	nonce = rand.Text()
	sum := sha256.Sum256([]byte(nonce))
	plain, _ := json.Marshal(pending{Verifier: verifier, NonceHash: hex.EncodeToString(sum[:]), StartedBy: by.ID})
	now := s.now()
	cb := &toolplane.OAuthState{
		ID: state, OrganizationID: st.OrganizationID, ConnectionID: app.ID, UserID: st.UserID,
		RedirectURI: redirectURI, CreatedAt: now, ExpiresAt: now.Add(s.cfg.StateTTL),
	}
	if cb.Verifier, err = s.cfg.Keys.Seal(plain, secret.StateAAD(cb.ID)); err != nil {
		return "", "", fmt.Errorf("seal authorization state: %w", err)
	}
	if err := s.cfg.Store.InsertOAuthState(ctx, cb); err != nil {
		return "", "", fmt.Errorf("store authorization state: %w", err)
	}
	return link, nonce, nil
}

// Callback completes an authorization from the query of the provider's
// redirect (state, code, and iss when the provider sends it): it takes
// the state (single use), checks that the browser holds the nonce its
// start gave and that the answer comes from the application's issuer
// (RFC 9207), exchanges the code with the PKCE verifier, and stores the
// person's connection, active again if it needed a new consent.
func (s *Admin) Callback(ctx context.Context, back url.Values, nonce string) (*toolplane.Connection, error) {
	stateID, code := back.Get("state"), back.Get("code")
	st, err := s.cfg.Store.TakeOAuthState(ctx, stateID, s.now())
	if err != nil {
		if errors.Is(err, toolplane.ErrNotFound) {
			return nil, fmt.Errorf("%w: this authorization was already completed or has expired; start again", ErrState)
		}
		return nil, fmt.Errorf("take authorization state: %w", err)
	}
	if len(st.Verifier) == 0 || st.ConnectionID == "" {
		// A sign-in's state names no connection: it is not this
		// callback's to complete.
		return nil, fmt.Errorf("%w: the state is not a callback's", ErrState)
	}
	plain, err := s.cfg.Keys.Open(st.Verifier, secret.StateAAD(st.ID))
	if err != nil {
		return nil, fmt.Errorf("open authorization state: %w", err)
	}
	var p pending
	if err := json.Unmarshal(plain, &p); err != nil {
		return nil, fmt.Errorf("read authorization state: %w", err)
	}
	sum := sha256.Sum256([]byte(nonce))
	if subtle.ConstantTimeCompare([]byte(hex.EncodeToString(sum[:])), []byte(p.NonceHash)) != 1 {
		return nil, fmt.Errorf("%w: the authorization was started in another browser; open the authorization link again in this one", ErrState)
	}
	if code == "" {
		return nil, fmt.Errorf("%w: the provider sent no code", toolplane.ErrInvalid)
	}
	app, err := s.cfg.Store.GetConnection(ctx, st.OrganizationID, st.ConnectionID)
	if err != nil {
		return nil, fmt.Errorf("read connection %s: %w", st.ConnectionID, err)
	}
	if err := checkUsable(app); err != nil {
		return nil, fmt.Errorf("%w: %v", toolplane.ErrConflict, err)
	}
	if iss := back.Get("iss"); iss != "" && app.Config.Issuer != "" && iss != app.Config.Issuer {
		// A mix-up: the answer is another authorization server's.
		return nil, fmt.Errorf("%w: the authorization answer comes from another issuer than the application's; start again", ErrState)
	}
	appSec, err := s.open(app)
	if err != nil {
		return nil, err
	}
	tok, err := s.oauth.exchange(ctx, app, appSec, code, p.Verifier, st.RedirectURI)
	var ge *grantError
	switch {
	case errors.As(err, &ge):
		return nil, fmt.Errorf("%w: the provider refused the authorization: %s; start again", toolplane.ErrInvalid, ge.reason)
	case err != nil:
		return nil, fmt.Errorf("complete the authorization: %w", err)
	}
	startedBy := p.StartedBy
	if startedBy == "" {
		startedBy = st.UserID // started before starts were signed in
	}
	return s.storeConsent(ctx, app, st.UserID, startedBy, tok)
}

// storeConsent stores user's tokens on their connection through app: the
// one they hold (active again, with the scopes granted now), or a new one.
// The change names the person as its actor and, in its detail, the
// signed-in credential that started the consent (started_by).
func (s *Admin) storeConsent(ctx context.Context, app *toolplane.Connection, user, startedBy string, tok token) (*toolplane.Connection, error) {
	sec := toolplane.Secrets{AccessToken: tok.access, RefreshToken: tok.refresh}
	now := s.now()
	held, _, err := s.cfg.Store.ListConnections(ctx, app.OrganizationID, toolplane.ConnectionFilter{Provider: app.Provider, UserID: user}, "", maxCandidates)
	if err != nil {
		return nil, fmt.Errorf("list connections: %w", err)
	}
	for i := range held {
		c := &held[i]
		if c.Config.App != app.ID || c.State == toolplane.ConnectionRevoked {
			continue
		}
		if c.Secret, err = s.seal(c, sec); err != nil {
			return nil, err
		}
		c.State, c.Reason, c.Scopes, c.TokenExpiresAt, c.UpdatedAt = toolplane.ConnectionActive, "", tok.scopes, tok.expiry, now
		c.RefreshOwner, c.RefreshUntil = "", time.Time{}
		ok, err := s.update(ctx, c, s.consentChange(c, user, startedBy))
		if err != nil {
			return nil, fmt.Errorf("store connection %s: %w", c.ID, err)
		}
		if !ok {
			return nil, fmt.Errorf("%w: connection %s changed while it was authorized; authorize again", toolplane.ErrConflict, c.ID)
		}
		return shown(c), nil
	}
	cfg := app.Config
	cfg.App = app.ID
	c := &toolplane.Connection{
		ID: toolplane.NewID("con_"), OrganizationID: app.OrganizationID, Name: personalName(app.Name, user),
		Provider: app.Provider, Kind: toolplane.ConnectionAuthorizationCode, UserID: user,
		State: toolplane.ConnectionActive, Config: cfg, Scope: app.Scope, Scopes: tok.scopes,
		TokenExpiresAt: tok.expiry, Owner: user, CreatedAt: now, UpdatedAt: now,
	}
	if c.Secret, err = s.seal(c, sec); err != nil {
		return nil, err
	}
	if err := s.insert(ctx, c, s.consentChange(c, user, startedBy)); err != nil {
		return nil, fmt.Errorf("store connection: %w", err)
	}
	return shown(c), nil
}

// consentChange is the change record of a consent: the person's, started
// from the session of the credential startedBy.
func (s *Admin) consentChange(c *toolplane.Connection, user, startedBy string) *toolplane.Change {
	return s.changeWith(c, "connection.consent", user, "", map[string]any{"started_by": startedBy})
}

// missingScopes answers the scopes wanted that granted lacks: a person's
// connection whose application now asks for more needs a new consent.
func missingScopes(wanted, granted []string) []string {
	var out []string
	for _, w := range wanted {
		if !slices.Contains(granted, w) {
			out = append(out, w)
		}
	}
	return out
}

// personalName names a person's connection through app uniquely, within
// the grammar of names, without spelling the person's identifier.
func personalName(app, user string) string {
	sum := sha256.Sum256([]byte(user))
	name := app
	if len(name) > 50 {
		name = name[:50]
	}
	return name + "-" + hex.EncodeToString(sum[:])[:12]
}

// revokeAtProvider asks the provider to revoke the tokens of a connection
// just revoked here, in the background: the revocation here is what calls
// obey, and a provider that does not answer must not hold it up.
func (s *Admin) revokeAtProvider(ctx context.Context, c *toolplane.Connection, sealed []byte) {
	if c.Kind == toolplane.ConnectionStatic || len(sealed) == 0 {
		return
	}
	sec, err := secret.OpenSecrets(s.cfg.Keys, c.OrganizationID, c.ID, sealed)
	if err != nil {
		s.log.WarnContext(ctx, "provider not told of a revocation: secret does not open", "connection", c.ID, "err", err)
		return
	}
	tok := sec.RefreshToken
	if tok == "" {
		tok = sec.AccessToken
	}
	if tok == "" {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		appSec := sec
		if c.Config.Vault != nil {
			// The client's secret, to authenticate the revocation, is
			// Vault's.
			kept, err := s.fromVault(ctx, c)
			if err != nil {
				s.log.WarnContext(ctx, "provider not told of a revocation", "connection", c.ID, "err", err)
				return
			}
			appSec.ClientSecret = kept.ClientSecret
		}
		app, appSec, err := s.application(ctx, c, appSec)
		if err != nil {
			s.log.WarnContext(ctx, "provider not told of a revocation", "connection", c.ID, "err", err)
			return
		}
		if err := s.oauth.revoke(ctx, app, appSec, tok); err != nil {
			s.log.WarnContext(ctx, "provider did not revoke the token", "connection", c.ID, "err", err)
		}
	}()
}

// SweepStates removes authorizations nobody completed once they expired,
// a bounded batch a time, and answers how many it removed. A state taken
// after its expiry is refused anyway; the sweep only keeps the table from
// growing with links nobody opened.
func (s *Admin) SweepStates(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.cfg.Store.DeleteExpiredOAuthStates(ctx, s.now(), sweepBatch)
		total += n
		if err != nil || n < sweepBatch {
			return total, err
		}
	}
}

// sweepBatch bounds one delete of expired states.
const sweepBatch = 500
