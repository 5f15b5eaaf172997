// Package authserver is toolplane's own OAuth 2.1 authorization server,
// for the clients that reach /mcp by its URL alone (the MCP authorization
// flow): authorization-server metadata (RFC 8414), clients that register
// themselves (RFC 7591) or are named by the URL of their metadata
// document (Client ID Metadata Documents), the authorization-code grant
// with PKCE S256 only, tokens bound to one resource (RFC 8707),
// short-lived signed access tokens, rotating refresh tokens, revocation
// (RFC 7009) and introspection (RFC 7662).
//
// A person authorizes a client on a consent page, after signing in through
// package signin (the deployment's OpenID provider or their own key). What
// they consent to is a grant (toolplane.OAuthGrant): the client acts for
// them as an agent identity — the client's own when an admin set one for
// the organization, otherwise the deployment's default — on every tool that
// agent may call for them, or on the few they ticked. An access token
// verified by Verifier becomes that agent's credential acting for the
// person, so the delegated-authority rules the doors already apply decide
// each call (the agent's grants and the person's), and the audit trail
// names both.
//
// Every token is checked against its grant on every call: a revoked
// consent, a revoked client, a replayed code or a reused refresh token is
// refused on the next call on every node. The grant is read from the
// store, or taken from what the node kept of it while the store's change
// feed says it has not changed (see Server.Watch); every revocation the
// server makes answers only once the feed's settle time has passed, by
// when every node has heard of it or trusts nothing it kept. No verified
// state outlives the grant row.
//
// Why not zitadel/oidc's op package, which the module already has for
// sign-in's relying party: op is an OpenID provider first. It refuses an
// authorization request without a scope, lets a client choose plain PKCE
// or none, issues refresh tokens only for offline_access, and knows no
// resource indicators, dynamic registration or client metadata documents;
// bending it to the MCP profile took more code than the four endpoints
// here, which keep go-jose for every signature.
package authserver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/egress"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/signin"
)

// Path is where the endpoints are, under the public URL: register,
// authorize, token, revoke, introspect and jwks.
const Path = "/oauth"

// MetadataPath is the RFC 8414 metadata document; OpenIDPath answers the
// same document, for clients that look there first.
const (
	MetadataPath = "/.well-known/oauth-authorization-server"
	OpenIDPath   = "/.well-known/openid-configuration"
)

// The scopes: ScopeTools is every tool the agent may call for the person;
// ScopeToolPrefix+name narrows to the tool named (several may be asked).
const (
	ScopeTools      = "tools"
	ScopeToolPrefix = "tool:"
)

// Registration modes.
const (
	RegistrationOpen      = "open"
	RegistrationAllowlist = "allowlist"
	RegistrationOff       = "off"
)

// The defaults of a zero Config field.
const (
	DefaultAccessTTL       = 10 * time.Minute
	DefaultRefreshTTL      = 30 * 24 * time.Hour
	DefaultConsentTTL      = 90 * 24 * time.Hour
	DefaultCodeTTL         = time.Minute
	DefaultRegistrationsPH = 20
	DefaultAgent           = "oauth-clients"
	DefaultMaxClients      = 10000
	DefaultOIDCMaxAge      = 24 * time.Hour
)

// Store is what the server keeps: its own state, and the audit trail its
// control events go to.
type Store interface {
	toolplane.OAuthStore
	// InsertOAuthConsent and RevokeOAuthClient keep a consent from
	// outrunning its client's revocation or removal.
	toolplane.OAuthConsentStore
	// GetCredential finds the API key a person consented with (a grant's
	// PersonKey), checked at every call.
	apikey.Getter
	AppendAudit(ctx context.Context, e *toolplane.AuditEvent) error
}

// People is sign-in as the consent page uses it (*signin.Service).
type People interface {
	Session(r *http.Request) (*signin.Session, error)
	SignInURL(returnTo string) string
	CheckForm(r *http.Request, sess *signin.Session) error
}

