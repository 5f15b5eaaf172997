package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolplane/toolplane"
)

// The refusals of discovery. Each is the connection's settings at fault
// (toolplane.ErrInvalid); a provider that fails or cannot be reached
// answers a *TransientError instead.
var (
	// ErrNoMetadata: none of the well-known URLs answers usable metadata.
	ErrNoMetadata = toolplane.Refine(toolplane.ErrInvalid, "no oauth metadata found")
	// ErrIssuerMismatch: the metadata names another issuer than the one
	// asked for. Using it would let one provider pose as another (the
	// mix-up attack, RFC 8414 section 3.3), so it is refused.
	ErrIssuerMismatch = toolplane.Refine(toolplane.ErrInvalid, "oauth metadata names another issuer")
	// ErrResourceMismatch: a protected resource's metadata describes a
	// resource that does not cover the URL asked about (RFC 9728 section
	// 3.3).
	ErrResourceMismatch = toolplane.Refine(toolplane.ErrInvalid, "oauth protected resource metadata names another resource")
	// ErrInsecureEndpoint: an issuer, resource or endpoint is not an
	// https URL (plain http is accepted for loopback hosts only).
	ErrInsecureEndpoint = toolplane.Refine(toolplane.ErrInvalid, "oauth endpoint not https")
)

// maxMetadata bounds a metadata document read.
const maxMetadata = 1 << 20

// Metadata is an authorization server's metadata (RFC 8414, or OpenID
// Connect Discovery, whose document carries the same fields).
type Metadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint,omitempty"`
	TokenEndpoint                     string   `json:"token_endpoint,omitempty"`
	RevocationEndpoint                string   `json:"revocation_endpoint,omitempty"`
	RegistrationEndpoint              string   `json:"registration_endpoint,omitempty"`
	ScopesSupported                   []string `json:"scopes_supported,omitempty"`
	ResponseTypesSupported            []string `json:"response_types_supported,omitempty"`
	GrantTypesSupported               []string `json:"grant_types_supported,omitempty"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported,omitempty"`
}

// SupportsS256 reports whether the server says it accepts PKCE with S256.
// A server that does not say may ignore the challenge; an authorization
// code connection should not be made with it.
func (m *Metadata) SupportsS256() bool {
	for _, s := range m.CodeChallengeMethodsSupported {
		if s == "S256" {
			return true
		}
	}
	return false
}

