package authserver

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/toolplane/toolplane"
)

// tokenAnswer is a successful token response (RFC 6749 section 5.1).
type tokenAnswer struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// form reads a form POST of the token, revocation or introspection
// endpoint, refusing repeated parameters (RFC 6749 section 3.2).
func form(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body is not a form")
		return false
	}
	for k, v := range r.PostForm {
		if len(v) > 1 {
			oauthError(w, http.StatusBadRequest, "invalid_request", "the parameter "+k+" is repeated")
			return false
		}
	}
	return true
}

// token answers POST /oauth/token: the authorization-code grant and the
// refresh-token grant, for public clients (client_id, no secret).
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if !form(w, r) {
		return
	}
	if _, _, ok := r.BasicAuth(); ok || r.PostFormValue("client_secret") != "" {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "clients here are public: send client_id, no secret")
		return
	}
	switch r.PostFormValue("grant_type") {
	case "authorization_code":
		s.codeGrant(w, r)
	case "refresh_token":
		s.refreshGrant(w, r)
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
	}
}

// invalidGrant is the one answer for a code or refresh token that is not
// good, whatever the reason: a caller learns nothing by probing.
func invalidGrant(w http.ResponseWriter, why string) {
	oauthError(w, http.StatusBadRequest, "invalid_grant", why)
}

func (s *Server) codeGrant(w http.ResponseWriter, r *http.Request) {
	ctx, now := r.Context(), s.cfg.Now()
	code, verifier, clientID := r.PostFormValue("code"), r.PostFormValue("code_verifier"), r.PostFormValue("client_id")
	if code == "" || clientID == "" {
		oauthError(w, http.StatusBadRequest, "invalid_request", "code and client_id are required")
		return
	}
	// The code is taken before anything else is checked: a code is good
	// for one attempt, whatever the attempt sends.
	c, err := s.cfg.Store.TakeOAuthCode(ctx, hash(code), now)
	switch {
	case errors.Is(err, toolplane.ErrReused):
		// RFC 6749 section 4.1.2: what the code issued is revoked.
		if _, rerr := s.cfg.Store.RevokeOAuthGrant(ctx, c.OrganizationID, c.GrantID, toolplane.OAuthRevokedCodeReplay, now,
			s.event(system(c.OrganizationID), "revoked", c.GrantID, toolplane.OAuthRevokedCodeReplay)); rerr != nil {
			s.log.ErrorContext(ctx, "grant of a replayed code not revoked", "grant", c.GrantID, "err", rerr)
		}
		invalidGrant(w, "the code was used already; what it issued is revoked")
		return
	case errors.Is(err, toolplane.ErrNotFound):
		invalidGrant(w, "the code is not valid")
		return
	case err != nil:
		s.unavailable(w, r, err)
		return
	}
	switch {
	case !now.Before(c.ExpiresAt):
		invalidGrant(w, "the code expired")
		return
	case c.ClientID != clientID:
		invalidGrant(w, "the code was issued to another client")
		return
	case r.PostFormValue("redirect_uri") != c.RedirectURI:
		invalidGrant(w, "redirect_uri is not the one the code was sent to")
		return
	case verifier == "":
		oauthError(w, http.StatusBadRequest, "invalid_request", "code_verifier is required (PKCE); the code is spent")
		return
	case len(verifier) < 43 || len(verifier) > 128 || subtle.ConstantTimeCompare([]byte(s256(verifier)), []byte(c.Challenge)) != 1:
		invalidGrant(w, "code_verifier does not match the code_challenge")
		return
	}
	g, err := s.cfg.Store.GetOAuthGrant(ctx, c.OrganizationID, c.GrantID)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	if !s.grantUsable(w, r, g) {
		return
	}
	s.issue(w, r, g, now)
}

// clientOff is the refusal of a grant whose client its organization
// revoked.
const clientOff = "the organization revoked the client"

