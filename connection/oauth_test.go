package connection_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/oauth"
	"github.com/toolplane/toolplane/oauth/oauthtest"
)

// provider is the OpenID provider of a test with its endpoints, and the
// organization's application at it.
type provider struct {
	*oauthtest.Provider
	e         *env
	token     string // the token endpoint's path, where requests are counted
	userinfo  string
	revoke    string
	app       *toolplane.Connection
	appID     string
	appSecret string
}

// loopback lets a connection's requests reach the provider on 127.0.0.1,
// which the egress rules refuse by default.
var loopback = toolplane.EgressRules{Hosts: []string{"127.0.0.1"}, AllowCIDRs: []string{"127.0.0.1/32"}}

// startProvider runs a provider and reads its endpoints.
func startProvider(t *testing.T, e *env) *provider {
	t.Helper()
	p := &provider{Provider: oauthtest.Start(t), e: e}
	resp, err := p.HTTPClient().Get(p.Issuer + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md struct {
		Token    string `json:"token_endpoint"`
		Userinfo string `json:"userinfo_endpoint"`
		Revoke   string `json:"revocation_endpoint"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(md.Token)
	if err != nil {
		t.Fatal(err)
	}
	p.token, p.userinfo, p.revoke = u.Path, md.Userinfo, md.Revoke
	return p
}

// registerApp registers the application at the provider and creates the
// organization's connection holding it.
func (p *provider) registerApp(s *service) {
	p.e.t.Helper()
	p.appID, p.appSecret = p.RegisterClient(baseURL + connection.CallbackPath)
	p.app = p.e.create(s, admin, connection.Input{
		Name: "crm-app", Provider: "crm", Kind: toolplane.ConnectionAuthorizationCode,
		Config: toolplane.ConnectionConfig{Issuer: p.Issuer, ClientID: p.appID,
			RequestScope: []string{"openid", "offline_access"}, Egress: loopback},
		Secrets: toolplane.Secrets{ClientSecret: toolplane.SecretString(p.appSecret)},
	})
}

// works reports whether the provider takes tok as a valid access token
// of its person.
func (p *provider) works(tok toolplane.SecretString) bool {
	req, _ := http.NewRequest(http.MethodGet, p.userinfo, nil)
	req.Header.Set("Authorization", "Bearer "+tok.Reveal())
	resp, err := p.HTTPClient().Do(req)
	if err != nil {
		p.e.t.Errorf("userinfo: %v", err)
		return false
	}
	defer resp.Body.Close()
	var info struct {
		Sub string `json:"sub"`
	}
	json.NewDecoder(resp.Body).Decode(&info)
	return resp.StatusCode == http.StatusOK && info.Sub == p.UserID
}

// startState answers the start state an authorization link names,
// failing the test when it is not one of this deployment's.
func startState(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil || !strings.HasPrefix(link, baseURL+connection.StartPath+"?") || u.Query().Get("state") == "" {
		t.Fatalf("authorization link %q does not lead to %s", link, connection.StartPath)
	}
	return u.Query().Get("state")
}

// signedIn answers the credential of user signed in to a browser
// session, as the consent start is given it.
func signedIn(user string) *toolplane.Credential {
	return &toolplane.Credential{ID: "oidc:idp:" + user, OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: user}
}

// login runs the start of link on s for user, signed in, and the person's
// login at the provider, and answers the callback's state and code and
// the browser's nonce.
func (p *provider) login(s *service, user, link string) (state, code, nonce string) {
	t := p.e.t
	t.Helper()
	redirect, nonce, err := s.Start(t.Context(), signedIn(user), startState(t, link))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if !strings.HasPrefix(redirect, p.Issuer) {
		t.Fatalf("Start sent the browser to %s, not the provider", redirect)
	}
	back, err := p.Login(t.Context(), redirect)
	if err != nil {
		t.Fatalf("Login: %v", err)
	}
	if got := back.Scheme + "://" + back.Host + back.Path; got != baseURL+connection.CallbackPath {
		t.Fatalf("the provider redirected to %s", back)
	}
	q := back.Query()
	if q.Get("error") != "" || q.Get("code") == "" {
		t.Fatalf("the provider answered %v", q)
	}
	return q.Get("state"), q.Get("code"), nonce
}

// consent has user connect through the link a call of theirs is
// answered, and answers their connection.
func (p *provider) consent(s *service, user string) *toolplane.Connection {
	t := p.e.t
	t.Helper()
	_, err := p.e.release(s, call(user), tool("crm.read", "crm"), nil)
	ce := connErr(t, err, toolplane.CodeConnectionRequired)
	state, code, nonce := p.login(s, user, ce.AuthorizationURL)
	c, err := s.Callback(t.Context(), returned(state, code), nonce)
	p.e.saw(err)
	p.e.saw(c)
	if err != nil {
		t.Fatalf("Callback: %v", err)
	}
	return c
}

// due makes the access token of connection id due for a refresh: it is
// stored as expiring in two minutes, and the clock moves 90 seconds on,
// past its expiry less RefreshBefore (a minute). The token a refresh
// brings, which the provider issues for five minutes of real time, is
// not due then: the clock starts from real time each time.
func (p *provider) due(id string) {
	t := p.e.t
	t.Helper()
	p.e.clock.Set(0)
	c, _ := p.e.stored(org, id)
	c.TokenExpiresAt = p.e.clock.Now().Add(2 * time.Minute)
	if ok, err := p.e.store.UpdateConnection(t.Context(), c, nil); !ok || err != nil {
		t.Fatalf("update %s: %t, %v", id, ok, err)
	}
	p.e.clock.Set(90 * time.Second)
}

func TestAuthorizationCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := startProvider(t, e)
	s := e.service("n1")
	p.registerApp(s)
	ctx := t.Context()
	crmRead := tool("crm.read", "crm")

	// A call for sam, who has not connected: the answer links to the
	// start of his consent.
	_, err := e.release(s, call("sam"), crmRead, nil)
	ce := connErr(t, err, toolplane.CodeConnectionRequired)
	link := ce.AuthorizationURL

	// A start state is single use.
	state, code, nonce := p.login(s, "sam", link)
	_, _, err = s.Start(ctx, signedIn("sam"), startState(t, link))
	e.saw(err)
	if !errors.Is(err, connection.ErrState) {
		t.Fatalf("second Start = %v, want ErrState", err)
	}

	// An answer naming another issuer (RFC 9207) is a mix-up: refused,
	// and nothing stored.
	_, err = e.release(s, call("sam"), crmRead, nil)
	mixState, mixCode, mixNonce := p.login(s, "sam", connErr(t, err, toolplane.CodeConnectionRequired).AuthorizationURL)
	mixed := returned(mixState, mixCode)
	mixed.Set("iss", "https://other-issuer.example")
	if _, err := s.Callback(ctx, mixed, mixNonce); !errors.Is(err, connection.ErrState) {
		t.Fatalf("Callback from another issuer = %v, want ErrState", err)
	}
	if cs, _, _ := e.store.ListConnections(ctx, org, toolplane.ConnectionFilter{UserID: "sam"}, "", 10); len(cs) != 0 {
		t.Fatalf("a mixed-up callback stored a connection for sam")
	}

	// The application's own issuer is accepted.
	back := returned(state, code)
	back.Set("iss", p.app.Config.Issuer)
	c, err := s.Callback(ctx, back, nonce)
	e.saw(err)
	e.saw(c)
	if err != nil {
		t.Fatalf("Callback: %v", err)
	}
	if c.UserID != "sam" || c.State != toolplane.ConnectionActive || c.Kind != toolplane.ConnectionAuthorizationCode ||
		c.Config.App != p.app.ID || c.Provider != "crm" || c.Secret != nil || c.Owner != "sam" {
		t.Fatalf("Callback answered %+v", c)
	}
	if _, err := s.Callback(ctx, returned(state, code), nonce); !errors.Is(err, connection.ErrState) {
		t.Fatalf("replayed Callback = %v, want ErrState", err)
	}

	// sam's calls now carry his access token, which the provider takes.
	requests := e.count(p.token)
	r, err := e.release(s, call("sam"), crmRead, nil)
	if err != nil {
		t.Fatalf("Release for sam: %v", err)
	}
	if r.Connection.ID != c.ID || !p.works(r.Secrets.AccessToken) || r.Secrets.ClientSecret != "" {
		t.Fatalf("released %s, want %s with a working token and no client secret", r.Connection.ID, c.ID)
	}
	if e.count(p.token) != requests {
		t.Errorf("a fresh token was renewed")
	}
	// Nobody else's call uses it: not kim's, not a call for no one.
	for _, user := range []string{"kim", ""} {
		_, err := e.release(s, call(user), crmRead, nil)
		ce := connErr(t, err, toolplane.CodeConnectionRequired)
		if (user != "") != (ce.AuthorizationURL != "") {
			t.Errorf("call for %q: authorization link %q", user, ce.AuthorizationURL)
		}
	}
	_, err = e.release(s, call("kim"), crmRead, map[string]any{connection.ChoiceArgument: c.ID})
	connErr(t, err, toolplane.CodeConnectionRequired)

	// A callback completed in another browser than the one sent to the
	// provider is refused, and stores nothing.
	_, err = e.release(s, call("kim"), crmRead, nil)
	state, code, _ = p.login(s, "kim", connErr(t, err, toolplane.CodeConnectionRequired).AuthorizationURL)
	_, err = s.Callback(ctx, returned(state, code), "another browser's nonce")
	e.saw(err)
	if !errors.Is(err, connection.ErrState) {
		t.Fatalf("Callback with another nonce = %v, want ErrState", err)
	}
	if cs, _, _ := e.store.ListConnections(ctx, org, toolplane.ConnectionFilter{UserID: "kim"}, "", 10); len(cs) != 0 {
		t.Errorf("a refused callback stored a connection for kim")
	}

	// States expire: a start link, and a callback, after StateTTL.
	_, err = e.release(s, call("kim"), crmRead, nil)
	expiredLink := connErr(t, err, toolplane.CodeConnectionRequired).AuthorizationURL
	_, err = e.release(s, call("kim"), crmRead, nil)
	state, code, nonce = p.login(s, "kim", connErr(t, err, toolplane.CodeConnectionRequired).AuthorizationURL)
	e.clock.Advance(11 * time.Minute)
	// The sweep removes them (the start link and the callback's state at
	// least), and finds nothing the second time.
	if n, err := s.SweepStates(ctx); err != nil || n < 2 {
		t.Errorf("SweepStates = %d, %v; want the two expired states at least", n, err)
	}
	if n, err := s.SweepStates(ctx); err != nil || n != 0 {
		t.Errorf("SweepStates again = %d, %v; want 0", n, err)
	}
	if _, _, err := s.Start(ctx, signedIn("kim"), startState(t, expiredLink)); !errors.Is(err, connection.ErrState) {
		t.Errorf("Start after the state's expiry = %v, want ErrState", err)
	}
	if _, err := s.Callback(ctx, returned(state, code), nonce); !errors.Is(err, connection.ErrState) {
		t.Errorf("Callback after the state's expiry = %v, want ErrState", err)
	}
	if cs, _, _ := e.store.ListConnections(ctx, org, toolplane.ConnectionFilter{UserID: "kim"}, "", 10); len(cs) != 0 {
		t.Errorf("an expired callback stored a connection for kim")
	}
}

func TestRefresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := startProvider(t, e)
	a := e.service("n1")
	b := e.service("n2")
	p.registerApp(a)
	ctx := t.Context()
	crmRead := tool("crm.read", "crm")
	c := p.consent(a, "sam")
	_, first := e.stored(org, c.ID)

	// Due: the broker refreshes through the provider and keeps the new
	// token.
	p.due(c.ID)
	requests := e.count(p.token)
	r, err := e.release(a, call("sam"), crmRead, nil)
	if err != nil {
		t.Fatalf("Release of a due token: %v", err)
	}
	row, sec := e.stored(org, c.ID)
	if e.count(p.token) != requests+1 || r.Secrets.AccessToken == first.AccessToken ||
		sec.AccessToken != r.Secrets.AccessToken || !p.works(r.Secrets.AccessToken) {
		t.Fatalf("a due token was not refreshed and kept: %d requests", e.count(p.token)-requests)
	}
	if !row.TokenExpiresAt.After(e.clock.Now().Add(time.Minute)) || row.RefreshOwner != "" {
		t.Errorf("stored expiry %v, lease %q", row.TokenExpiresAt, row.RefreshOwner)
	}
	if _, err := e.release(b, call("sam"), crmRead, nil); err != nil || e.count(p.token) != requests+1 {
		t.Errorf("another node renewed a fresh token: %v", err)
	}

	// Several calls on two nodes at once with the token due: one
	// refresh, and every call a working token.
	p.due(c.ID)
	requests = e.count(p.token)
	toks := atOnce(t, 6, []*service{a, b}, func(s *service) (*toolplane.Released, error) {
		return e.release(s, call("sam"), crmRead, nil)
	})
	if n := e.count(p.token) - requests; n != 1 {
		t.Errorf("%d refresh requests reached the provider, want 1", n)
	}
	for tok := range toks {
		if !p.works(tok) {
			t.Errorf("a call was given a token the provider refuses")
		}
	}

	// The grant revoked at the provider: the refresh is refused, the
	// connection needs a new consent, and the call links to it.
	_, sec = e.stored(org, c.ID)
	cfg := oauth.Config{RevokeURL: p.revoke, ClientID: p.appID, ClientSecret: toolplane.SecretString(p.appSecret), HTTPClient: p.HTTPClient()}
	if err := oauth.Revoke(ctx, cfg, sec.RefreshToken); err != nil {
		t.Fatalf("revoke at the provider: %v", err)
	}
	p.due(c.ID)
	for _, s := range []*service{a, b} { // the refusal, then the state it left
		_, err = e.release(s, call("sam"), crmRead, nil)
		ce := connErr(t, err, toolplane.CodeConnectionExpired)
		if ce.AuthorizationURL == "" {
			t.Fatalf("connection_expired without an authorization link: %s", ce.Message)
		}
		startState(t, ce.AuthorizationURL)
	}
	if row, _ := e.stored(org, c.ID); row.State != toolplane.ConnectionNeedsReauth || row.Reason == "" {
		t.Fatalf("after the provider refused the grant: state %s, reason %q", row.State, row.Reason)
	}
	if chs, _, _ := e.store.ListChanges(ctx, org, "connection.needs_reauth", c.ID, "", 10); len(chs) != 1 {
		t.Errorf("needing a new consent recorded %d changes, want 1", len(chs))
	}

	// sam consents again: the same connection is active again.
	_, err = e.release(b, call("sam"), crmRead, nil)
	state, code, nonce := p.login(b, "sam", connErr(t, err, toolplane.CodeConnectionExpired).AuthorizationURL)
	again, err := b.Callback(ctx, returned(state, code), nonce)
	e.saw(again)
	e.saw(err)
	if err != nil || again.ID != c.ID || again.State != toolplane.ConnectionActive || again.Reason != "" {
		t.Fatalf("consent again = %+v, %v; want %s active", again, err, c.ID)
	}
	for _, s := range []*service{a, b} {
		r, err := e.release(s, call("sam"), crmRead, nil)
		if err != nil || r.Connection.ID != c.ID || !p.works(r.Secrets.AccessToken) {
			t.Fatalf("Release after consenting again = %v", err)
		}
	}
}

// TestRefreshOnceOnANode releases a due token for many calls on one node
// at once: the node asks the provider once.
func TestRefreshOnceOnANode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := startProvider(t, e)
	s := e.service("n1")
	p.registerApp(s)
	c := p.consent(s, "sam")
	for round := range 3 {
		p.due(c.ID)
		requests := e.count(p.token)
		toks := atOnce(t, 8, []*service{s}, func(s *service) (*toolplane.Released, error) {
			return e.release(s, call("sam"), tool("crm.read", "crm"), nil)
		})
		if n := e.count(p.token) - requests; n != 1 {
			t.Fatalf("round %d: %d refresh requests reached the provider, want 1", round, n)
		}
		for tok := range toks {
			if !p.works(tok) {
				t.Errorf("round %d: a call was given a token the provider refuses", round)
			}
		}
	}
}

func TestClientCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := startProvider(t, e)
	s := e.service("n1")
	c := e.create(s, admin, connection.Input{
		Name: "crm-service", Provider: "crm", Kind: toolplane.ConnectionClientCredentials,
		Config:  toolplane.ConnectionConfig{Issuer: p.Issuer, ClientID: oauthtest.ServiceClientID, RequestScope: []string{"openid"}, Egress: loopback},
		Secrets: toolplane.Secrets{ClientSecret: oauthtest.ServiceClientSecret},
	})
	crmRead := tool("crm.read", "crm")

	r, err := e.release(s, call(""), crmRead, nil)
	if err != nil {
		t.Fatalf("first Release: %v", err)
	}
	minted := r.Secrets.AccessToken
	if r.Connection.ID != c.ID || minted == "" || e.count(p.token) != 1 {
		t.Fatalf("first Release minted %t with %d token requests", minted != "", e.count(p.token))
	}
	if row, sec := e.stored(org, c.ID); sec.AccessToken != minted || row.TokenExpiresAt.IsZero() {
		t.Errorf("the minted token was not kept with its expiry")
	}
	// Cached: on this node, and on a node that starts now.
	for _, s := range []*service{s, e.service("n2")} {
		r, err = e.release(s, call(""), crmRead, nil)
		if err != nil || r.Secrets.AccessToken != minted || e.count(p.token) != 1 {
			t.Fatalf("Release of a fresh token = %v, %d token requests; want the cached one", err, e.count(p.token))
		}
	}
	// Expired: minted again.
	e.clock.Advance(10 * time.Minute)
	r, err = e.release(s, call(""), crmRead, nil)
	if err != nil || r.Secrets.AccessToken == minted || r.Secrets.AccessToken == "" || e.count(p.token) != 2 {
		t.Fatalf("Release after expiry = %v, %d token requests; want a new token", err, e.count(p.token))
	}
}

// TestScopeGrowth grows the scopes the application asks for after sam
// consented: his calls must consent again before they use the token.
func TestScopeGrowth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := startProvider(t, e)
	s := e.service("n1")
	p.registerApp(s)
	c := p.consent(s, "sam")
	if _, err := e.release(s, call("sam"), tool("crm.read", "crm"), nil); err != nil {
		t.Fatalf("Release before the scopes grew: %v", err)
	}
	app, _ := e.stored(org, p.app.ID)
	app.Config.RequestScope = append(app.Config.RequestScope, "email")
	if ok, err := e.store.UpdateConnection(t.Context(), app, nil); !ok || err != nil {
		t.Fatalf("update the application: %t, %v", ok, err)
	}
	_, err := e.release(s, call("sam"), tool("crm.read", "crm"), nil)
	ce := connErr(t, err, toolplane.CodeConnectionExpired)
	if !strings.Contains(ce.Message, "email") || !strings.Contains(ce.Message, c.ID) {
		t.Errorf("message %q does not name the connection and the scope", ce.Message)
	}
	// Consenting again grants the grown scopes.
	state, code, nonce := p.login(s, "sam", ce.AuthorizationURL)
	again, err := s.Callback(t.Context(), returned(state, code), nonce)
	e.saw(err)
	if err != nil || again.ID != c.ID {
		t.Fatalf("consent again = %v, %v", again, err)
	}
	if _, err := e.release(s, call("sam"), tool("crm.read", "crm"), nil); err != nil {
		t.Fatalf("Release after consenting to the grown scopes: %v", err)
	}
}

// TestSecretsNeverShown drives the paths where a secret sits closest to
// an answer or a log line: a provider refusing a client's secret, a
// connection refused with its secrets given, a grant refused on renewal.
// The environment's scan then finds none of the secrets anywhere.
func TestSecretsNeverShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := startProvider(t, e)
	s := e.service("n1")

	wrong := secretToken("client-secret")
	e.create(s, admin, connection.Input{
		Name: "crm-service", Provider: "crm", Kind: toolplane.ConnectionClientCredentials,
		Config:  toolplane.ConnectionConfig{Issuer: p.Issuer, ClientID: oauthtest.ServiceClientID, Egress: loopback},
		Secrets: toolplane.Secrets{ClientSecret: toolplane.SecretString(wrong)},
	})
	_, err := e.release(s, call(""), tool("crm.read", "crm"), nil)
	connErr(t, err, toolplane.CodeUnavailable)
	if !strings.Contains(e.logs.String(), "token renewal failed") {
		t.Errorf("the refused renewal was not logged")
	}

	for _, in := range []connection.Input{
		{Name: "db", Provider: "db", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{Driver: "oracle"},
			Secrets: toolplane.Secrets{DSN: toolplane.SecretString("postgres://u:" + secretToken("dsn") + "@db/x")}},
		{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{Auth: toolplane.AuthHeader, Header: "X Key"},
			Secrets: toolplane.Secrets{Token: toolplane.SecretString(secretToken("header"))}},
	} {
		e.plant(in.Secrets.DSN.Reveal(), in.Secrets.Token.Reveal())
		_, err := s.Create(t.Context(), admin, in)
		e.saw(err)
		if !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("Create = %v, want ErrInvalid", err)
		}
	}

	p.registerApp(s)
	c := p.consent(s, "sam")
	_, sec := e.stored(org, c.ID)
	cfg := oauth.Config{RevokeURL: p.revoke, ClientID: p.appID, ClientSecret: toolplane.SecretString(p.appSecret), HTTPClient: p.HTTPClient()}
	if err := oauth.Revoke(t.Context(), cfg, sec.RefreshToken); err != nil {
		t.Fatal(err)
	}
	p.due(c.ID)
	_, err = e.release(s, call("sam"), tool("crm.read", "crm"), nil)
	connErr(t, err, toolplane.CodeConnectionExpired)
	got, err := s.Get(t.Context(), sam, c.ID)
	e.saw(got)
	e.saw(err)
	list, _, err := s.List(t.Context(), admin, toolplane.ConnectionFilter{}, "", 10)
	e.saw(list)
	e.saw(err)
}

// returned is the query of the provider's redirect to the callback.
func returned(state, code string) url.Values {
	return url.Values{"state": {state}, "code": {code}}
}

// TestStartIsThePersonsOwn: an authorization link opened by anyone but
// the person it is for, signed in, is refused and stays usable by that
// person; the consent records who started it.
func TestStartIsThePersonsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := startProvider(t, e)
	s := e.service("n1")
	p.registerApp(s)
	ctx := t.Context()
	_, err := e.release(s, call("sam"), tool("crm.read", "crm"), nil)
	link := connErr(t, err, toolplane.CodeConnectionRequired).AuthorizationURL
	state := startState(t, link)

	otherOrg := signedIn("sam")
	otherOrg.OrganizationID = "org-elsewhere"
	agent := signedIn("sam")
	agent.Kind = toolplane.CredentialAgent
	for name, by := range map[string]*toolplane.Credential{
		"another person": signedIn("kim"),
		"the same subject in another organization": otherOrg,
		"an agent": agent,
		"nobody":   nil,
	} {
		_, _, err := s.Start(ctx, by, state)
		e.saw(err)
		if !errors.Is(err, connection.ErrNotYours) || !errors.Is(err, toolplane.ErrForbidden) {
			t.Errorf("Start by %s = %v, want ErrNotYours", name, err)
		}
	}

	// The link still works for sam, once.
	st, code, nonce := p.login(s, "sam", link)
	c, err := s.Callback(ctx, returned(st, code), nonce)
	if err != nil {
		t.Fatalf("Callback = %v", err)
	}
	chs, _, err := e.store.ListChanges(ctx, org, "connection.consent", c.ID, "", 10)
	if err != nil || len(chs) != 1 {
		t.Fatalf("consent changes = %d, %v; want 1", len(chs), err)
	}
	var detail map[string]any
	if err := json.Unmarshal(chs[0].Detail, &detail); err != nil || chs[0].Actor != "sam" || detail["started_by"] != signedIn("sam").ID {
		t.Errorf("consent change: actor %q, detail %s; want sam, started by %s", chs[0].Actor, chs[0].Detail, signedIn("sam").ID)
	}
}

// TestRenewARefusedToken renews a token a downstream refused though it
// was not due: calls refused at once on two nodes cost the provider one
// refresh, each gets a working token other than the refused one, and a
// call still holding the refused token once it was renewed takes the
// renewed one without another refresh.
func TestRenewARefusedToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := startProvider(t, e)
	a := e.service("n1")
	b := e.service("n2")
	p.registerApp(a)
	c := p.consent(a, "sam")
	crmRead := tool("crm.read", "crm")
	refused, err := e.release(a, call("sam"), crmRead, nil)
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	requests := e.count(p.token)
	toks := atOnce(t, 6, []*service{a, b}, func(s *service) (*toolplane.Released, error) {
		r, err := s.Renew(t.Context(), releaseOf(call("sam"), crmRead, nil), refused)
		e.saw(err)
		if err == nil && r == nil {
			err = errors.New("Renew answered neither a token nor an error")
		}
		if r != nil {
			e.saw(r.Connection)
		}
		return r, err
	})
	if n := e.count(p.token) - requests; n != 1 {
		t.Errorf("%d refresh requests reached the provider, want 1", n)
	}
	for tok := range toks {
		if tok == refused.Secrets.AccessToken || !p.works(tok) {
			t.Error("a renewal answered the refused token, or one the provider refuses")
		}
	}
	if _, sec := e.stored(org, c.ID); !toks[sec.AccessToken] {
		t.Error("the renewed token answered is not the one stored")
	}
	// A call that held the refused token all along takes the renewed one.
	late, err := b.Renew(t.Context(), releaseOf(call("sam"), crmRead, nil), refused)
	if err != nil || late == nil || !toks[late.Secrets.AccessToken] || e.count(p.token)-requests != 1 {
		t.Errorf("a late renewal = %v, %v, after %d refreshes; want the renewed token and no refresh", late, err, e.count(p.token)-requests)
	}
}

// atOnce runs get n times at once, spread over the nodes in turn, and
// answers the distinct access tokens the calls were given: a refresh
// raced by many calls must reach the provider once and hand every call
// a token that works.
func atOnce(t *testing.T, n int, nodes []*service, get func(*service) (*toolplane.Released, error)) map[toolplane.SecretString]bool {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		toks  = map[toolplane.SecretString]bool{}
		start = make(chan struct{})
	)
	for i := range n {
		s := nodes[i%len(nodes)]
		wg.Go(func() {
			<-start
			r, err := get(s)
			if err != nil {
				t.Errorf("a call at once: %v", err)
				return
			}
			mu.Lock()
			toks[r.Secrets.AccessToken] = true
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return toks
}

// TestRenewOfAConnectionAwaitingConsentLinksToIt: a renewal asked for a
// person's connection that another call meanwhile found refused (and
// stored as needing a new consent) answers connection_expired with the
// link to that consent, as a release of it does.
func TestRenewOfAConnectionAwaitingConsentLinksToIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := startProvider(t, e)
	a := e.service("n1")
	p.registerApp(a)
	p.consent(a, "sam")
	crmRead := tool("crm.read", "crm")
	refused, err := e.release(a, call("sam"), crmRead, nil)
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	marked := a.Refused(t.Context(), releaseOf(call("sam"), crmRead, nil), refused.Connection)
	if marked == nil || marked.Code != toolplane.CodeConnectionExpired || marked.AuthorizationURL == "" {
		t.Fatalf("Refused = %+v; want connection_expired with a link", marked)
	}
	r, err := a.Renew(t.Context(), releaseOf(call("sam"), crmRead, nil), refused)
	e.saw(err)
	if ce := connErr(t, err, toolplane.CodeConnectionExpired); r != nil || ce.AuthorizationURL == "" {
		t.Errorf("Renew = %v, %+v; want connection_expired linking to the new consent", r, ce)
	}
}
