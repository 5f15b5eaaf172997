package console_test

import (
	"context"
	"crypto/rand"
	"database/sql"
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
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/console"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/internal/policytoy"
	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/resilience"
	"github.com/toolplane/toolplane/rules"
	"github.com/toolplane/toolplane/runs"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/signin"
	"github.com/toolplane/toolplane/spend"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
	"github.com/toolplane/toolplane/traffic"
)

const org = "org-1"

// Payloads a page must render inert: in a tool's description, in the
// arguments an agent sent, in an agent's name.
const (
	xssDescription = `Pays out. <script>alert("description")</script>`
	xssNote        = `<img src=x onerror=alert("note")>`
	xssAgent       = `agent-<script>alert("agent")</script>`
	// account is the value the tool's input schema marks x-sensitive.
	account = "NL91ABNA0417164300"
)

type payIn struct {
	Account string `json:"account"`
	Note    string `json:"note"`
}

// world is the console, the sign-in and the REST API of one server over a
// SQLite file, on loopback, with the people and agents the tests act as.
type world struct {
	t     testing.TB
	store toolplane.Store
	// db is the SQLite store's database (nil on PostgreSQL).
	db *sql.DB
	// pool is the PostgreSQL store's pool (nil on SQLite).
	pool  *pgxpool.Pool
	iv    *invoke.Invoker
	base  string
	links *links
	// logs is what the server logged.
	logs syncbuf.Buffer
	// reg, cat and grants are the registry, the catalogue and the grants
	// the console's pages read.
	reg    *registry.Registry
	cat    *catalog.Service
	grants *authz.Service
	// handler is the server's: a benchmark calls it without the network.
	handler http.Handler
	// web is the console the handler serves.
	web  *console.Console
	paid sync.Map // the accounts xss.pay's handler was called for
	// purges is the console's purge service, signing with auditKeys.
	purges    *audit.Purges
	auditKeys *auditchain.KeySet
	// rules are the organization's policy bundles, in the toy language.
	rules *rules.Service
	// meter is the usage store the approval service reads cost estimates
	// from: the store, counting its reads.
	meter *countingMeter
	// keys by name: agent (xssAgent), frontDesk (an agent acting for
	// users), fin (approver in group finance), ada (approver in no
	// group), bob (approver, the person a call is asked for), grace
	// (auditor), root (platform_admin), oliver (agent_operator).
	keys map[string]string
}

// backends are the stores a test runs the console on: a SQLite file
// always, PostgreSQL when the test server is set.
func backends() []string {
	if _, ok := pgtest.LookupDSN(); ok {
		return []string{"sqlite", "postgres"}
	}
	return []string{"sqlite"}
}

func newWorld(t testing.TB) *world { return newWorldOn(t, "sqlite") }