// clientRevoked reports whether g's organization revoked g's client.
// Revoking a client revokes its grants in the same transaction, and a
// grant is stored only while its client is not revoked, so a live grant
// of a revoked client should not exist; the token endpoint checks all the
// same before it issues anything.
func (s *Server) clientRevoked(ctx context.Context, g *toolplane.OAuthGrant) (bool, error) {
	st, err := s.cfg.Store.GetOAuthClientSetting(ctx, g.OrganizationID, g.ClientID)
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read the client's setting: %w", err)
	}
	return !st.RevokedAt.IsZero(), nil
}

func (s *Server) refreshGrant(w http.ResponseWriter, r *http.Request) {
	ctx, now := r.Context(), s.cfg.Now()
	token, clientID := r.PostFormValue("refresh_token"), r.PostFormValue("client_id")
	if token == "" || clientID == "" {
		oauthError(w, http.StatusBadRequest, "invalid_request", "refresh_token and client_id are required")
		return
	}
	old, err := s.cfg.Store.GetOAuthRefreshToken(ctx, hash(token))
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		invalidGrant(w, "the refresh token is not valid")
		return
	case err != nil:
		s.unavailable(w, r, err)
		return
	}
	g, err := s.cfg.Store.GetOAuthGrant(ctx, old.OrganizationID, old.GrantID)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	switch {
	case g.ClientID != clientID:
		invalidGrant(w, "the refresh token was issued to another client")
		return
	case !g.Live(now):
		invalidGrant(w, "the consent was revoked or ended")
		return
	case s.stale(g, now):
		invalidGrant(w, staleSignIn)
		return
	case !now.Before(old.ExpiresAt):
		invalidGrant(w, "the refresh token expired")
		return
	}
	if !s.grantUsable(w, r, g) {
		return
	}
	next, secret := s.refreshToken(g, now)
	_, err = s.cfg.Store.RotateOAuthRefreshToken(ctx, old.Hash, next, now)
	switch {
	case errors.Is(err, toolplane.ErrReused):
		// Two holders of one refresh token: one of them stole it. The
		// family goes, so neither keeps access.
		if _, rerr := s.cfg.Store.RevokeOAuthGrant(ctx, g.OrganizationID, g.ID, toolplane.OAuthRevokedTokenReuse, now,
			s.event(system(g.OrganizationID), "revoked", g.ID, toolplane.OAuthRevokedTokenReuse)); rerr != nil {
			s.log.ErrorContext(ctx, "grant of a reused refresh token not revoked", "grant", g.ID, "err", rerr)
		}
		invalidGrant(w, "the refresh token was used already; the consent is revoked")
		return
	case err != nil:
		s.unavailable(w, r, err)
		return
	}
	s.answer(w, r, g, secret, now)
}

// staleSignIn is the refusal of a consent whose OpenID sign-in is past
// the bound.
const staleSignIn = "the sign-in through the identity provider behind this consent is older than this server allows; authorize again, so the person signs in anew"

// stale reports whether g rests on the OpenID provider's sign-in (no
// person key) older than Config.OIDCMaxAge at now: the roles it carries
// are the provider's of then, so its tokens are no longer refreshed.
// A person key's grant is checked against the key at every call, and is
// never stale.
func (s *Server) stale(g *toolplane.OAuthGrant, now time.Time) bool {
	end := signInEnds(g, s.cfg.OIDCMaxAge)
	return !end.IsZero() && !now.Before(end)
}

// refreshToken answers a new refresh token of g and its secret value. It
// ends with the grant, and, for a consent through the OpenID provider,
// when its sign-in reaches the bound, after which no refresh succeeds.
func (s *Server) refreshToken(g *toolplane.OAuthGrant, now time.Time) (*toolplane.OAuthRefreshToken, string) {
	secret := "tpr_" + rand.Text() + rand.Text()
	exp := now.Add(s.cfg.RefreshTTL)
	if g.ExpiresAt.Before(exp) {
		exp = g.ExpiresAt
	}
	if end := signInEnds(g, s.cfg.OIDCMaxAge); !end.IsZero() && end.Before(exp) {
		exp = end
	}
	return &toolplane.OAuthRefreshToken{Hash: hash(secret), OrganizationID: g.OrganizationID, GrantID: g.ID, CreatedAt: now, ExpiresAt: exp}, secret
}

