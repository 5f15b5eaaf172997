package console_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
)

// other is the second organization of the tests: nothing of it may show
// in org-1's console.
const other = "org-2"

// seed stores, in org-1 and in the other organization, an audit event,
// a tool version and a grant whose names carry payloads, and answers the
// ID of org-1's event.
func (w *world) seed(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	def, _ := json.Marshal(map[string]any{"name": "xss.pay", "version": "1.2.0", "description": xssDescription})
	for _, o := range []struct{ org, tag string }{{org, "mine"}, {other, "theirs"}} {
		ev := &toolplane.AuditEvent{ID: "aud_" + o.tag, OrganizationID: o.org, RunID: "run-" + o.tag, AgentID: xssAgent + o.tag,
			UserID: "user-" + o.tag, Tool: "xss.pay", ToolVersion: "1.2.0", Source: toolplane.SourceREST, Outcome: "denied",
			Reason: xssNote, CreatedAt: time.Now()}
		if err := w.store.AppendAudit(ctx, ev); err != nil {
			t.Fatal(err)
		}
		for _, v := range []struct {
			version string
			state   toolplane.VersionState
		}{{"1.0.0", toolplane.StateActive}, {"1.1.0", toolplane.StateDeprecated}, {"1.2.0", toolplane.StateInReview}} {
			tv := &toolplane.ToolVersion{OrganizationID: o.org, Name: "xss.pay" + o.tag, Version: v.version, State: v.state, Definition: def,
				SchemaHash: "sha256:" + o.tag, Owner: "team-" + o.tag, PublishedBy: "pub", PublishedAt: time.Now(), SunsetAt: time.Now().Add(time.Hour)}
			if err := w.store.InsertToolVersion(ctx, tv); err != nil {
				t.Fatal(err)
			}
		}
		g := &toolplane.Grant{ID: "grt_" + o.tag, OrganizationID: o.org, AgentID: xssAgent + o.tag, Pattern: "xss.*", GrantedBy: "root", CreatedAt: time.Now()}
		if err := w.store.InsertGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	id, sec, _ := apikey.New(toolplane.CredentialPerson)
	if err := w.store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: other, Kind: toolplane.CredentialPerson,
		Subject: "subject-theirs", Roles: []string{toolplane.RolePlatformAdmin}, Hash: apikey.Hash(sec), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// The other organization's key of an agent of the same name.
	id, sec, _ = apikey.New(toolplane.CredentialAgent)
	if err := w.store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: other, Kind: toolplane.CredentialAgent,
		Subject: xssAgent, Tools: []string{"theirs.*"}, Hash: apikey.Hash(sec), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return "aud_mine"
}

// The audit, catalogue and access pages need a session, as every page.
func TestSectionsNeedASession(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	b := w.browser()
	for _, path := range []string{"/console/audit", "/console/audit/aud_1", "/console/catalog", "/console/catalog/xss.pay/1.2.0",
		"/console/access", "/console/access/explain?agent=a", "/console/access/keys"} {
		p := b.get(path)
		wantHeaders(t, path, p)
		want := "/signin?" + url.Values{"return": {path}}.Encode()
		if p.status != http.StatusSeeOther || p.header.Get("Location") != want {
			t.Errorf("GET %s without a session: %d to %q", path, p.status, p.header.Get("Location"))
		}
	}
	for _, path := range []string{"/console/catalog/xss.pay/1.2.0", "/console/access/keys", "/console/access/keys/revoke"} {
		if p := b.post(path, w.base, url.Values{"action": {"retire"}}); p.status != http.StatusUnauthorized {
			t.Errorf("POST %s without a session: %d", path, p.status)
		}
	}
}

// A person the API refuses is refused by the console, in the API's words,
// and a form from elsewhere changes nothing.
func TestSectionsRefuseWhomTheAPIRefuses(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.seed(t)
	tests := []struct {
		name, who, apiMethod, apiPath, page string
	}{
		{"an approver reads no audit trail", "fin", "GET", "/v1/audit/events", "/console/audit"},
		{"an approver reads no audit event", "fin", "GET", "/v1/audit/events", "/console/audit/aud_mine"},
		{"an approver lists no keys", "fin", "GET", "/v1/keys", "/console/access/keys"},
	}
	for _, tt := range tests {
		status, body := w.api(tt.apiMethod, tt.apiPath, w.keys[tt.who], "")
		if status != http.StatusForbidden {
			t.Fatalf("%s: the API answered %d %v", tt.name, status, body)
		}
		said := refusal(t, body)
		b := w.browser()
		b.signIn(tt.who)
		if p := b.get(tt.page); p.status != http.StatusForbidden || !strings.Contains(p.body, ">denied<") || !strings.Contains(p.body, escape(said)) {
			t.Errorf("%s: %d; want the API's refusal %q: %s", tt.name, p.status, said, p.body)
		}
	}

	// An auditor lists keys and mints none: the form is not offered, and
	// sent anyway it is refused as the API refuses it.
	status, body := w.api("POST", "/v1/keys", w.keys["grace"], `{"kind":"person","subject":"x"}`)
	if status != http.StatusForbidden {
		t.Fatalf("the API let an auditor mint: %d %v", status, body)
	}
	said := refusal(t, body)
	grace := w.browser()
	grace.signIn("grace")
	keys := grace.get("/console/access/keys")
	if keys.status != http.StatusOK || strings.Contains(keys.body, "Mint a key") || strings.Contains(keys.body, ">Revoke<") {
		t.Fatalf("the auditor's keys page: %d %s", keys.status, keys.body)
	}
	p := grace.post("/console/access/keys", w.base, url.Values{"csrf": {keys.csrf(t)}, "kind": {"person"}, "subject": {"x"}})
	if p.status != http.StatusForbidden || !strings.Contains(p.body, escape(said)) {
		t.Errorf("an auditor minting: %d %s; want %q", p.status, p.body, said)
	}
	// Reviews are a platform_admin's: an auditor's approval is refused
	// (in the API's words: TestCatalogueAndGrantsRefuseAsTheAPIDoes).
	card := grace.get("/console/catalog/xss.paymine/1.2.0")
	p = grace.post("/console/catalog/xss.paymine/1.2.0", w.base, url.Values{"csrf": {card.csrf(t)}, "action": {"approve"}})
	if p.status != http.StatusForbidden || !strings.Contains(p.body, ">denied<") {
		t.Errorf("an auditor approving a version: %d %s", p.status, p.body)
	}
	// Changing grants is not the auditor's, reading them is.
	if p := grace.get("/console/access"); p.status != http.StatusOK || !strings.Contains(p.body, escape(xssAgent+"mine")) {
		t.Errorf("the auditor's access page: %d %s", p.status, p.body)
	}
	// An approver reads no grants.
	fin := w.browser()
	fin.signIn("fin")
	if p := fin.get("/console/access"); p.status != http.StatusForbidden {
		t.Errorf("an approver's access page: %d", p.status)
	}
	// A form from another origin is refused before anything is done.
	root := w.browser()
	root.signIn("root")
	keys = root.get("/console/access/keys")
	if p := root.post("/console/access/keys", "https://evil.example", url.Values{"csrf": {keys.csrf(t)}, "kind": {"person"}, "subject": {"x"}}); p.status != http.StatusForbidden {
		t.Errorf("a mint from elsewhere: %d %s", p.status, p.body)
	}
	if p := root.post("/console/access/keys", w.base, url.Values{"csrf": {"forged"}, "kind": {"person"}, "subject": {"x"}}); p.status != http.StatusForbidden {
		t.Errorf("a mint with a forged token: %d %s", p.status, p.body)
	}
}

// Nothing of another organization shows on any page, and its event is
// not found; what a tool's author, an agent or a caller wrote is shown as
// text.
func TestSectionsShowOnlyTheOrganizationAsText(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.seed(t)
	root := w.browser()
	root.signIn("root")
	pages := map[string]string{
		"audit": "/console/audit", "event": "/console/audit/" + id, "search": "/console/audit?outcome=error&agent=" + url.QueryEscape(xssAgent+"mine"),
		"catalog": "/console/catalog", "queue": "/console/catalog?state=in_review", "version": "/console/catalog/xss.paymine/1.2.0?against=1.0.0",
		"access": "/console/access", "explain": "/console/access/explain?agent=" + url.QueryEscape(xssAgent+"mine"), "keys": "/console/access/keys",
		"explain keys": "/console/access/explain?agent=" + url.QueryEscape(xssAgent),
	}
	for name, path := range pages {
		p := root.get(path)
		if p.status != http.StatusOK {
			t.Fatalf("%s: %d %s", name, p.status, p.body)
		}
		wantHeaders(t, name, p)
		for _, theirs := range []string{"theirs", other} {
			if strings.Contains(p.body, theirs) {
				t.Errorf("%s shows %q of the other organization", name, theirs)
			}
		}
		for _, raw := range []string{"<script>alert", "<img"} {
			if strings.Contains(p.body, raw) {
				t.Errorf("%s holds %q unescaped", name, raw)
			}
		}
		if name != "keys" && name != "queue" && name != "explain keys" && !strings.Contains(p.body, "mine") {
			t.Errorf("%s does not show the organization's own: %s", name, p.body)
		}
	}
	if p := root.get("/console/audit/" + id); !strings.Contains(p.body, escape(xssAgent+"mine")) || !strings.Contains(p.body, escape(xssNote)) {
		t.Errorf("the event does not show its agent and reason as text: %s", p.body)
	}
	// The agent's own key narrows it to xss.*; the other organization's
	// agent of the same name is not this one.
	if p := root.get("/console/access/explain?agent=" + url.QueryEscape(xssAgent)); !strings.Contains(p.body, ": xss.*</li>") {
		t.Errorf("the explanation does not name the agent's key: %s", p.body)
	}
	if p := root.get("/console/catalog/xss.paymine/1.2.0"); !strings.Contains(p.body, "Traffic on this node") || !strings.Contains(p.body, "No call of this tool has reached a downstream") {
		t.Fatalf("the version page shows no traffic: %s", p.body)
	}
	if p := root.get("/console/catalog/xss.paymine/1.2.0?against=1.0.0"); !strings.Contains(p.body, "needs") {
		t.Errorf("the version page shows no compatibility report: %s", p.body)
	}
	for _, path := range []string{"/console/audit/aud_theirs", "/console/catalog/xss.paytheirs/1.2.0"} {
		if p := root.get(path); p.status != http.StatusNotFound {
			t.Errorf("%s of the other organization: %d", path, p.status)
		}
	}
	// The search narrows as the trail does: no event of the user, none
	// before the range.
	if p := root.get("/console/audit?user=nobody"); strings.Contains(p.body, id) {
		t.Errorf("a search for another user shows the event")
	}
	if p := root.get("/console/audit?until=2000-01-01T00:00"); strings.Contains(p.body, id) {
		t.Errorf("a search before the event shows it")
	}
	if p := root.get("/console/audit?since=yesterday"); p.status != http.StatusBadRequest {
		t.Errorf("a time that is not one: %d", p.status)
	}
}

// A version moves through its lifecycle from its page: a platform_admin
// approves it out of the review queue, then deprecates it with a sunset
// and a replacement, then retires it.
func TestVersionsAreReviewedDeprecatedAndRetired(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.seed(t)
	root := w.browser()
	root.signIn("root")
	const at = "/console/catalog/xss.paymine/1.2.0"
	step := func(form url.Values, want toolplane.VersionState) {
		t.Helper()
		card := root.get(at)
		form.Set("csrf", card.csrf(t))
		if p := root.post(at, w.base, form); p.status != http.StatusSeeOther {
			t.Fatalf("%v: %d %s", form, p.status, p.body)
		}
		v, err := w.store.GetToolVersion(context.Background(), org, "xss.paymine", "1.2.0")
		if err != nil || v.State != want {
			t.Fatalf("%v: the version is %v (%v), want %s", form, v.State, err, want)
		}
	}
	step(url.Values{"action": {"approve"}}, toolplane.StateActive)
	step(url.Values{"action": {"deprecate"}, "sunset": {"2030-01-01T00:00"}, "replacement": {"1.0.0"}}, toolplane.StateDeprecated)
	step(url.Values{"action": {"retire"}}, toolplane.StateRetired)
	card := root.get(at)
	form := url.Values{"csrf": {card.csrf(t)}, "action": {"retire"}}
	if p := root.post(at, w.base, form); p.status != http.StatusConflict || !strings.Contains(p.body, "invalid_transition") {
		t.Errorf("retiring a retired version: %d %s", p.status, p.body)
	}
}

var secretShown = regexp.MustCompile(`<pre class="secret">([^<]+)</pre>`)

// A key minted in the console is shown once, on the answer to the form,
// never stored and never cached, and not on any later page; revoked, the
// API refuses it.
func TestAMintedKeyIsShownOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	root := w.browser()
	root.signIn("root")
	keys := root.get("/console/access/keys")
	p := root.post("/console/access/keys", w.base, url.Values{"csrf": {keys.csrf(t)}, "kind": {"person"}, "subject": {"newcomer"},
		"roles": {toolplane.RoleAuditor}, "label": {"laptop"}})
	m := secretShown.FindStringSubmatch(p.body)
	if p.status != http.StatusCreated || m == nil {
		t.Fatalf("mint: %d %s", p.status, p.body)
	}
	if p.header.Get("Cache-Control") != "no-store" {
		t.Errorf("the minted key's page may be cached: %q", p.header.Get("Cache-Control"))
	}
	secret := htmlUnescape(m[1])
	status, body := w.api("GET", "/v1/audit/events", secret, "")
	if status != http.StatusOK {
		t.Fatalf("the minted key does not work: %d %v", status, body)
	}
	later := map[string]page{"keys": root.get("/console/access/keys"), "audit": root.get("/console/audit")}
	for name, lp := range later {
		if strings.Contains(lp.body, secret) || secretShown.MatchString(lp.body) {
			t.Errorf("the %s page shows the secret again", name)
		}
	}
	if !strings.Contains(later["keys"].body, "newcomer") {
		t.Errorf("the keys page does not list the new key: %s", later["keys"].body)
	}
	creds, _, err := w.store.ListCredentials(context.Background(), org, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var credID string
	for _, c := range creds {
		if c.Subject == "newcomer" {
			credID = c.ID
			if strings.Contains(string(c.Hash), secret) {
				t.Errorf("the secret is stored")
			}
		}
	}
	keys = root.get("/console/access/keys")
	p = root.post("/console/access/keys/revoke", w.base, url.Values{"csrf": {keys.csrf(t)}, "id": {credID}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("revoke: %d %s", p.status, p.body)
	}
	if status, _ := w.api("GET", "/v1/audit/events", secret, ""); status != http.StatusUnauthorized {
		t.Errorf("the revoked key still works: %d", status)
	}
	// Neither the minting, nor its use, nor its refusal logged it.
	if logs := w.logs.String(); strings.Contains(logs, secret) || !strings.Contains(logs, "level=") {
		t.Errorf("the logs hold the secret, or nothing was logged at all (the test would prove nothing): %s", logs)
	}
	if p := root.get(p.header.Get("Location")); !strings.Contains(p.body, "is revoked") || strings.Contains(p.body, secret) {
		t.Errorf("after revoking: %s", p.body)
	}
}

// Grants, denies and bundles change from the access page, through the
// grants service: an agent_operator grants, revokes and saves bundles
// but adds no deny; a platform_admin denies and lifts; an auditor reads
// and is offered nothing.
func TestAccessChangesGoThroughTheGrantsService(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	send := func(b *browser, form url.Values) page {
		t.Helper()
		p := b.get("/console/access")
		form.Set("csrf", p.csrf(t))
		return b.post("/console/access", w.base, form)
	}
	oliver, root, grace := w.browser(), w.browser(), w.browser()
	oliver.signIn("oliver")
	root.signIn("root")
	grace.signIn("grace")

	if p := send(oliver, url.Values{"action": {"grant"}, "agent": {"agent-new"}, "pattern": {"xss.*"}}); p.status != http.StatusSeeOther {
		t.Fatalf("grant: %d %s", p.status, p.body)
	}
	gs, err := w.store.ListGrants(ctx, org, "agent-new", false)
	if err != nil || len(gs) != 1 || gs[0].GrantedBy != "oliver" {
		t.Fatalf("the grant: %v %v", gs, err)
	}
	if p := send(oliver, url.Values{"action": {"bundle"}, "name": {"payments"}, "refs": {"xss.pay@^1.0.0, xss.slow@^1.0.0"}}); p.status != http.StatusSeeOther {
		t.Fatalf("bundle: %d %s", p.status, p.body)
	}
	if p := send(oliver, url.Values{"action": {"deny"}, "agent": {"*"}, "pattern": {"xss.pay"}, "reason": {"incident"}}); p.status != http.StatusForbidden ||
		!strings.Contains(p.body, escape("denies are a platform_admin's")) {
		t.Errorf("an agent_operator's deny: %d %s", p.status, p.body)
	}
	if p := send(root, url.Values{"action": {"deny"}, "agent": {"*"}, "pattern": {"xss.pay"}, "reason": {xssNote}}); p.status != http.StatusSeeOther {
		t.Fatalf("deny: %d %s", p.status, p.body)
	}
	ds, err := w.store.ListDenies(ctx, org)
	if err != nil || len(ds) != 1 {
		t.Fatalf("the deny: %v %v", ds, err)
	}
	page := grace.get("/console/access")
	if page.status != http.StatusOK || strings.Contains(page.body, `name="action"`) || !strings.Contains(page.body, escape(xssNote)) || strings.Contains(page.body, "<img") {
		t.Errorf("the auditor's access page offers a change, or does not show the deny as text: %s", page.body)
	}
	if p := grace.post("/console/access", w.base, url.Values{"csrf": {page.csrf(t)}, "action": {"revoke-grant"}, "id": {gs[0].ID}}); p.status != http.StatusForbidden {
		t.Errorf("an auditor's revoke: %d %s", p.status, p.body)
	}
	if p := send(root, url.Values{"action": {"lift-deny"}, "id": {ds[0].ID}}); p.status != http.StatusSeeOther {
		t.Fatalf("lift: %d %s", p.status, p.body)
	}
	if p := send(oliver, url.Values{"action": {"revoke-grant"}, "id": {gs[0].ID}}); p.status != http.StatusSeeOther {
		t.Fatalf("revoke: %d %s", p.status, p.body)
	}
	if gs, _ := w.store.ListGrants(ctx, org, "agent-new", false); len(gs) != 0 {
		t.Errorf("the revoked grant is live: %v", gs)
	}
	if ds, _ := w.store.ListDenies(ctx, org); len(ds) != 0 {
		t.Errorf("the lifted deny stays: %v", ds)
	}
	if bs, _ := w.store.ListBundles(ctx, org); len(bs) != 1 || len(bs[0].Refs) != 2 {
		t.Errorf("the bundle: %v", bs)
	}
}

// registryAPI answers the REST API of the world's server with the
// catalogue and grants routes, which the world's own API serves without:
// the answers the console's are held to.
func (w *world) registryAPI(t *testing.T) func(method, path, key, body string) (int, map[string]any) {
	t.Helper()
	layer := &door.Door{Invoker: w.iv, Registry: w.reg, Store: w.store, Log: slog.New(slog.DiscardHandler), Authz: w.grants}
	api := &httpapi.Server{Door: layer, Store: w.store, Catalog: w.cat, Log: slog.New(slog.DiscardHandler)}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return func(method, path, key, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
}

// The catalogue's and the grants' refusals are the API's, in its words:
// an auditor approving a version, an agent_operator adding a deny, an
// approver reading the catalogue.
func TestCatalogueAndGrantsRefuseAsTheAPIDoes(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.seed(t)
	rest := w.registryAPI(t)
	tests := []struct {
		name, who         string
		method, apiPath   string
		apiBody           string
		page              string // a GET page, or the page whose form is sent
		form              url.Values
		wantConsoleStatus int
	}{
		{"an auditor approves a version", "grace", "POST", "/v1/registry/tools/xss.paymine/versions/1.2.0/approve", "",
			"/console/catalog/xss.paymine/1.2.0", url.Values{"action": {"approve"}}, http.StatusForbidden},
		{"an agent_operator denies", "oliver", "POST", "/v1/denies", `{"agent_id":"*","pattern":"xss.pay","reason":"incident"}`,
			"/console/access", url.Values{"action": {"deny"}, "agent": {"*"}, "pattern": {"xss.pay"}, "reason": {"incident"}}, http.StatusForbidden},
		{"an auditor revokes a grant", "grace", "POST", "/v1/grants/grt_mine/revoke", "",
			"/console/access", url.Values{"action": {"revoke-grant"}, "id": {"grt_mine"}}, http.StatusForbidden},
		{"an approver reads the grants", "fin", "GET", "/v1/grants", "", "/console/access", nil, http.StatusForbidden},
		{"an auditor explains nothing wrong", "grace", "GET", "/v1/agents/x/explain", "", "/console/access/explain?agent=x", nil, http.StatusOK},
		{"an approver explains", "fin", "GET", "/v1/agents/x/explain", "", "/console/access/explain?agent=x", nil, http.StatusForbidden},
	}
	for _, tt := range tests {
		status, body := rest(tt.method, tt.apiPath, w.keys[tt.who], tt.apiBody)
		if status != tt.wantConsoleStatus {
			t.Fatalf("%s: the API answered %d %v", tt.name, status, body)
		}
		b := w.browser()
		b.signIn(tt.who)
		var p page
		if tt.form == nil {
			p = b.get(tt.page)
		} else {
			// The form as the page would send it, offered or not.
			form := url.Values{"csrf": {b.get(tt.page).csrf(t)}}
			for k, v := range tt.form {
				form[k] = v
			}
			p = b.post(tt.page, w.base, form)
		}
		if p.status != tt.wantConsoleStatus {
			t.Errorf("%s: the console answered %d, the API %d: %s", tt.name, p.status, status, p.body)
			continue
		}
		if status == http.StatusForbidden {
			e, _ := body["error"].(map[string]any)
			said, _ := e["message"].(string)
			if said == "" || !strings.Contains(p.body, escape(said)) {
				t.Errorf("%s: the console does not say the API's %q: %s", tt.name, said, p.body)
			}
		}
	}
	if v, err := w.store.GetToolVersion(context.Background(), org, "xss.paymine", "1.2.0"); err != nil || v.State != toolplane.StateInReview {
		t.Errorf("a refused review changed the version: %v %v", v, err)
	}
}
