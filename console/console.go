// Package console is the web console people govern agents with: server-
// rendered pages under /console for approvers, auditors, tool owners and
// administrators. It is a door like the REST API: every page reads and
// acts through the same services with the signed-in person's credential,
// so each service's own role checks decide what a person sees and may do,
// and the console holds no rule of its own.
//
// A page needs a browser session (package signin); without one the
// browser is sent to sign in and brought back. Every state change is a
// form POST that signin.CheckForm accepts (the server's own origin and the
// session's CSRF token). Pages run no inline script: the stylesheet and
// one small script are embedded and served from the console itself under a
// strict Content-Security-Policy, and the pages work without the script.
//
// Pages come in groups, one file each (approvals.go, uncertain.go, ...):
// a group registers its routes in routes and its entry of the navigation
// in sections, and its templates live in assets/<group>.html, parsed with
// the layout (assets/layout.html: "top" and "bottom") into one set.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/anomaly"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/resilience"
	"github.com/toolplane/toolplane/rules"
	"github.com/toolplane/toolplane/runs"
	"github.com/toolplane/toolplane/signin"
	"github.com/toolplane/toolplane/spend"
	"github.com/toolplane/toolplane/traffic"
	"github.com/toolplane/toolplane/upstream"
)

// Path is where the console is served, under the public URL's path.
const Path = "/console"

// CSP is the Content-Security-Policy of every console page: sign-in's
// (nothing from elsewhere, forms posting only here, no framing), with the
// console's own script file allowed. No inline script runs.
const CSP = signin.CSP + "; script-src 'self'"

//go:embed assets
var assets embed.FS

// People is the browser sign-in the console relies on (*signin.Service).
type People interface {
	// Session answers who is signed in on r, or an error wrapping
	// toolplane.ErrUnauthenticated when nobody is.
	Session(r *http.Request) (*signin.Session, error)
	// SignInURL answers the sign-in page that sends the browser back to
	// returnTo once signed in.
	SignInURL(returnTo string) string
	// CheckForm answers nil when the state-changing request r may act for
	// sess (its origin and CSRF token).
	CheckForm(r *http.Request, sess *signin.Session) error
}

// Config is what a Console is built from.
type Config struct {
	// People tells who is signed in; required.
	People People
	// Invoker answers approvals and uncertain actions, through the
	// approval service it files approvals with; required.
	Invoker *invoke.Invoker
	// Registry describes the tool an approval or an uncertain action is
	// of; required.
	Registry *registry.Registry
	// PublicURL is where people reach the server; the console's links
	// are under its path.
	PublicURL string
	// Trail, when set, serves the audit pages; Catalog the catalogue's;
	// Authz and Keys the access pages (grants, denies, bundles and
	// explain; API keys). A section whose service is not set answers
	// that it is not enabled on this server, as the API does.
	Trail   *audit.Trail
	Catalog *catalog.Service
	Authz   *authz.Service
	Keys    *apikey.Keys
	// Credentials is where an explanation reads the agent's live keys
	// (authz.ExplainKeys); without it the keys are not named.
	Credentials authz.KeyLister
	// Links, when set, checks and uses the signed one-click links
	// notifications carry (see Links); without it a link is ignored.
	Links Links
	// Notifications, when set, shows the deliveries that failed for good
	// (the dead letters) to those who may read them; without it the page
	// says notifications are not configured.
	Notifications Notifications
	// Anomalies, when set, serves the anomaly triage's items to those
	// who may read them (anomaly.MayTriage); without it the page says
	// the triage is off.
	Anomalies *anomaly.Service
	// Purges, when set, serves the audit purges' page (two platform
	// admins' drop of a range of the trail); Sinks the export sinks'
	// page. Without them the pages say this server does neither.
	Purges *audit.Purges
	Sinks  *audit.Sinks
	// Spend, when set, serves the spend page (reports by day, agent and
	// tool, and the daily ceiling) to those who may read them; without it
	// the page says spend is not enabled.
	Spend *spend.Service
	// Door, when set, serves each tool page's dependency graph and, when
	// it keeps a search index (door.Door.Discovery), the catalogue's
	// search: both over what the door shows the signed-in person. Without
	// it the tool pages show no graph and the catalogue no search box.
	Door *door.Door
	// Traffic, when set, serves the traffic overview and each tool page's
	// traffic panel to those who may read the audit trail; without it the
	// overview says it is not enabled and tool pages show no panel.
	Traffic *traffic.Service
	// Runs, when set, serves the run pages (/console/runs/{id}) to those
	// who may read the audit trail; without it a run page says runs are
	// not enabled, and run ids still link there.
	Runs *runs.Service
	// Now is the clock time left is read by; nil is time.Now.
	Now func() time.Time
	// Logger receives what a page does not show (a platform fault); nil
	// discards.
	Logger *slog.Logger
	// Connections, when set, serves the connections' pages (status,
	// scopes, re-authorization and revocation, as the service allows);
	// without it they say this server keeps no connections.
	Connections *connection.Admin
	// Upstreams, when set, serves the upstream MCP servers' pages to the
	// deployment's operator; Breakers, when set, adds each upstream tool's
	// circuit breakers in the viewer's organization. Without Upstreams
	// the pages say this server fronts no upstream MCP server.
	Upstreams *upstream.Settings
	Breakers  *resilience.Traffic
	// Rules, when set, serves the policy bundles' pages (versions, diffs,
	// tests, shadow runs and rollback, as the rules service allows);
	// without it they say policy bundles are not enabled.
	Rules *rules.Service
	// ConnectedClients, when set, is the address of the authorization
	// server's page of the signed-in person's connected OAuth clients,
	// linked from the keys page; "" where no authorization server runs.
	ConnectedClients string
}

