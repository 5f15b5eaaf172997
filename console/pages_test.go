package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/console"
)

// wantHeaders fails t unless p carries what every console answer does.
func wantHeaders(t *testing.T, what string, p page) {
	t.Helper()
	for k, want := range map[string]string{
		"Content-Security-Policy": console.CSP, "X-Frame-Options": "DENY", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
	} {
		if got := p.header.Get(k); got != want {
			t.Errorf("%s: %s = %q, want %q", what, k, got, want)
		}
	}
	if !strings.Contains(console.CSP, "frame-ancestors 'none'") || strings.Contains(console.CSP, "unsafe-inline") || !strings.Contains(console.CSP, "script-src 'self'") {
		t.Errorf("CSP %q", console.CSP)
	}
}

// Every page needs a session: without one a browser is sent to sign in
// and brought back to the same address, query and all; a form sent
// without one is refused. Every answer, the refusals too, carries the
// strict headers, and a page runs no inline script.
func TestPagesNeedASession(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	b := w.browser()
	for _, path := range []string{"/console/approvals", "/console/approvals?status=approved", "/console/approvals/apr_1?link=abc", "/console/uncertain", "/console/", "/console/nowhere"} {
		p := b.get(path)
		wantHeaders(t, path, p)
		want := "/signin?" + url.Values{"return": {path}}.Encode()
		if p.status != http.StatusSeeOther || p.header.Get("Location") != want {
			t.Errorf("GET %s without a session: %d to %q, want 303 to %q", path, p.status, p.header.Get("Location"), want)
		}
	}
	p := b.post("/console/approvals/apr_1", w.base, url.Values{"decision": {"approve"}})
	if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "unauthenticated") {
		t.Errorf("POST without a session: %d %s", p.status, p.body)
	}
	wantHeaders(t, "a refused POST", p)

	home := b.signIn("fin")
	if home.status != http.StatusOK || !strings.Contains(home.body, "Approvals waiting for you") {
		t.Fatalf("signed in: %d %s", home.status, home.body)
	}
	wantHeaders(t, "the inbox", home)
	if strings.Contains(home.body, "<script>") || !strings.Contains(home.body, `<script src="/console/assets/console.js" defer></script>`) {
		t.Errorf("the page runs script other than its own file: %s", home.body)
	}
	for _, asset := range []string{"/console/assets/console.css", "/console/assets/console.js"} {
		if p := b.get(asset); p.status != http.StatusOK || p.body == "" {
			t.Errorf("%s: %d", asset, p.status)
		}
	}
	notFound := b.get("/console/nowhere")
	if notFound.status != http.StatusNotFound || !strings.Contains(notFound.body, "not_found") {
		t.Errorf("an unknown page: %d %s", notFound.status, notFound.body)
	}
	if p := b.get("/console/approvals/apr_missing"); p.status != http.StatusNotFound || !strings.Contains(p.body, "not_found") {
		t.Errorf("an unknown approval: %d %s", p.status, p.body)
	}
}

// A form is acted on only when it comes from the console's own page: the
// session's CSRF token, and no other origin. A refused form changes
// nothing.
func TestFormsFromElsewhereAreRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.file("agent", "run-1", "")
	b := w.browser()
	b.signIn("fin")
	token := b.get("/console/approvals/" + id).csrf(t)
	other := w.browser()
	otherToken := other.signIn("fin").csrf(t)
	tests := []struct {
		name   string
		origin string
		form   url.Values
	}{
		{"no CSRF token", w.base, url.Values{"decision": {"approve"}}},
		{"another session's token", w.base, url.Values{"decision": {"approve"}, "csrf": {otherToken}}},
		{"another origin", "https://evil.example", url.Values{"decision": {"approve"}, "csrf": {token}}},
	}
	for _, tt := range tests {
		p := b.post("/console/approvals/"+id, tt.origin, tt.form)
		if p.status != http.StatusForbidden || !strings.Contains(p.body, "denied") {
			t.Errorf("%s: %d %s", tt.name, p.status, p.body)
		}
		if a := w.approval(id); a.Status != toolplane.ApprovalPending {
			t.Fatalf("%s: the refused form answered the approval: %s", tt.name, a.Status)
		}
	}
	p := b.post("/console/approvals/"+id, w.base, url.Values{"decision": {"approve"}, "csrf": {token}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("the page's own form: %d %s", p.status, p.body)
	}
}

