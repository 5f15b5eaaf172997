package console_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/console"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/resilience"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/signin"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
	"github.com/toolplane/toolplane/upstream"
)

// otherOrg is the second organization, whose connections and view of the
// upstreams org's people never see.
const otherOrg = "org-2"

// Secrets the connections hold, none of which a page may show.
const (
	staticToken  = "tok-static-7f3a9c1e5b"
	clientSecret = "cs-oauth-app-44be0d91"
	accessToken  = "at-bob-person-9d02e6"
	refreshToken = "rt-bob-person-51c8aa"
	vaultMount   = "kvmount-hidden-3b1"
	vaultPath    = "crm/hidden-path-77e"
	otherToken   = "tok-other-org-c0ffee"
	// upstreamKey is in the failing upstream's URL, which the page shows
	// redacted.
	upstreamKey = "upkey0123456789abcdef0123456789"
)

// pagesWorld is a console with the connections service and upstream MCP
// servers: one that answers (up), whose tools the test can change, and one
// that never does (down).
type pagesWorld struct {
	*world
	conns   *connection.Admin
	up      *mcp.Server
	reg     *registry.Registry
	traffic *resilience.Traffic
	// keys seal the connections' secrets.
	keys *secret.Keyring
	// ids of the connections, by name.
	ids map[string]string
}

type upBindings struct {
	*handler.Registry
	set *upstream.Set
}

func (b upBindings) Connection(id string) bool { return b.set.Connection(id) }
func (upBindings) FactResolver(string) bool    { return false }