// Console serves the console's pages.
type Console struct {
	cfg  Config
	log  *slog.Logger
	base string // the public URL's path, "" at the root
	// pages answers the page templates, parsed on the first page served
	// (once, whoever asks first): parsed, they are 0.7 MB of a node's
	// heap, which a node nobody opens the console of never needs.
	pages func() (*template.Template, error)
	// parsed is set once the templates are parsed (for a test).
	parsed atomic.Bool
}

// New answers the console cfg describes.
func New(cfg Config) (*Console, error) {
	if cfg.People == nil || cfg.Invoker == nil || cfg.Registry == nil {
		return nil, errors.New("console: People, Invoker and Registry are required")
	}
	u, err := url.Parse(cfg.PublicURL)
	if err != nil {
		return nil, fmt.Errorf("console: public URL %q: %w", cfg.PublicURL, err)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Console{cfg: cfg, log: cfg.Logger, base: strings.TrimSuffix(u.Path, "/")}
	c.pages = sync.OnceValues(func() (*template.Template, error) {
		c.parsed.Store(true)
		t, err := template.New("console").Funcs(c.funcs()).ParseFS(assets, "assets/*.html")
		if err != nil {
			return nil, fmt.Errorf("console: templates: %w", err)
		}
		return t, nil
	})
	return c, nil
}

// Handler answers the console's routes, at Path. Like sign-in's, they are
// served at /console and reached at the public URL's path: the links and
// redirects the pages make name it.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(assets, "assets")
	static := http.StripPrefix(Path+"/assets/", http.FileServerFS(sub))
	mux.Handle("GET "+Path+"/assets/console.css", static)
	mux.Handle("GET "+Path+"/assets/console.js", static)
	mux.Handle("GET "+Path+"/assets/favicon.svg", static)
	mux.Handle("GET "+Path+"/{$}", c.page(func(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
		// Home is the inbox of a person who may read approvals, and the
		// catalogue (which every person may read) of anyone else: signing
		// in never lands on a refusal.
		home := "/approvals"
		if approval.MayRead(sess.Credential, "listing approvals") != nil {
			home = "/catalog"
		}
		http.Redirect(w, r, c.path(home), http.StatusSeeOther)
		return nil
	}))
	mux.Handle("GET "+Path, http.RedirectHandler(c.path("/"), http.StatusSeeOther))
	c.routes(mux)
	mux.Handle(Path+"/", c.page(func(http.ResponseWriter, *http.Request, *signin.Session) error {
		return fmt.Errorf("no such page: %w", toolplane.ErrNotFound)
	}))
	return headers(mux)
}

