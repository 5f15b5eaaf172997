package httpapi_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/oauth/oauthtest"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/signin"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
	"github.com/toolplane/toolplane/toolfile"
)

// connFixture is a server with the connections service over a SQLite
// store, and keys of every kind the rules tell apart.
type connFixture struct {
	store *sqlite.Store
	srv   *httptest.Server
	// base is the server's URL, the service's public base URL.
	base string
	// admin and admin2 administer org-1 and org-2; ada is a person of
	// org-1 without a role, auditor one who audits, agent an agent's key.
	admin, admin2, ada, auditor, agent string
}

// testKeyring answers a keyring of one fresh key.
func testKeyring(t *testing.T) *secret.Keyring {
	t.Helper()
	key := make([]byte, secret.KeySize)
	rand.Read(key)
	k, err := secret.ParseKeyring("k1 " + base64.StdEncoding.EncodeToString(key))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newConnFixture(t *testing.T, publicURL string) *connFixture {
	t.Helper()
	store, _ := sqlitetest.NewDB(t)
	reg, hs := demotest.Registry(t)
	quiet := slog.New(slog.DiscardHandler)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	conns, _, err := connection.New(connection.Config{Store: store, Keys: testKeyring(t), BaseURL: base, Node: "node-1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	layer := &door.Door{Invoker: iv, Registry: reg, Store: store, Log: quiet}
	api := &httpapi.Server{Door: layer, Store: store, Log: quiet, Connections: conns, PublicURL: publicURL}
	srv.Config.Handler = withSignIn(t, api, store, layer, cmp.Or(publicURL, base))
	srv.Start()
	t.Cleanup(srv.Close)
	return &connFixture{
		store: store, srv: srv, base: base,
		admin:   mint(t, store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil, false),
		admin2:  mintIn(t, store, "org-2", toolplane.CredentialPerson, "root2", []string{toolplane.RolePlatformAdmin}, nil, false),
		ada:     mint(t, store, toolplane.CredentialPerson, "ada", nil, nil, false),
		auditor: mint(t, store, toolplane.CredentialPerson, "grace", []string{toolplane.RoleAuditor}, nil, false),
		agent:   mint(t, store, toolplane.CredentialAgent, "agent-support", nil, []string{"demo.*"}, false),
	}
}

// do sends a request and answers the status and the raw body.
func (f *connFixture) do(t *testing.T, method, path, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// decode reads a JSON answer.
func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return m
}

// connOf answers the connection of an answer {connection: ...}.
func connOf(t *testing.T, b []byte) map[string]any {
	t.Helper()
	c, _ := decode(t, b)["connection"].(map[string]any)
	if c == nil {
		t.Fatalf("no connection in %s", b)
	}
	return c
}

// create creates a connection as the admin and answers its id.
func (f *connFixture) create(t *testing.T, body string) string {
	t.Helper()
	status, b := f.do(t, "POST", "/v1/connections", f.admin, body)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, b)
	}
	id, _ := connOf(t, b)["id"].(string)
	return id
}

func bearerBody(name, token string) string {
	return fmt.Sprintf(`{"name":%q,"provider":"acme","kind":"static","config":{"egress":{"hosts":["api.acme.test"]}},"secrets":{"token":%q}}`, name, token)
}

func TestConnectionSecretsAreNeverAnswered(t *testing.T) {
	t.Parallel()
	f := newConnFixture(t, "")
	planted := map[string]string{
		"token": "tok-planted-" + rand.Text(), "password": "pw-planted-" + rand.Text(),
		"dsn": "postgres://u:dsn-planted-" + rand.Text() + "@db.test/x", "client_secret": "cs-planted-" + rand.Text(),
	}
	bodies := []string{
		bearerBody("acme-bearer", planted["token"]),
		fmt.Sprintf(`{"name":"acme-basic","provider":"acme","kind":"static","config":{"auth":"basic"},"secrets":{"username":"svc","password":%q}}`, planted["password"]),
		fmt.Sprintf(`{"name":"warehouse","provider":"warehouse","kind":"static","config":{"driver":"postgres","egress":{"hosts":["db.test"]}},"secrets":{"dsn":%q}}`, planted["dsn"]),
		fmt.Sprintf(`{"name":"acme-cc","provider":"acme","kind":"oauth2_client_credentials","config":{"client_id":"cid","token_url":"https://auth.acme.test/token"},"secrets":{"client_secret":%q}}`, planted["client_secret"]),
	}
	var answers [][]byte
	var ids []string
	for _, body := range bodies {
		status, b := f.do(t, "POST", "/v1/connections", f.admin, body)
		if status != http.StatusCreated {
			t.Fatalf("create: %d %s", status, b)
		}
		c := connOf(t, b)
		if c["state"] != "active" || c["organization_id"] != "org-1" || c["owner"] != "root" {
			t.Errorf("created %v", c)
		}
		ids = append(ids, c["id"].(string))
		answers = append(answers, b)
	}
	status, b := f.do(t, "GET", "/v1/connections", f.admin, "")
	if status != http.StatusOK {
		t.Fatalf("list: %d %s", status, b)
	}
	answers = append(answers, b)
	for _, id := range ids {
		status, b := f.do(t, "GET", "/v1/connections/"+id, f.auditor, "")
		if status != http.StatusOK {
			t.Fatalf("get: %d %s", status, b)
		}
		answers = append(answers, b)
		status, b = f.do(t, "POST", "/v1/connections/"+id+"/revoke", f.admin, `{"reason":"rotating"}`)
		if status != http.StatusOK {
			t.Fatalf("revoke: %d %s", status, b)
		}
		answers = append(answers, b)
	}
	for _, b := range answers {
		for what, v := range planted {
			if strings.Contains(string(b), v) {
				t.Errorf("the %s was answered: %s", what, b)
			}
		}
		for _, field := range []string{`"secret"`, `"secrets"`, `"refresh_owner"`, `"refresh_until"`, `"[secret]"`} {
			if strings.Contains(string(b), field) {
				t.Errorf("an answer names %s: %s", field, b)
			}
		}
	}
}

func TestCreateConnectionRefusesAtTheField(t *testing.T) {
	t.Parallel()
	f := newConnFixture(t, "")
	cases := []struct {
		name, body, field string
	}{
		{"bad name", `{"name":"Acme!","provider":"acme","kind":"static","secrets":{"token":"t"}}`, "name"},
		{"bad provider", `{"name":"acme","provider":"","kind":"static","secrets":{"token":"t"}}`, "provider"},
		{"bad kind", `{"name":"acme","provider":"acme","kind":"magic","secrets":{"token":"t"}}`, "kind"},
		{"bearer without token", `{"name":"acme","provider":"acme","kind":"static"}`, "secrets.token"},
		{"header without name", `{"name":"acme","provider":"acme","kind":"static","config":{"auth":"header","header":"X Key"},"secrets":{"token":"t"}}`, "config.header"},
		{"unknown auth", `{"name":"acme","provider":"acme","kind":"static","config":{"auth":"digest"},"secrets":{"token":"t"}}`, "config.auth"},
		{"unknown driver", `{"name":"db","provider":"db","kind":"static","config":{"driver":"oracle"},"secrets":{"dsn":"x"}}`, "config.driver"},
		{"sql without dsn", `{"name":"db","provider":"db","kind":"static","config":{"driver":"mysql"}}`, "secrets.dsn"},
		{"oauth without client", `{"name":"o","provider":"o","kind":"oauth2_client_credentials","config":{"token_url":"https://a.test/t"}}`, "config.client_id"},
		{"oauth without endpoints", `{"name":"o","provider":"o","kind":"oauth2_authorization_code","config":{"client_id":"c","token_url":"https://a.test/t"}}`, "config"},
		{"bad cidr", `{"name":"acme","provider":"acme","kind":"static","config":{"egress":{"allow_cidrs":["10.0.0.0/99"]}},"secrets":{"token":"t"}}`, "config.egress"},
		{"unknown field", `{"name":"acme","provider":"acme","kind":"static","secrets":{"token":"t"},"colour":"red"}`, ""},
		{"a token no person sends", `{"name":"acme","provider":"acme","kind":"static","secrets":{"token":"t","refresh_token":"r"}}`, ""},
		{"not JSON", `{"name":`, ""},
	}
	// The group ends when its parallel cases do, before what follows.
	t.Run("refusals", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				status, b := f.do(t, "POST", "/v1/connections", f.admin, c.body)
				e, _ := decode(t, b)["error"].(map[string]any)
				if status != http.StatusBadRequest || e["code"] != "invalid_request" {
					t.Fatalf("%d %s", status, b)
				}
				if got, _ := e["field_path"].(string); got != c.field {
					t.Errorf("field_path = %q, want %q (%s)", got, c.field, b)
				}
			})
		}
	})
	// Nothing refused was stored.
	status, b := f.do(t, "GET", "/v1/connections", f.admin, "")
	if items, _ := decode(t, b)["items"].([]any); status != http.StatusOK || len(items) != 0 {
		t.Errorf("after refusals: %d %s", status, b)
	}
}

