// Package oauth is the OAuth 2.0 client side of connections: finding a
// provider's endpoints (RFC 8414, OpenID discovery, and RFC 9728 for an
// upstream MCP server), the authorization code grant with PKCE, the
// client credentials grant, refreshing and revoking tokens. It is the
// protocol only: where tokens are kept, when they are refreshed and who may
// consent are the connection service's business.
//
// Every request goes through the *http.Client the caller injects, the one
// carrying the connection's egress rules. No error of this package holds a
// token, a client secret, an authorization code or a PKCE verifier: what
// a provider answers is reduced to its error code and a description from
// which every value sent to it is removed.
//
// Errors at the edge:
//
//	*GrantError      the provider refused the grant itself (invalid_grant):
//	                 revoked, expired, or a code or verifier not valid; the
//	                 person must consent again
//	*ProviderError   any other refusal (invalid_client, invalid_scope, ...):
//	                 the connection's settings are wrong; repeating fails again
//	*TransientError  the provider could not be reached or failed (5xx, 429,
//	                 a broken answer); the same request may succeed later
package oauth

import (
	"net/http"
	"slices"
	"time"

	"github.com/toolplane/toolplane"
)

// AuthMethod is how the client authenticates at the token and revocation
// endpoints (RFC 8414 token_endpoint_auth_methods_supported).
type AuthMethod string

// The client authentication methods.
const (
	// AuthSecretBasic sends the client id and secret as HTTP Basic
	// credentials, the method every provider must support.
	AuthSecretBasic AuthMethod = "client_secret_basic"
	// AuthSecretPost sends them in the form body.
	AuthSecretPost AuthMethod = "client_secret_post"
	// AuthNone is a public client: it sends its client id alone and
	// proves itself with PKCE.
	AuthNone AuthMethod = "none"
)

// Config is one OAuth client at one provider: the endpoints, the client's
// credentials and the HTTP client its requests go through.
type Config struct {
	AuthorizeURL string
	TokenURL     string
	// RevokeURL is the RFC 7009 revocation endpoint; empty when the
	// provider has none.
	RevokeURL    string
	ClientID     string
	ClientSecret toolplane.SecretString
	// AuthMethod is how the client authenticates; empty means
	// client_secret_basic with a secret, none without one.
	AuthMethod AuthMethod
	// Scopes are the scopes the connection asks for. Start and
	// ClientCredentials request them unless told others, and Exchange
	// reports them as granted when the provider's answer names none
	// (RFC 6749 section 5.1: an answer without scope grants what was asked).
	Scopes []string
	// Resource is the RFC 8707 resource indicator sent with the
	// authorization request and every token request.
	Resource string
	// HTTPClient carries every request. It is required: requests never
	// fall back to a default client, which would bypass the egress rules.
	HTTPClient *http.Client
}

// NewConfig answers the Config of a connection's settings and secrets,
// whose requests go through hc. Endpoints a connection leaves to discovery
// are filled in by Metadata.Apply.
func NewConfig(cc toolplane.ConnectionConfig, s toolplane.Secrets, hc *http.Client) Config {
	return Config{
		AuthorizeURL: cc.AuthorizeURL,
		TokenURL:     cc.TokenURL,
		RevokeURL:    cc.RevokeURL,
		ClientID:     cc.ClientID,
		ClientSecret: s.ClientSecret,
		Scopes:       slices.Clone(cc.RequestScope),
		Resource:     cc.Resource,
		HTTPClient:   hc,
	}
}

// authMethod answers the method in force: the configured one, or the
// default for a client with or without a secret.
func (c *Config) authMethod() AuthMethod {
	switch {
	case c.AuthMethod != "":
		return c.AuthMethod
	case c.ClientSecret == "":
		return AuthNone
	default:
		return AuthSecretBasic
	}
}

// Token is what a provider issued.
type Token struct {
	AccessToken toolplane.SecretString
	// RefreshToken is empty when the provider issued none (client
	// credentials, or a grant without offline access).
	RefreshToken toolplane.SecretString
	// Expiry is when the access token expires; zero when the provider
	// did not say.
	Expiry time.Time
	// Scopes are the scopes granted: the answer's scope, or the ones
	// requested when the answer names none. After a refresh whose answer
	// names none they are nil: the grant's scopes are unchanged.
	Scopes []string
}
