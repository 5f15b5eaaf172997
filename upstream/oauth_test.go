package upstream_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/pkg/client/rs"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/oauth"
	"github.com/toolplane/toolplane/oauth/oauthtest"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
	"github.com/toolplane/toolplane/upstream"
)

// protected is an MCP server that takes OAuth bearer tokens, as the MCP
// authorization specification has a server do: the SDK's bearer-token
// middleware in front of its Streamable HTTP handler, verifying each token
// at the provider's introspection endpoint, and its protected resource
// metadata (RFC 9728) naming the provider as its authorization server. A
// static service token, toolplane's own, is taken too, for listing.
type protected struct {
	url     string // the MCP endpoint: the resource
	service string // the service token
	// scoped, when set, makes the server want a scope no token has: it
	// answers 403 insufficient scope.
	scoped atomic.Bool

	mu sync.Mutex
	// calls are the subjects of the tokens tools/call requests carried,
	// in order.
	calls []string
}

func (s *protected) called() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// startProtected runs the server. Tokens are introspected as the client
// id and secret given: the example provider answers an introspection
// only to a client in the token's audience, the application the tokens
// were issued to.
func startProtected(t *testing.T, p *oauthtest.Provider, clientID, clientSecret string) *protected {
	t.Helper()
	s := &protected{service: "svc-" + rand.Text()}
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "Answer whose notes these are."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoami, error) {
			sub := ""
			if ti := req.Extra.TokenInfo; ti != nil {
				sub = ti.UserID
			}
			s.mu.Lock()
			s.calls = append(s.calls, sub)
			s.mu.Unlock()
			return nil, whoami{Subject: sub}, nil
		})
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	s.url = hs.URL + "/mcp"
	metadata := hs.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: s.url, AuthorizationServers: []string{p.Issuer}, BearerMethodsSupported: []string{"header"},
	}))
	var (
		once     sync.Once
		server   rs.ResourceServer
		startErr error
	)
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if token == s.service {
			return &auth.TokenInfo{UserID: "toolplane-service", Expiration: time.Now().Add(time.Hour)}, nil
		}
		once.Do(func() {
			server, startErr = rs.NewResourceServerClientCredentials(context.Background(), p.Issuer, clientID, clientSecret)
		})
		if startErr != nil {
			return nil, startErr
		}
		in, err := rs.Introspect[*oidc.IntrospectionResponse](ctx, server, token)
		if err != nil {
			return nil, err
		}
		if !in.Active {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: in.Subject, Scopes: in.Scope, Expiration: in.Expiration.AsTime()}, nil
	}
	api := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	open := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: metadata})(api)
	scoped := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: metadata, Scopes: []string{"notes:write"}})(api)
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.scoped.Load() && r.Header.Get("Authorization") != "Bearer "+s.service {
			scoped.ServeHTTP(w, r)
			return
		}
		open.ServeHTTP(w, r)
	}))
	return s
}

type whoami struct {
	Subject string `json:"subject"`
}

// oauthWorld is toolplane calling the protected server for people, through
// the real invoker and broker.
type oauthWorld struct {
	t     *testing.T
	p     *oauthtest.Provider
	up    *protected
	svc   *connection.Admin
	iv    *invoke.Invoker
	keys  *secret.Keyring
	store interface {
		GetConnection(ctx context.Context, org, id string) (*toolplane.Connection, error)
		UpdateConnection(ctx context.Context, c *toolplane.Connection, ch *toolplane.Change) (bool, error)
	}
	appID, appSecret string
}

const (
	oauthOrg     = "org-1"
	oauthBaseURL = "https://toolplane.test"
)

var oauthAdmin = &toolplane.Credential{ID: "tpk_admin", OrganizationID: oauthOrg, Kind: toolplane.CredentialPerson, Subject: "root", Roles: []string{toolplane.RolePlatformAdmin}}