func newPagesWorld(t *testing.T) *pagesWorld {
	t.Helper()
	ctx := context.Background()
	w := &world{t: t, keys: map[string]string{}}
	w.store, w.db = sqlitetest.OpenDB(t, filepath.Join(t.TempDir(), "toolplane.db"))
	quiet := slog.New(slog.NewTextHandler(&w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	// Two upstreams: up answers; down's port is closed.
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "lookup", Description: "Look a record up by id."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			ID string `json:"id"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.ID}}}, nil, nil
		})
	mcp.AddTool(up, &mcp.Tool{Name: "send", Description: "Send a message."},
		func(context.Context, *mcp.CallToolRequest, struct {
			To string `json:"to"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil, nil
		})
	ups := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(ups.Close)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + closed.Addr().String() + "/mcp?key=" + upstreamKey
	closed.Close()
	set, err := upstream.New([]upstream.Config{{Slug: "up", URL: ups.URL, Owner: "platform-team"}, {Slug: "down", URL: downURL}},
		upstream.Options{Logger: quiet, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	hs := handler.NewRegistry()
	reg, _, err := registry.Build(nil, registry.Options{Bindings: upBindings{hs, set}})
	if err != nil {
		t.Fatal(err)
	}
	set.UseRegistry(reg)
	set.Start(ctx, 20*time.Second)
	t.Cleanup(set.Close)

	traffic := resilience.New(resilience.Config{})
	w.iv, err = invoke.New(invoke.Config{Registry: reg, Handlers: hs, Remotes: set, Store: w.store, Policy: policy.Grants{},
		Approvals: approval.New(approval.Config{Store: w.store, TTL: time.Hour}), Logger: quiet, Traffic: traffic})
	if err != nil {
		t.Fatal(err)
	}
	layer := &door.Door{Invoker: w.iv, Registry: reg, Store: w.store, Log: quiet}
	srv := httptest.NewUnstartedServer(nil)
	w.base = "http://" + srv.Listener.Addr().String()
	keys := keyring(t)
	people, err := signin.New(signin.Config{Store: w.store, Keys: keys, Gate: layer, PublicURL: w.base, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	conns, _, err := connection.New(connection.Config{Store: w.store, Keys: keys, BaseURL: w.base, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	web, err := console.New(console.Config{People: people, Invoker: w.iv, Registry: reg, PublicURL: w.base, Logger: quiet,
		Connections: conns, Upstreams: upstream.NewSettings(w.store, set, org, quiet), Breakers: traffic})
	if err != nil {
		t.Fatal(err)
	}
	api := &httpapi.Server{Door: layer, Store: w.store, Log: quiet, PublicURL: w.base, Connections: conns, People: people}
	mux := http.NewServeMux()
	mux.Handle(signin.Path, people.Handler())
	mux.Handle(signin.Path+"/", people.Handler())
	mux.Handle(console.Path, web.Handler())
	mux.Handle(console.Path+"/", web.Handler())
	mux.Handle("/", api.Handler())
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)

	p := &pagesWorld{world: w, conns: conns, up: up, reg: reg, traffic: traffic, keys: keys, ids: map[string]string{}}
	for _, k := range []struct {
		name, org, subject string
		roles              []string
	}{
		{"root", org, "root", []string{toolplane.RolePlatformAdmin}},
		{"grace", org, "grace", []string{toolplane.RoleAuditor}},
		{"bob", org, "bob", []string{toolplane.RoleApprover}},
		{"ada", org, "ada", []string{toolplane.RoleApprover}},
		{"otherRoot", otherOrg, "other-root", []string{toolplane.RolePlatformAdmin}},
	} {
		w.keys[k.name] = mintIn(t, w.store, k.org, toolplane.CredentialPerson, k.subject, k.roles)
	}

	// The connections: a static one, one kept in Vault, an OAuth
	// application, bob's account through it (needing a new consent), and
	// the other organization's.
	root := cred(org, "root", toolplane.RolePlatformAdmin)
	static, err := conns.Create(ctx, root, connection.Input{Name: "orders-api", Provider: "orders", Kind: toolplane.ConnectionStatic,
		Config:  toolplane.ConnectionConfig{BaseURL: "https://api.orders.example/v2", Egress: toolplane.EgressRules{Hosts: []string{"api.orders.example"}}},
		Scope:   toolplane.ConnectionScope{Tools: []string{"orders.*"}, MaxAmountCentsPerCall: 50000},
		Secrets: toolplane.Secrets{Token: staticToken}})
	if err != nil {
		t.Fatal(err)
	}
	p.ids["orders-api"] = static.ID
	app, err := conns.Create(ctx, root, connection.Input{Name: "crm-app", Provider: "crm", Kind: toolplane.ConnectionAuthorizationCode,
		Config: toolplane.ConnectionConfig{AuthorizeURL: "https://idp.crm.example/authorize", TokenURL: "https://idp.crm.example/token",
			ClientID: "crm-client", RequestScope: []string{"contacts.read"}, Egress: toolplane.EgressRules{Hosts: []string{"idp.crm.example"}}},
		Secrets: toolplane.Secrets{ClientSecret: clientSecret}})
	if err != nil {
		t.Fatal(err)
	}
	p.ids["crm-app"] = app.ID
	now := time.Now()
	vaulted := &toolplane.Connection{ID: toolplane.NewID("con_"), OrganizationID: org, Name: "crm-vault", Provider: "crmv", Kind: toolplane.ConnectionStatic,
		State: toolplane.ConnectionActive, Config: toolplane.ConnectionConfig{Vault: &toolplane.VaultRef{Mount: vaultMount, Path: vaultPath}},
		Secret: []byte{}, Owner: "root", CreatedAt: now, UpdatedAt: now}
	p.insert(vaulted, nil)
	bobs := &toolplane.Connection{ID: toolplane.NewID("con_"), OrganizationID: org, Name: "crm-bob", Provider: "crm", Kind: toolplane.ConnectionAuthorizationCode,
		UserID: "bob", State: toolplane.ConnectionNeedsReauth, Reason: "the provider refused the refresh token",
		Config: toolplane.ConnectionConfig{App: app.ID, TokenURL: app.Config.TokenURL, Egress: app.Config.Egress}, Scopes: []string{"contacts.read"},
		TokenExpiresAt: now.Add(-time.Hour), Owner: "bob", CreatedAt: now, UpdatedAt: now}
	p.insert(bobs, &toolplane.Secrets{AccessToken: accessToken, RefreshToken: refreshToken})
	other, err := conns.Create(ctx, cred(otherOrg, "other-root", toolplane.RolePlatformAdmin), connection.Input{Name: "other-org-api", Provider: "orders",
		Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{Egress: toolplane.EgressRules{Hosts: []string{"api.other.example"}}},
		Secrets: toolplane.Secrets{Token: otherToken}})
	if err != nil {
		t.Fatal(err)
	}
	p.ids["other-org-api"] = other.ID
	return p
}

// insert stores c, its secrets sealed as the service seals them.
func (p *pagesWorld) insert(c *toolplane.Connection, sec *toolplane.Secrets) {
	p.t.Helper()
	if sec != nil {
		sealed, err := secret.SealSecrets(p.keys, c.OrganizationID, c.ID, *sec)
		if err != nil {
			p.t.Fatal(err)
		}
		c.Secret = sealed
	}
	detail, _ := json.Marshal(map[string]any{"name": c.Name})
	if err := p.store.InsertConnection(context.Background(), c, &toolplane.Change{ID: toolplane.NewID("chg_"), OrganizationID: c.OrganizationID,
		Kind: "connection.create", Subject: c.ID, Actor: c.Owner, Detail: detail, CreatedAt: c.CreatedAt}); err != nil {
		p.t.Fatal(err)
	}
	p.ids[c.Name] = c.ID
}

func cred(orgID, subject string, roles ...string) *toolplane.Credential {
	return &toolplane.Credential{ID: "cred-" + subject, OrganizationID: orgID, Kind: toolplane.CredentialPerson, Subject: subject, Roles: roles}
}

// noSecret fails when the page shows any of the connections' secrets, or
// where Vault keeps one.
func noSecret(t *testing.T, what string, p page) {
	t.Helper()
	for _, s := range []string{staticToken, clientSecret, accessToken, refreshToken, vaultMount, vaultPath, otherToken, upstreamKey} {
		if strings.Contains(p.body, s) {
			t.Errorf("%s shows the secret %q", what, s)
		}
	}
}

// TestConnectionsPagesShowWhatTheServiceLetsEachPersonSee: an
// administrator and an auditor see every connection of their
// organization, a person their own, another organization's nobody; each
// page shows state, scopes and who authorized, and no secret.
func TestConnectionsPagesShowWhatTheServiceLetsEachPersonSee(t *testing.T) {
	t.Parallel()
	p := newPagesWorld(t)
	all := []string{"orders-api", "crm-app", "crm-vault", "crm-bob"}
	for _, tt := range []struct {
		who    string
		sees   []string
		hidden []string
	}{
		{"root", all, []string{"other-org-api"}},
		{"grace", all, []string{"other-org-api"}},
		{"bob", []string{"crm-bob"}, []string{"orders-api", "crm-app", "crm-vault", "other-org-api"}},
		{"ada", nil, append(all, "other-org-api")},
		{"otherRoot", []string{"other-org-api"}, all},
	} {
		t.Run(tt.who, func(t *testing.T) {
			b := p.browser()
			b.signIn(tt.who)
			list := b.get(console.Path + "/connections")
			if list.status != http.StatusOK {
				t.Fatalf("list: %d %s", list.status, list.body)
			}
			noSecret(t, "the list", list)
			for _, name := range tt.sees {
				if !strings.Contains(list.body, ">"+name+"</a>") {
					t.Errorf("the list lacks %s", name)
				}
				one := b.get(console.Path + "/connections/" + p.ids[name])
				if one.status != http.StatusOK {
					t.Errorf("%s's page: %d", name, one.status)
				}
				noSecret(t, name+"'s page", one)
			}
			for _, name := range tt.hidden {
				if strings.Contains(list.body, name) {
					t.Errorf("the list shows %s", name)
				}
				if one := b.get(console.Path + "/connections/" + p.ids[name]); one.status != http.StatusNotFound {
					t.Errorf("%s's page answered %d, want 404 as for one that does not exist", name, one.status)
				}
			}
			if len(tt.sees) == 0 && !strings.Contains(list.body, "toolplane connections create") {
				t.Errorf("the empty list does not say how to add a connection: %s", list.body)
			}
		})
	}

	// What the list and a page say of each.
	b := p.browser()
	b.signIn("root")
	list := b.get(console.Path + "/connections")
	for _, want := range []string{"needs re-authorization", "healthy", "contacts.read", `data-label="Status"`} {
		if !strings.Contains(list.body, want) {
			t.Errorf("the list lacks %q", want)
		}
	}
	bobs := b.get(console.Path + "/connections/" + p.ids["crm-bob"])
	for _, want := range []string{"bob, whose account it holds", "the provider refused the refresh token", "contacts.read", p.ids["crm-app"]} {
		if !strings.Contains(bobs.body, want) {
			t.Errorf("bob's connection's page lacks %q", want)
		}
	}
	if strings.Contains(bobs.body, "Re-authorize") {
		t.Error("the administrator is offered to re-authorize bob's account")
	}
	if vault := b.get(console.Path + "/connections/" + p.ids["crm-vault"]); !strings.Contains(vault.body, "kept in Vault") {
		t.Errorf("the Vault connection's page does not say where its secret is: %s", vault.body)
	}
	static := b.get(console.Path + "/connections/" + p.ids["orders-api"])
	for _, want := range []string{"api.orders.example", "orders.*", "500.00"} {
		if !strings.Contains(static.body, want) {
			t.Errorf("the static connection's page lacks %q", want)
		}
	}
}

// TestReauthorizeStartsTheSameAuthorization: bob's re-authorize button
// starts the consent the API's authorize starts, which sends his browser
// to the provider; only he is offered it, and a form from elsewhere is
// refused.
func TestReauthorizeStartsTheSameAuthorization(t *testing.T) {
	t.Parallel()
	p := newPagesWorld(t)
	id := p.ids["crm-bob"]
	b := p.browser()
	b.signIn("bob")
	pg := b.get(console.Path + "/connections/" + id)
	if !strings.Contains(pg.body, "Re-authorize") {
		t.Fatalf("bob is not offered to re-authorize: %s", pg.body)
	}
	if forged := b.post(console.Path+"/connections/"+id+"/authorize", "https://evil.example", url.Values{"csrf": {pg.csrf(t)}}); forged.status != http.StatusForbidden {
		t.Errorf("a form from another origin answered %d", forged.status)
	}
	started := b.post(console.Path+"/connections/"+id+"/authorize", p.base, url.Values{"csrf": {pg.csrf(t)}})
	start := started.header.Get("Location")
	if started.status != http.StatusSeeOther || !strings.HasPrefix(start, p.base+connection.StartPath+"?state=") {
		t.Fatalf("re-authorize answered %d to %q, want the authorization's start", started.status, start)
	}
	req, _ := http.NewRequest("GET", start, nil)
	provider := b.do(req)
	to, err := url.Parse(provider.header.Get("Location"))
	if provider.status != http.StatusFound || err != nil || to.Host != "idp.crm.example" || to.Query().Get("client_id") != "crm-client" {
		t.Fatalf("the start answered %d to %q, want the provider's consent", provider.status, provider.header.Get("Location"))
	}
	noSecret(t, "the provider's address", page{body: to.String()})

	// Nobody else re-authorizes bob's account.
	for _, who := range []string{"root", "grace"} {
		o := p.browser()
		o.signIn(who)
		their := o.get(console.Path + "/connections/" + id)
		if strings.Contains(their.body, "Re-authorize") {
			t.Errorf("%s is offered to re-authorize bob's account", who)
		}
		if got := o.post(console.Path+"/connections/"+id+"/authorize", p.base, url.Values{"csrf": {their.csrf(t)}}); got.status != http.StatusForbidden {
			t.Errorf("%s re-authorizing bob's account answered %d", who, got.status)
		}
	}
}

// TestRevokeGoesThroughTheService: an auditor is neither offered nor
// allowed the revocation; an administrator revokes, and the page says so.
func TestRevokeGoesThroughTheService(t *testing.T) {
	t.Parallel()
	p := newPagesWorld(t)
	id := p.ids["orders-api"]
	g := p.browser()
	g.signIn("grace")
	pg := g.get(console.Path + "/connections/" + id)
	if strings.Contains(pg.body, "/revoke") {
		t.Error("the auditor is offered the revocation")
	}
	if got := g.post(console.Path+"/connections/"+id+"/revoke", p.base, url.Values{"csrf": {pg.csrf(t)}}); got.status != http.StatusForbidden {
		t.Errorf("the auditor's revocation answered %d", got.status)
	}
	o := p.browser()
	o.signIn("otherRoot")
	op := o.get(console.Path + "/connections")
	if got := o.post(console.Path+"/connections/"+id+"/revoke", p.base, url.Values{"csrf": {op.csrf(t)}}); got.status != http.StatusNotFound {
		t.Errorf("the other organization's revocation answered %d", got.status)
	}
	if c, err := p.store.GetConnection(context.Background(), org, id); err != nil || c.State != toolplane.ConnectionActive {
		t.Fatalf("after refused revocations: %v %v", c.State, err)
	}

	r := p.browser()
	r.signIn("root")
	pg = r.get(console.Path + "/connections/" + id)
	done := r.post(console.Path+"/connections/"+id+"/revoke", p.base, url.Values{"csrf": {pg.csrf(t)}, "reason": {"rotated at the vendor"}})
	if done.status != http.StatusSeeOther {
		t.Fatalf("revoke: %d %s", done.status, done.body)
	}
	after := r.get(done.header.Get("Location"))
	for _, want := range []string{"Revoked:", "rotated at the vendor", "state-revoked"} {
		if !strings.Contains(after.body, want) {
			t.Errorf("after the revocation the page lacks %q", want)
		}
	}
	if strings.Contains(after.body, "/revoke") {
		t.Error("a revoked connection is offered the revocation again")
	}
}

// TestUpstreamPagesShowHealthToolsAndDrift: the operator sees each
// server's health (one answering, one failing, its URL's key hidden), the
// tools with their contracts, a tool whose contract changed as drifted,
// and the open breakers of their own organization only; nobody else sees
// the servers.
func TestUpstreamPagesShowHealthToolsAndDrift(t *testing.T) {
	t.Parallel()
	p := newPagesWorld(t)
	b := p.browser()
	b.signIn("root")
	list := b.get(console.Path + "/upstreams")
	if list.status != http.StatusOK {
		t.Fatalf("list: %d %s", list.status, list.body)
	}
	noSecret(t, "the upstreams' list", list)
	for _, want := range []string{">up</a>", ">down</a>", "connected", "failing", "/mcp/up", `data-label="Health"`} {
		if !strings.Contains(list.body, want) {
			t.Errorf("the list lacks %q", want)
		}
	}
	down := b.get(console.Path + "/upstreams/down")
	noSecret(t, "the failing server's page", down)
	if !strings.Contains(down.body, "Last failure") || !strings.Contains(down.body, "No tool listed yet") {
		t.Errorf("the failing server's page: %s", down.body)
	}
	first, ok := p.reg.Get("", "mcp.up.lookup")
	if !ok {
		t.Fatal("mcp.up.lookup not ingested")
	}
	pg := b.get(console.Path + "/upstreams/up")
	for _, want := range []string{"lookup", "mcp.up.send", "1.0.0", strings.TrimPrefix(first.Def.SchemaHash, "sha256:")[:12], "unchanged", "needs approval"} {
		if !strings.Contains(pg.body, want) {
			t.Errorf("up's page lacks %q", want)
		}
	}
	if strings.Contains(pg.body, "<strong>changed</strong>") {
		t.Error("a tool is shown drifted before any change")
	}

	// The server changes lookup's contract: a new required argument.
	mcp.AddTool(p.up, &mcp.Tool{Name: "lookup", Description: "Look a record up by id and region."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			ID     string `json:"id"`
			Region string `json:"region"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.ID}}}, nil, nil
		})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if tool, ok := p.reg.Get("", "mcp.up.lookup"); ok && tool.Def.Version == "2.0.0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the changed contract was not listed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Breakers: one open on send in this organization, one on lookup in
	// the other's, which this page never shows.
	for range 25 {
		p.traffic.Breaker(org, "mcp.up.send", "upstream:up").Record(resilience.Failure, false)
		p.traffic.Breaker(otherOrg, "mcp.up.lookup", "upstream:up").Record(resilience.Failure, false)
	}
	pg = b.get(console.Path + "/upstreams/up")
	if !strings.Contains(pg.body, "<strong>changed</strong>") || !strings.Contains(pg.body, "2.0.0") {
		t.Errorf("the drifted tool is not shown as changed: %s", pg.body)
	}
	breakers, _, _ := strings.Cut(pg.body, "<h2>Tools</h2>")
	_, breakers, _ = strings.Cut(breakers, "Circuit breakers not closed")
	if !strings.Contains(breakers, "mcp.up.send") || !strings.Contains(breakers, "open") {
		t.Errorf("the open breaker is not shown: %q", breakers)
	}
	if strings.Contains(breakers, "mcp.up.lookup") {
		t.Error("the other organization's breaker is shown")
	}
	if list := b.get(console.Path + "/upstreams"); !strings.Contains(list.body, "1 changed") {
		t.Error("the list does not count the drifted tool")
	}

	// Nobody but the operator: an auditor, a person, the other
	// organization's administrator.
	for _, who := range []string{"grace", "bob", "otherRoot"} {
		o := p.browser()
		o.signIn(who)
		for _, path := range []string{"/upstreams", "/upstreams/up"} {
			got := o.get(console.Path + path)
			if got.status != http.StatusForbidden || strings.Contains(got.body, "mcp.up.") {
				t.Errorf("%s opening %s: %d", who, path, got.status)
			}
		}
	}
	if nope := b.get(console.Path + "/upstreams/nope"); nope.status != http.StatusNotFound {
		t.Errorf("an upstream not configured: %d", nope.status)
	}
}

// TestPagesSayWhatToDoWithoutTheServices: a server with neither keeps its
// pages, which say so rather than fail.
func TestPagesSayWhatToDoWithoutTheServices(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	b := w.browser()
	b.signIn("root")
	for _, path := range []string{"/connections", "/upstreams"} {
		if got := b.get(console.Path + path); got.status != http.StatusNotFound || !strings.Contains(got.body, "this server") {
			t.Errorf("%s without its service: %d %s", path, got.status, got.body)
		}
	}
}
