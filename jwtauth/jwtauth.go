// Package jwtauth authenticates callers with JSON Web Tokens signed by a
// configured issuer, whose keys are read from its JWKS document. A verified
// token becomes the same credential an API key would: an organization, a
// subject, and an agent's tools (narrowing what its identity is granted,
// as a key's do) or a person's roles, read from claims.
//
// Claims read: iss and aud (both required to match), exp/nbf/iat (one
// minute of leeway), sub (the subject), and the private claims org,
// toolplane_kind ("agent" or "person"), toolplane_tools and toolplane_roles
// (a person's roles; of an agent's, only act_for_users is kept).
//
// A token the issuer minted for an agent on a person's behalf (token
// exchange, RFC 8693) names the person as sub and the agent as act.sub:
// it becomes the agent's credential, acting for that person on every call
// (Credential.ActsFor). What the deployment maps from the person's claims
// (Claims: roles, groups, manager, attributes) travels with it as the
// person's, never as the agent's; the groups decide which group grants
// stand for the person.
package jwtauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/toolplane/toolplane"
)

// ErrInvalid: the token is not one this issuer signed for this audience,
// or it is expired, or it lacks a claim toolplane needs.
var ErrInvalid = fmt.Errorf("token not valid: %w", toolplane.ErrUnauthenticated)

// algorithms are the signature algorithms accepted; "none" and HMAC never
// are (a shared secret would let any holder of it mint identities).
var algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.ES256, jose.ES384, jose.EdDSA}

// Verifier verifies tokens of one issuer.
type Verifier struct {
	Issuer   string
	Audience string
	JWKSURL  string
	Client   *http.Client
	// Refresh bounds how long fetched keys are trusted before being read
	// again; an unknown key id also triggers a read, at most once per
	// MinRefresh.
	Refresh    time.Duration
	MinRefresh time.Duration
	Now        func() time.Time
	// Claims maps the person's claims of a delegated token (and the
	// attributes of any token) to what rules read.
	Claims Claims

	mu      sync.Mutex
	keys    *jose.JSONWebKeySet
	fetched time.Time
	// tried is when the key set was last read, whether or not the read
	// succeeded: reads are spaced by MinRefresh however many tokens with
	// unknown key ids arrive, so a caller cannot make the server hammer
	// the issuer (or stall behind it).
	tried time.Time
}

type claims struct {
	jwt.Claims
	Org   string   `json:"org"`
	Kind  string   `json:"toolplane_kind"`
	Tools []string `json:"toolplane_tools"`
	Roles []string `json:"toolplane_roles"`
	// Act is the actor of a delegated token: the agent acting for sub.
	Act *struct {
		Subject string `json:"sub"`
	} `json:"act"`
}

// Claims names the claims a deployment maps from its identity provider's
// tokens: each is a claim name, "" for none. Roles and Groups read a
// string or a list of strings; Manager a string; Attributes are copied as
// they are, under their names.
type Claims struct {
	Roles, Groups, Manager string
	Attributes             []string
}

// Configured reports whether any claim is mapped.
func (m Claims) Configured() bool {
	return m.Roles != "" || m.Groups != "" || m.Manager != "" || len(m.Attributes) > 0
}

// user answers what raw says of the person, as m maps it.
func (m Claims) user(raw map[string]any) *toolplane.User {
	u := &toolplane.User{Roles: ClaimStrings(raw[m.Roles]), Groups: ClaimStrings(raw[m.Groups]), Attributes: m.attributes(raw)}
	if m.Manager != "" {
		u.Manager, _ = raw[m.Manager].(string)
	}
	return u
}

// attributes answers the mapped attributes raw holds, nil for none.
func (m Claims) attributes(raw map[string]any) map[string]any {
	var out map[string]any
	for _, name := range m.Attributes {
		if v, ok := raw[name]; ok {
			if out == nil {
				out = map[string]any{}
			}
			out[name] = v
		}
	}
	return out
}

// MaxClaimValues bounds a roles or groups claim: the issuer signed it,
// which says who sent it, not that it is small.
const MaxClaimValues = 256