// issue answers the first tokens of a grant.
func (s *Server) issue(w http.ResponseWriter, r *http.Request, g *toolplane.OAuthGrant, now time.Time) {
	if !g.Live(now) {
		invalidGrant(w, "the consent was revoked or ended")
		return
	}
	if s.stale(g, now) {
		invalidGrant(w, staleSignIn)
		return
	}
	next, secret := s.refreshToken(g, now)
	if err := s.cfg.Store.InsertOAuthRefreshToken(r.Context(), next); err != nil {
		s.unavailable(w, r, err)
		return
	}
	s.answer(w, r, g, secret, now)
}

// answer mints an access token of g and answers it with the refresh
// token's secret. The access token ends with the grant and, for a consent
// through the OpenID provider, when its sign-in reaches the bound, never
// an access TTL past it.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, g *toolplane.OAuthGrant, refresh string, now time.Time) {
	exp := now.Add(s.cfg.AccessTTL)
	if g.ExpiresAt.Before(exp) {
		exp = g.ExpiresAt
	}
	if end := signInEnds(g, s.cfg.OIDCMaxAge); !end.IsZero() && end.Before(exp) {
		exp = end
	}
	at, err := s.mint(r.Context(), g, now, exp)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, tokenAnswer{AccessToken: at, TokenType: "Bearer", ExpiresIn: int64(exp.Sub(now) / time.Second),
		RefreshToken: refresh, Scope: scope(g.Tools)})
}

func (s *Server) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	s.log.ErrorContext(r.Context(), "oauth token endpoint failed", "err", err)
	oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "try again")
}

// grantOf answers the grant a token (refresh or access) of clientID
// stands for, or nil when it is none of the client's.
func (s *Server) grantOf(ctx context.Context, token, clientID string) (*toolplane.OAuthGrant, error) {
	var org, id string
	if rt, err := s.cfg.Store.GetOAuthRefreshToken(ctx, hash(token)); err == nil {
		org, id = rt.OrganizationID, rt.GrantID
	} else if !errors.Is(err, toolplane.ErrNotFound) {
		return nil, err
	} else if c, err := s.verify.parse(ctx, token); err == nil {
		org, id = c.Org, c.Grant
	} else if !errors.Is(err, toolplane.ErrUnauthenticated) {
		return nil, err
	} else {
		return nil, nil
	}
	g, err := s.cfg.Store.GetOAuthGrant(ctx, org, id)
	if errors.Is(err, toolplane.ErrNotFound) || err == nil && g.ClientID != clientID {
		return nil, nil
	}
	return g, err
}