func TestConnectionsAreAuthorized(t *testing.T) {
	t.Parallel()
	f := newConnFixture(t, "")
	status, b := f.do(t, "POST", "/v1/connections", f.admin, bearerBody("acme", "t"))
	created := connOf(t, b)
	id, _ := created["id"].(string)
	if status != http.StatusCreated || id == "" {
		t.Fatalf("create: %d %s", status, b)
	}
	cases := []struct {
		name, method, path, key, body string
		status                        int
		code                          string
	}{
		{"no key", "GET", "/v1/connections", "", "", http.StatusUnauthorized, "unauthenticated"},
		{"an agent creates", "POST", "/v1/connections", f.agent, bearerBody("other", "t"), http.StatusForbidden, "denied"},
		{"an agent lists", "GET", "/v1/connections", f.agent, "", http.StatusForbidden, "denied"},
		{"an agent reads", "GET", "/v1/connections/" + id, f.agent, "", http.StatusNotFound, "not_found"},
		{"an auditor creates", "POST", "/v1/connections", f.auditor, bearerBody("other", "t"), http.StatusForbidden, "denied"},
		{"an auditor revokes", "POST", "/v1/connections/" + id + "/revoke", f.auditor, "", http.StatusForbidden, "denied"},
		{"a person reads the organization's", "GET", "/v1/connections/" + id, f.ada, "", http.StatusNotFound, "not_found"},
		{"a person revokes the organization's", "POST", "/v1/connections/" + id + "/revoke", f.ada, "", http.StatusNotFound, "not_found"},
		{"another organization reads", "GET", "/v1/connections/" + id, f.admin2, "", http.StatusNotFound, "not_found"},
		{"another organization revokes", "POST", "/v1/connections/" + id + "/revoke", f.admin2, "", http.StatusNotFound, "not_found"},
		{"another organization authorizes", "POST", "/v1/connections/" + id + "/authorize", f.admin2, "", http.StatusNotFound, "not_found"},
		{"an agent authorizes", "POST", "/v1/connections/" + id + "/authorize", f.agent, "", http.StatusForbidden, "denied"},
		{"a static connection is no application", "POST", "/v1/connections/" + id + "/authorize", f.ada, "", http.StatusBadRequest, "invalid_request"},
		{"an id past its bound", "GET", "/v1/connections/" + strings.Repeat("x", 300), f.admin, "", http.StatusBadRequest, "invalid_request"},
		{"a duplicate name", "POST", "/v1/connections", f.admin, bearerBody("acme", "t"), http.StatusConflict, "conflict"},
	}
	t.Run("refusals", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				status, b := f.do(t, c.method, c.path, c.key, c.body)
				if status != c.status || errCode(decode(t, b)) != c.code {
					t.Errorf("%d %s, want %d %s", status, b, c.status, c.code)
				}
			})
		}
	})
	// Another organization's list holds nothing of org-1; a person without
	// a role sees only their own (none).
	for _, key := range []string{f.admin2, f.ada} {
		status, b := f.do(t, "GET", "/v1/connections", key, "")
		if items, _ := decode(t, b)["items"].([]any); status != http.StatusOK || len(items) != 0 {
			t.Errorf("list: %d %s", status, b)
		}
	}
	// Nothing refused changed the connection.
	status, b = f.do(t, "GET", "/v1/connections/"+id, f.admin, "")
	if c := connOf(t, b); status != http.StatusOK || c["state"] != "active" || c["version"] != created["version"] {
		t.Errorf("after refusals: %d %s", status, b)
	}
}