// refusal is the message of a denied answer, as the API gives it.
func refusal(t *testing.T, body map[string]any) string {
	t.Helper()
	e, _ := body["error"].(map[string]any)
	if e["code"] != "denied" {
		t.Fatalf("not denied: %v", body)
	}
	return e["message"].(string)
}

// Who answers an approval is the approval service's rule, and the
// console refuses exactly whom the API refuses, in the same words: an
// approver outside the approval's group, the person the call was asked
// for. Neither is shown it in their inbox; a member of the group is.
func TestTheConsoleRefusesWhomTheAPIRefuses(t *testing.T) {
	t.Parallel()
	for _, backend := range backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testRefusals(t, newWorldOn(t, backend))
		})
	}
}

func testRefusals(t *testing.T, w *world) {
	forBob := w.file("frontDesk", "run-bob", "bob")
	tests := []struct {
		name, who, id string
	}{
		{"an approver outside the group", "ada", forBob},
		{"the requester, approving their own call", "bob", forBob},
	}
	for _, tt := range tests {
		status, body := w.api("POST", "/v1/approvals/"+tt.id+"/approve", w.keys[tt.who], "")
		if status != http.StatusForbidden {
			t.Fatalf("%s: the API answered %d %v", tt.name, status, body)
		}
		said := refusal(t, body)
		b := w.browser()
		inbox := b.signIn(tt.who)
		if strings.Contains(inbox.body, tt.id) {
			t.Errorf("%s: the inbox shows the approval", tt.name)
		}
		card := b.get("/console/approvals/" + tt.id)
		if card.status != http.StatusOK || strings.Contains(card.body, `value="approve"`) || !strings.Contains(card.body, escape(said)) {
			t.Errorf("%s: the card offers the decision, or does not say why not (%q): %s", tt.name, said, card.body)
		}
		// Sent anyway, with the page's own token: the same refusal.
		p := b.post("/console/approvals/"+tt.id, w.base, url.Values{"csrf": {card.csrf(t)}, "decision": {"approve"}})
		if p.status != http.StatusForbidden || !strings.Contains(p.body, ">denied<") || !strings.Contains(p.body, escape(said)) {
			t.Errorf("%s: %d %s; want the API's refusal %q", tt.name, p.status, p.body, said)
		}
		if a := w.approval(tt.id); a.Status != toolplane.ApprovalPending {
			t.Fatalf("%s: the refused decision answered it: %s", tt.name, a.Status)
		}
	}
	fin := w.browser()
	if inbox := fin.signIn("fin"); !strings.Contains(inbox.body, forBob) {
		t.Errorf("a member of the group does not see the approval: %s", inbox.body)
	}
	// An auditor reads every pending approval and answers none.
	grace := w.browser()
	inbox := grace.signIn("grace")
	if !strings.Contains(inbox.body, forBob) || strings.Contains(grace.get("/console/approvals/"+forBob).body, `value="approve"`) {
		t.Errorf("the auditor's view: %s", inbox.body)
	}
}

// escape is text as a page shows it.
func escape(s string) string {
	r := strings.NewReplacer(`&`, "&amp;", `'`, "&#39;", `<`, "&lt;", `>`, "&gt;", `"`, "&#34;")
	return r.Replace(s)
}