// routes registers every page group's routes. A new group adds its line
// here and its section to sections.
func (c *Console) routes(mux *http.ServeMux) {
	c.approvalRoutes(mux)
	c.uncertainRoutes(mux)
	c.auditRoutes(mux)
	c.retentionRoutes(mux)
	c.catalogRoutes(mux)
	c.accessRoutes(mux)
	c.notificationRoutes(mux)
	c.anomalyRoutes(mux)
	c.spendRoutes(mux)
	c.tryRoutes(mux)
	c.overviewRoutes(mux)
	c.runRoutes(mux)
	c.connectionRoutes(mux)
	c.upstreamRoutes(mux)
	c.policyRoutes(mux)
}

// section is an entry of the navigation: a page group's name (its path
// under the console, and the Nav its pages name) and title.
type section struct{ Name, Title string }

// sections are the navigation, in order.
var sections = []section{
	{"overview", "Overview"},
	{"approvals", "Approvals"},
	{"uncertain", "Uncertain actions"},
	{"audit", "Audit"},
	{"catalog", "Catalogue"},
	{"access", "Access"},
	{"notifications", "Notifications"},
	{"anomalies", "Anomalies"},
	{"spend", "Spend"},
	{"connections", "Connections"},
	{"upstreams", "Upstream servers"},
	{"policy", "Policy"},
}

// sectionMay are the services' checks of each section's read: the
// navigation offers a section only to a person its check passes for, so
// nobody is shown a page that would refuse them. A section not named here
// is offered to everyone signed in (the page's service decides anyway).
var sectionMay = map[string]func(*toolplane.Credential) error{
	"overview":      traffic.MayRead,
	"approvals":     func(by *toolplane.Credential) error { return approval.MayRead(by, "listing approvals") },
	"uncertain":     invoke.MayListUncertain,
	"audit":         audit.MayRead,
	"catalog":       catalog.MayRead,
	"access":        authz.MayRead,
	"notifications": notify.MayReadDeliveries,
	"anomalies":     anomaly.MayTriage,
	"spend":         spend.MayRead,
	"policy":        rules.MayRead,
}

// sectionServed are the checks of the sections a server may not serve at
// all (no connections kept, no upstream fronted) besides their service's
// read check: the navigation offers such a section only where its page
// would answer.
var sectionServed = map[string]func(c *Console, by *toolplane.Credential) error{
	"connections": (*Console).mayConnections,
	"upstreams":   (*Console).mayUpstreams,
}

// navCap bounds what one count of the navigation reads: past it the
// navigation says "navCap+", so a page view costs a few bounded reads
// however much waits.
const navCap = 50

// sectionCount are the counts the navigation shows beside a section:
// what waits for the person there (the approvals they may decide, the
// open uncertain actions, the open anomalies), read through the section's
// service with the person's credential, counting at most navCap+1 each:
// the uncertain actions and anomalies by the store's bounded count, the
// approvals by the inbox's page (who may decide one is the approval
// service's judgement of each, MayDecide, not a column).
var sectionCount = map[string]func(c *Console, ctx context.Context, by *toolplane.Credential) (int, error){
	"approvals": func(c *Console, ctx context.Context, by *toolplane.Credential) (int, error) {
		if approval.MayAnswer(by) != nil {
			return 0, nil // an auditor reads the inbox, and decides nothing
		}
		svc, err := c.approvals()
		if err != nil {
			return 0, err
		}
		as, _, err := svc.Inbox(ctx, "", navCap+1, by)
		return len(as), err
	},
	"uncertain": func(c *Console, ctx context.Context, by *toolplane.Credential) (int, error) {
		return c.cfg.Invoker.CountUncertain(ctx, navCap+1, by)
	},
	"anomalies": func(c *Console, ctx context.Context, by *toolplane.Credential) (int, error) {
		if c.cfg.Anomalies == nil {
			return 0, nil
		}
		return c.cfg.Anomalies.Count(ctx, toolplane.AnomalyOpen, navCap+1, by)
	},
}