// Config is what a Server is built from.
type Config struct {
	Store Store
	// Keys seal the access-token signing keys.
	Keys *secret.Keyring
	// Issuer is the server's public URL: the issuer, and the base of
	// every endpoint and resource.
	Issuer string
	People People
	// Tools answers the tools cred (an agent acting for a person) is
	// shown: the consent page's list.
	Tools func(ctx context.Context, cred *toolplane.Credential) ([]string, error)
	// Upstreams answers the slugs of the governed copies, each a resource
	// of its own at /mcp/<slug>.
	Upstreams func() []string
	// Agent is the agent identity a client acts as where its
	// organization set none; DefaultAgent when empty.
	Agent string
	// Registration is RegistrationOpen (default), RegistrationAllowlist
	// (every redirect URI on RedirectAllow) or RegistrationOff. Client
	// metadata documents follow the same redirect rule.
	Registration string
	// RedirectAllow are the redirect URIs allowed under allowlist: exact,
	// or a prefix when the entry ends in "*".
	RedirectAllow []string
	// RegistrationsPerHour bounds registrations per client address.
	RegistrationsPerHour int
	// MaxClients bounds the clients the server holds, registered and
	// metadata documents' alike, across every address and node:
	// DefaultMaxClients when zero, no bound when negative.
	MaxClients int
	// OIDCMaxAge bounds how old the OpenID provider's sign-in behind a
	// consent may be for its tokens to be refreshed and honoured: past it, the client
	// sends the person through sign-in (and consent) again, and the roles
	// come fresh from the provider. DefaultOIDCMaxAge when zero, no bound
	// when negative. Consents given with a person's own key follow the key
	// at every call instead, and know no such bound.
	OIDCMaxAge time.Duration
	// Operator is the operator's organization: only its platform_admins
	// act on what is the whole deployment's, the signing key. Empty: no
	// one, through this API.
	Operator string
	// Limits keeps the registration counts: the nodes' shared rate
	// limits; a memory of this node's own when nil.
	Limits     *ratelimit.Shared
	ClientAddr func(r *http.Request) string
	// Egress is the rule client metadata documents are fetched under: any
	// host, never a private address unless it allows one.
	Egress *egress.Policy
	// DocumentTimeout and DocumentMaxBytes bound one document's fetch.
	DocumentTimeout  time.Duration
	DocumentMaxBytes int64
	AccessTTL        time.Duration
	RefreshTTL       time.Duration
	ConsentTTL       time.Duration
	CodeTTL          time.Duration
	Now              func() time.Time
	Logger           *slog.Logger
}

// Server is the authorization server.
type Server struct {
	cfg    Config
	log    *slog.Logger
	base   *url.URL
	keys   *keyRing
	docs   *documents
	verify *Verifier
	// feed is the store's change feed, nil when it tells none: every
	// call then reads its grant from the store.
	feed toolplane.ChangeFeed
}

