package browsertest

import (
	"html/template"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// A person pastes their own key into /signin and is signed in: the page
// names them, the session lives in an HttpOnly, SameSite cookie no script
// can read; keys that are not a person's are refused in words; signing
// out ends the session.
func TestSignInWithAPastedKeyAndSignOut(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ada := s.mint(t, "person", "ada", "approver", "group:support")
	b := newBrowser(t)

	for _, tc := range []struct {
		name, key string
		status    int64
		want      string
	}{
		{"an agent's key", s.agent, http.StatusForbidden, "That key is an agent's"},
		{"a key of no toolplane", "sk_live_not-ours", http.StatusUnauthorized, "That is not a toolplane API key."},
		{"ada's key with a wrong secret", wrongSecret(ada), http.StatusUnauthorized, "The API key is not valid."},
		// Signed in, the person lands in the console.
		{"the person's key", ada, http.StatusOK, "Approvals waiting for you"},
	} {
		b.open(t, s.base+"/signin", "#key")
		b.do(t, "paste "+tc.name, chromedp.SendKeys(chromedp.CSS("#key"), tc.key))
		if got := b.submit(t, "form button[type=submit]"); got != tc.status {
			t.Errorf("%s: the page answered %d, want %d", tc.name, got, tc.status)
		}
		b.waitText(t, "main", tc.want)
	}
	b.checkCSP(t)
	// The key never shows on the page it was pasted on.
	if page := b.text(t, "body"); strings.Contains(page, ada) {
		t.Fatal("the signed-in page shows the key")
	}

	// The session cookie: HttpOnly (no script reads it), SameSite, and
	// the only cookie a signed-in browser holds for the server.
	b.checkSessionCookie(t, s.base)

	// Sign out: the session ends, and the sign-in form is back.
	b.open(t, s.base+"/signin", "main form button")
	if got := b.submit(t, "form button[type=submit]:not([name])"); got != http.StatusOK {
		t.Errorf("sign-out answered %d", got)
	}
	b.waitText(t, "main", "You are signed out.")
	b.open(t, s.base+"/signin", "#key")
	if page := b.text(t, "main"); strings.Contains(page, "Signed in as") {
		t.Fatalf("still signed in after signing out:\n%s", page)
	}
}

// A page of another origin cannot act with the person's session: its
// form posting to toolplane's sign-out, signing the browser in with a
// key of the other site's choosing, or approving a refund in the
// console (even with the session's CSRF token) is refused, the person
// stays signed in as themselves, and the refund still waits. The other page is served on
// another port of the same loopback address: another origin of the same
// site, so the browser sends the session's SameSite=Lax cookie with its
// POST, and only the server's origin and CSRF checks stand in the way;
// reached as localhost it is another site, whose POST arrives without
// the cookie.
func TestFormsFromAnotherOriginAreRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ada := s.mint(t, "person", "ada", "approver")
	mallory := s.mint(t, "person", "mallory", "approver")
	b := newBrowser(t)
	b.open(t, s.base+"/signin", "#key")
	b.do(t, "paste ada's key", chromedp.SendKeys(chromedp.CSS("#key"), ada))
	b.submit(t, "form button[type=submit]")
	b.waitText(t, "header", "ada")
	// A refund waits for a person: the console's decision form is the
	// prize of a forged POST.
	filed := s.call(t, s.agent, "demo.refund_order", "run-forged", map[string]any{"order_id": "o-501", "amount_cents": 4990, "reason": "screen cracked"})
	if filed.Approval == nil {
		t.Fatalf("the refund answered %d %s, want an approval", filed.status, filed.code())
	}
	decide := s.base + "/console/approvals/" + filed.Approval.ID
	b.open(t, decide, "#reason")
	// The session's own CSRF token, as if the other site had learned
	// it: the origin check alone must refuse the POST.
	token := eval[string](t, b, `document.querySelector("form.card input[name=csrf]").value`)
	if token == "" {
		t.Fatal("the decision form carries no CSRF token")
	}

	// The other origin's pages: each a form aimed at toolplane, with
	// whatever fields the other site can make up.
	forms := map[string]struct {
		action string
		fields map[string]string
	}{
		"/sign-out":      {s.base + "/signin/out", map[string]string{"csrf": "guessed"}},
		"/sign-in":       {s.base + "/signin/key", map[string]string{"csrf": "guessed", "key": mallory, "return": "/signin"}},
		"/sign-out2":     {s.base + "/signin/out", map[string]string{}},
		"/approve":       {decide, map[string]string{"csrf": "guessed", "decision": "approve", "reason": "forged"}},
		"/approve-token": {decide, map[string]string{"csrf": token, "decision": "approve", "reason": "forged"}},
	}
	page := template.Must(template.New("evil").Parse(`<!doctype html><title>another site</title>
<form method="post" action="{{.action}}">{{range $k, $v := .fields}}<input type="hidden" name="{{$k}}" value="{{$v}}">{{end}}
<button id="go" type="submit">Go</button></form>`))
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := forms[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = page.Execute(w, map[string]any{"action": f.action, "fields": f.fields})
	}))
	t.Cleanup(other.Close)
	if strings.HasPrefix(other.URL, s.base) || !strings.HasPrefix(other.URL, "http://127.0.0.1:") {
		t.Fatalf("the other site %s must be another origin of 127.0.0.1 than %s", other.URL, s.base)
	}

	for _, tc := range []struct {
		name string
		// host is the other page's host: 127.0.0.1 is the same site
		// (the cookie goes along), localhost another site (it stays
		// home, and the sign-out must not clear it either).
		host, path string
		status     int64
		want       string
	}{
		{"sign-out with a guessed token", "127.0.0.1", "/sign-out", http.StatusForbidden, "did not come from this server's own page"},
		{"sign-out with no token", "127.0.0.1", "/sign-out2", http.StatusForbidden, "did not come from this server's own page"},
		{"sign-in with the other site's key", "127.0.0.1", "/sign-in", http.StatusForbidden, "did not come from this server's sign-in page"},
		{"sign-out from another site", "localhost", "/sign-out", http.StatusForbidden, "did not come from this server's own page"},
		{"approve with a guessed token", "127.0.0.1", "/approve", http.StatusForbidden, "did not come from this console's own page"},
		{"approve with the session's token", "127.0.0.1", "/approve-token", http.StatusForbidden, "did not come from this console's own page"},
		// Without the cookie the POST is nobody's.
		{"approve from another site", "localhost", "/approve", http.StatusUnauthorized, "Not signed in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := strings.Replace(other.URL, "127.0.0.1", tc.host, 1)
			b.open(t, at+tc.path, "#go")
			if got := b.submit(t, "#go"); got != tc.status {
				t.Errorf("the cross-origin POST answered %d, want %d", got, tc.status)
			}
			b.waitText(t, "main", tc.want)
			b.open(t, s.base+"/signin", "main")
			if got := b.text(t, "main"); !strings.Contains(got, "Signed in as ada") {
				t.Fatalf("after the cross-origin POST the browser is not ada's any more:\n%s", got)
			}
		})
	}
	if v := s.must(t, "GET", "/v1/approvals/"+filed.Approval.ID, s.admin, "", http.StatusOK); v["status"] != "pending" {
		t.Errorf("after the forged decisions the refund is %v, want still pending", v["status"])
	}
	// The browser's own page still signs out: the refusals above were
	// the origin's, not a broken form.
	if got := b.submit(t, "form button[type=submit]:not([name])"); got != http.StatusOK {
		t.Errorf("sign-out from the server's own page answered %d", got)
	}
	b.waitText(t, "main", "You are signed out.")
}

// wrongSecret answers key with the last character of its secret changed.
func wrongSecret(key string) string {
	last := byte('0')
	if key[len(key)-1] == '0' {
		last = '1'
	}
	return key[:len(key)-1] + string(last)
}
