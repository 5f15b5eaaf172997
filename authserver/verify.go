package authserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/authz"
)

// ErrInvalid: the token is not an access token this server issued for
// this resource, or it expired, or its grant was revoked.
var ErrInvalid = fmt.Errorf("access token not valid: %w", toolplane.ErrUnauthenticated)

// claims are an access token's: iss, sub (the person), aud (the resource),
// exp/iat/nbf/jti, and the private claims below.
type claims struct {
	jwt.Claims
	// Org is the person's organization; Grant the consent the token was
	// issued under, read on every call.
	Org   string `json:"org"`
	Grant string `json:"gid"`
	// ClientID is the client (RFC 9068); Act the agent identity acting
	// for sub (RFC 8693).
	ClientID string `json:"client_id"`
	Act      struct {
		Subject string `json:"sub"`
	} `json:"act"`
	Scope string `json:"scope"`
}

// scope answers the scope text of a narrowing: "tools" for none.
func scope(tools []string) string {
	if len(tools) == 0 {
		return ScopeTools
	}
	parts := make([]string, len(tools))
	for i, t := range tools {
		parts[i] = ScopeToolPrefix + t
	}
	return strings.Join(parts, " ")
}

// mint answers a signed access token for g, expiring at exp.
func (s *Server) mint(ctx context.Context, g *toolplane.OAuthGrant, now, exp time.Time) (string, error) {
	key, err := s.keys.current(ctx)
	if err != nil {
		return "", fmt.Errorf("signing key: %w", err)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		return "", err
	}
	c := claims{Claims: jwt.Claims{Issuer: s.cfg.Issuer, Subject: g.Subject, Audience: jwt.Audience{g.Resource},
		Expiry: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), ID: toolplane.NewID("oat_")},
		Org: g.OrganizationID, Grant: g.ID, ClientID: g.ClientID, Scope: scope(g.Tools)}
	c.Act.Subject = g.AgentID
	return jwt.Signed(sig).Claims(c).Serialize()
}

type resourceKey struct{}

// WithResource answers ctx naming the resource a request is for (the
// public URL's /mcp or /mcp/<slug>): an access token authenticates only
// where its audience is that resource. A request whose context names none
// (the REST API, the console) takes none of this server's tokens.
func WithResource(ctx context.Context, resource string) context.Context {
	return context.WithValue(ctx, resourceKey{}, resource)
}

// ResourceOf answers the resource WithResource put on ctx.
func ResourceOf(ctx context.Context) string {
	r, _ := ctx.Value(resourceKey{}).(string)
	return r
}

// Verifier verifies the server's access tokens (apikey.TokenVerifier).
type Verifier struct {
	s     *Server
	cache *tokenCache
	// consents keeps the grants found in force while the store's change
	// feed is watched (Server.Watch).
	consents *consents
}

var _ apikey.TokenVerifier = (*Verifier)(nil)

// Verify answers the credential token stands for: the grant's agent
// identity acting for its person, narrowed to the tools consented to, for
// the resource on ctx. The signature and claims of a token seen before
// are remembered until it expires. Its grant (and the person's key, when
// they consented with it) is read from the store, or, while the store's
// change feed is watched and caught up, taken from what this node kept of
// it; the grant's end and the key's are checked against now either way.
func (v *Verifier) Verify(ctx context.Context, token string) (*toolplane.Credential, error) {
	c, err := v.parse(ctx, token)
	if err != nil {
		return nil, err
	}
	now := v.s.cfg.Now()
	if !now.Before(c.Expiry.Time()) {
		return nil, fmt.Errorf("%w: expired", ErrInvalid)
	}
	if want := ResourceOf(ctx); want == "" || !c.Audience.Contains(want) {
		return nil, fmt.Errorf("%w: issued for another resource", ErrInvalid)
	}
	st, err := v.inForce(ctx, c.Org, c.Grant, now)
	if err != nil {
		return nil, err
	}
	g, roles := st.g, st.roles
	switch {
	case g.ClientID != c.ClientID || g.Subject != c.Subject || g.AgentID != c.Act.Subject:
		return nil, fmt.Errorf("%w: the token does not match its grant", ErrInvalid)
	}
	return &toolplane.Credential{ID: CredentialPrefix + g.ID, OrganizationID: g.OrganizationID, Kind: toolplane.CredentialAgent,
		Subject: g.AgentID, Tools: g.Tools, ActsFor: g.Subject, User: &toolplane.User{Roles: roles}, ClientID: g.ClientID,
		Label: g.ClientID, CreatedAt: g.CreatedAt, ExpiresAt: c.Expiry.Time()}, nil
}