// revoke answers POST /oauth/revoke (RFC 7009): a refresh or access token
// of the client revokes its whole grant. An unknown token answers 200 as
// well, as the RFC asks.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	if !form(w, r) {
		return
	}
	ctx, token, clientID := r.Context(), r.PostFormValue("token"), r.PostFormValue("client_id")
	if token == "" || clientID == "" {
		oauthError(w, http.StatusBadRequest, "invalid_request", "token and client_id are required")
		return
	}
	g, err := s.grantOf(ctx, token, clientID)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	if g != nil {
		by := &toolplane.Credential{ID: CredentialPrefix + g.ID, OrganizationID: g.OrganizationID, Subject: g.ClientID}
		if _, err := s.cfg.Store.RevokeOAuthGrant(ctx, g.OrganizationID, g.ID, toolplane.OAuthRevokedByClient, s.cfg.Now(),
			s.event(by, "revoked", g.ID, toolplane.OAuthRevokedByClient)); err != nil {
			s.unavailable(w, r, err)
			return
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// introspect answers POST /oauth/introspect (RFC 7662) for the client the
// token was issued to: a token of another client, or none, is inactive.
func (s *Server) introspect(w http.ResponseWriter, r *http.Request) {
	if !form(w, r) {
		return
	}
	ctx, token, clientID := r.Context(), r.PostFormValue("token"), r.PostFormValue("client_id")
	inactive := map[string]any{"active": false}
	if token == "" || clientID == "" {
		writeJSON(w, http.StatusOK, inactive)
		return
	}
	now := s.cfg.Now()
	if c, err := s.verify.parse(ctx, token); err == nil {
		g, err := s.cfg.Store.GetOAuthGrant(ctx, c.Org, c.Grant)
		if err != nil && !errors.Is(err, toolplane.ErrNotFound) {
			s.unavailable(w, r, err)
			return
		}
		if err != nil || c.ClientID != clientID || !g.Live(now) || !now.Before(c.Expiry.Time()) {
			writeJSON(w, http.StatusOK, inactive)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"active": true, "token_type": "Bearer", "scope": c.Scope, "client_id": c.ClientID,
			"sub": c.Subject, "aud": c.Audience, "iss": c.Issuer, "exp": c.Expiry.Time().Unix(), "iat": c.IssuedAt.Time().Unix(),
			"jti": c.ID, "org": c.Org, "act": map[string]string{"sub": c.Act.Subject}})
		return
	}
	rt, err := s.cfg.Store.GetOAuthRefreshToken(ctx, hash(token))
	if err != nil {
		if !errors.Is(err, toolplane.ErrNotFound) {
			s.unavailable(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, inactive)
		return
	}
	g, err := s.cfg.Store.GetOAuthGrant(ctx, rt.OrganizationID, rt.GrantID)
	if err != nil || g.ClientID != clientID || !g.Live(now) || !rt.UsedAt.IsZero() || !now.Before(rt.ExpiresAt) {
		writeJSON(w, http.StatusOK, inactive)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"active": true, "token_type": "refresh_token", "scope": scope(g.Tools), "client_id": g.ClientID,
		"sub": g.Subject, "aud": []string{g.Resource}, "iss": s.cfg.Issuer, "exp": rt.ExpiresAt.Unix(), "org": g.OrganizationID,
		"act": map[string]string{"sub": g.AgentID}})
}

// AccessToken answers an access token of the organization's grant id,
// as the token endpoint would issue one: for a benchmark or an operator's
// tool that holds the server itself, never a door.
func (s *Server) AccessToken(ctx context.Context, org, id string) (string, error) {
	g, err := s.cfg.Store.GetOAuthGrant(ctx, org, id)
	if err != nil {
		return "", err
	}
	now := s.cfg.Now()
	if !g.Live(now) {
		return "", fmt.Errorf("grant %s: %w", id, toolplane.ErrInvalid)
	}
	exp := now.Add(s.cfg.AccessTTL)
	if g.ExpiresAt.Before(exp) {
		exp = g.ExpiresAt
	}
	return s.mint(ctx, g, now, exp)
}

// grantUsable answers whether g may be exchanged for tokens as the
// request asks: for the resource it was consented to, while its client
// is not revoked in its organization (the revocation revokes the grant
// too; this holds should a grant have escaped it). It has answered the
// client when not.
func (s *Server) grantUsable(w http.ResponseWriter, r *http.Request, g *toolplane.OAuthGrant) bool {
	if res := withoutListing(r.PostFormValue("resource")); res != "" && res != g.Resource {
		oauthError(w, http.StatusBadRequest, "invalid_target", "resource is not the one consented to")
		return false
	}
	revoked, err := s.clientRevoked(r.Context(), g)
	if err != nil {
		s.unavailable(w, r, err)
		return false
	}
	if revoked {
		invalidGrant(w, clientOff)
		return false
	}
	return true
}
