package authserver_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
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

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/oauth2"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/authserver"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/signin"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// store is what a node is built over: either backend.
type store interface {
	toolplane.Store
	toolplane.OAuthStore
	toolplane.OAuthConsentStore
}

// backends answers a fresh store of each backend, PostgreSQL when the
// test database is set.
func backends(t *testing.T) map[string]func(t *testing.T) []store {
	out := map[string]func(t *testing.T) []store{
		"sqlite": func(t *testing.T) []store { s := sqlitetest.New(t); return []store{s, s} },
	}
	if dsn, ok := pgtest.LookupDSN(); ok {
		out["postgres"] = func(t *testing.T) []store {
			dsn := pgtest.SchemaDSN(t, dsn)
			var nodes []store
			for i := range 2 {
				// One pool per node, as two processes would have.
				pool, err := pgxpool.New(context.Background(), dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pool.Close)
				s := postgres.New(pool)
				if i == 0 {
					if err := s.Migrate(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				nodes = append(nodes, s)
			}
			return nodes
		}
	}
	return out
}

// forEach runs fn on a world of each backend.
func forEach(t *testing.T, opts func(*authserver.Config), fn func(t *testing.T, w *world)) {
	t.Parallel()
	for name, newStores := range backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, newWorld(t, newStores(t), opts))
		})
	}
}

const org = "acme"

var offeredTools = []string{"docs.search", "payments.refund"}

// node is one toolplane process: sign-in, the authorization server, and a
// resource at /mcp and /mcp/billing that answers who a token stands for.
type node struct {
	store store
	as    *authserver.Server
	srv   *httptest.Server
}

// world is two nodes over one database, sharing one public URL (node 0's),
// and alice's person key.
type world struct {
	t     *testing.T
	base  string
	nodes []*node
	key   string
	keys  *secret.Keyring
}