// headers sets what every console answer carries: nobody caches it (the
// pages show an organization's data), no other site frames it, and only
// the console's own files run or style it.
func headers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Cache-Control", "no-store")
		hd.Set("Content-Security-Policy", CSP)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		// same-origin, as sign-in's: no-referrer would make a form's POST
		// carry "Origin: null", which the origin check refuses.
		hd.Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// handlerFunc is a page's handler: it runs for a signed-in person and
// answers an error the console renders as an error page.
type handlerFunc func(w http.ResponseWriter, r *http.Request, sess *signin.Session) error

// page answers GET requests of a signed-in person; anyone else is sent to
// sign in and brought back to the same address.
func (c *Console) page(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, err := c.cfg.People.Session(r)
		switch {
		case errors.Is(err, toolplane.ErrUnauthenticated):
			http.Redirect(w, r, c.cfg.People.SignInURL(c.base+r.URL.RequestURI()), http.StatusSeeOther)
			return
		case err != nil:
			c.fail(w, r, nil, err)
			return
		}
		if err := h(w, r, sess); err != nil {
			c.fail(w, r, sess, err)
		}
	})
}

// maxForm bounds a form's body.
const maxForm = 64 << 10

// action answers a form's POST: the person must be signed in, and the
// request must come from the console's own page (signin.CheckForm)
// before anything of it is read further.
func (c *Console) action(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		sess, err := c.cfg.People.Session(r)
		if err != nil {
			// Signed out, the page answers with a link to sign in: a POST
			// is not carried through the sign-in, so the person sends the
			// form again from its page.
			c.fail(w, r, nil, err)
			return
		}
		if err := c.cfg.People.CheckForm(r, sess); err != nil {
			c.fail(w, r, sess, err)
			return
		}
		if err := h(w, r, sess); err != nil {
			c.fail(w, r, sess, err)
		}
	})
}

// ApprovalURL answers where a person opens approval id in the console of
// the server reached at publicURL: the address an agent's answer, an MCP
// elicitation and a notification show.
func ApprovalURL(publicURL, id string) string {
	return strings.TrimRight(publicURL, "/") + Path + "/approvals/" + url.PathEscape(id)
}

// path answers p under the console, under the public URL's path.
func (c *Console) path(p string) string { return c.base + Path + p }

// frame is what the layout shows around every page.
type frame struct {
	Title   string
	Session *signin.Session
	// Nav is the section the page belongs to ("approvals", ...), among
	// Sections: those the person may open.
	Nav      string
	Sections []navEntry
	// Base is the console's root path, Assets its files', SignOut the
	// sign-out form's action.
	Base, Assets, SignOut string
	// Notice is a line shown above the page (what an action did).
	Notice string
}

// navEntry is a section as the navigation shows it to one person: with
// what waits there, when its section counts something (Count; More when
// more than navCap wait).
type navEntry struct {
	section
	Count int
	More  bool
}

// CountText answers the count as the navigation shows it: "" for none.
func (e navEntry) CountText() string {
	switch {
	case e.More:
		return fmt.Sprintf("%d+", navCap)
	case e.Count > 0:
		return fmt.Sprint(e.Count)
	}
	return ""
}

// frameFor answers the frame of a page titled title in section nav. Its
// navigation holds the sections the person may open (sectionMay); their
// counts are read when the page is rendered (render), which has the
// request.
func (c *Console) frameFor(sess *signin.Session, title, nav string) frame {
	f := frame{Title: title, Session: sess, Nav: nav, Base: c.path(""), Assets: c.path("/assets"),
		SignOut: c.base + signin.Path + "/out"}
	if sess == nil {
		return f
	}
	for _, s := range sections {
		if may := sectionMay[s.Name]; may != nil && may(sess.Credential) != nil {
			continue
		}
		if may := sectionServed[s.Name]; may != nil && may(c, sess.Credential) != nil {
			continue
		}
		f.Sections = append(f.Sections, navEntry{section: s})
	}
	return f
}