// What an agent or a tool's author wrote reaches a page as text: a
// script in a tool's description, in the arguments, in an agent's name
// runs nowhere, in the inbox, on the card, in the history. The value the
// tool's schema marks x-sensitive is not shown at all.
func TestPayloadsAreRenderedInert(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.file("agent", "run-1", "")
	b := w.browser()
	pages := map[string]page{"inbox": b.signIn("fin"), "card": b.get("/console/approvals/" + id)}
	if p := b.decide(id, "reject", `<script>alert("reason")</script>`, nil); p.status != http.StatusSeeOther {
		t.Fatalf("reject: %d %s", p.status, p.body)
	}
	pages["history"] = b.get("/console/approvals?status=rejected")
	pages["decided card"] = b.get("/console/approvals/" + id)
	for name, p := range pages {
		if p.status != http.StatusOK {
			t.Fatalf("%s: %d %s", name, p.status, p.body)
		}
		if !strings.Contains(p.body, id) {
			t.Errorf("%s does not show the approval", name)
		}
		for _, raw := range []string{"<script>alert", "<img"} {
			if strings.Contains(p.body, raw) {
				t.Errorf("%s holds %q unescaped", name, raw)
			}
		}
		for _, shown := range []string{escape(xssDescription), escape(xssAgent), "xss.pay", "1.2.0", "run-1"} {
			if !strings.Contains(p.body, shown) {
				t.Errorf("%s does not show %q", name, shown)
			}
		}
		if strings.Contains(p.body, account) || !strings.Contains(p.body, "[redacted]") {
			t.Errorf("%s shows the sensitive account", name)
		}
	}
	if !strings.Contains(pages["card"].body, "onerror=alert(&#34;note&#34;)") && !strings.Contains(pages["card"].body, "onerror=alert(\\u0026#34;") {
		// The arguments are shown as JSON text, escaped.
		if !strings.Contains(pages["card"].body, escape(`\u003cimg`)) && !strings.Contains(pages["card"].body, "&lt;img") {
			t.Errorf("the card does not show the note as text: %s", pages["card"].body)
		}
	}
	if !strings.Contains(pages["decided card"].body, "rejected by <strong>fin</strong>") || !strings.Contains(pages["decided card"].body, escape(`<script>alert("reason")</script>`)) {
		t.Errorf("the decided card does not say who rejected it, and why: %s", pages["decided card"].body)
	}
}

// An approval answered in the console completes the call it held: the
// card shows who approved it and when, the history lists it, and the
// agent's call with the approval runs, once, with the real arguments.
func TestApprovingInTheConsoleCompletesTheCall(t *testing.T) {
	t.Parallel()
	for _, backend := range backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testApproving(t, newWorldOn(t, backend))
		})
	}
}

func testApproving(t *testing.T, w *world) {
	id := w.file("agent", "run-1", "")
	b := w.browser()
	b.signIn("fin")
	p := b.decide(id, "approve", "matches the ticket", nil)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/console/approvals/"+id) {
		t.Fatalf("approve: %d %s %s", p.status, p.header.Get("Location"), p.body)
	}
	card := b.get(p.header.Get("Location"))
	if !strings.Contains(card.body, "approved by <strong>fin</strong>") || !strings.Contains(card.body, "matches the ticket") || !strings.Contains(card.body, "Your answer was recorded") {
		t.Errorf("the card after the decision: %s", card.body)
	}
	if h := b.get("/console/approvals?status=approved"); !strings.Contains(h.body, id) {
		t.Errorf("the history does not list it: %s", h.body)
	}
	if inbox := b.get("/console/approvals"); strings.Contains(inbox.body, id) {
		t.Errorf("the inbox still lists it")
	}
	if a := w.approval(id); a.Status != toolplane.ApprovalApproved || a.ResolvedBy != "fin" {
		t.Fatalf("stored: %s by %s", a.Status, a.ResolvedBy)
	}
	call := `{"arguments":{"account":"` + account + `","note":"` + strings.ReplaceAll(xssNote, `"`, `\"`) + `"},"run_id":"run-1","authorized_by":"` + id + `"}`
	status, body := w.api("POST", "/v1/tools/xss.pay/invoke", w.keys["agent"], call)
	if status != http.StatusOK || body["ok"] != true {
		t.Fatalf("the approved call: %d %v", status, body)
	}
	if note, ok := w.paid.Load(account); !ok || note != xssNote {
		t.Errorf("the approved call ran with %v, %v", note, ok)
	}
	// A second answer is refused as the API refuses it.
	if p := b.decide(id, "reject", "", nil); p.status != http.StatusConflict || !strings.Contains(p.body, "conflict") {
		t.Errorf("answering twice: %d %s", p.status, p.body)
	}
}

