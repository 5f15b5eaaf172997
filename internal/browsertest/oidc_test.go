package browsertest

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolplane/toolplane/oauth/oauthtest"
)

// A person signs in to the console through the organization's OpenID
// provider, in the browser, against the real binary: the approvals inbox
// sends them to /signin, its link to the provider's login page, where a
// wrong password is refused and theirs accepted, and the provider's
// authorization code (with PKCE) brings them back to the inbox, signed
// in as the person the ID token names. Their roles and groups are the
// token's claims under the names the deployment reads: the approver role
// and the finance group, for whom an agent's wire waits. They find the
// wire and approve it, and it runs; an approver of another group, signed
// in the same way, is shown nothing to decide.
func TestSignInThroughTheProviderAndApproveForAGroup(t *testing.T) {
	t.Parallel()
	chromium(t) // skip before starting anything
	p := oauthtest.Start(t)
	person := p.AddPerson(map[string]any{"toolplane_roles": []string{"approver"}, "groups": []string{"finance"}})
	outsider := p.AddPerson(map[string]any{"toolplane_roles": []string{"approver"}, "groups": []string{"support"}})
	// The provider must know the redirect URI before toolplane starts
	// with its client id: the address is chosen first.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	base := "http://" + addr
	clientID, clientSecret := p.RegisterClient(base + "/signin/callback")
	s := startShopEnv(t, "Wire money to a supplier.", []string{"TOOLPLANE_SIGNIN_CLIENT_SECRET=" + clientSecret},
		"--addr", addr, "--jwt-issuer", p.Issuer, "--jwt-audience", "toolplane", "--jwt-jwks-url", p.Issuer+"/keys",
		"--signin-client-id", clientID)
	if s.base != base {
		t.Fatalf("toolplane listens on %s, want %s (the redirect URI the provider knows)", s.base, base)
	}

	wire := s.call(t, s.agent, "shop.wire", "run-oidc", map[string]any{"id": "sup-9", "amount_cents": 99000, "memo": "invoice 2026-207"})
	if wire.status != http.StatusAccepted || wire.Approval == nil {
		t.Fatalf("the wire answered %d %s, want 202 with an approval", wire.status, wire.code())
	}

	b := newBrowser(t)
	inbox := s.base + "/console/approvals"
	const toProvider = `main a.button[href*="/signin/start"]`
	// toLogin opens the inbox signed out and follows the sign-in page's
	// link to the provider's login page.
	toLogin := func() {
		t.Helper()
		b.open(t, inbox, toProvider)
		if where := eval[string](t, b, "location.href"); !strings.HasPrefix(where, s.base+"/signin?") {
			t.Fatalf("the inbox before sign-in is at %s, want the sign-in page", where)
		}
		b.checkCSP(t)
		b.do(t, "follow the provider's link", chromedp.Click(chromedp.CSS(toProvider)), chromedp.WaitVisible(chromedp.CSS("#password")))
		if where := eval[string](t, b, "location.href"); !strings.HasPrefix(where, p.Issuer+"/login/") {
			t.Fatalf("the provider's link led to %s, want the provider's login page at %s", where, p.Issuer)
		}
	}
	login := func(who oauthtest.Person, password string) {
		t.Helper()
		b.do(t, "fill the provider's login form",
			chromedp.SendKeys(chromedp.CSS("#username"), who.Username),
			chromedp.SendKeys(chromedp.CSS("#password"), password),
			chromedp.Click(chromedp.CSS("form button[type=submit]")))
	}
	// signedIn waits for the browser back in the inbox, signed in as who.
	signedIn := func(who oauthtest.Person) {
		t.Helper()
		b.waitFor(t, "back in the inbox, signed in", fmt.Sprintf(`location.href === %s && document.querySelector("form.who")`, jsString(inbox)))
		if got := b.text(t, "form.who span"); !strings.Contains(got, who.ID) {
			t.Errorf("the console names %q, want the person %s", got, who.ID)
		}
	}

	// An approver of another group signs in the same way, and is neither
	// shown the wire nor offered a decision on its page.
	toLogin()
	login(outsider, outsider.Password)
	signedIn(outsider)
	b.waitText(t, "main", "Nothing waits for you.")
	b.open(t, s.base+"/console/approvals/"+wire.Approval.ID, "main article")
	if got := b.text(t, "main"); !strings.Contains(got, "You cannot answer this approval") {
		t.Errorf("the wire's page for an approver outside finance does not say they may not answer:\n%s", got)
	}
	if eval[bool](t, b, `!!document.querySelector("#reason, button[name=decision]")`) {
		t.Error("the wire's page offers an approver outside finance a decision")
	}
	if got := b.submit(t, "form.who button[type=submit]"); got != http.StatusOK {
		t.Fatalf("signing out answered %d", got)
	}
	b.waitText(t, "main", "You are signed out.")

	// The provider refuses a wrong password on its own page.
	toLogin()
	login(person, "not-"+person.Password)
	b.waitFor(t, "the provider refusing the wrong password",
		fmt.Sprintf(`location.href.startsWith(%s) && document.body.innerText.includes("username or password wrong")`, jsString(p.Issuer)))
	b.do(t, "the login form again", chromedp.WaitVisible(chromedp.CSS("#password")))

	// The right one: back in the inbox, signed in as the person.
	login(person, person.Password)
	signedIn(person)
	b.checkSessionCookie(t, s.base)
	b.checkCSP(t)

	// The wire waits for the finance group, which the person is in
	// through the token's groups claim.
	card := fmt.Sprintf(`article.card:has(a[href$=%s])`, jsString("/approvals/"+wire.Approval.ID))
	b.waitFor(t, "the wire in the inbox", fmt.Sprintf(`document.querySelector(%s)`, jsString(card)))
	b.do(t, "open the wire", chromedp.Click(chromedp.CSS(card+" h2 a")), chromedp.WaitVisible(chromedp.CSS("#reason")))
	b.do(t, "give a reason", chromedp.SendKeys(chromedp.CSS("#reason"), "invoice checked against the order"))
	if got := b.submit(t, `button[name=decision][value=approve]`); got != http.StatusOK {
		t.Fatalf("approving answered %d\n%s", got, b.describe())
	}
	b.waitText(t, "p.notice", "Your answer was recorded.")
	b.waitText(t, "p.decision", "approved by "+person.ID)
	b.checkCSP(t)

	if a := s.must(t, "GET", "/v1/approvals/"+wire.Approval.ID, s.admin, "", http.StatusOK); a["status"] != "approved" {
		t.Errorf("the approval over REST: %v", a)
	}
	pollREST(t, "the approved wire to run", func() bool {
		v := s.must(t, "GET", "/v1/audit/events?run_id=run-oidc&tool=shop.wire&outcome=ok", s.admin, "", http.StatusOK)
		items, _ := v["items"].([]any)
		return len(items) > 0
	})
	// Neither the client secret nor the person's password is in
	// toolplane's output.
	for _, secret := range []string{clientSecret, person.Password, outsider.Password} {
		if strings.Contains(s.out.String(), secret) {
			t.Errorf("a secret (%.6s…) is in toolplane's output", secret)
		}
	}
}