func newWorld(t *testing.T, stores []store, opts func(*authserver.Config)) *world {
	k := make([]byte, secret.KeySize)
	rand.Read(k)
	keys, err := secret.ParseKeyring("k1 " + base64.StdEncoding.EncodeToString(k))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, keys: keys}
	log := slog.New(slog.DiscardHandler)
	for i, st := range stores {
		srv := httptest.NewUnstartedServer(nil)
		if i == 0 {
			w.base = "http://" + srv.Listener.Addr().String()
		}
		people, err := signin.New(signin.Config{Store: st, Keys: keys, Gate: &door.Door{Store: st, Log: log}, PublicURL: w.base, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		cfg := authserver.Config{Store: st, Keys: keys, Issuer: w.base, People: people, Logger: log,
			Tools: func(_ context.Context, cred *toolplane.Credential) ([]string, error) {
				if cred.Kind != toolplane.CredentialAgent || cred.ActsFor != "alice" {
					return nil, errors.New("the consent page asked for the wrong caller's tools")
				}
				return offeredTools, nil
			},
			Upstreams: func() []string { return []string{"billing"} }}
		if opts != nil {
			opts(&cfg)
		}
		as, err := authserver.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/signin", people.Handler())
		mux.Handle("/signin/", people.Handler())
		mux.Handle("/", as.Handler())
		for _, path := range []string{"/mcp", "/mcp/billing", "/v1/tools"} {
			mux.HandleFunc(path, func(rw http.ResponseWriter, r *http.Request) {
				ctx := r.Context()
				if path != "/v1/tools" {
					ctx = authserver.WithResource(ctx, w.base+path)
				}
				tok, _ := door.Bearer(r.Header.Get("Authorization"))
				cred, err := as.Verifier().Verify(ctx, tok)
				if err != nil {
					http.Error(rw, err.Error(), http.StatusUnauthorized)
					return
				}
				json.NewEncoder(rw).Encode(seen{ID: cred.ID, Org: cred.OrganizationID, Kind: cred.Kind, Subject: cred.Subject,
					ActsFor: cred.ActsFor, ClientID: cred.ClientID, Tools: cred.Tools, Roles: cred.User.Roles})
			})
		}
		srv.Config.Handler = mux
		srv.Start()
		t.Cleanup(srv.Close)
		w.nodes = append(w.nodes, &node{store: st, as: as, srv: srv})
	}
	id, sec, err := apikey.New(toolplane.CredentialPerson)
	if err != nil {
		t.Fatal(err)
	}
	if err := stores[0].InsertCredential(t.Context(), &toolplane.Credential{ID: id, OrganizationID: org, Kind: toolplane.CredentialPerson,
		Subject: "alice", Roles: []string{toolplane.RoleApprover}, Hash: apikey.Hash(sec), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	w.key = apikey.Key(id, sec)
	return w
}

// url answers path on node i.
func (w *world) url(i int, path string) string { return w.nodes[i].srv.URL + path }

// register registers a client with redirect on node i.
func (w *world) register(i int, redirect ...string) (string, int) {
	w.t.Helper()
	body, _ := json.Marshal(map[string]any{"client_name": "Test client", "redirect_uris": redirect})
	resp, err := http.Post(w.url(i, "/oauth/register"), "application/json", strings.NewReader(string(body)))
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ClientID string `json:"client_id"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	return out.ClientID, resp.StatusCode
}

// client is an OAuth client of the world, as golang.org/x/oauth2 is one.
type client struct {
	w        *world
	conf     oauth2.Config
	verifier string
}

const redirect = "http://127.0.0.1:33418/callback"

func (w *world) newClient() *client {
	w.t.Helper()
	id, status := w.register(0, redirect)
	if status != http.StatusCreated {
		w.t.Fatalf("register: %d", status)
	}
	return w.clientOf(id)
}

func (w *world) clientOf(id string) *client {
	return &client{w: w, verifier: oauth2.GenerateVerifier(), conf: oauth2.Config{ClientID: id, RedirectURL: redirect, Scopes: []string{"tools"},
		Endpoint: oauth2.Endpoint{AuthURL: w.base + "/oauth/authorize", TokenURL: w.base + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}}
}

// authURL answers the authorization request, with extra parameters.
func (c *client) authURL(extra ...oauth2.AuthCodeOption) string {
	opts := append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(c.verifier), oauth2.SetAuthURLParam("resource", c.w.base+"/mcp")}, extra...)
	return c.conf.AuthCodeURL("st-123", opts...)
}

// browser is a person's browser: a cookie jar that follows the server's
// redirects and stops at the first one leaving it.
type browser struct {
	w  *world
	hc *http.Client
}

func (w *world) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{w: w, hc: &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if "http://"+req.URL.Host != w.base {
			return http.ErrUseLastResponse
		}
		return nil
	}}}
}

type page struct {
	status   int
	body     string
	location string
	csp      string
}

func (b *browser) do(req *http.Request) page {
	b.w.t.Helper()
	resp, err := b.hc.Do(req)
	if err != nil {
		b.w.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, body: string(body), location: resp.Header.Get("Location"), csp: resp.Header.Get("Content-Security-Policy")}
}

func (b *browser) get(u string) page {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	return b.do(req)
}

func (b *browser) post(u string, form url.Values) page {
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

var inputRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// hidden answers a page's hidden form fields.
func (p page) hidden() url.Values {
	v := url.Values{}
	for _, m := range inputRE.FindAllStringSubmatch(p.body, -1) {
		v.Add(m[1], html.UnescapeString(m[2]))
	}
	return v
}

// signIn signs alice in with her key, from the sign-in page authorize
// sent her to, and answers the page she is sent back to.
func (b *browser) signIn(p page) page {
	b.w.t.Helper()
	if !strings.Contains(p.body, "personal API key") {
		b.w.t.Fatalf("not the sign-in page: %d %s", p.status, p.body)
	}
	form := p.hidden()
	form.Set("key", b.w.key)
	return b.post(b.w.base+signin.Path+"/key", form)
}

// consent opens authURL, signs in when asked, and answers the consent page.
func (b *browser) consent(authURL string) page {
	b.w.t.Helper()
	p := b.get(authURL)
	if strings.Contains(p.body, "personal API key") {
		p = b.signIn(p)
	}
	return p
}

// decide posts the consent page's form with decision and extra fields,
// and answers where the browser is sent.
func (b *browser) decide(p page, decision string, extra url.Values) *url.URL {
	b.w.t.Helper()
	if p.status != http.StatusOK || !strings.Contains(p.body, `value="allow"`) {
		b.w.t.Fatalf("not the consent page: %d %s", p.status, p.body)
	}
	form := p.hidden()
	form.Set("decision", decision)
	for k, v := range extra {
		form[k] = v
	}
	res := b.post(b.w.base+"/oauth/authorize", form)
	if res.status != http.StatusSeeOther {
		b.w.t.Fatalf("consent answered %d, want a redirect: %s", res.status, res.body)
	}
	u, err := url.Parse(res.location)
	if err != nil || !strings.HasPrefix(res.location, redirect) {
		b.w.t.Fatalf("consent sent the browser to %q", res.location)
	}
	return u
}

// authorize runs the browser part of the flow and answers the code.
func (c *client) authorize(b *browser, extra url.Values, opts ...oauth2.AuthCodeOption) string {
	c.w.t.Helper()
	u := b.decide(b.consent(c.authURL(opts...)), "allow", extra)
	q := u.Query()
	if q.Get("state") != "st-123" || q.Get("iss") != c.w.base || q.Get("code") == "" {
		c.w.t.Fatalf("redirect %s lacks the code, the state or the issuer", u)
	}
	return q.Get("code")
}

// exchange trades a code on node i.
func (c *client) exchange(i int, code string, opts ...oauth2.AuthCodeOption) (*oauth2.Token, error) {
	conf := c.conf
	conf.Endpoint.TokenURL = c.w.url(i, "/oauth/token")
	return conf.Exchange(context.Background(), code, append([]oauth2.AuthCodeOption{oauth2.VerifierOption(c.verifier)}, opts...)...)
}

// refresh uses a refresh token on node i.
func (c *client) refresh(i int, rt string) (*oauth2.Token, error) {
	conf := c.conf
	conf.Endpoint.TokenURL = c.w.url(i, "/oauth/token")
	return conf.TokenSource(context.Background(), &oauth2.Token{RefreshToken: rt, Expiry: time.Now().Add(-time.Hour)}).Token()
}

// call presents token at path on node i, answering the credential or the
// status.
func (w *world) call(i int, path, token string) (*seen, int) {
	w.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, w.url(i, path), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode
	}
	var c seen
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		w.t.Fatal(err)
	}
	return &c, resp.StatusCode
}

// seen is what the test resource answers of a verified token.
type seen struct {
	ID, Org  string
	Kind     toolplane.CredentialKind
	Subject  string
	ActsFor  string
	ClientID string
	Tools    []string
	Roles    []string
}

// oauthErr answers the RFC 6749 error code of err, or "".
func oauthErr(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	if err != nil {
		return fmt.Sprint(err)
	}
	return ""
}