// A one-click link opens the card and decides nothing: the decision is a
// POST by the signed-in approver carrying the link, which is used once. A
// link that is forged, for another approval or used is not honoured.
func TestOneClickLinksOpenAConfirmation(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	id := w.file("agent", "run-1", "")
	other := w.file("agent", "run-2", "")
	token := w.links.mint(id)
	b := w.browser()
	// Opened signed out, the link survives the sign-in.
	if p := b.get("/console/approvals/" + id + "?link=" + token); p.status != http.StatusSeeOther || !strings.Contains(p.header.Get("Location"), url.QueryEscape("link="+token)) {
		t.Fatalf("the link signed out: %d %s", p.status, p.header.Get("Location"))
	}
	b.signIn("fin")
	card := b.get("/console/approvals/" + id + "?link=" + token)
	if !strings.Contains(card.body, "Nothing is decided until you press") || !strings.Contains(card.body, `name="link" value="`+token+`"`) {
		t.Fatalf("the link's card: %s", card.body)
	}
	if a := w.approval(id); a.Status != toolplane.ApprovalPending {
		t.Fatalf("opening the link decided it: %s", a.Status)
	}
	for name, bad := range map[string]string{"forged": "nope", "another approval's": w.links.mint(other)} {
		p := b.get("/console/approvals/" + id + "?link=" + bad)
		if strings.Contains(p.body, `name="link"`) || !strings.Contains(p.body, "not valid any more") {
			t.Errorf("a %s link: %s", name, p.body)
		}
	}
	// An approver outside the approval's group is refused as without the
	// link, and does not use it up.
	ada := w.browser()
	ada.signIn("ada")
	adaCard := ada.get("/console/approvals/" + id + "?link=" + token)
	refused := ada.post("/console/approvals/"+id, w.base, url.Values{"csrf": {adaCard.csrf(t)}, "decision": {"approve"}, "link": {token}})
	if refused.status != http.StatusForbidden || w.links.wasUsed(token) {
		t.Fatalf("an approver outside the group with the link: %d, used %v", refused.status, w.links.wasUsed(token))
	}
	if p := b.decide(id, "approve", "", url.Values{"link": {token}}); p.status != http.StatusSeeOther {
		t.Fatalf("the decision with the link: %d %s", p.status, p.body)
	}
	if !w.links.wasUsed(token) {
		t.Error("the link was not used up")
	}
	// Replayed, on another approval the person may answer: refused, and
	// the approval stays pending.
	replayed := b.decide(other, "approve", "", url.Values{"link": {token}})
	if replayed.status != http.StatusConflict || w.approval(other).Status != toolplane.ApprovalPending {
		t.Errorf("a replayed link: %d %s", replayed.status, replayed.body)
	}
}

// Uncertain actions are listed with what is known of the call, and a
// person reconciles one through the invoker as the API does: afterwards
// the list no longer holds it and identical calls answer what was
// recorded.
func TestUncertainActionsAreReconciled(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	call := `{"arguments":{"account":"` + account + `","note":"x"},"run_id":"run-u"}`
	if status, body := w.api("POST", "/v1/tools/xss.slow/invoke", w.keys["agent"], call); status != http.StatusOK || !strings.Contains(toJSON(body), "uncertain") {
		t.Fatalf("the slow call: %d %v", status, body)
	}
	grace := w.browser()
	grace.signIn("grace")
	list := grace.get("/console/uncertain")
	if list.status != http.StatusOK || !strings.Contains(list.body, "xss.slow") || strings.Contains(list.body, `value="output"`) || strings.Contains(list.body, account) {
		t.Fatalf("the auditor's list (read only, redacted): %s", list.body)
	}
	fin := w.browser()
	fin.signIn("fin")
	list = fin.get("/console/uncertain")
	m := regexpKey.FindStringSubmatch(list.body)
	if m == nil {
		t.Fatalf("no reconcile form: %s", list.body)
	}
	form := url.Values{"csrf": {list.csrf(t)}, "tool": {"xss.slow"}, "key": {htmlUnescape(m[1])}}
	bad := url.Values{"outcome": {"failure"}, "code": {"denied"}, "message": {"no"}}
	for k, v := range form {
		bad[k] = v
	}
	if p := fin.post("/console/uncertain/reconcile", w.base, bad); p.status != http.StatusBadRequest || !strings.Contains(p.body, "invalid_request") {
		t.Errorf("a failure under a code no tool answers: %d %s", p.status, p.body)
	}
	form.Set("outcome", "failure")
	form.Set("code", "conflict")
	form.Set("message", "the bank refused the payment")
	if p := fin.post("/console/uncertain/reconcile", w.base, form); p.status != http.StatusSeeOther {
		t.Fatalf("reconcile: %d %s", p.status, p.body)
	}
	if after := fin.get("/console/uncertain?done=1"); strings.Contains(after.body, "xss.slow</h2>") || !strings.Contains(after.body, "reconciled") {
		t.Errorf("after reconciling: %s", after.body)
	}
	status, body := w.api("POST", "/v1/tools/xss.slow/invoke", w.keys["agent"], call)
	if status != http.StatusOK || !strings.Contains(toJSON(body), "the bank refused the payment") {
		t.Errorf("the identical call after reconciling: %d %v", status, body)
	}
	cs, _, err := w.iv.Uncertain(context.Background(), "", 10, &toolplane.Credential{OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "x", Roles: []string{toolplane.RoleAuditor}})
	if err != nil || len(cs) != 0 {
		t.Errorf("still uncertain: %d %v", len(cs), err)
	}
}