// New answers the server cfg describes.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Keys == nil || cfg.People == nil {
		return nil, errors.New("authserver: Store, Keys and People are required")
	}
	base, err := url.Parse(cfg.Issuer)
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" || base.RawQuery != "" || base.Fragment != "" {
		return nil, fmt.Errorf("authserver: issuer %q is not an http(s) URL", cfg.Issuer)
	}
	// A public URL with a path (a proxy serving the server under it, and
	// stripping it) is the issuer as it is: endpoints and resources are
	// under it, and the metadata is also answered at the RFC 8414 form
	// with the path after the well-known segment.
	cfg.Issuer = strings.TrimSuffix(cfg.Issuer, "/")
	base.Path = strings.TrimSuffix(base.Path, "/")
	switch cfg.Registration {
	case "":
		cfg.Registration = RegistrationOpen
	case RegistrationOpen, RegistrationAllowlist, RegistrationOff:
	default:
		return nil, fmt.Errorf("authserver: registration %q is not open, allowlist or off", cfg.Registration)
	}
	if cfg.Agent == "" {
		cfg.Agent = DefaultAgent
	}
	if cfg.RegistrationsPerHour == 0 {
		cfg.RegistrationsPerHour = DefaultRegistrationsPH
	}
	if cfg.MaxClients == 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.OIDCMaxAge == 0 {
		cfg.OIDCMaxAge = DefaultOIDCMaxAge
	}
	if cfg.Limits == nil {
		cfg.Limits = ratelimit.NewShared(ratelimit.NewMemory(), ratelimit.SharedOptions{})
	}
	if cfg.ClientAddr == nil {
		cfg.ClientAddr = ratelimit.ClientAddr
	}
	if cfg.Egress == nil {
		if cfg.Egress, err = egress.Compile(toolplane.EgressRules{}, egress.AnyHost()); err != nil {
			return nil, err
		}
	}
	cfg.DocumentTimeout = or(cfg.DocumentTimeout, 5*time.Second)
	if cfg.DocumentMaxBytes == 0 {
		cfg.DocumentMaxBytes = 64 << 10
	}
	cfg.AccessTTL = or(cfg.AccessTTL, DefaultAccessTTL)
	cfg.RefreshTTL = or(cfg.RefreshTTL, DefaultRefreshTTL)
	cfg.ConsentTTL = or(cfg.ConsentTTL, DefaultConsentTTL)
	cfg.CodeTTL = or(cfg.CodeTTL, DefaultCodeTTL)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Upstreams == nil {
		cfg.Upstreams = func() []string { return nil }
	}
	s := &Server{cfg: cfg, log: cfg.Logger, base: base}
	s.keys = &keyRing{store: cfg.Store, kek: cfg.Keys, now: cfg.Now}
	s.docs = newDocuments(cfg.Egress.Client(cfg.DocumentTimeout), cfg.DocumentMaxBytes, cfg.Now)
	s.verify = &Verifier{s: s, cache: newTokenCache(4096), consents: newConsents(maxKeptConsents)}
	s.feed, _ = cfg.Store.(toolplane.ChangeFeed)
	// Every revocation the server makes answers once it holds on every
	// node (see settling).
	s.cfg.Store = settling{Store: cfg.Store, feed: s.feed, consents: s.verify.consents}
	return s, nil
}

func or(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Issuer answers the issuer.
func (s *Server) Issuer() string { return s.cfg.Issuer }

// Verifier answers the verifier of the server's access tokens.
func (s *Server) Verifier() *Verifier { return s.verify }

// Resource answers the resource a token for /mcp is bound to: the public
// URL's /mcp, or /mcp/<slug> for a governed copy.
func (s *Server) Resource(slug string) string {
	if slug == "" {
		return s.cfg.Issuer + "/mcp"
	}
	return s.cfg.Issuer + "/mcp/" + slug
}

// resource answers the resource asked for (the whole /mcp when none is),
// or false when it is not one of this server's.
func (s *Server) resource(asked string) (string, bool) {
	asked = withoutListing(asked)
	if asked == "" || asked == s.Resource("") {
		return s.Resource(""), true
	}
	slug, ok := strings.CutPrefix(asked, s.cfg.Issuer+"/mcp/")
	if ok && slices.Contains(s.cfg.Upstreams(), slug) {
		return asked, true
	}
	return "", false
}

// withoutListing answers resource without its query when that asks only
// for a listing (/mcp?listing=meta, see mcpserver): how a client lists
// tools is its choice at each request, not part of what a token is for,
// and a client that names its endpoint's whole URL as the resource is
// given the token of the endpoint.
func withoutListing(resource string) string {
	u, err := url.Parse(resource)
	if err != nil || u.RawQuery == "" || u.Fragment != "" {
		return resource
	}
	for k := range u.Query() {
		if k != "listing" && k != "top" {
			return resource
		}
	}
	u.RawQuery, u.ForceQuery = "", false
	return u.String()
}

// Handler answers the routes: the metadata documents, every endpoint
// under Path, and the signed-in person's page of connected clients
// (Path/consents). The pages carry sign-in's CSP.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+MetadataPath, s.metadata)
	mux.HandleFunc("GET "+OpenIDPath, s.metadata)
	if s.base.Path != "" {
		mux.HandleFunc("GET "+MetadataPath+s.base.Path, s.metadata)
	}
	mux.HandleFunc("GET "+Path+"/jwks", s.jwks)
	mux.HandleFunc("POST "+Path+"/register", s.register)
	mux.Handle("GET "+Path+"/authorize", pageHeaders(http.HandlerFunc(s.authorize)))
	mux.Handle("POST "+Path+"/authorize", pageHeaders(http.HandlerFunc(s.consent)))
	mux.Handle("GET "+Path+"/consents", pageHeaders(http.HandlerFunc(s.connectedClients)))
	mux.Handle("POST "+Path+"/consents/revoke", pageHeaders(http.HandlerFunc(s.revokeConnected)))
	mux.HandleFunc("POST "+Path+"/token", s.token)
	mux.HandleFunc("POST "+Path+"/revoke", s.revoke)
	mux.HandleFunc("POST "+Path+"/introspect", s.introspect)
	return mux
}