// framed is a page's value: each embeds a frame.
type framed interface {
	navigation() (*signin.Session, []navEntry)
}

func (f frame) navigation() (*signin.Session, []navEntry) { return f.Session, f.Sections }

// count fills in the counts of the navigation of the page v, for the
// person signed in. A count that cannot be read is left out, and logged:
// the page is shown without it.
func (c *Console) count(ctx context.Context, v any) {
	fr, ok := v.(framed)
	if !ok {
		return
	}
	sess, entries := fr.navigation()
	if sess == nil {
		return
	}
	for i := range entries {
		n := sectionCount[entries[i].Name]
		if n == nil {
			continue
		}
		got, err := n(c, ctx, sess.Credential)
		if err != nil {
			c.log.WarnContext(ctx, "console navigation count not read", "section", entries[i].Name, "err", err)
			continue
		}
		// The entries share the page's backing array: the page shows
		// what is written here.
		entries[i].Count, entries[i].More = min(got, navCap), got > navCap
	}
}

// render answers the page template name with v.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v any) {
	c.count(r.Context(), v)
	var b strings.Builder
	pages, err := c.pages()
	if err == nil {
		err = pages.ExecuteTemplate(&b, name, v)
	}
	if err != nil {
		// Rendered to a buffer first: a failing template answers an
		// error page, not half a page.
		c.log.ErrorContext(r.Context(), "console page not rendered", "page", name, "err", err)
		http.Error(w, "the page could not be shown", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// errorPage is what an error page shows: the stable code a client of
// the API would have been answered, the words, and the request's id to
// quote to an operator.
type errorPage struct {
	frame
	Code      httperr.Code
	Message   string
	RequestID string
	SignIn    string
}

// fail renders err as an error page. A refusal is shown in its service's
// words under its stable code, as the API answers it; anything else is the
// platform's fault, logged, and named by nothing of its cause.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, sess *signin.Session, err error) {
	p := problem(err)
	if p.Code == httperr.Internal {
		c.log.ErrorContext(r.Context(), "console request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	v := errorPage{frame: c.frameFor(sess, "Not done", ""), Code: p.Code, Message: p.Message, RequestID: httperr.RequestID(r)}
	if p.Code == httperr.Unauthenticated {
		v.Title = "Not signed in"
		v.SignIn = c.cfg.People.SignInURL(c.path("/"))
	}
	c.render(w, r, p.Code.Status(), "error", v)
}

// problem answers what a page says of err: the code and words the REST API
// answers the same error with.
func problem(err error) httperr.Problem {
	switch {
	case errors.Is(err, signin.ErrForged):
		return httperr.Problem{Code: httperr.Denied, Message: "This form did not come from this console's own page; open the page again and send it from there."}
	case errors.Is(err, context.Canceled):
		return httperr.Problem{Code: httperr.Unavailable, Message: "the request ended before it was answered"}
	}
	if p, ok := httperr.Classify(err); ok {
		return p
	}
	return httperr.Problem{Code: httperr.Internal, Message: "The console could not complete this request. Try again later."}
}

// funcs are the templates' helpers.
func (c *Console) funcs() template.FuncMap {
	return template.FuncMap{
		"when": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		},
		"left":  func(t time.Time) string { return timeLeft(t, c.cfg.Now()) },
		"cents": cents,
		"run":   c.runPath,
		"took": func(micros int64) string {
			return latency(max(time.Duration(micros)*time.Microsecond, time.Nanosecond))
		},
	}
}

// timeLeft says how long until t, from now, in words a person reads at a
// glance.
func timeLeft(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d <= 0:
		return "expired"
	case d < time.Minute:
		return "under a minute"
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
}
