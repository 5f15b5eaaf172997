package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/toolplane/toolplane"
)

// Start begins an authorization code grant: it answers the URL the person
// consents at, the state the provider hands back to the redirect URI, and
// the PKCE verifier Exchange needs. The challenge is S256, the only method
// used; the resource indicator is sent when the Config has one. State and
// verifier are fresh random values of 256 bits each: the caller keeps both
// (the verifier sealed) until the callback arrives. Scopes, when nil, are
// cfg.Scopes. cfg.AuthorizeURL must be set (by the connection or by
// Metadata.Apply); Start builds the URL and sends nothing.
func Start(cfg Config, redirectURI string, scopes []string) (authURL, state, verifier string) {
	if scopes == nil {
		scopes = cfg.Scopes
	}
	// Both are oauth2's 32 random bytes, base64url: RFC 7636 wants a
	// verifier of 43 to 128 characters (rand.Text has 26), and the state
	// keeps the same documented form.
	state, verifier = oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
	conf := cfg.oauth2(redirectURI, scopes)
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	if cfg.Resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", cfg.Resource))
	}
	return conf.AuthCodeURL(state, opts...), state, verifier
}

// Exchange trades the code the provider handed to redirectURI for tokens,
// proving with verifier that the same client started the grant. A code
// the provider refuses (spent, expired, or its verifier wrong) answers a
// *GrantError.
func Exchange(ctx context.Context, cfg Config, code, verifier, redirectURI string) (*Token, error) {
	const op = "exchange"
	if err := cfg.check(op, cfg.TokenURL); err != nil {
		return nil, err
	}
	if code == "" || verifier == "" {
		return nil, fmt.Errorf("oauth %s: %w: code and verifier are required", op, toolplane.ErrInvalid)
	}
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(verifier)}
	if cfg.Resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", cfg.Resource))
	}
	t, err := cfg.oauth2(redirectURI, nil).Exchange(cfg.context(ctx), code, opts...)
	if err != nil {
		return nil, classify(op, err, code, verifier, cfg.ClientSecret.Reveal())
	}
	return token(t, cfg.Scopes), nil
}

// ClientCredentials obtains an access token for the client itself (the
// client credentials grant). Scopes, when nil, are cfg.Scopes.
func ClientCredentials(ctx context.Context, cfg Config, scopes []string) (*Token, error) {
	const op = "client_credentials"
	if err := cfg.check(op, cfg.TokenURL); err != nil {
		return nil, err
	}
	if scopes == nil {
		scopes = cfg.Scopes
	}
	conf := cfg.clientCredentials(scopes, nil)
	t, err := conf.Token(cfg.context(ctx))
	if err != nil {
		return nil, classify(op, err, cfg.ClientSecret.Reveal())
	}
	return token(t, scopes), nil
}

// Refresh obtains a new access token from a refresh token. The answer's
// RefreshToken is the one to keep: a new one when the provider rotates
// them, refreshToken itself when it issued none. A refresh token the
// provider refuses (revoked, expired) answers a *GrantError; a provider
// that fails or cannot be reached, a *TransientError, and the refresh
// token is still good.
func Refresh(ctx context.Context, cfg Config, refreshToken toolplane.SecretString) (*Token, error) {
	const op = "refresh"
	if err := cfg.check(op, cfg.TokenURL); err != nil {
		return nil, err
	}
	if refreshToken == "" {
		return nil, fmt.Errorf("oauth %s: %w: no refresh token", op, toolplane.ErrInvalid)
	}
	// x/oauth2's own refresh sends no parameter beyond the refresh token,
	// and RFC 8707 asks for the resource on every token request. The
	// client credentials request lets its grant type be replaced, and
	// otherwise is the same POST with the same client authentication.
	params := url.Values{
		"grant_type":    {"refresh_token"},
		"refresh_token": {refreshToken.Reveal()},
	}
	t, err := cfg.clientCredentials(nil, params).Token(cfg.context(ctx))
	if err != nil {
		return nil, classify(op, err, refreshToken.Reveal(), cfg.ClientSecret.Reveal())
	}
	tk := token(t, nil)
	if tk.RefreshToken == "" {
		tk.RefreshToken = refreshToken
	}
	return tk, nil
}

