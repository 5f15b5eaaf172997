package signin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/pkg/client/rp"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"golang.org/x/oauth2"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/jwtauth"
	"github.com/toolplane/toolplane/secret"
)

// OIDC is the deployment's OpenID provider as sign-in uses it. The issuer
// is the one bearer JWTs are accepted from (serve's --jwt-issuer); the
// claims are read under the same names jwtauth reads them, unless Claims
// names others.
type OIDC struct {
	Issuer       string
	ClientID     string
	ClientSecret toolplane.SecretString
	// Scopes requested; default openid, profile and email.
	Scopes []string
	Claims Claims
	// DefaultOrganization, when set, is the organization of a person
	// whose ID token carries no organization claim (a single-tenant
	// install whose provider knows nothing of organizations); unset, such
	// a token is refused.
	DefaultOrganization string
	// Client reaches the provider; default a client with a 10 second
	// timeout.
	Client *http.Client
}

// Claims names the ID token claims a person's organization, roles and
// groups are read from. An empty field takes its default: "org" and
// "toolplane_roles" (the claims jwtauth reads from bearer JWTs) and
// "groups". A group g becomes the role "group:g", which approval chains
// route by.
type Claims struct {
	Organization, Roles, Groups string
}

func (o *OIDC) check() error {
	if o.Issuer == "" || o.ClientID == "" {
		return errors.New("signin: the provider needs an issuer and a client id")
	}
	return nil
}

func (c Claims) withDefaults() Claims {
	if c.Organization == "" {
		c.Organization = "org"
	}
	if c.Roles == "" {
		c.Roles = "toolplane_roles"
	}
	if c.Groups == "" {
		c.Groups = "groups"
	}
	return c
}

// pending is the sealed content of a sign-in under way at the provider.
type pending struct {
	Verifier string `json:"v"`
	Nonce    string `json:"n"`
	// Browser is the hash of the nonce cookie given to the browser that
	// started the sign-in: a callback in any other browser is refused.
	Browser string `json:"b"`
	Return  string `json:"r"`
}

// relyingParty is the provider's client, built (with discovery) on first
// use and kept.
type relyingParty struct {
	rp rp.RelyingParty
}

type nonceKey struct{}

// party answers the relying party, discovering the provider the first
// time.
func (s *Service) party(ctx context.Context) (*relyingParty, error) {
	s.rpMu.Lock()
	defer s.rpMu.Unlock()
	if s.rp != nil {
		return s.rp, nil
	}
	o := s.cfg.OIDC
	hc := o.Client
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	scopes := o.Scopes
	if len(scopes) == 0 {
		scopes = []string{oidc.ScopeOpenID, oidc.ScopeProfile, oidc.ScopeEmail}
	}
	party, err := rp.NewRelyingPartyOIDC(ctx, o.Issuer, o.ClientID, o.ClientSecret.Reveal(), s.callbackURL(), scopes,
		rp.WithHTTPClient(hc),
		// The nonce the ID token must carry is the one sealed in the
		// pending sign-in, which the callback puts in the context.
		rp.WithVerifierOpts(rp.WithNonce(func(ctx context.Context) string {
			n, _ := ctx.Value(nonceKey{}).(string)
			return n
		})))
	if err != nil {
		return nil, fmt.Errorf("discover the provider %s: %w", o.Issuer, err)
	}
	s.rp = &relyingParty{rp: party}
	return s.rp, nil
}

func (s *Service) callbackURL() string {
	return s.base.Scheme + "://" + s.base.Host + s.path(Path+"/callback")
}

// stateAAD binds a sealed pending sign-in to its state.
func stateAAD(id string) []byte { return secret.StateAAD("signin:" + id) }

// startOIDC stores a pending sign-in and answers the provider's
// authorization URL and the browser's nonce.
func (s *Service) startOIDC(ctx context.Context, back string) (link, browser string, err error) {
	party, err := s.party(ctx)
	if err != nil {
		return "", "", err
	}
	// The PKCE verifier is oauth2's: RFC 7636 wants at least 43
	// characters, more than rand.Text's 26.
	state, nonce, verifier, browser := rand.Text(), rand.Text(), oauth2.GenerateVerifier(), rand.Text()
	plain, _ := json.Marshal(pending{Verifier: verifier, Nonce: nonce, Browser: hashToken(browser), Return: back})
	now := s.now()
	// A sign-in is an authorization under way like a connection's, kept
	// in the same single-use, expiring states; it names no organization
	// (the provider says which) and no connection, which is how the
	// connections' callback tells it from one of its own and refuses it.
	st := &toolplane.OAuthState{ID: state, RedirectURI: s.callbackURL(), CreatedAt: now, ExpiresAt: now.Add(pendingTTL)}
	if st.Verifier, err = s.cfg.Keys.Seal(plain, stateAAD(state)); err != nil {
		return "", "", fmt.Errorf("seal sign-in state: %w", err)
	}
	if err := s.cfg.Store.InsertOAuthState(ctx, st); err != nil {
		return "", "", fmt.Errorf("store sign-in state: %w", err)
	}
	sum := sha256.Sum256([]byte(verifier))
	challenge := base64.RawURLEncoding.EncodeToString(sum[:])
	link = rp.AuthURL(state, party.rp, rp.WithCodeChallenge(challenge), rp.AuthURLOpt(rp.WithURLParam("nonce", nonce)))
	return link, browser, nil
}