// ClaimStrings answers a claim's string values: one string, or the
// strings of a list, each at most toolplane.MaxRefLen long and at most
// MaxClaimValues of them. Anything else is none. Sign-in reads an ID
// token's roles and groups with it, as tokens' are read here.
func ClaimStrings(v any) []string {
	switch x := v.(type) {
	case string:
		if x != "" {
			return []string{x}
		}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok && s != "" && len(s) <= toolplane.MaxRefLen && len(out) < MaxClaimValues {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// Verify answers the credential a token stands for.
func (v *Verifier) Verify(ctx context.Context, token string) (*toolplane.Credential, error) {
	tok, err := jwt.ParseSigned(token, algorithms)
	if err != nil || len(tok.Headers) != 1 {
		return nil, ErrInvalid
	}
	key, err := v.key(ctx, tok.Headers[0].KeyID)
	if err != nil {
		return nil, err
	}
	var (
		c   claims
		raw map[string]any
	)
	if err := tok.Claims(key, &c, &raw); err != nil {
		return nil, ErrInvalid
	}
	now := v.now()
	if err := c.Validate(jwt.Expected{Issuer: v.Issuer, AnyAudience: jwt.Audience{v.Audience}, Time: now}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Expiry == nil || c.Subject == "" || c.Org == "" {
		return nil, fmt.Errorf("%w: exp, sub and org are required", ErrInvalid)
	}
	// sub and org become the caller's identity in every record; the
	// issuer's signature says who sent them, not that they are short.
	if err := errors.Join(toolplane.CheckLen("sub", c.Subject, toolplane.MaxRefLen), toolplane.CheckLen("org", c.Org, toolplane.MaxRefLen)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	cred := &toolplane.Credential{ID: "jwt:" + v.Issuer + ":" + c.Subject, OrganizationID: c.Org, Subject: c.Subject}
	if c.Act != nil {
		// A person's token handed to an agent: the agent calls, for the
		// person, within the tools the token lists (if any).
		agent := c.Act.Subject
		if agent == "" || c.Kind == string(toolplane.CredentialAgent) {
			return nil, fmt.Errorf("%w: act names the agent (act.sub) of a person's token", ErrInvalid)
		}
		if err := toolplane.CheckLen("act.sub", agent, toolplane.MaxRefLen); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		cred.ID = "jwt:" + v.Issuer + ":" + agent + ":for:" + c.Subject
		cred.Kind, cred.Subject, cred.Tools = toolplane.CredentialAgent, agent, c.Tools
		// The claims describe the person (sub), not the agent: they are
		// the person's attributes (User), never the agent's. Read as the
		// agent's, a person's department or team would let any agent
		// acting for them pass a rule written for that team's agents.
		cred.ActsFor, cred.User = c.Subject, v.Claims.user(raw)
		return cred, nil
	}
	// The token is its subject's own: its claims are the caller's.
	cred.Attributes = v.Claims.attributes(raw)
	switch toolplane.CredentialKind(c.Kind) {
	case toolplane.CredentialAgent:
		cred.Kind, cred.Tools = toolplane.CredentialAgent, c.Tools
		// An agent holds no role but act_for_users; any other is dropped.
		if slices.Contains(c.Roles, toolplane.RoleActForUsers) {
			cred.Roles = []string{toolplane.RoleActForUsers}
		}
	case toolplane.CredentialPerson:
		cred.Kind, cred.Roles = toolplane.CredentialPerson, c.Roles
	default:
		return nil, fmt.Errorf("%w: toolplane_kind must be agent or person", ErrInvalid)
	}
	return cred, nil
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// key answers the public key named kid, reading the JWKS again when the
// cached one is old or does not know kid.
func (v *Verifier) key(ctx context.Context, kid string) (any, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	refresh, minRefresh := v.Refresh, v.MinRefresh
	if refresh <= 0 {
		refresh = 10 * time.Minute
	}
	if minRefresh <= 0 {
		minRefresh = 30 * time.Second
	}
	now := v.now()
	wanted := v.keys == nil || now.Sub(v.fetched) > refresh || len(v.keys.Key(kid)) == 0
	if wanted && (v.tried.IsZero() || now.Sub(v.tried) >= minRefresh) {
		v.tried = now
		// The read is the server's, not the request's: a caller that
		// goes away does not cut it short.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		ks, err := v.fetch(fctx)
		cancel()
		if err == nil {
			v.keys, v.fetched = ks, now
		} else if v.keys == nil {
			return nil, err
		}
	}
	if v.keys == nil {
		return nil, fmt.Errorf("the issuer's keys are not available yet")
	}
	found := v.keys.Key(kid)
	if len(found) == 0 {
		return nil, fmt.Errorf("%w: unknown key %q", ErrInvalid, kid)
	}
	return found[0].Public().Key, nil
}

// maxJWKS bounds the key document.
const maxJWKS = 1 << 20

func (v *Verifier) fetch(ctx context.Context) (*jose.JSONWebKeySet, error) {
	client := v.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.JWKSURL, nil)
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", v.JWKSURL, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", v.JWKSURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("JWKS %s: status %d", v.JWKSURL, resp.StatusCode)
	}
	var ks jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJWKS)).Decode(&ks); err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", v.JWKSURL, err)
	}
	return &ks, nil
}