// parse answers the token's verified claims (not its expiry or audience).
func (v *Verifier) parse(ctx context.Context, token string) (*claims, error) {
	if c, ok := v.cache.get(token); ok {
		return c, nil
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(tok.Headers) != 1 {
		return nil, fmt.Errorf("%w: not a signed JWT", ErrInvalid)
	}
	key, err := v.s.keys.verifying(ctx, tok.Headers[0].KeyID)
	if errors.Is(err, toolplane.ErrUnauthenticated) {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read signing keys: %w", err)
	}
	var c claims
	if err := tok.Claims(key.Key, &c); err != nil {
		return nil, fmt.Errorf("%w: signature", ErrInvalid)
	}
	if c.Issuer != v.s.cfg.Issuer || c.Expiry == nil || c.Org == "" || c.Grant == "" || c.Subject == "" || c.Act.Subject == "" {
		return nil, fmt.Errorf("%w: claims", ErrInvalid)
	}
	v.cache.put(token, &c)
	return &c, nil
}

// Issued reports whether token claims to be this server's (its iss), read
// without verifying anything: which verifier a chain hands it to.
func (v *Verifier) Issued(token string) bool {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256, jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.ES384, jose.EdDSA})
	if err != nil {
		return false
	}
	var c jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&c); err != nil {
		return false
	}
	return c.Issuer == v.s.cfg.Issuer
}

// Chain verifies this server's tokens with Own and any other bearer token
// (an operator's JWT) with Next, so both work side by side.
type Chain struct {
	Own  *Verifier
	Next apikey.TokenVerifier
}

// Verify hands token to the verifier of its issuer.
func (c Chain) Verify(ctx context.Context, token string) (*toolplane.Credential, error) {
	if c.Own != nil && (c.Next == nil || c.Own.Issued(token)) {
		return c.Own.Verify(ctx, token)
	}
	if c.Next == nil {
		return nil, ErrInvalid
	}
	return c.Next.Verify(ctx, token)
}

// tokenCache remembers the claims of tokens whose signature verified,
// until they expire: the signature check is most of a token's cost, and
// nothing a revocation changes is in it.
type tokenCache struct {
	mu  sync.Mutex
	max int
	m   map[string]*claims
}

func newTokenCache(max int) *tokenCache { return &tokenCache{max: max, m: make(map[string]*claims)} }

func (t *tokenCache) get(token string) (*claims, bool) {
	t.mu.Lock()
	c, ok := t.m[token]
	t.mu.Unlock()
	return c, ok
}

func (t *tokenCache) put(token string, c *claims) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) >= t.max {
		// Dropped whole: entries are cheap to make again, and a bound
		// is what matters.
		clear(t.m)
	}
	t.m[token] = c
}

// CredentialPrefix starts the credential ID of every access token's
// caller: CredentialPrefix and the consent's (grant's) ID.
const CredentialPrefix = authz.ConsentPrefix

// grantInForce reads org's grant id from the store and answers it as it
// stands at now, with the person's roles: live (neither revoked nor
// ended), and, when the person consented with their own key, that key
// still in force and theirs (its roles are then the person's now), or
// else the OpenID sign-in behind it younger than maxAge (Config.OIDCMaxAge
// once defaulted). Otherwise an error wrapping ErrInvalid says which.
func grantInForce(ctx context.Context, st Store, org, id string, maxAge time.Duration, now time.Time) (*standing, error) {
	g, err := st.GetOAuthGrant(ctx, org, id)
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		return nil, fmt.Errorf("%w: no such grant", ErrInvalid)
	case err != nil:
		return nil, fmt.Errorf("read the token's grant: %w", err)
	case !g.Live(now):
		return nil, fmt.Errorf("%w: the consent was revoked or ended", ErrInvalid)
	case g.PersonKey == "":
		st := &standing{g: g, roles: g.Roles, signInEnds: signInEnds(g, maxAge)}
		if err := st.at(now); err != nil {
			return nil, err
		}
		return st, nil
	}
	key, err := apikey.InForce(ctx, st, g.PersonKey, now)
	switch {
	case errors.Is(err, apikey.ErrInvalid):
		return nil, fmt.Errorf("%w: the person's key the consent was given with is revoked or ended", ErrInvalid)
	case err != nil:
		return nil, fmt.Errorf("check the consenting person's key: %w", err)
	case key.Kind != toolplane.CredentialPerson || key.Subject != g.Subject || key.OrganizationID != g.OrganizationID:
		return nil, fmt.Errorf("%w: the person's key is not the consenting person's", ErrInvalid)
	}
	return &standing{g: g, roles: key.Roles, keyExpires: key.ExpiresAt}, nil
}

// ConsentInForce reports whether the consent an access token's caller
// credential ID names (CredentialPrefix and the grant's ID) still stands
// in org at now, as Verify would decide it: a call filed with such a
// token and run later (after its approval) runs only while it does.
// oidcMaxAge is the server's Config.OIDCMaxAge (zero: DefaultOIDCMaxAge,
// negative: no bound): a consent through the OpenID provider stands only
// while its sign-in is younger. It reads the store, keeping nothing: such
// calls are few.
func ConsentInForce(ctx context.Context, st Store, org, credentialID string, oidcMaxAge time.Duration, now time.Time) (bool, error) {
	id, ok := strings.CutPrefix(credentialID, CredentialPrefix)
	if !ok {
		return false, fmt.Errorf("%q is not an access token's credential: %w", credentialID, toolplane.ErrInvalid)
	}
	if oidcMaxAge == 0 {
		oidcMaxAge = DefaultOIDCMaxAge
	}
	_, err := grantInForce(ctx, st, org, id, oidcMaxAge, now)
	if errors.Is(err, ErrInvalid) {
		return false, nil
	}
	return err == nil, err
}
