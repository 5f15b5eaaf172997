package connection

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/oauth"
)

// token is what a provider issued, as the broker keeps it.
type token struct {
	access, refresh toolplane.SecretString
	expiry          time.Time
	scopes          []string
}

// grantError is a provider's definite refusal of a connection's grant:
// its owner must consent again.
type grantError struct{ reason string }

func (e *grantError) Error() string { return e.reason }

// oauthClient speaks OAuth for connections, each request through the
// client the connection's egress rules allow.
type oauthClient struct {
	client func(rules toolplane.EgressRules) (*http.Client, error)
}

// config answers the OAuth client of connection c (an application, or a
// client credentials connection) with its secrets, its endpoints
// discovered from its issuer when it names one.
func (o oauthClient) config(ctx context.Context, c *toolplane.Connection, sec toolplane.Secrets) (oauth.Config, error) {
	hc, err := o.client(c.Config.Egress)
	if err != nil {
		return oauth.Config{}, fmt.Errorf("connection %s: %w", c.ID, err)
	}
	cfg := oauth.NewConfig(c.Config, sec, hc)
	if c.Config.Issuer != "" && (cfg.TokenURL == "" || cfg.AuthorizeURL == "") {
		md, err := oauth.Discover(ctx, hc, c.Config.Issuer)
		if err != nil {
			return oauth.Config{}, fmt.Errorf("connection %s: discover its provider: %w", c.ID, err)
		}
		md.Apply(&cfg)
	}
	return cfg, nil
}

// start answers the provider's consent URL, the state it hands back, and
// the PKCE verifier.
func (o oauthClient) start(ctx context.Context, app *toolplane.Connection, sec toolplane.Secrets, redirect string) (link, state, verifier string, err error) {
	cfg, err := o.config(ctx, app, sec)
	if err != nil {
		return "", "", "", err
	}
	link, state, verifier = oauth.Start(cfg, redirect, nil)
	return link, state, verifier, nil
}

func (o oauthClient) exchange(ctx context.Context, app *toolplane.Connection, sec toolplane.Secrets, code, verifier, redirect string) (token, error) {
	cfg, err := o.config(ctx, app, sec)
	if err != nil {
		return token{}, err
	}
	t, err := oauth.Exchange(ctx, cfg, code, verifier, redirect)
	return tokenOf(t, err)
}

func (o oauthClient) clientCredentials(ctx context.Context, c *toolplane.Connection, sec toolplane.Secrets) (token, error) {
	cfg, err := o.config(ctx, c, sec)
	if err != nil {
		return token{}, err
	}
	t, err := oauth.ClientCredentials(ctx, cfg, nil)
	return tokenOf(t, err)
}

// renew asks the provider for a new access token of c, and stores
// nothing: one minted from c's client secret in sec (client credentials),
// or one refreshed with the refresh token sec holds, through app, the
// application c was consented through, with its secrets appSec
// (authorization code).
func (o oauthClient) renew(ctx context.Context, c *toolplane.Connection, sec toolplane.Secrets, app *toolplane.Connection, appSec toolplane.Secrets) (token, error) {
	if c.Kind == toolplane.ConnectionClientCredentials {
		return o.clientCredentials(ctx, c, sec)
	}
	return o.refresh(ctx, app, appSec, sec.RefreshToken)
}

func (o oauthClient) refresh(ctx context.Context, app *toolplane.Connection, appSec toolplane.Secrets, refresh toolplane.SecretString) (token, error) {
	if refresh == "" {
		return token{}, &grantError{reason: "no refresh token is held"}
	}
	cfg, err := o.config(ctx, app, appSec)
	if err != nil {
		return token{}, err
	}
	t, err := oauth.Refresh(ctx, cfg, refresh)
	return tokenOf(t, err)
}

// revoke asks the provider to revoke tok, when it can.
func (o oauthClient) revoke(ctx context.Context, app *toolplane.Connection, appSec toolplane.Secrets, tok toolplane.SecretString) error {
	cfg, err := o.config(ctx, app, appSec)
	if err != nil {
		return err
	}
	if err := oauth.Revoke(ctx, cfg, tok); err != nil && !errors.Is(err, oauth.ErrNoRevocation) {
		return err
	}
	return nil
}

// tokenOf converts the oauth package's answer; a refused grant becomes a
// *grantError.
func tokenOf(t *oauth.Token, err error) (token, error) {
	var ge *oauth.GrantError
	switch {
	case errors.As(err, &ge):
		return token{}, &grantError{reason: ge.Error()}
	case err != nil:
		return token{}, err
	}
	return token{access: t.AccessToken, refresh: t.RefreshToken, expiry: t.Expiry, scopes: t.Scopes}, nil
}