// Revoke asks the provider to revoke token (RFC 7009), a refresh token or
// an access token; revoking a refresh token ends the grant. A token the
// provider does not know counts as revoked. Without a RevokeURL it answers
// ErrNoRevocation.
func Revoke(ctx context.Context, cfg Config, token toolplane.SecretString) error {
	const op = "revoke"
	if cfg.RevokeURL == "" {
		return ErrNoRevocation
	}
	if err := cfg.check(op, cfg.RevokeURL); err != nil {
		return err
	}
	sent := []string{token.Reveal(), cfg.ClientSecret.Reveal()}
	form := url.Values{"token": {token.Reveal()}}
	method := cfg.authMethod()
	if method != AuthSecretBasic {
		form.Set("client_id", cfg.ClientID)
	}
	if method == AuthSecretPost {
		form.Set("client_secret", cfg.ClientSecret.Reveal())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.RevokeURL, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("oauth %s: %w: revocation endpoint not a URL", op, ErrConfig)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if method == AuthSecretBasic {
		// RFC 6749 section 2.3.1: both are form-encoded before Basic.
		req.SetBasicAuth(url.QueryEscape(cfg.ClientID), url.QueryEscape(cfg.ClientSecret.Reveal()))
	}
	resp, err := cfg.HTTPClient.Do(req)
	if err != nil {
		return transportError(op, err, sent)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return transportError(op, err, sent)
	}
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	var e struct {
		Code        string `json:"error"`
		Description string `json:"error_description"`
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct == "application/json" {
		json.Unmarshal(body, &e) // an unreadable error is classified by status
	}
	return refusal(op, resp.StatusCode, resp.Header, e.Code, e.Description, sent)
}

// check refuses a Config that cannot make the request: no endpoint, no
// client id, or no HTTP client to carry it.
func (c *Config) check(op, endpoint string) error {
	switch {
	case endpoint == "":
		return fmt.Errorf("oauth %s: %w: no endpoint", op, ErrConfig)
	case c.ClientID == "":
		return fmt.Errorf("oauth %s: %w: no client id", op, ErrConfig)
	case c.HTTPClient == nil:
		return fmt.Errorf("oauth %s: %w: no HTTP client", op, ErrConfig)
	}
	switch c.authMethod() {
	case AuthSecretBasic, AuthSecretPost, AuthNone:
	default:
		return fmt.Errorf("oauth %s: %w: client authentication method %q not supported", op, ErrConfig, c.AuthMethod)
	}
	return nil
}

// context answers ctx carrying the injected HTTP client, where x/oauth2
// looks for it.
func (c *Config) context(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, c.HTTPClient)
}

// style maps the client authentication method onto x/oauth2's. It is
// never left to detection: detecting retries a refused request the other
// way, and the second refusal (invalid_client) would hide the first
// (invalid_grant).
func (c *Config) style() oauth2.AuthStyle {
	if c.authMethod() == AuthSecretBasic {
		return oauth2.AuthStyleInHeader
	}
	return oauth2.AuthStyleInParams
}

// secret answers the secret x/oauth2 sends: none for a public client.
func (c *Config) secret() string {
	if c.authMethod() == AuthNone {
		return ""
	}
	return c.ClientSecret.Reveal()
}

func (c *Config) oauth2(redirectURI string, scopes []string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     c.ClientID,
		ClientSecret: c.secret(),
		Endpoint: oauth2.Endpoint{
			AuthURL:   c.AuthorizeURL,
			TokenURL:  c.TokenURL,
			AuthStyle: c.style(),
		},
		RedirectURL: redirectURI,
		Scopes:      scopes,
	}
}

func (c *Config) clientCredentials(scopes []string, params url.Values) *clientcredentials.Config {
	if c.Resource != "" {
		if params == nil {
			params = url.Values{}
		}
		params.Set("resource", c.Resource)
	}
	return &clientcredentials.Config{
		ClientID:       c.ClientID,
		ClientSecret:   c.secret(),
		TokenURL:       c.TokenURL,
		Scopes:         scopes,
		EndpointParams: params,
		AuthStyle:      c.style(),
	}
}

// token converts x/oauth2's token; requested are the scopes granted when
// the answer names none.
func token(t *oauth2.Token, requested []string) *Token {
	tk := &Token{
		AccessToken:  toolplane.SecretString(t.AccessToken),
		RefreshToken: toolplane.SecretString(t.RefreshToken),
		Expiry:       t.Expiry,
		Scopes:       slices.Clone(requested),
	}
	if s, ok := t.Extra("scope").(string); ok && strings.TrimSpace(s) != "" {
		tk.Scopes = strings.Fields(s)
	}
	return tk
}