func newOAuthWorld(t *testing.T) *oauthWorld {
	t.Helper()
	ctx := t.Context()
	p := oauthtest.Start(t)
	appID, appSecret := p.RegisterClient(oauthBaseURL + connection.CallbackPath)
	up := startProtected(t, p, appID, appSecret)

	// What an operator does: the server's 401 names its metadata, whose
	// authorization server is the application's issuer, and whose
	// resource the tokens are bound to.
	resp, err := http.Post(up.url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the server answered a call without a token %d", resp.StatusCode)
	}
	md, err := oauth.DiscoverResource(ctx, http.DefaultClient, up.url, resp.Header.Get("WWW-Authenticate"))
	if err != nil {
		t.Fatalf("DiscoverResource: %v", err)
	}
	if len(md.AuthorizationServers) == 0 || md.AuthorizationServers[0] != p.Issuer {
		t.Fatalf("the metadata names %v, not the provider %s", md.AuthorizationServers, p.Issuer)
	}

	keys := func() *secret.Keyring {
		k, err := secret.ParseKeyring("k1 " + newKeyText() + "\n")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}()
	store := sqlitetest.Open(t, filepath.Join(t.TempDir(), "toolplane.db"))
	quiet := slog.New(slog.DiscardHandler)
	svc, broker, err := connection.New(connection.Config{Store: store, Keys: keys, BaseURL: oauthBaseURL, Node: "n1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, oauthAdmin, connection.Input{
		Name: "notes-app", Provider: "notes", Kind: toolplane.ConnectionAuthorizationCode,
		Config: toolplane.ConnectionConfig{Issuer: md.AuthorizationServers[0], ClientID: appID, Resource: md.Resource, RequestScope: []string{"openid", "offline_access"},
			Egress: toolplane.EgressRules{Hosts: []string{"127.0.0.1"}, AllowCIDRs: []string{"127.0.0.1/32"}}},
		Secrets: toolplane.Secrets{ClientSecret: toolplane.SecretString(appSecret)},
	}); err != nil {
		t.Fatalf("create the application: %v", err)
	}

	set, err := upstream.New([]upstream.Config{{
		Slug: "notes", URL: up.url, Connection: "notes",
		Headers: map[string]string{"Authorization": "Bearer " + up.service},
		Tools:   map[string]upstream.Relax{"whoami": {Effect: toolplane.EffectRead, RequiresApproval: no()}},
	}}, upstream.Options{Logger: quiet, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	hs := handler.NewRegistry()
	reg, _, err := registry.Build(nil, registry.Options{Bindings: bindings{hs, set}})
	if err != nil {
		t.Fatal(err)
	}
	set.UseRegistry(reg)
	set.Start(ctx, 20*time.Second)
	t.Cleanup(set.Close)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Remotes: set, Broker: broker, Store: store, Policy: policy.Grants{},
		Approvals: approval.New(approval.Config{Store: store, TTL: time.Hour}), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return &oauthWorld{t: t, p: p, up: up, svc: svc, iv: iv, keys: keys, store: store, appID: appID, appSecret: appSecret}
}

func newKeyText() string {
	b := make([]byte, secret.KeySize)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// call calls whoami for user.
func (w *oauthWorld) call(user string) toolplane.Result {
	w.t.Helper()
	inv := &toolplane.Invocation{OrganizationID: oauthOrg, UserID: user, RunID: "run-" + user, AgentID: "agent-1", StepPath: "agent",
		Principal: toolplane.Principal{ID: "agent-1", Tools: []string{"mcp.notes.whoami"}}, Source: toolplane.SourceSDK}
	r, err := w.iv.InvokeJSON(w.t.Context(), "mcp.notes.whoami", json.RawMessage(`{}`), inv)
	if err != nil {
		w.t.Fatalf("call for %s: %v", user, err)
	}
	return r
}

// refused checks r is the refusal code, and answers its authorization
// link.
func (w *oauthWorld) refused(r toolplane.Result, code toolplane.Code) string {
	w.t.Helper()
	if r.OK || r.Error == nil || r.Error.Code != code {
		w.t.Fatalf("result = %+v (%+v), want %s", r, r.Error, code)
	}
	return r.Error.AuthorizationURL
}

// consent has the provider's person complete the consent link leads to,
// signed in as user, the user the link was made for, and answers their
// connection.
func (w *oauthWorld) consent(user, link string) *toolplane.Connection {
	w.t.Helper()
	ctx := w.t.Context()
	u, err := url.Parse(link)
	if err != nil || !strings.HasPrefix(link, oauthBaseURL+connection.StartPath) {
		w.t.Fatalf("authorization link %q", link)
	}
	redirect, nonce, err := w.svc.Start(ctx, &toolplane.Credential{ID: "oidc:idp:" + user, OrganizationID: oauthOrg, Kind: toolplane.CredentialPerson, Subject: user}, u.Query().Get("state"))
	if err != nil {
		w.t.Fatalf("Start: %v", err)
	}
	back, err := w.p.Login(ctx, redirect)
	if err != nil {
		w.t.Fatalf("Login: %v", err)
	}
	c, err := w.svc.Callback(ctx, back.Query(), nonce)
	if err != nil {
		w.t.Fatalf("Callback: %v", err)
	}
	return c
}

// revokeAtProvider has the provider revoke the token connection id holds:
// its access token, as a provider ending a token early does, or with
// refresh its refresh token (and the access token with it), as a person
// revoking toolplane's access there does.
func (w *oauthWorld) revokeAtProvider(id string, refresh bool) {
	w.t.Helper()
	c, err := w.store.GetConnection(w.t.Context(), oauthOrg, id)
	if err != nil {
		w.t.Fatal(err)
	}
	sec, err := secret.OpenSecrets(w.keys, oauthOrg, id, c.Secret)
	if err != nil {
		w.t.Fatal(err)
	}
	resp, err := http.Get(w.p.Issuer + "/.well-known/openid-configuration")
	if err != nil {
		w.t.Fatal(err)
	}
	var md struct {
		Revocation string `json:"revocation_endpoint"`
	}
	err = json.NewDecoder(resp.Body).Decode(&md)
	resp.Body.Close()
	if err != nil {
		w.t.Fatal(err)
	}
	form := url.Values{"token": {sec.AccessToken.Reveal()}, "token_type_hint": {"access_token"}}
	if refresh {
		form = url.Values{"token": {sec.RefreshToken.Reveal()}, "token_type_hint": {"refresh_token"}}
	}
	req, _ := http.NewRequest(http.MethodPost, md.Revocation, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(w.appID, w.appSecret)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		w.t.Fatalf("revocation answered %d", resp.StatusCode)
	}
}

// accessToken answers the access token connection id holds.
func (w *oauthWorld) accessToken(id string) string {
	w.t.Helper()
	c, err := w.store.GetConnection(w.t.Context(), oauthOrg, id)
	if err != nil {
		w.t.Fatal(err)
	}
	sec, err := secret.OpenSecrets(w.keys, oauthOrg, id, c.Secret)
	if err != nil {
		w.t.Fatal(err)
	}
	return sec.AccessToken.Reveal()
}

func (w *oauthWorld) state(id string) toolplane.ConnectionState {
	w.t.Helper()
	c, err := w.store.GetConnection(w.t.Context(), oauthOrg, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return c.State
}

// An upstream that needs OAuth is called with the token of the person
// each call is made for, never anyone else's, and a token the server
// refuses or a connection revoked ends the call with nothing done.
func TestUpstreamCalledWithEachPersonsToken(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t)

	// sam has not connected: the call links to his consent, and the
	// server saw nothing.
	link := w.refused(w.call("sam"), toolplane.CodeConnectionRequired)
	if link == "" {
		t.Fatal("connection_required without an authorization link")
	}
	if got := w.up.called(); len(got) != 0 {
		t.Fatalf("the server was called %v", got)
	}

	// sam consents; his call reaches the server with his token.
	sam := w.consent("sam", link)
	r := w.call("sam")
	if !r.OK {
		t.Fatalf("sam's call after consent: %+v", r.Error)
	}
	if got := r.Data.(map[string]any)["subject"]; got != w.p.UserID {
		t.Fatalf("the server saw subject %v, want sam's %s", got, w.p.UserID)
	}

	// ada's call does not borrow sam's token, nor the service token.
	if w.refused(w.call("ada"), toolplane.CodeConnectionRequired) == "" {
		t.Fatal("ada's connection_required without an authorization link")
	}
	if got := w.up.called(); len(got) != 1 || got[0] != w.p.UserID {
		t.Fatalf("the server's calls came with %v, want sam's alone", got)
	}

	// The provider ends sam's access token early: the server refuses it,
	// the broker refreshes it once, and the call, which the server did
	// not run, is made again with the new token. sam is asked nothing.
	before := w.accessToken(sam.ID)
	w.revokeAtProvider(sam.ID, false)
	if r := w.call("sam"); !r.OK {
		t.Fatalf("sam's call after his access token was refused: %+v", r.Error)
	}
	if got := w.state(sam.ID); got != toolplane.ConnectionActive {
		t.Fatalf("sam's connection is %s after a refresh served the call", got)
	}
	if w.accessToken(sam.ID) == before {
		t.Fatal("the refused token was not refreshed")
	}
	if n := len(w.up.called()); n != 2 {
		t.Fatalf("the server ran %d calls, want 2: the refused one was not run", n)
	}

	// sam revokes toolplane's access at the provider: the refresh is
	// refused too, the call did nothing, and sam is asked to consent
	// again.
	w.revokeAtProvider(sam.ID, true)
	link = w.refused(w.call("sam"), toolplane.CodeConnectionExpired)
	if link == "" {
		t.Fatal("connection_expired without an authorization link")
	}
	if got := w.state(sam.ID); got != toolplane.ConnectionNeedsReauth {
		t.Fatalf("sam's connection is %s after its token and its refresh were refused", got)
	}
	if n := len(w.up.called()); n != 2 {
		t.Fatalf("the server ran %d calls, want the two before the refusal", n)
	}
	// His new consent serves the next call, on a new token.
	if again := w.consent("sam", link); again.ID != sam.ID {
		t.Fatalf("the new consent made connection %s, not %s again", again.ID, sam.ID)
	}
	if r := w.call("sam"); !r.OK {
		t.Fatalf("sam's call after consenting again: %+v", r.Error)
	}

	// The server wants a scope sam's token lacks: 403. A refreshed token
	// lacks it too and is refused again: connection_expired, and no third
	// try.
	w.up.scoped.Store(true)
	before = w.accessToken(sam.ID)
	link = w.refused(w.call("sam"), toolplane.CodeConnectionExpired)
	w.up.scoped.Store(false)
	if got := w.state(sam.ID); got != toolplane.ConnectionNeedsReauth {
		t.Fatalf("sam's connection is %s after its refreshed token was refused", got)
	}
	if w.accessToken(sam.ID) == before {
		t.Fatal("the token refused for want of scope was not refreshed first")
	}
	w.consent("sam", link)
	if r := w.call("sam"); !r.OK {
		t.Fatalf("sam's call after the scope refusal and a new consent: %+v", r.Error)
	}

	// An administrator revokes sam's connection.
	if _, err := w.svc.Revoke(t.Context(), oauthAdmin, sam.ID, "offboarded"); err != nil {
		t.Fatal(err)
	}
	w.refused(w.call("sam"), toolplane.CodeConnectionRevoked)
	if got := w.up.called(); len(got) != 4 {
		t.Fatalf("the server ran %d calls, want 4", len(got))
	}
	for _, sub := range w.up.called() {
		if sub != w.p.UserID {
			t.Fatalf("a call reached the server with subject %q", sub)
		}
	}
}

// A call made with a person's token goes out under the egress rules of the
// person's connection, as an http tool's does, though the server's URL is
// the operator's: rules that do not list the server's host refuse the
// call before anything is sent, naming the host and the rule, and rules
// that list it again serve the next call.
func TestUpstreamPersonalSessionKeepsTheConnectionsEgressRules(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t)
	sam := w.consent("sam", w.refused(w.call("sam"), toolplane.CodeConnectionRequired))
	if r := w.call("sam"); !r.OK {
		t.Fatalf("sam's call: %+v", r.Error)
	}
	setEgress := func(rules toolplane.EgressRules) {
		c, err := w.store.GetConnection(t.Context(), oauthOrg, sam.ID)
		if err != nil {
			t.Fatal(err)
		}
		c.Config.Egress = rules
		if ok, err := w.store.UpdateConnection(t.Context(), c, nil); err != nil || !ok {
			t.Fatalf("update the egress rules: %v %v", ok, err)
		}
	}
	tests := []struct {
		name  string
		rules toolplane.EgressRules
		rule  string
	}{
		{"host not listed", toolplane.EgressRules{Hosts: []string{"notes.example.com"}, AllowCIDRs: []string{"127.0.0.1/32"}}, "not on the connection's host list"},
		{"loopback not allowed", toolplane.EgressRules{Hosts: []string{"127.0.0.1"}}, "loopback"},
	}
	for _, tc := range tests {
		setEgress(tc.rules)
		r := w.call("sam")
		if r.OK || r.Error == nil || r.Error.Code != toolplane.CodeUnavailable {
			t.Fatalf("%s: result %+v (%+v), want unavailable", tc.name, r, r.Error)
		}
		if msg := r.Error.Message; !strings.Contains(msg, "127.0.0.1") || !strings.Contains(msg, tc.rule) {
			t.Fatalf("%s: the refusal %q names neither the host nor the rule %q", tc.name, msg, tc.rule)
		}
		if n := len(w.up.called()); n != 1 {
			t.Fatalf("%s: the server ran %d calls, want the one before the rules changed", tc.name, n)
		}
		if got := w.state(sam.ID); got != toolplane.ConnectionActive {
			t.Fatalf("%s: sam's connection is %s after an egress refusal", tc.name, got)
		}
	}
	setEgress(toolplane.EgressRules{Hosts: []string{"127.0.0.1"}, AllowCIDRs: []string{"127.0.0.1/32"}})
	if r := w.call("sam"); !r.OK {
		t.Fatalf("sam's call once the rules list the server again: %+v", r.Error)
	}
}