// Metadata is the RFC 8414 document.
type Metadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint,omitempty"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	IntrospectionEndpoint             string   `json:"introspection_endpoint"`
	JWKSURI                           string   `json:"jwks_uri"`
	ScopesSupported                   []string `json:"scopes_supported"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	ResponseModesSupported            []string `json:"response_modes_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	RevocationAuthMethodsSupported    []string `json:"revocation_endpoint_auth_methods_supported"`
	IntrospectionAuthMethodsSupported []string `json:"introspection_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported"`
	AuthorizationResponseISS          bool     `json:"authorization_response_iss_parameter_supported"`
}

// Metadata answers the server's RFC 8414 document.
func (s *Server) Metadata() Metadata {
	p := s.cfg.Issuer + Path
	m := Metadata{Issuer: s.cfg.Issuer, AuthorizationEndpoint: p + "/authorize", TokenEndpoint: p + "/token",
		RevocationEndpoint: p + "/revoke", IntrospectionEndpoint: p + "/introspect", JWKSURI: p + "/jwks",
		ScopesSupported: []string{ScopeTools}, ResponseTypesSupported: []string{"code"}, ResponseModesSupported: []string{"query"},
		GrantTypesSupported: []string{"authorization_code", "refresh_token"}, TokenEndpointAuthMethodsSupported: []string{"none"},
		RevocationAuthMethodsSupported: []string{"none"}, IntrospectionAuthMethodsSupported: []string{"none"},
		CodeChallengeMethodsSupported: []string{"S256"}, ClientIDMetadataDocumentSupported: true, AuthorizationResponseISS: true}
	if s.cfg.Registration != RegistrationOff {
		m.RegistrationEndpoint = p + "/register"
	}
	return m
}

func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Cache-Control", "max-age=300")
	writeJSON(w, http.StatusOK, s.Metadata())
}

func (s *Server) jwks(w http.ResponseWriter, r *http.Request) {
	set, err := s.keys.published(r.Context())
	if err != nil {
		s.log.ErrorContext(r.Context(), "oauth signing keys not read", "err", err)
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the signing keys cannot be read now")
		return
	}
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Cache-Control", "max-age=60")
	writeJSON(w, http.StatusOK, set)
}

// writeJSON answers v as JSON; token answers are never cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	if w.Header().Get("Cache-Control") == "" {
		w.Header().Set("Cache-Control", "no-store")
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// oauthError answers an RFC 6749 error. description never carries a value
// the caller sent.
func oauthError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

// hash answers the stored form of a code or refresh token.
func hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// s256 answers the PKCE S256 challenge of verifier.
func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// event answers the control event of by's change, which the store writes
// in the change's own transaction.
func (s *Server) event(by *toolplane.Credential, outcome, subject, reason string) *toolplane.AuditEvent {
	ev := toolplane.ControlEvent(by, toolplane.AuditOAuth, outcome, subject, s.cfg.Now())
	ev.Reason = reason
	return ev
}

// record appends a control event of by's change after it: only for the
// signing key's rotation, which is the operator's and no organization's
// (its event goes to the operator's organization's trail, and the key
// store is not the trail's). A failure is logged, not answered.
func (s *Server) record(ctx context.Context, by *toolplane.Credential, outcome, subject, reason string) {
	ev := s.event(by, outcome, subject, reason)
	if err := s.cfg.Store.AppendAudit(context.WithoutCancel(ctx), ev); err != nil {
		s.log.ErrorContext(ctx, "oauth audit event not written", "outcome", outcome, "subject", subject, "err", err)
	}
}

// system is the principal of changes the server makes itself (a replayed
// code or reused refresh token revoking a grant), in org.
func system(org string) *toolplane.Credential {
	return &toolplane.Credential{ID: "oauth", OrganizationID: org, Subject: "toolplane:oauth"}
}