// ErrState: the sign-in's state is unknown, used, expired, or was started
// in another browser. It is a toolplane.ErrInvalid: the person's to start
// again, never the server's fault.
var ErrState = toolplane.Refine(toolplane.ErrInvalid, "sign-in state not valid")

// finishOIDC takes the state (single use), checks the browser, exchanges
// the code with the PKCE verifier, verifies the ID token (signature,
// issuer, audience, expiry, nonce) and answers the person and where to go
// back to.
func (s *Service) finishOIDC(ctx context.Context, state, code, browser string) (*toolplane.Credential, string, error) {
	st, err := s.cfg.Store.TakeOAuthState(ctx, state, s.now())
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		return nil, "", fmt.Errorf("%w: this sign-in was already completed or has expired; sign in again", ErrState)
	case err != nil:
		return nil, "", fmt.Errorf("take sign-in state: %w", err)
	}
	if st.ConnectionID != "" || st.OrganizationID != "" || len(st.Verifier) == 0 {
		return nil, "", fmt.Errorf("%w: the state is not a sign-in's", ErrState)
	}
	plain, err := s.cfg.Keys.Open(st.Verifier, stateAAD(st.ID))
	if err != nil {
		return nil, "", fmt.Errorf("%w: the state is not a sign-in's", ErrState)
	}
	var p pending
	if err := json.Unmarshal(plain, &p); err != nil {
		return nil, "", fmt.Errorf("read sign-in state: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(hashToken(browser)), []byte(p.Browser)) != 1 {
		return nil, "", fmt.Errorf("%w: the sign-in was started in another browser; sign in again in this one", ErrState)
	}
	if code == "" {
		return nil, "", fmt.Errorf("%w: the provider sent no code", toolplane.ErrInvalid)
	}
	party, err := s.party(ctx)
	if err != nil {
		return nil, "", err
	}
	tokens, err := rp.CodeExchange[*oidc.IDTokenClaims](context.WithValue(ctx, nonceKey{}, p.Nonce), code, party.rp, rp.WithCodeVerifier(p.Verifier))
	if err != nil {
		// The provider's or the verifier's words may quote what was sent;
		// the log keeps the cause, the person reads none of it.
		s.log.WarnContext(ctx, "sign-in refused", "err", err)
		return nil, "", fmt.Errorf("%w: the provider's answer could not be verified; sign in again", toolplane.ErrUnauthenticated)
	}
	claims := tokens.IDTokenClaims
	if claims.Nonce != p.Nonce {
		return nil, "", fmt.Errorf("%w: the provider's answer is not for this sign-in", toolplane.ErrUnauthenticated)
	}
	cred, err := s.person(claims)
	if err != nil {
		return nil, "", err
	}
	return cred, p.Return, nil
}

// person maps a verified ID token to the person it names.
func (s *Service) person(c *oidc.IDTokenClaims) (*toolplane.Credential, error) {
	o := s.cfg.OIDC
	names := o.Claims.withDefaults()
	org, _ := c.Claims[names.Organization].(string)
	if org == "" {
		org = o.DefaultOrganization
	}
	if c.Subject == "" || org == "" {
		return nil, fmt.Errorf("%w: the provider names no person or no organization for this account", toolplane.ErrUnauthenticated)
	}
	if err := errors.Join(toolplane.CheckLen("sub", c.Subject, toolplane.MaxRefLen), toolplane.CheckLen("org", org, toolplane.MaxRefLen)); err != nil {
		return nil, fmt.Errorf("%w: %v", toolplane.ErrUnauthenticated, err)
	}
	roles := jwtauth.ClaimStrings(c.Claims[names.Roles])
	for _, g := range jwtauth.ClaimStrings(c.Claims[names.Groups]) {
		roles = append(roles, toolplane.GroupRolePrefix+g)
	}
	slices.Sort(roles)
	roles = slices.Compact(roles)
	return &toolplane.Credential{ID: "oidc:" + o.Issuer + ":" + c.Subject, OrganizationID: org, Kind: toolplane.CredentialPerson,
		Subject: c.Subject, Roles: roles}, nil
}