func TestConnectionsListPages(t *testing.T) {
	t.Parallel()
	f := newConnFixture(t, "")
	var want []string
	for i := range 5 {
		want = append(want, f.create(t, bearerBody(fmt.Sprintf("acme-%d", i), "t")))
	}
	other := f.create(t, `{"name":"beta","provider":"beta","kind":"static","secrets":{"token":"t"}}`)
	var got []string
	cursor, pages := "", 0
	for {
		status, b := f.do(t, "GET", "/v1/connections?provider=acme&limit=2&cursor="+url.QueryEscape(cursor), f.auditor, "")
		if status != http.StatusOK {
			t.Fatalf("page: %d %s", status, b)
		}
		m := decode(t, b)
		items, _ := m["items"].([]any)
		if len(items) > 2 {
			t.Fatalf("a page of %d past the limit", len(items))
		}
		for _, it := range items {
			got = append(got, it.(map[string]any)["id"].(string))
		}
		pages++
		cursor, _ = m["next_cursor"].(string)
		if cursor == "" || pages > 5 {
			break
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || pages != 3 {
		t.Errorf("paged %v in %d pages, want %v in 3", got, pages, want)
	}
	// Revoked ones are found by their state.
	if status, b := f.do(t, "POST", "/v1/connections/"+other+"/revoke", f.admin, ""); status != http.StatusOK {
		t.Fatalf("revoke: %d %s", status, b)
	}
	status, b := f.do(t, "GET", "/v1/connections?state=revoked", f.admin, "")
	items, _ := decode(t, b)["items"].([]any)
	if status != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["id"] != other {
		t.Errorf("revoked: %d %s", status, b)
	}
	for _, q := range []struct{ query, field string }{
		{"state=paused", "state"}, {"limit=0", "limit"}, {"limit=1001", "limit"}, {"cursor=bogus", "cursor"},
	} {
		status, b := f.do(t, "GET", "/v1/connections?"+q.query, f.admin, "")
		e, _ := decode(t, b)["error"].(map[string]any)
		if status != http.StatusBadRequest || e["field_path"] != q.field {
			t.Errorf("%s: %d %s", q.query, status, b)
		}
	}
}

func TestRevokeConnection(t *testing.T) {
	t.Parallel()
	f := newConnFixture(t, "")
	id := f.create(t, bearerBody("acme", "t"))
	status, b := f.do(t, "POST", "/v1/connections/"+id+"/revoke", f.admin, `{"reason":"the vendor was replaced"}`)
	c := connOf(t, b)
	if status != http.StatusOK || c["state"] != "revoked" || c["reason"] != "the vendor was replaced" || c["revoked_at"] == nil {
		t.Fatalf("revoke: %d %s", status, b)
	}
	// Final: revoking again answers it as it is; the name is free again.
	status, b = f.do(t, "POST", "/v1/connections/"+id+"/revoke", f.admin, `{"reason":"again"}`)
	if c := connOf(t, b); status != http.StatusOK || c["reason"] != "the vendor was replaced" {
		t.Errorf("revoke again: %d %s", status, b)
	}
	f.create(t, bearerBody("acme", "t2"))
	for _, body := range []string{`{"reason":1}`, `{"why":"x"}`, `{"reason":"` + strings.Repeat("x", toolplane.MaxReasonLen+1) + `"}`} {
		status, b := f.do(t, "POST", "/v1/connections/"+id+"/revoke", f.admin, body)
		if status != http.StatusBadRequest {
			t.Errorf("%.20s: %d %s", body, status, b)
		}
	}
	if status, b := f.do(t, "POST", "/v1/connections/con_nothing/revoke", f.admin, ""); status != http.StatusNotFound {
		t.Errorf("unknown id: %d %s", status, b)
	}
}

func TestConnectionRoutesNeedTheService(t *testing.T) {
	t.Parallel()
	f := newFixture(t) // a server without Connections
	admin := mint(t, f.store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil, false)
	for _, p := range []string{"/v1/connections", "/v1/connections/con_x"} {
		if status, body := f.do(t, "GET", p, admin, ""); status != http.StatusNotFound || errCode(body) != "not_found" {
			t.Errorf("GET %s: %d %v", p, status, body)
		}
	}
	resp, err := http.Get(f.srv.URL + connection.StartPath + "?state=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("start: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// withSignIn answers api's routes with the browser sign-in of people
// beside them, as serve wires them: people sign in at /signin with their
// own key, checked through layer.
func withSignIn(t *testing.T, api *httpapi.Server, store *sqlite.Store, layer *door.Door, publicURL string) http.Handler {
	t.Helper()
	people, err := signin.New(signin.Config{Store: store, Keys: testKeyring(t), Gate: layer, PublicURL: publicURL})
	if err != nil {
		t.Fatal(err)
	}
	api.People = people
	mux := http.NewServeMux()
	mux.Handle("/signin", people.Handler())
	mux.Handle("/signin/", people.Handler())
	mux.Handle("/", api.Handler())
	return mux
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn signs the person of key in on b, through the sign-in page's key
// form, at the server base.
func (b browser) signIn(t *testing.T, base, key string) {
	t.Helper()
	_, page, _ := b.get(t, base+"/signin")
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no key form on the sign-in page: %s", page)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/signin/key", strings.NewReader(url.Values{"csrf": {m[1]}, "key": {key}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in with a key: %d", resp.StatusCode)
	}
}

// browser is a person's browser: it keeps cookies, and is told of
// redirects rather than following them.
type browser struct {
	*http.Client
}

func newBrowser(t *testing.T) browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return browser{&http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       30 * time.Second,
	}}
}

// get opens u and answers the status, the page and the answer's headers.
func (b browser) get(t *testing.T, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}

// oauthApp registers a client at p and creates the organization's
// application connection for it, answering its id.
func (f *connFixture) oauthApp(t *testing.T, p *oauthtest.Provider, provider string) string {
	t.Helper()
	clientID, clientSecret := p.RegisterClient(f.base + connection.CallbackPath)
	return f.create(t, fmt.Sprintf(`{"name":%q,"provider":%q,"kind":"oauth2_authorization_code",
		"config":{"issuer":%q,"client_id":%q,"request_scopes":["openid","offline_access"],"egress":{"hosts":["127.0.0.1"],"allow_cidrs":["127.0.0.1/32"]}},
		"secrets":{"client_secret":%q}}`, provider+"-app", provider, p.Issuer, clientID, clientSecret))
}

// authorize asks, as key, for the link that connects key's person to app.
func (f *connFixture) authorize(t *testing.T, key, app string) string {
	t.Helper()
	status, b := f.do(t, "POST", "/v1/connections/"+app+"/authorize", key, "")
	link, _ := decode(t, b)["authorization_url"].(string)
	if status != http.StatusOK || !strings.HasPrefix(link, f.base+connection.StartPath+"?state=") {
		t.Fatalf("authorize: %d %s", status, b)
	}
	return link
}

func TestConnectAnAccountInABrowser(t *testing.T) {
	t.Parallel()
	f := newConnFixture(t, "")
	p := oauthtest.Start(t)
	app := f.oauthApp(t, p, "crm")
	link := f.authorize(t, f.ada, app)
	br := newBrowser(t)

	// Nobody signed in: the link sends the browser to sign in, and back
	// to the link after.
	status, _, h := br.get(t, link)
	if want := "/signin?return=" + url.QueryEscape(strings.TrimPrefix(link, f.base)); status != http.StatusSeeOther || h.Get("Location") != want {
		t.Fatalf("start before sign-in: %d to %q, want %q", status, h.Get("Location"), want)
	}
	// Another person of the organization, signed in, is refused, and the
	// link stays ada's.
	grace := newBrowser(t)
	grace.signIn(t, f.base, f.auditor)
	if status, page, _ := grace.get(t, link); status != http.StatusForbidden || !strings.Contains(page, "You are signed in as grace, and this authorization link is for another person") {
		t.Fatalf("start by another person: %d %s", status, page)
	}

	// Start, signed in as ada: to the provider, with the nonce cookie.
	br.signIn(t, f.base, f.ada)
	status, _, h = br.get(t, link)
	to := h.Get("Location")
	if status != http.StatusFound || !strings.HasPrefix(to, p.Issuer) {
		t.Fatalf("start: %d to %q", status, to)
	}
	var nonce *http.Cookie
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == "toolplane_oauth" {
			nonce = c
		}
	}
	if nonce == nil || nonce.Value == "" || !nonce.HttpOnly || nonce.SameSite != http.SameSiteLaxMode ||
		nonce.Path != "/v1/connections/oauth" || nonce.MaxAge != 600 || nonce.Secure {
		t.Fatalf("start's cookie: %+v", nonce)
	}
	if h.Get("Cache-Control") != "no-store" || h.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("start's headers: %v", h)
	}
	// The link is single use.
	again := newBrowser(t)
	again.signIn(t, f.base, f.ada)
	if status, page, _ := again.get(t, link); status != http.StatusBadRequest || !strings.Contains(page, "already used") {
		t.Errorf("start again: %d %s", status, page)
	}

	// The person logs in at the provider, which sends the browser back.
	back, err := p.Login(t.Context(), to)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(back.String(), f.base+connection.CallbackPath+"?") || back.Query().Get("code") == "" {
		t.Fatalf("the provider sent the browser to %s", back)
	}

	// Another browser, without the cookie, is refused, and the state is
	// left for the browser that started.
	if status, page, _ := newBrowser(t).get(t, back.String()); status != http.StatusBadRequest || !strings.Contains(page, "did not start this authorization") {
		t.Errorf("callback without the cookie: %d %s", status, page)
	}

	status, page, h := br.get(t, back.String())
	if status != http.StatusOK || !strings.Contains(page, "Connected crm for ada. You can close this window.") {
		t.Fatalf("callback: %d %s", status, page)
	}
	if !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(h.Get("Set-Cookie"), "toolplane_oauth=;") {
		t.Errorf("callback's headers: %v", h)
	}

	// A replay, even with the nonce, finds the state taken.
	replay := newBrowser(t)
	replay.Jar.SetCookies(back, []*http.Cookie{{Name: "toolplane_oauth", Value: nonce.Value, Path: "/v1/connections/oauth"}})
	if status, page, _ := replay.get(t, back.String()); status != http.StatusBadRequest || !strings.Contains(page, "already completed or has expired") {
		t.Errorf("callback replayed: %d %s", status, page)
	}

	// Ada now holds her own connection, and sees it; its tokens are never
	// answered.
	status, b := f.do(t, "GET", "/v1/connections", f.ada, "")
	items, _ := decode(t, b)["items"].([]any)
	if status != http.StatusOK || len(items) != 1 {
		t.Fatalf("ada's connections: %d %s", status, b)
	}
	mine := items[0].(map[string]any)
	if mine["user_id"] != "ada" || mine["provider"] != "crm" || mine["state"] != "active" || mine["kind"] != "oauth2_authorization_code" {
		t.Errorf("ada's connection: %v", mine)
	}
	stored, err := f.store.GetConnection(context.Background(), "org-1", mine["id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.Secret) == 0 {
		t.Fatal("no secret stored for the consent")
	}
	if strings.Contains(string(b), "access_token") || strings.Contains(string(b), "refresh_token") {
		t.Errorf("tokens answered: %s", b)
	}
}

func TestCallbackPagesEscapeWhatTheyQuote(t *testing.T) {
	t.Parallel()
	f := newConnFixture(t, "https://tools.example.com/toolplane")
	br := newBrowser(t)
	cases := []struct {
		name, query, want string
	}{
		{"the provider's refusal", "error=access_denied&error_description=" + url.QueryEscape(`<script>alert("x")</script>`),
			"access_denied (&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;)"},
		{"a long refusal", "error=" + strings.Repeat("e", 5000), strings.Repeat("e", 300) + "…"},
		{"no state", "code=c", "names no authorization"},
	}
	for _, c := range cases {
		status, page, h := br.get(t, f.base+connection.CallbackPath+"?"+c.query)
		if status != http.StatusBadRequest || !strings.Contains(page, c.want) || strings.Contains(page, "<script>") || strings.Contains(page, strings.Repeat("e", 301)) {
			t.Errorf("%s: %d %s", c.name, status, page)
		}
		// Behind https, under the public URL's path, the cookie is cleared
		// where it was set.
		sc := h.Get("Set-Cookie")
		if !strings.Contains(sc, "Path=/toolplane/v1/connections/oauth") || !strings.Contains(sc, "Secure") || !strings.Contains(sc, "Max-Age=0") {
			t.Errorf("%s: Set-Cookie %q", c.name, sc)
		}
	}
	for _, q := range []string{"", "state=" + strings.Repeat("s", 300)} {
		if status, page, _ := br.get(t, f.base+connection.StartPath+"?"+q); status != http.StatusBadRequest || !strings.Contains(page, "<p>") {
			t.Errorf("start ?%.20s: %d %s", q, status, page)
		}
	}
	// A link opened before sign-in goes to the sign-in page under the
	// public URL's path, and comes back to itself there.
	status, _, h := br.get(t, f.base+connection.StartPath+"?state=unknown")
	if want := "/toolplane/signin?return=" + url.QueryEscape("/toolplane"+connection.StartPath+"?state=unknown"); status != http.StatusSeeOther || h.Get("Location") != want {
		t.Errorf("start before sign-in: %d to %q, want %q", status, h.Get("Location"), want)
	}
}

// connectionBindings resolves the one test tool's references: it binds no
// handler and names no remote connection.
type connectionBindings struct{}

func (connectionBindings) Handler(string) (bool, bool) { return false, false }
func (connectionBindings) Connection(string) bool      { return false }
func (connectionBindings) FactResolver(string) bool    { return false }

// unreachedRuntime binds the HTTP tool to a body that fails the test: a
// call without its connection must end before it is dispatched.
type unreachedRuntime struct{ t *testing.T }

func (u unreachedRuntime) Binding(d *toolplane.Definition) (*handler.Binding, error) {
	return handler.BindFunc("http "+d.Name, func(context.Context, handler.Call, any) (any, error) {
		u.t.Error("the call was dispatched without its connection")
		return nil, errors.New("no connection")
	}, nil)
}

const lookupTool = `name: crm.lookup
version: 1.0.0
description: Look up one contact in the CRM by its id, as the person the call is made for sees it.
kind: internal
connection: crm
binding:
  http: {method: GET, url: 'https://api.crm.test/contacts/{id}'}
effect: read
retry: safe
timeout: 5s
owner: crm-team
input_schema:
  type: object
  additionalProperties: false
  required: [id]
  properties:
    id: {type: string, maxLength: 64, description: The contact's id.}
output_schema:
  type: object
`

func TestACallWithoutItsConnectionAnswersTheAuthorizationLink(t *testing.T) {
	t.Parallel()
	def, _, err := toolfile.Parse([]byte(lookupTool), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	reg, _, err := registry.Build([]toolplane.Definition{def}, registry.Options{Bindings: connectionBindings{}})
	if err != nil {
		t.Fatal(err)
	}
	store, _ := sqlitetest.NewDB(t)
	quiet := slog.New(slog.DiscardHandler)
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	conns, broker, err := connection.New(connection.Config{Store: store, Keys: testKeyring(t), BaseURL: base, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: handler.NewRegistry(), Store: store, Policy: policy.Grants{},
		Runtimes: unreachedRuntime{t}, Broker: broker, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	layer := &door.Door{Invoker: iv, Registry: reg, Store: store, Log: quiet}
	api := &httpapi.Server{Door: layer, Store: store, Log: quiet, Connections: conns}
	srv.Config.Handler = withSignIn(t, api, store, layer, base)
	srv.Start()
	t.Cleanup(srv.Close)
	f := &connFixture{store: store, srv: srv, base: base,
		admin: mint(t, store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil, false)}
	agent := mint(t, store, toolplane.CredentialAgent, "agent-crm", []string{toolplane.RoleActForUsers}, []string{"crm.*"}, false)
	// The organization's application people connect their CRM accounts to.
	f.create(t, `{"name":"crm-app","provider":"crm","kind":"oauth2_authorization_code",
		"config":{"issuer":"http://127.0.0.1:1","client_id":"toolplane","egress":{"hosts":["127.0.0.1"],"allow_cidrs":["127.0.0.1/32"]}},"secrets":{"client_secret":"s"}}`)

	status, b := f.do(t, "POST", "/v1/tools/crm.lookup/invoke", agent, `{"arguments":{"id":"c-1"},"on_behalf_of":"ada"}`)
	res := decode(t, b)
	e, _ := res["error"].(map[string]any)
	link, _ := e["authorization_url"].(string)
	if status != http.StatusOK || res["ok"] != false || e["code"] != string(toolplane.CodeConnectionRequired) ||
		!strings.HasPrefix(link, base+connection.StartPath+"?state=") {
		t.Fatalf("invoke: %d %s", status, b)
	}
	// The link is a live start link: its state is found, and the provider
	// asked for its endpoints. Nothing answers at the issuer here, which is
	// the platform's fault, a 500 page (an unknown state would be a 400).
	ada := newBrowser(t)
	ada.signIn(t, base, mint(t, store, toolplane.CredentialPerson, "ada", nil, nil, false))
	status, page, _ := ada.get(t, link)
	if status != http.StatusInternalServerError || !strings.Contains(page, "could not be completed") {
		t.Errorf("the link: %d %s", status, page)
	}

	// A call made for nobody has no one to send a link to.
	status, b = f.do(t, "POST", "/v1/tools/crm.lookup/invoke", agent, `{"arguments":{"id":"c-1"}}`)
	e, _ = decode(t, b)["error"].(map[string]any)
	if status != http.StatusOK || e["code"] != string(toolplane.CodeConnectionRequired) || e["authorization_url"] != nil {
		t.Errorf("invoke for nobody: %d %s", status, b)
	}
}