// A fault is a page with the stable code and the request's id, naming
// nothing of its cause.
func TestAFaultNamesNothingOfItsCause(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	b := w.browser()
	b.signIn("fin")
	if err := w.db.Close(); err != nil {
		t.Fatal(err)
	}
	p := b.get("/console/approvals")
	if p.status != http.StatusInternalServerError || !strings.Contains(p.body, "internal_error") || !strings.Contains(p.body, "Request req_") {
		t.Fatalf("a closed database: %d %s", p.status, p.body)
	}
	for _, cause := range []string{"sql", "closed", "database", "sqlite", ".go:"} {
		if strings.Contains(strings.ToLower(p.body), cause) {
			t.Errorf("the page names %q: %s", cause, p.body)
		}
	}
	wantHeaders(t, "a fault", p)
}

// The inbox pages newest first, by the cursor the service answers, and
// the history shows another state; an unknown state is the caller's
// mistake.
func TestTheInboxPages(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var ids []string
	for i := range 53 {
		a := &toolplane.Approval{
			ID: fmt.Sprintf("apr_page_%02d", i), OrganizationID: org, RunID: "run-1", Tool: "xss.pay", ToolVersion: "1.2.0",
			Key: fmt.Sprintf("k%d", i), Arguments: []byte(`{}`), Invocation: []byte(`{}`), PrincipalID: "agent-x",
			Status: toolplane.ApprovalPending, ApproverGroup: "finance",
			CreatedAt: time.Now().Add(time.Duration(i-100) * time.Second), ExpiresAt: time.Now().Add(time.Hour),
		}
		if err := w.store.InsertApproval(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	b := w.browser()
	first := b.signIn("fin")
	if n := strings.Count(first.body, `<article class="card">`); n != 50 || !strings.Contains(first.body, ids[52]) || strings.Contains(first.body, ids[2]+"<") {
		t.Fatalf("first page: %d approvals: %s", n, first.body)
	}
	m := regexp.MustCompile(`href="([^"]+)">Older`).FindStringSubmatch(first.body)
	if m == nil {
		t.Fatalf("no link to the next page: %s", first.body)
	}
	second := b.get(html.UnescapeString(m[1]))
	if n := strings.Count(second.body, `<article class="card">`); n != 3 || !strings.Contains(second.body, ids[0]) || strings.Contains(second.body, ">Older<") {
		t.Errorf("second page: %d approvals: %s", n, second.body)
	}
	if p := b.get("/console/approvals?status=expired"); p.status != http.StatusOK || !strings.Contains(p.body, "No approvals expired") {
		t.Errorf("the history of expired approvals: %d %s", p.status, p.body)
	}
	if p := b.get("/console/approvals?status=bogus"); p.status != http.StatusBadRequest || !strings.Contains(p.body, "invalid_request") {
		t.Errorf("an unknown state: %d %s", p.status, p.body)
	}
	if p := b.get("/console/approvals?cursor=bogus"); p.status != http.StatusBadRequest || !strings.Contains(p.body, "invalid_request") {
		t.Errorf("a bad cursor: %d %s", p.status, p.body)
	}
}
