package signin_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/internal/testclock"
	"github.com/toolplane/toolplane/jwtauth"
	"github.com/toolplane/toolplane/oauth/oauthtest"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/signin"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

const org = "org-1"

// world is a sign-in service over a SQLite file, in front of the real
// in-process OpenID provider, served on loopback with a page that shows
// who is signed in (/whoami) and a state-changing form (/act).
type world struct {
	t       testing.TB
	store   *sqlite.Store
	dbPath  string
	p       *oauthtest.Provider
	svc     *signin.Service
	base    string
	clock   *testclock.Clock
	log     *syncbuf.Buffer
	answers *syncbuf.Buffer
	secret  string // the OIDC client's secret
	planted []string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	dbPath := filepath.Join(t.TempDir(), "toolplane.db")
	store := sqlitetest.Open(t, dbPath)
	key := make([]byte, secret.KeySize)
	rand.Read(key)
	keys, err := secret.ParseKeyring("k1 " + base64.StdEncoding.EncodeToString(key))
	if err != nil {
		t.Fatal(err)
	}
	p := oauthtest.Start(t)
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	id, clientSecret := p.RegisterClient(base + "/signin/callback")
	p.SetClaims(p.UserID, map[string]any{"org": org, "toolplane_roles": []string{toolplane.RoleApprover}, "groups": []string{"finance"}})
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clock := testclock.New(time.Now())
	svc, err := signin.New(signin.Config{
		Store: store, Keys: keys, Gate: &door.Door{Store: store, Log: log}, PublicURL: base,
		OIDC:   &signin.OIDC{Issuer: p.Issuer, ClientID: id, ClientSecret: toolplane.SecretString(clientSecret), Client: p.HTTPClient()},
		Now:    clock.Now,
		Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/signin", svc.Handler())
	mux.Handle("/signin/", svc.Handler())
	mux.HandleFunc("GET /whoami", func(w http.ResponseWriter, r *http.Request) {
		sess, err := svc.Session(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		c := sess.Credential
		fmt.Fprintf(w, "%s %s %s %s csrf=%s", c.OrganizationID, c.Subject, strings.Join(c.Roles, ","), sess.Method, sess.CSRF)
	})
	mux.HandleFunc("POST /act", func(w http.ResponseWriter, r *http.Request) {
		sess, err := svc.Session(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if err := svc.CheckForm(r, sess); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		fmt.Fprint(w, "done")
	})
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	return &world{t: t, store: store, dbPath: dbPath, p: p, svc: svc, base: base, clock: clock, log: logs, answers: &syncbuf.Buffer{}, secret: clientSecret,
		planted: []string{clientSecret}}
}

// browser is a cookie jar that follows redirects within the server and
// stops at the first one leaving it (to the provider).
type browser struct {
	w   *world
	hc  *http.Client
	jar *cookiejar.Jar
}

func (w *world) browser() *browser {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if !strings.HasPrefix(req.URL.String(), w.base) || len(via) > 10 {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	return &browser{w: w, hc: hc, jar: jar}
}

// page is an answer the browser got.
type page struct {
	status int
	body   string
	header http.Header
	// url is where the browser ended; location where a redirect off the
	// server pointed.
	url, location string
}

func (b *browser) do(req *http.Request) page {
	b.w.t.Helper()
	resp, err := b.hc.Do(req)
	if err != nil {
		b.w.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	// Every answer is kept for the secret scan: its body and its headers
	// but the session cookie's own Set-Cookie, the one place its token
	// belongs.
	fmt.Fprintf(b.w.answers, "%s\n", body)
	for k, vs := range resp.Header {
		for _, v := range vs {
			if k == "Set-Cookie" && strings.HasPrefix(v, "toolplane_session=") {
				continue
			}
			fmt.Fprintf(b.w.answers, "%s: %s\n", k, v)
		}
	}
	return page{status: resp.StatusCode, body: string(body), header: resp.Header, url: resp.Request.URL.String(), location: resp.Header.Get("Location")}
}

func (b *browser) get(u string) page {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	return b.do(req)
}

// post sends a form as a page of the server would: its Origin is the
// server's unless the test says otherwise.
func (b *browser) post(path string, form url.Values, origin string) page {
	req, _ := http.NewRequest(http.MethodPost, b.w.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return b.do(req)
}

func (b *browser) cookie(name string) *http.Cookie {
	u, _ := url.Parse(b.w.base + "/signin/callback")
	for _, c := range b.jar.Cookies(u) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// start begins a sign-in that returns to back, and answers the provider's
// authorization URL.
func (b *browser) start(back string) string {
	b.w.t.Helper()
	pg := b.get(b.w.base + "/signin/start?return=" + url.QueryEscape(back))
	if pg.status != http.StatusFound || !strings.HasPrefix(pg.location, b.w.p.Issuer) {
		b.w.t.Fatalf("start: %d to %q: %s", pg.status, pg.location, pg.body)
	}
	return pg.location
}

// login logs in at the provider as the person and answers the callback
// URL the provider redirects to (not yet opened).
func (w *world) login(authURL, username, password string) string {
	w.t.Helper()
	back, err := w.p.LoginAs(w.t.Context(), authURL, username, password)
	if err != nil {
		w.t.Fatalf("login at the provider: %v", err)
	}
	if !strings.HasPrefix(back.String(), w.base+"/signin/callback?") {
		w.t.Fatalf("the provider sent the browser to %s", back)
	}
	return back.String()
}

// signIn signs the provider's own person in on b and answers /whoami.
func (b *browser) signIn() page {
	b.w.t.Helper()
	cb := b.w.login(b.start("/whoami"), b.w.p.Username, b.w.p.Password)
	pg := b.get(cb)
	if pg.status != http.StatusOK || pg.url != b.w.base+"/whoami" {
		b.w.t.Fatalf("callback ended at %s with %d: %s", pg.url, pg.status, pg.body)
	}
	if c := b.cookie("toolplane_session"); c != nil {
		b.w.planted = append(b.w.planted, c.Value)
	}
	return pg
}

func (b *browser) whoami() page { return b.get(b.w.base + "/whoami") }

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf answers the CSRF token of the page at path.
func (b *browser) csrf(path string) string {
	b.w.t.Helper()
	pg := b.get(b.w.base + path)
	m := csrfField.FindStringSubmatch(pg.body)
	if m == nil {
		b.w.t.Fatalf("no CSRF token on %s (%d): %s", path, pg.status, pg.body)
	}
	return m[1]
}

func TestSignInThroughTheProvider(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	b := w.browser()

	// Nobody is signed in yet.
	if pg := b.whoami(); pg.status != http.StatusUnauthorized {
		t.Fatalf("whoami before sign-in = %d", pg.status)
	}
	// The sign-in page: no script, no framing, nothing cached.
	pg := b.get(w.base + "/signin?return=/whoami")
	for h, want := range map[string]string{
		"Content-Security-Policy": signin.CSP, "X-Frame-Options": "DENY", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
	} {
		if got := pg.header.Get(h); got != want {
			t.Errorf("sign-in page %s = %q, want %q", h, got, want)
		}
	}
	if !strings.Contains(signin.CSP, "frame-ancestors 'none'") || strings.Contains(signin.CSP, "script-src") || strings.Contains(pg.body, "<script") {
		t.Errorf("the page or its policy allows script or framing: %s", signin.CSP)
	}
	if !strings.Contains(pg.body, `href="/signin/start?return=%2Fwhoami"`) {
		t.Errorf("the sign-in page does not link to the provider: %s", pg.body)
	}

	pg = b.signIn()
	if !strings.HasPrefix(pg.body, org+" "+w.p.UserID+" approver,group:finance oidc ") {
		t.Fatalf("whoami = %q, want the provider's person of %s with the roles and group of the token", pg.body, org)
	}
	c := b.cookie("toolplane_session")
	if c == nil {
		t.Fatal("no session cookie")
	}
	// The store keeps the token's hash, never the token.
	sum := sha256.Sum256([]byte(c.Value))
	stored, err := w.store.FindBrowserSession(t.Context(), hex.EncodeToString(sum[:]))
	if err != nil || stored.Subject != w.p.UserID || stored.OrganizationID != org {
		t.Fatalf("FindBrowserSession(hash) = %+v, %v", stored, err)
	}
	db, err := os.ReadFile(w.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(w.dbPath + "-wal")
	if bytes.Contains(db, []byte(c.Value)) || bytes.Contains(wal, []byte(c.Value)) {
		t.Error("the session token is in the database")
	}
	// A signed-in visit to the sign-in page with a return goes there.
	if pg := b.get(w.base + "/signin?return=/whoami"); pg.url != w.base+"/whoami" {
		t.Errorf("signed-in sign-in page with a return ended at %s", pg.url)
	}
	w.noSecrets()
}

// TestIDTokenClaimsAreBounded: an ID token's roles and groups claims are
// read as a bearer token's are (jwtauth.ClaimStrings), so a provider that
// signs thousands of groups makes a session of a bounded number of roles,
// not a row of every one of them.
func TestIDTokenClaimsAreBounded(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	groups := make([]string, 4*jwtauth.MaxClaimValues)
	for i := range groups {
		groups[i] = fmt.Sprintf("g%04d", i)
	}
	w.p.SetClaims(w.p.UserID, map[string]any{"org": org, "toolplane_roles": []string{toolplane.RoleApprover}, "groups": groups})
	pg := w.browser().signIn()
	fields := strings.Fields(pg.body)
	if len(fields) < 3 || fields[1] != w.p.UserID {
		t.Fatalf("whoami = %.200q", pg.body)
	}
	roles := strings.Split(fields[2], ",")
	if len(roles) != 1+jwtauth.MaxClaimValues || !slices.Contains(roles, toolplane.RoleApprover) || !slices.Contains(roles, toolplane.GroupRolePrefix+"g0000") {
		t.Errorf("a session of %d roles from %d groups; want the approver role and the first %d groups", len(roles), len(groups), jwtauth.MaxClaimValues)
	}
}

// TestSessionCookie reads the Set-Cookie the callback answers: HttpOnly,
// SameSite=Lax, path-scoped, and Secure only where the public URL is
// https (loopback over http cannot keep a Secure cookie).
func TestSessionCookie(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	b := w.browser()
	cb := w.login(b.start("/whoami"), w.p.Username, w.p.Password)
	b.hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	pg := b.get(cb)
	if pg.status != http.StatusSeeOther || pg.location != "/whoami" {
		t.Fatalf("callback = %d to %q", pg.status, pg.location)
	}
	var set *http.Cookie
	for _, line := range pg.header.Values("Set-Cookie") {
		if c, err := http.ParseSetCookie(line); err == nil && c.Name == "toolplane_session" {
			set = c
		}
	}
	if set == nil || !set.HttpOnly || set.SameSite != http.SameSiteLaxMode || set.Path != "/" || set.Secure || set.MaxAge <= 0 {
		t.Errorf("session cookie = %+v; want HttpOnly, SameSite=Lax, Path=/, not Secure over http, with a max age", set)
	}
}

func TestCallbackRefusals(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	other := w.p.AddPerson(map[string]any{"org": org})

	t.Run("state replayed", func(t *testing.T) {
		b := w.browser()
		authURL := b.start("/whoami")
		pending := *b.cookie("toolplane_signin")
		cb := w.login(authURL, w.p.Username, w.p.Password)
		if pg := b.get(cb); pg.status != http.StatusOK {
			t.Fatalf("first callback = %d", pg.status)
		}
		// The same callback, with the browser's pending cookie put back:
		// the state was taken.
		replay := w.browser()
		u, _ := url.Parse(w.base + "/signin")
		replay.jar.SetCookies(u, []*http.Cookie{{Name: pending.Name, Value: pending.Value, Path: "/signin"}})
		pg := replay.get(cb)
		if pg.status != http.StatusBadRequest || !strings.Contains(pg.body, "already completed") {
			t.Errorf("replayed callback = %d: %s", pg.status, pg.body)
		}
		if replay.whoami().status != http.StatusUnauthorized {
			t.Error("a replayed callback signed a browser in")
		}
	})

	t.Run("state from another browser", func(t *testing.T) {
		victim, thief := w.browser(), w.browser()
		cb := w.login(victim.start("/whoami"), w.p.Username, w.p.Password)
		// A browser without the pending cookie is refused before the
		// state is taken ...
		if pg := thief.get(cb); pg.status != http.StatusBadRequest || thief.whoami().status != http.StatusUnauthorized {
			t.Fatalf("callback in a browser that did not start = %d: %s", pg.status, pg.body)
		}
		// ... and one that started a sign-in of its own is refused for
		// the other's state, which is used up.
		thief.start("/whoami")
		if pg := thief.get(cb); pg.status != http.StatusBadRequest || !strings.Contains(pg.body, "another browser") {
			t.Fatalf("callback of another browser's state = %d: %s", pg.status, pg.body)
		}
		if thief.whoami().status != http.StatusUnauthorized {
			t.Error("another browser's callback signed the thief in")
		}
	})

	t.Run("the first browser still completes after a refusal before the take", func(t *testing.T) {
		victim, thief := w.browser(), w.browser()
		cb := w.login(victim.start("/whoami"), w.p.Username, w.p.Password)
		thief.get(cb)
		if pg := victim.get(cb); pg.status != http.StatusOK {
			t.Fatalf("the starting browser's callback = %d: %s", pg.status, pg.body)
		}
	})

	t.Run("another person's code", func(t *testing.T) {
		// The other person's code, from a sign-in of theirs, spliced into
		// this browser's callback: the PKCE verifier is this sign-in's,
		// so the provider refuses the exchange.
		b, attacker := w.browser(), w.browser()
		mine := w.login(b.start("/whoami"), w.p.Username, w.p.Password)
		theirs := w.login(attacker.start("/whoami"), other.Username, other.Password)
		mu, _ := url.Parse(mine)
		tu, _ := url.Parse(theirs)
		q := mu.Query()
		q.Set("code", tu.Query().Get("code"))
		mu.RawQuery = q.Encode()
		pg := b.get(mu.String())
		if pg.status != http.StatusUnauthorized || b.whoami().status != http.StatusUnauthorized {
			t.Fatalf("callback with another person's code = %d: %s", pg.status, pg.body)
		}
	})

	t.Run("the provider's error", func(t *testing.T) {
		b := w.browser()
		b.start("/whoami")
		pg := b.get(w.base + "/signin/callback?error=access_denied&state=x")
		if pg.status != http.StatusBadRequest || !strings.Contains(pg.body, "access_denied") {
			t.Errorf("callback with an error = %d: %s", pg.status, pg.body)
		}
	})

	t.Run("no organization", func(t *testing.T) {
		nobody := w.p.AddPerson(nil)
		b := w.browser()
		pg := b.get(w.login(b.start("/whoami"), nobody.Username, nobody.Password))
		if pg.status != http.StatusUnauthorized || b.whoami().status != http.StatusUnauthorized {
			t.Errorf("sign-in of a person of no organization = %d: %s", pg.status, pg.body)
		}
	})
	w.noSecrets()
}

func TestReturnStaysOnTheServer(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, back := range []string{"https://evil.example/x", "//evil.example/x", "/\\evil.example", "javascript:alert(1)", "whoami"} {
		b := w.browser()
		cb := w.login(b.start(back), w.p.Username, w.p.Password)
		if pg := b.get(cb); pg.url != w.base+"/signin" || !strings.Contains(pg.body, "Signed in as") {
			t.Errorf("return %q: the browser ended at %s", back, pg.url)
		}
	}
}

func TestSessionEnds(t *testing.T) {
	t.Parallel()
	w := newWorld(t)

	t.Run("idle", func(t *testing.T) {
		b := w.browser()
		b.signIn()
		w.clock.Advance(signin.DefaultIdleTimeout + time.Second)
		if pg := b.whoami(); pg.status != http.StatusUnauthorized {
			t.Errorf("whoami after the idle timeout = %d", pg.status)
		}
	})

	t.Run("used, until its absolute end", func(t *testing.T) {
		b := w.browser()
		b.signIn()
		for range int(signin.DefaultMaxAge/(20*time.Minute)) - 1 {
			w.clock.Advance(20 * time.Minute)
			if pg := b.whoami(); pg.status != http.StatusOK {
				t.Fatalf("whoami of a session used every 20 minutes = %d", pg.status)
			}
		}
		w.clock.Advance(21 * time.Minute)
		if pg := b.whoami(); pg.status != http.StatusUnauthorized {
			t.Errorf("whoami past the absolute end = %d", pg.status)
		}
	})

	t.Run("swept", func(t *testing.T) {
		b := w.browser()
		b.signIn()
		w.clock.Advance(signin.DefaultMaxAge + time.Hour)
		if n, err := w.svc.Sweep(t.Context()); err != nil || n < 1 {
			t.Errorf("Sweep = %d, %v", n, err)
		}
	})
}

func TestSignOut(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	b := w.browser()
	b.signIn()
	token := b.cookie("toolplane_session").Value
	csrf := b.csrf("/signin")

	// Forged: a wrong token, none, another origin, a cross-site fetch.
	forged := []struct {
		name   string
		form   url.Values
		origin string
		site   string
	}{
		{"wrong CSRF token", url.Values{"csrf": {"forged"}}, w.base, ""},
		{"no CSRF token", url.Values{}, w.base, ""},
		{"another origin", url.Values{"csrf": {csrf}}, "https://evil.example", ""},
		{"a cross-site fetch", url.Values{"csrf": {csrf}}, "", "cross-site"},
	}
	for _, f := range forged {
		req, _ := http.NewRequest(http.MethodPost, w.base+"/signin/out", strings.NewReader(f.form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if f.origin != "" {
			req.Header.Set("Origin", f.origin)
		}
		if f.site != "" {
			req.Header.Set("Sec-Fetch-Site", f.site)
		}
		if pg := b.do(req); pg.status != http.StatusForbidden {
			t.Errorf("sign-out with %s = %d", f.name, pg.status)
		}
		if pg := b.post("/act", f.form, f.origin); f.site == "" && pg.status != http.StatusForbidden {
			t.Errorf("a form with %s = %d", f.name, pg.status)
		}
		if b.whoami().status != http.StatusOK {
			t.Fatalf("a forged sign-out (%s) ended the session", f.name)
		}
	}
	if pg := b.post("/act", url.Values{"csrf": {csrf}}, w.base); pg.status != http.StatusOK {
		t.Errorf("the page's own form = %d: %s", pg.status, pg.body)
	}
	// Another site's form reaches the sign-out without the session's
	// cookie (SameSite keeps it home): refused, and the answer leaves the
	// browser's cookie alone.
	req, _ := http.NewRequest(http.MethodPost, w.base+"/signin/out", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Errorf("a cross-site sign-out without the cookie = %d, setting %v", resp.StatusCode, resp.Cookies())
	}

	// The page's own sign-out.
	if pg := b.post("/signin/out", url.Values{"csrf": {csrf}}, w.base); pg.status != http.StatusOK || !strings.Contains(pg.body, "signed out") {
		t.Fatalf("sign-out = %d: %s", pg.status, pg.body)
	}
	if b.whoami().status != http.StatusUnauthorized {
		t.Error("still signed in after signing out")
	}
	// The old cookie, kept by someone, opens nothing.
	replay := w.browser()
	u, _ := url.Parse(w.base)
	replay.jar.SetCookies(u, []*http.Cookie{{Name: "toolplane_session", Value: token, Path: "/"}})
	if replay.whoami().status != http.StatusUnauthorized {
		t.Error("the signed-out session's cookie still opens it")
	}
	w.noSecrets()
}

func TestSignInWithAPersonKey(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	person := w.mint(toolplane.CredentialPerson, "ada", []string{toolplane.RoleAuditor})
	agent := w.mint(toolplane.CredentialAgent, "agent-1", nil)
	w.planted = append(w.planted, person, agent)

	keyForm := func(b *browser) string { return b.csrf("/signin?return=/whoami") }

	b := w.browser()
	tests := []struct {
		name   string
		key    string
		status int
	}{
		{"an agent's key", agent, http.StatusForbidden},
		{"a wrong secret", person[:len(person)-2] + "xx", http.StatusUnauthorized},
		{"no key", "", http.StatusUnauthorized},
		{"a JWT", "eyJhbGciOiJSUzI1NiJ9.e30.sig", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		pg := b.post("/signin/key", url.Values{"csrf": {keyForm(b)}, "key": {tt.key}, "return": {"/whoami"}}, w.base)
		if pg.status != tt.status || b.whoami().status != http.StatusUnauthorized {
			t.Errorf("key form with %s = %d, want %d: %s", tt.name, pg.status, tt.status, pg.body)
		}
	}
	// The form itself must be this server's.
	if pg := b.post("/signin/key", url.Values{"csrf": {"forged"}, "key": {person}}, w.base); pg.status != http.StatusForbidden {
		t.Errorf("key form with a forged CSRF token = %d", pg.status)
	}
	if pg := b.post("/signin/key", url.Values{"csrf": {keyForm(b)}, "key": {person}}, "https://evil.example"); pg.status != http.StatusForbidden {
		t.Errorf("key form from another origin = %d", pg.status)
	}
	if b.whoami().status != http.StatusUnauthorized {
		t.Fatal("a refused key form signed the browser in")
	}

	pg := b.post("/signin/key", url.Values{"csrf": {keyForm(b)}, "key": {person}, "return": {"/whoami"}}, w.base)
	if pg.status != http.StatusOK || !strings.HasPrefix(pg.body, org+" ada auditor api_key ") {
		t.Fatalf("key sign-in = %d at %s: %s", pg.status, pg.url, pg.body)
	}
	if c := b.cookie("toolplane_session"); c != nil {
		w.planted = append(w.planted, c.Value)
	}

	// Revoking the key ends the session at its next use.
	id, _, _ := apikey.Parse(person)
	cred, err := w.store.GetCredential(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	cred.RevokedAt = w.clock.Now()
	if ok, err := w.store.UpdateCredential(t.Context(), cred); !ok || err != nil {
		t.Fatalf("revoke: %t, %v", ok, err)
	}
	if pg := b.whoami(); pg.status != http.StatusUnauthorized {
		t.Errorf("whoami after the key's revocation = %d", pg.status)
	}
	w.noSecrets()
}

// mint stores a key of org and answers it.
func (w *world) mint(kind toolplane.CredentialKind, subject string, roles []string) string {
	w.t.Helper()
	id, sec, err := apikey.New(kind)
	if err != nil {
		w.t.Fatal(err)
	}
	c := &toolplane.Credential{ID: id, OrganizationID: org, Kind: kind, Subject: subject, Roles: roles,
		Hash: apikey.Hash(sec), CreatedAt: time.Now()}
	if err := w.store.InsertCredential(context.Background(), c); err != nil {
		w.t.Fatal(err)
	}
	return apikey.Key(id, sec)
}

// noSecrets fails the test when a session token, a pasted key or the
// client's secret is in the log or in an answer the browser got.
func (w *world) noSecrets() {
	w.t.Helper()
	logs, answers := w.log.String(), w.answers.String()
	for _, s := range w.planted {
		if s != "" && strings.Contains(logs, s) {
			w.t.Errorf("a secret (%.6s…) is in the log", s)
		}
		if s != "" && strings.Contains(answers, s) {
			w.t.Errorf("a secret (%.6s…) is in an answer", s)
		}
	}
}

// TestSignInAgainEndsTheEarlierSession: a browser signed in that signs in
// again holds one session, and the earlier token opens nothing.
func TestSignInAgainEndsTheEarlierSession(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	b := w.browser()
	b.signIn()
	first := b.cookie("toolplane_session").Value
	b.signIn()
	if second := b.cookie("toolplane_session").Value; second == first {
		t.Fatal("signing in again kept the session token")
	}
	old := w.browser()
	u, _ := url.Parse(w.base)
	old.jar.SetCookies(u, []*http.Cookie{{Name: "toolplane_session", Value: first, Path: "/"}})
	if old.whoami().status != http.StatusUnauthorized {
		t.Error("the earlier session still opens after signing in again")
	}
	if b.whoami().status != http.StatusOK {
		t.Error("the new session does not open")
	}
}

// TestSignOutEverywhere ends the person's sessions in every browser, and
// no one else's.
func TestSignOutEverywhere(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	laptop, phone := w.browser(), w.browser()
	laptop.signIn()
	phone.signIn()
	other := w.browser()
	key := w.mint(toolplane.CredentialPerson, "kim", nil)
	w.planted = append(w.planted, key)
	other.post("/signin/key", url.Values{"csrf": {other.csrf("/signin")}, "key": {key}}, w.base)
	if other.whoami().status != http.StatusOK {
		t.Fatal("kim is not signed in")
	}
	if pg := laptop.post("/signin/out", url.Values{"csrf": {laptop.csrf("/signin")}, "everywhere": {"1"}}, w.base); pg.status != http.StatusOK {
		t.Fatalf("sign out everywhere = %d: %s", pg.status, pg.body)
	}
	for name, b := range map[string]*browser{"laptop": laptop, "phone": phone} {
		if b.whoami().status != http.StatusUnauthorized {
			t.Errorf("the %s is still signed in", name)
		}
	}
	if other.whoami().status != http.StatusOK {
		t.Error("another person's session ended too")
	}
	w.noSecrets()
}

// touchCounter is the store, counting the touches asked of it.
type touchCounter struct {
	*sqlite.Store
	n atomic.Int64
}

func (c *touchCounter) TouchBrowserSession(ctx context.Context, org, id string, until time.Time) error {
	c.n.Add(1)
	return c.Store.TouchBrowserSession(ctx, org, id, until)
}

// TestSessionAtItsEndIsNotTouched: a session whose idle end has reached
// its absolute end (here a key's session, ending when the key expires in
// 20 minutes, sooner than the idle timeout) has nothing left to move, so
// using it writes nothing; it is still the person's until it ends.
func TestSessionAtItsEndIsNotTouched(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id, sec, err := apikey.New(toolplane.CredentialPerson)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.store.InsertCredential(t.Context(), &toolplane.Credential{ID: id, OrganizationID: org, Kind: toolplane.CredentialPerson,
		Subject: "ada", Hash: apikey.Hash(sec), CreatedAt: time.Now(), ExpiresAt: w.clock.Now().Add(20 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	b := w.browser()
	if pg := b.post("/signin/key", url.Values{"csrf": {b.csrf("/signin")}, "key": {apikey.Key(id, sec)}}, w.base); pg.status != http.StatusOK {
		t.Fatalf("sign-in with a key: %d %s", pg.status, pg.body)
	}
	c := b.cookie("toolplane_session")
	if c == nil {
		t.Fatal("not signed in")
	}
	counted := &touchCounter{Store: w.store}
	keys, err := secret.ParseKeyring("k1 " + base64.StdEncoding.EncodeToString(make([]byte, secret.KeySize)))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := signin.New(signin.Config{Store: counted, Keys: keys, PublicURL: w.base, Now: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, w.base+"/whoami", nil)
	req.AddCookie(c)
	for range 5 {
		w.clock.Advance(time.Minute)
		if sess, err := svc.Session(req); err != nil || sess.Credential.Subject != "ada" {
			t.Fatalf("Session = %+v, %v", sess, err)
		}
	}
	if n := counted.n.Load(); n != 0 {
		t.Errorf("%d touches of a session whose idle end is its absolute end; want none", n)
	}
}