// Apply fills the endpoints c leaves empty from the metadata, and its
// client authentication method, when unset and c has a secret, with the
// one the server prefers of those this package speaks.
func (m *Metadata) Apply(c *Config) {
	if c.AuthorizeURL == "" {
		c.AuthorizeURL = m.AuthorizationEndpoint
	}
	if c.TokenURL == "" {
		c.TokenURL = m.TokenEndpoint
	}
	if c.RevokeURL == "" {
		c.RevokeURL = m.RevocationEndpoint
	}
	if c.AuthMethod != "" || c.ClientSecret == "" {
		return
	}
	// RFC 8414 section 2: absent, the server supports client_secret_basic.
	c.AuthMethod = AuthSecretBasic
	methods := m.TokenEndpointAuthMethodsSupported
	if len(methods) > 0 && !contains(methods, string(AuthSecretBasic)) && contains(methods, string(AuthSecretPost)) {
		c.AuthMethod = AuthSecretPost
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Discover reads the metadata of the authorization server issuer through
// hc: first at the RFC 8414 well-known URL, then at OpenID Connect
// Discovery's (for an issuer with a path, both the inserted and the
// appended forms). The metadata's issuer must equal issuer exactly, and
// every endpoint must be https unless its host is loopback.
func Discover(ctx context.Context, hc *http.Client, issuer string) (*Metadata, error) {
	u, err := secureURL(issuer)
	if err != nil {
		return nil, fmt.Errorf("oauth discovery of %q: %w", issuer, err)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("oauth discovery of %q: %w: an issuer has no query or fragment", issuer, toolplane.ErrInvalid)
	}
	if hc == nil {
		return nil, fmt.Errorf("oauth discovery: %w: no HTTP client", ErrConfig)
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	origin := u.Scheme + "://" + u.Host
	candidates := []string{origin + "/.well-known/oauth-authorization-server" + path}
	if path == "" {
		candidates = append(candidates, origin+"/.well-known/openid-configuration")
	} else {
		candidates = append(candidates,
			origin+"/.well-known/openid-configuration"+path,
			origin+path+"/.well-known/openid-configuration")
	}
	var m *Metadata
	found, err := fetchFirst(ctx, hc, "discovery", candidates, func() any { m = new(Metadata); return m })
	if err != nil {
		return nil, err
	}
	if m.Issuer != issuer {
		return nil, fmt.Errorf("oauth discovery at %s: %w: %q, not %q", found, ErrIssuerMismatch, m.Issuer, issuer)
	}
	if m.TokenEndpoint == "" {
		return nil, fmt.Errorf("oauth discovery at %s: %w: no token endpoint", found, ErrNoMetadata)
	}
	for _, e := range []string{m.AuthorizationEndpoint, m.TokenEndpoint, m.RevocationEndpoint, m.RegistrationEndpoint} {
		if e == "" {
			continue
		}
		if _, err := secureURL(e); err != nil {
			return nil, fmt.Errorf("oauth discovery at %s: endpoint %q: %w", found, e, err)
		}
	}
	return m, nil
}

// ResourceMetadata is a protected resource's metadata (RFC 9728): which
// authorization servers issue tokens for it.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported,omitempty"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// DiscoverResource reads the metadata of the protected resource at
// resource (an upstream MCP server's URL) through hc, as the MCP
// authorization specification does: from the resource_metadata URL of
// challenge, the WWW-Authenticate header of the resource's 401, when it
// has one; otherwise from the RFC 9728 well-known URL of resource's path,
// then of its origin. The metadata's resource must cover resource (same
// origin, and its path resource's path or a parent of it), and it must
// name at least one authorization server, https unless loopback.
func DiscoverResource(ctx context.Context, hc *http.Client, resource, challenge string) (*ResourceMetadata, error) {
	u, err := secureURL(resource)
	if err != nil {
		return nil, fmt.Errorf("oauth resource discovery of %q: %w", resource, err)
	}
	if hc == nil {
		return nil, fmt.Errorf("oauth resource discovery: %w: no HTTP client", ErrConfig)
	}
	var candidates []string
	if mu, ok := ResourceMetadataURL(challenge); ok {
		if _, err := secureURL(mu); err != nil {
			return nil, fmt.Errorf("oauth resource discovery: resource_metadata %q: %w", mu, err)
		}
		candidates = []string{mu}
	} else {
		origin := u.Scheme + "://" + u.Host
		if path := strings.TrimSuffix(u.EscapedPath(), "/"); path != "" {
			candidates = append(candidates, origin+"/.well-known/oauth-protected-resource"+path)
		}
		candidates = append(candidates, origin+"/.well-known/oauth-protected-resource")
	}
	var m *ResourceMetadata
	found, err := fetchFirst(ctx, hc, "resource discovery", candidates, func() any { m = new(ResourceMetadata); return m })
	if err != nil {
		return nil, err
	}
	if !covers(m.Resource, u) {
		return nil, fmt.Errorf("oauth resource discovery at %s: %w: %q does not cover %q", found, ErrResourceMismatch, m.Resource, resource)
	}
	if len(m.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("oauth resource discovery at %s: %w: no authorization server", found, ErrNoMetadata)
	}
	for _, s := range m.AuthorizationServers {
		if _, err := secureURL(s); err != nil {
			return nil, fmt.Errorf("oauth resource discovery at %s: authorization server %q: %w", found, s, err)
		}
	}
	return m, nil
}

// covers reports whether the resource identifier r names u or a parent of
// it: same scheme and host, and r's path u's path or a segment-wise prefix
// of it.
func covers(r string, u *url.URL) bool {
	ru, err := url.Parse(r)
	if err != nil || ru.Fragment != "" || !strings.EqualFold(ru.Scheme, u.Scheme) || !strings.EqualFold(ru.Host, u.Host) {
		return false
	}
	rp := strings.TrimSuffix(ru.EscapedPath(), "/")
	up := strings.TrimSuffix(u.EscapedPath(), "/")
	return rp == up || strings.HasPrefix(up, rp+"/")
}

// fetchFirst GETs each candidate in turn and decodes the first JSON
// document answered into newDoc's value, answering its URL. A candidate
// that is missing (4xx) or answers something other than a JSON object is
// passed over; when none answers, a failure seen on the way (5xx, 429, the
// network) makes the answer a *TransientError, otherwise ErrNoMetadata.
func fetchFirst(ctx context.Context, hc *http.Client, op string, candidates []string, newDoc func() any) (string, error) {
	var transient error
	for _, c := range candidates {
		ok, err := fetchJSON(ctx, hc, op, c, newDoc())
		if ok {
			return c, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return "", err
			}
			transient = err
		}
	}
	if transient != nil {
		return "", transient
	}
	return "", fmt.Errorf("oauth %s: %w at %s", op, ErrNoMetadata, strings.Join(candidates, ", "))
}

// fetchJSON GETs u and decodes it into doc. It answers true when it did;
// false and a *TransientError when the server failed or could not be
// reached; false and nil when u has no document.
func fetchJSON(ctx context.Context, hc *http.Client, op, u string, doc any) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, nil
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return false, transportError(op, err, nil)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusTooManyRequests:
		return false, &TransientError{Op: op, Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header),
			msg: fmt.Sprintf("%s answered status %d", u, resp.StatusCode)}
	case resp.StatusCode != http.StatusOK:
		return false, nil
	}
	// A catch-all page served for every path answers 200 with HTML.
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "" && ct != "application/json" && !strings.HasSuffix(ct, "+json") {
		return false, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadata+1))
	if err != nil {
		return false, transportError(op, err, nil)
	}
	if len(body) > maxMetadata || json.Unmarshal(body, doc) != nil {
		return false, nil
	}
	return true, nil
}

// secureURL parses an absolute URL and refuses it unless it is https, or
// http to a loopback host (a provider on the same machine, as in tests).
func secureURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return nil, fmt.Errorf("%w: not an absolute URL", toolplane.ErrInvalid)
	}
	switch {
	case u.Scheme == "https":
		return u, nil
	case u.Scheme == "http" && loopbackOrLocalhostDomain(u.Hostname()):
		return u, nil
	}
	return nil, ErrInsecureEndpoint
}

// loopbackOrLocalhostDomain reports whether host is a loopback address,
// localhost, or a name under .localhost (RFC 6761 keeps them on this
// machine), in any case, by its name alone: nothing is resolved. It is
// wider than egress.LoopbackHost, which takes only "localhost" and IP
// literals: an authorization server's URL may be any name RFC 6761
// reserves for this machine.
func loopbackOrLocalhostDomain(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