// newWorldOn is newWorld on backend ("sqlite" or "postgres", a schema of
// the test's own).
func newWorldOn(t testing.TB, backend string) *world {
	t.Helper()
	w := &world{t: t, links: &links{used: map[string]bool{}}, keys: map[string]string{}}
	switch backend {
	case "postgres":
		pool, err := pgxpool.New(context.Background(), pgtest.SchemaDSN(t, pgtest.DSN(t)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		pg := postgres.New(pool)
		w.pool = pool
		if err := pg.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		w.store = pg
	default:
		w.store, w.db = sqlitetest.OpenDB(t, filepath.Join(t.TempDir(), "toolplane.db"))
	}

	pay, err := handler.Define[payIn, map[string]any](toolplane.Definition{
		Name: "xss.pay", Version: "1.2.0", Description: xssDescription, Kind: toolplane.KindInternal,
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "xss.pay"}}, Effect: toolplane.EffectWrite,
		ApprovalPreview: true, Approval: &toolplane.ApprovalPolicy{Chain: []string{"finance"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	pay.Annotations.RequiresApproval = true
	no := false
	pay.Repeatable = &no
	pay.InputSchema = markSensitive(t, pay.InputSchema, "account")
	slow, err := handler.Define[payIn, map[string]any](toolplane.Definition{
		Name: "xss.slow", Version: "1.0.0", Description: xssDescription, Kind: toolplane.KindInternal,
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "xss.slow"}}, Effect: toolplane.EffectWrite,
		Timeout: toolplane.Duration(50 * time.Millisecond),
	})
	if err != nil {
		t.Fatal(err)
	}
	slow.Repeatable = &no
	slow.InputSchema = markSensitive(t, slow.InputSchema, "account")
	// xss.meter is metered: its cards show what its calls cost.
	meter, err := handler.Define[payIn, map[string]any](toolplane.Definition{
		Name: "xss.meter", Version: "1.0.0", Description: "Looks an account up, at a price.", Kind: toolplane.KindInternal,
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "xss.meter"}}, Effect: toolplane.EffectRead, Metered: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := handler.NewRegistry()
	payB, err := handler.Bind("xss.pay", func(_ context.Context, _ handler.Call, in payIn) (map[string]any, error) {
		w.paid.Store(in.Account, in.Note)
		return map[string]any{"paid": true}, nil
	}, nil, handler.WithPreview(handler.TypedPreview(func(_ context.Context, _ handler.Call, in payIn) (string, error) {
		return fmt.Sprintf("Pay to %s: %s", in.Account, in.Note), nil
	})))
	if err != nil {
		t.Fatal(err)
	}
	slowB, err := handler.Bind("xss.slow", func(ctx context.Context, _ handler.Call, _ payIn) (map[string]any, error) {
		<-ctx.Done() // past its timeout after dispatch: nobody knows whether it paid
		return nil, ctx.Err()
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	meterB, err := handler.Bind("xss.meter", func(ctx context.Context, _ handler.Call, _ payIn) (map[string]any, error) {
		return map[string]any{"found": true}, handler.ReportUsage(ctx, 3, 1)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []*handler.Binding{payB, slowB, meterB} {
		if err := hs.Register(b); err != nil {
			t.Fatal(err)
		}
	}
	reg, _, err := registry.Build([]toolplane.Definition{pay, slow, meter}, registry.Options{Bindings: demotest.Bindings{Registry: hs}})
	if err != nil {
		t.Fatal(err)
	}
	// Everything the server logs is kept, so a test can tell a secret
	// never reached a log.
	quiet := slog.New(slog.NewTextHandler(&w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w.meter = &countingMeter{UsageStore: w.store}
	approvals := approval.New(approval.Config{Store: w.store, Usage: w.meter, TTL: time.Hour})
	w.iv, err = invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: w.store, Policy: policy.Grants{}, Approvals: approvals, Logger: quiet,
		Traffic: resilience.New(resilience.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	// The door keeps a search index, as a server's does: the catalogue
	// offers its search.
	index := discovery.New(discovery.Options{})
	t.Cleanup(index.Follow(reg))
	layer := &door.Door{Invoker: w.iv, Registry: reg, Store: w.store, Log: quiet, Discovery: index}

	srv := httptest.NewUnstartedServer(nil)
	w.base = "http://" + srv.Listener.Addr().String()
	people, err := signin.New(signin.Config{Store: w.store, Keys: keyring(t), Gate: layer, PublicURL: w.base, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	notes, err := notify.New(notify.Config{Store: w.store.(notify.Store), Keys: keyring(t), PublicURL: w.base})
	if err != nil {
		t.Fatal(err)
	}
	w.reg = reg
	w.auditKeys = &auditchain.KeySet{}
	if _, err := w.auditKeys.Generate(time.Now()); err != nil {
		t.Fatal(err)
	}
	w.purges = audit.NewPurges(audit.PurgesConfig{Store: w.store.(audit.PurgeStore), Keys: w.auditKeys})
	w.cat = catalog.New(catalog.Config{Store: w.store, Registry: reg, Logger: quiet})
	w.grants = authz.New(authz.Config{Store: w.store, Registry: reg})
	w.rules = rules.New(rules.Config{Store: w.store.(rules.Store), Grants: authz.Policy{Service: w.grants}, Engines: []policy.Engine{policytoy.Toy{}}})
	web, err := console.New(console.Config{People: people, Invoker: w.iv, Registry: reg, PublicURL: w.base, Links: w.links, Notifications: notes, Logger: quiet,
		Trail: audit.NewTrail(w.store), Catalog: w.cat, Authz: w.grants,
		Keys: apikey.NewKeys(apikey.KeysConfig{Store: w.store}), Credentials: w.store, Anomalies: anomalyTriage(t, w.store), Spend: spend.New(w.store, nil),
		Purges: w.purges, Sinks: audit.NewSinks(w.store.(audit.SinkStore), nil), Door: layer,
		Traffic: traffic.New(w.store.(toolplane.TrafficStore), nil), Runs: runs.New(w.store), Rules: w.rules,
		ConnectedClients: "/oauth/consents"})
	if err != nil {
		t.Fatal(err)
	}
	api := &httpapi.Server{Door: layer, Store: w.store, Log: quiet, PublicURL: w.base}
	mux := http.NewServeMux()
	mux.Handle(signin.Path, people.Handler())
	mux.Handle(signin.Path+"/", people.Handler())
	mux.Handle(console.Path, web.Handler())
	mux.Handle(console.Path+"/", web.Handler())
	mux.Handle("/", api.Handler())
	srv.Config.Handler = mux
	w.handler, w.web = mux, web
	srv.Start()
	t.Cleanup(srv.Close)

	w.keys["agent"] = mint(t, w.store, toolplane.CredentialAgent, xssAgent, nil, []string{"xss.*"})
	w.keys["frontDesk"] = mint(t, w.store, toolplane.CredentialAgent, "agent-front-desk", []string{"act_for_users"}, []string{"xss.*"})
	w.keys["fin"] = mint(t, w.store, toolplane.CredentialPerson, "fin", []string{toolplane.RoleApprover, "group:finance"}, nil)
	w.keys["ada"] = mint(t, w.store, toolplane.CredentialPerson, "ada", []string{toolplane.RoleApprover}, nil)
	w.keys["bob"] = mint(t, w.store, toolplane.CredentialPerson, "bob", []string{toolplane.RoleApprover, "group:finance"}, nil)
	w.keys["grace"] = mint(t, w.store, toolplane.CredentialPerson, "grace", []string{toolplane.RoleAuditor}, nil)
	w.keys["root"] = mint(t, w.store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil)
	w.keys["oliver"] = mint(t, w.store, toolplane.CredentialPerson, "oliver", []string{toolplane.RoleAgentOperator}, nil)
	return w
}

// markSensitive answers the input schema with property name marked
// x-sensitive.
func markSensitive(t testing.TB, raw json.RawMessage, name string) json.RawMessage {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	s["properties"].(map[string]any)[name].(map[string]any)["x-sensitive"] = true
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func keyring(t testing.TB) *secret.Keyring {
	t.Helper()
	key := make([]byte, secret.KeySize)
	rand.Read(key)
	keys, err := secret.ParseKeyring("k1 " + base64.StdEncoding.EncodeToString(key))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func mint(t testing.TB, s toolplane.Store, kind toolplane.CredentialKind, subject string, roles, tools []string) string {
	t.Helper()
	id, sec, err := apikey.New(kind)
	if err != nil {
		t.Fatal(err)
	}
	c := &toolplane.Credential{ID: id, OrganizationID: org, Kind: kind, Subject: subject, Roles: roles, Tools: tools,
		Hash: apikey.Hash(sec), CreatedAt: time.Now()}
	if err := s.InsertCredential(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return apikey.Key(id, sec)
}

// api calls the REST API with key and answers the status and the JSON body.
func (w *world) api(method, path, key, body string) (int, map[string]any) {
	w.t.Helper()
	req, _ := http.NewRequest(method, w.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// file has the agent key ask to pay, on behalf of forWhom ("" for none),
// and answers the approval the call waits for.
func (w *world) file(key, run, forWhom string) string {
	w.t.Helper()
	call := fmt.Sprintf(`{"arguments":{"account":%q,"note":%q},"run_id":%q,"on_behalf_of":%q}`, account, xssNote, run, forWhom)
	status, body := w.api("POST", "/v1/tools/xss.pay/invoke", w.keys[key], call)
	if status != http.StatusAccepted {
		w.t.Fatalf("pay: %d %v", status, body)
	}
	a := body["approval"].(map[string]any)
	if want := w.base + "/console/approvals/" + a["id"].(string); a["url"] != want {
		w.t.Errorf("the answer links %v, want the console's page %s", a["url"], want)
	}
	return a["id"].(string)
}

// browser is a person's browser: a cookie jar that does not follow
// redirects, so a test sees each one.
type browser struct {
	w  *world
	hc *http.Client
}

func (w *world) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{w: w, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// page is an answer as a test reads it.
type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(req *http.Request) page {
	b.w.t.Helper()
	resp, err := b.hc.Do(req)
	if err != nil {
		b.w.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func (b *browser) get(path string) page {
	b.w.t.Helper()
	req, _ := http.NewRequest("GET", b.w.base+path, nil)
	return b.do(req)
}

// post sends form to path from origin ("" sends no Origin header, as a
// non-browser client does).
func (b *browser) post(path, origin string, form url.Values) page {
	b.w.t.Helper()
	req, _ := http.NewRequest("POST", b.w.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return b.do(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf answers the CSRF token a page's form carries.
func (p page) csrf(t testing.TB) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token on the page: %s", p.body)
	}
	return html.UnescapeString(m[1])
}

// signIn signs the browser in with the person's key through the sign-in
// form, as a person pastes it, and answers the console page it lands on.
func (b *browser) signIn(name string) page {
	b.w.t.Helper()
	form := b.get(signin.Path + "?return=" + url.QueryEscape(console.Path+"/approvals"))
	p := b.post(signin.Path+"/key", b.w.base, url.Values{"csrf": {form.csrf(b.w.t)}, "key": {b.w.keys[name]}, "return": {console.Path + "/approvals"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != console.Path+"/approvals" {
		b.w.t.Fatalf("sign-in as %s: %d %s %s", name, p.status, p.header.Get("Location"), p.body)
	}
	return b.get(console.Path + "/approvals")
}

// TestPagesAreParsedOnTheFirstPageServed checks that a console nobody
// has opened holds no parsed templates, signing in included (sign-in's
// pages are its own), and that the first pages asked for at once, one of
// which parses them while the others wait, all render.
func TestPagesAreParsedOnTheFirstPageServed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if console.PagesParsed(w.web) {
		t.Fatal("the console's templates were parsed before any page was asked for")
	}
	browsers := make([]*browser, 8)
	for i := range browsers {
		b := w.browser()
		form := b.get(signin.Path + "?return=" + url.QueryEscape(console.Path+"/approvals"))
		p := b.post(signin.Path+"/key", w.base, url.Values{"csrf": {form.csrf(t)}, "key": {w.keys["ada"]}, "return": {console.Path + "/approvals"}})
		if p.status != http.StatusSeeOther {
			t.Fatalf("sign-in: %d %s", p.status, p.body)
		}
		browsers[i] = b
	}
	if console.PagesParsed(w.web) {
		t.Fatal("the console's templates were parsed by signing in")
	}
	type answer struct {
		status int
		body   string
		err    error
	}
	answers := make([]answer, len(browsers))
	var wg sync.WaitGroup
	for i, b := range browsers {
		wg.Go(func() {
			resp, err := b.hc.Get(w.base + console.Path + "/approvals")
			if err != nil {
				answers[i].err = err
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			answers[i] = answer{resp.StatusCode, string(body), err}
		})
	}
	wg.Wait()
	for i, a := range answers {
		if a.err != nil || a.status != http.StatusOK || !strings.Contains(a.body, "</html>") {
			t.Errorf("page %d: %d %v %.200s", i, a.status, a.err, a.body)
		}
	}
	if !console.PagesParsed(w.web) {
		t.Error("pages were served and the templates are not marked parsed")
	}
}

// decide answers approval id from its card, as its form sends it.
func (b *browser) decide(id, decision, reason string, extra url.Values) page {
	b.w.t.Helper()
	card := b.get(console.Path + "/approvals/" + id)
	form := url.Values{"csrf": {card.csrf(b.w.t)}, "decision": {decision}, "reason": {reason}}
	for k, v := range extra {
		form[k] = v
	}
	return b.post(console.Path+"/approvals/"+id, b.w.base, form)
}

func (w *world) approval(id string) *toolplane.Approval {
	w.t.Helper()
	a, err := w.store.GetApproval(context.Background(), org, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

// links is the one-click links of the tests: tokens minted for one
// approval, each usable once. The notifications package signs the real
// ones; the console only asks Check and Use.
type links struct {
	mu   sync.Mutex
	for_ map[string]string // token -> approval
	used map[string]bool
}

var errLink = errors.New("not a usable link")

func (l *links) mint(approvalID string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.for_ == nil {
		l.for_ = map[string]string{}
	}
	token := rand.Text()
	l.for_[token] = approvalID
	return token
}

func (l *links) wasUsed(token string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used[token]
}

func (l *links) Check(token, approvalID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.for_[token] != approvalID {
		return errLink
	}
	return nil
}

func (l *links) Use(ctx context.Context, token, approvalID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.for_[token] != approvalID || l.used[token] {
		return errLink
	}
	l.used[token] = true
	return nil
}

var regexpKey = regexp.MustCompile(`name="key" value="([^"]*)"`)

func htmlUnescape(s string) string { return html.UnescapeString(s) }

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestHomeIsAPageThePersonMayOpen: the console's own address, where a
// sign-in with no page to return to lands, is the inbox of a person who
// may read approvals and the catalogue of anyone else, never a refusal.
func TestHomeIsAPageThePersonMayOpen(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, tt := range []struct{ who, home string }{
		{"ada", "/approvals"},
		{"grace", "/approvals"},
		{"oliver", "/catalog"},
		{"root", "/approvals"}, // platform_admin holds every role
	} {
		b := w.browser()
		b.signIn(tt.who)
		p := b.get(console.Path + "/")
		if p.status != http.StatusSeeOther || p.header.Get("Location") != console.Path+tt.home {
			t.Fatalf("%s's home: %d to %q, want %s", tt.who, p.status, p.header.Get("Location"), console.Path+tt.home)
		}
		if landed := b.get(p.header.Get("Location")); landed.status != http.StatusOK {
			t.Errorf("%s lands on %s: %d", tt.who, tt.home, landed.status)
		}
	}
}
