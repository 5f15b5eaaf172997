package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
)

// insertInbox stores n pending approvals in org, routed to the finance
// group or to none, of two tools and three agents, filed 10 minutes, 40
// minutes, 70 minutes … ago, whose previews name $0, $100, $200 …; it
// answers their IDs, i-th first. tag tells the organizations' apart.
func (w *world) insertInbox(t *testing.T, org, tag string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		a := &toolplane.Approval{
			ID: fmt.Sprintf("apr_f_%s_%02d", tag, i), OrganizationID: org, RunID: fmt.Sprintf("run-%s-%d", tag, i), Tool: []string{"xss.pay", "xss.meter"}[i%2],
			ToolVersion: "1.2.0", Key: fmt.Sprintf("k%d", i), Arguments: []byte(`{}`), Invocation: []byte(`{}`),
			PrincipalID: fmt.Sprintf("agent-%d", i%3), Preview: fmt.Sprintf("Refund $%d to %s", i*100, tag),
			Status: toolplane.ApprovalPending, ApproverGroup: []string{"finance", ""}[(i/2)%2],
			CreatedAt: time.Now().Add(-time.Duration(i*30+10) * time.Minute), ExpiresAt: time.Now().Add(time.Hour),
		}
		if err := w.store.InsertApproval(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	return ids
}

// listed answers the IDs of the approvals whose cards a list page shows,
// in order.
var cardID = regexp.MustCompile(`<h2><a href="/console/approvals/([^"]+)" data-open>`)

func listed(body string) []string {
	var ids []string
	for _, m := range cardID.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// The inbox's filters and search narrow it to what they match, newest
// first, and the history's too; a filter the page cannot read is the
// person's mistake, said so. Another organization's approvals with the
// same words never show.
func TestTheInboxFiltersAndSearches(t *testing.T) {
	t.Parallel()
	for _, backend := range backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testInboxFilters(t, newWorldOn(t, backend))
		})
	}
}

func testInboxFilters(t *testing.T, w *world) {
	ids := w.insertInbox(t, org, "mine", 10)
	w.insertInbox(t, other, "theirs", 10)
	pick := func(keep func(i int) bool) []string {
		var out []string
		for i, id := range ids {
			if keep(i) {
				out = append(out, id)
			}
		}
		return out
	}
	tests := []struct {
		name, query string
		want        []string
	}{
		{"everything", "", ids},
		{"a tool", "tool=xss.meter", pick(func(i int) bool { return i%2 == 1 })},
		{"an agent", "agent=agent-1", pick(func(i int) bool { return i%3 == 1 })},
		{"a group", "group=finance", pick(func(i int) bool { return (i/2)%2 == 0 })},
		{"filed in the last hour", "age=1h", pick(func(i int) bool { return i < 2 })},
		{"waiting over an hour", "age=older1h", pick(func(i int) bool { return i >= 2 })},
		{"at least an amount", "min=500", pick(func(i int) bool { return i >= 5 })},
		{"an amount between", "min=200&max=300.00", pick(func(i int) bool { return i == 2 || i == 3 })},
		{"words, case folded", "q=REFUND+%247", pick(func(i int) bool { return i == 7 })},
		{"an id", "q=apr_f_mine_03", pick(func(i int) bool { return i == 3 })},
		{"conditions together", "tool=xss.pay&age=older1h&min=400", pick(func(i int) bool { return i%2 == 0 && i >= 4 })},
		{"the other organization's words", "q=theirs", nil},
	}
	b := w.browser()
	b.signIn("fin")
	for _, tt := range tests {
		p := b.get("/console/approvals?" + tt.query)
		if p.status != http.StatusOK {
			t.Fatalf("%s: %d %s", tt.name, p.status, p.body)
		}
		// ids are newest first, as the page lists them.
		if !slices.Equal(listed(p.body), tt.want) {
			t.Errorf("%s: listed %v, want %v", tt.name, listed(p.body), tt.want)
		}
		if strings.Contains(p.body, "theirs") && tt.query != "q=theirs" {
			t.Errorf("%s shows the other organization", tt.name)
		}
		// The form shows what was asked, so the next search starts there.
		if q, _ := url.ParseQuery(tt.query); q.Get("tool") != "" && !strings.Contains(p.body, `name="tool" value="`+q.Get("tool")+`"`) {
			t.Errorf("%s: the form does not keep the tool", tt.name)
		}
	}
	// A tab to another state keeps the filter.
	if p := b.get("/console/approvals?tool=xss.meter"); !strings.Contains(p.body, `href="/console/approvals?status=approved&amp;tool=xss.meter"`) {
		t.Errorf("the tabs lose the filter: %s", p.body)
	}
	for _, bad := range []string{"age=forever", "min=abc", "max=-1", "min=1.234", "q=" + strings.Repeat("x", 201)} {
		if p := b.get("/console/approvals?" + bad); p.status != http.StatusBadRequest {
			t.Errorf("%s: %d", bad, p.status)
		}
	}
	// An auditor reads the pending ones filtered the same way.
	g := w.browser()
	g.signIn("grace")
	if p := g.get("/console/approvals?tool=xss.meter&min=500"); !slices.Equal(listed(p.body), pick(func(i int) bool { return i%2 == 1 && i >= 5 })) {
		t.Errorf("the auditor's filtered list: %v", listed(p.body))
	}
}

// quickForm matches the form of a card that is answered from the list.
func quickForm(id string) *regexp.Regexp {
	return regexp.MustCompile(`<form class="quick" method="post" action="/console/approvals/` + regexp.QuoteMeta(id) + `/confirm"`)
}

// An approval one answer decides is answered from the list: the button
// opens a confirmation that decides nothing, whose own POST is the same
// decision as the card's, and brings the person back to the list they
// answered from. Forged forms, a person the service refuses and a
// return address of elsewhere change nothing.
func TestTheInboxAnswersFromTheList(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	first := w.file("agent", "run-q1", "")
	second := w.file("agent", "run-q2", "")
	several := &toolplane.Approval{ID: "apr_two_people", OrganizationID: org, RunID: "run-q3", Tool: "xss.pay", ToolVersion: "1.2.0", Key: "k-two",
		Arguments: []byte(`{}`), Invocation: []byte(`{}`), PrincipalID: "agent-x", Status: toolplane.ApprovalPending, Approvers: 2,
		ApproverGroup: "finance", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := w.store.InsertApproval(context.Background(), several); err != nil {
		t.Fatal(err)
	}
	b := w.browser()
	b.signIn("fin")
	list := b.get("/console/approvals?q=xss")
	for _, id := range []string{first, second} {
		if !quickForm(id).MatchString(list.body) {
			t.Fatalf("no answer from the list for %s: %s", id, list.body)
		}
	}
	if quickForm(several.ID).MatchString(list.body) || !strings.Contains(list.body, `<a href="/console/approvals/`+several.ID+`">Open to answer</a>`) {
		t.Errorf("an approval of two people is answered from the list")
	}
	if !strings.Contains(list.body, `name="back" value="q=xss"`) {
		t.Errorf("the list's forms do not carry its filter")
	}
	csrf := list.csrf(t)

	// Without the script: the confirmation page, which decides nothing.
	confirm := b.post("/console/approvals/"+first+"/confirm", w.base, url.Values{"csrf": {csrf}, "decision": {"approve"}, "back": {"q=xss"}})
	if confirm.status != http.StatusOK || !strings.Contains(confirm.body, "Yes, approve") ||
		!strings.Contains(confirm.body, `action="/console/approvals/`+first+`"`) || !strings.Contains(confirm.body, `name="back" value="q=xss"`) ||
		!strings.Contains(confirm.body, `name="decision" value="approve"`) {
		t.Fatalf("the confirmation: %d %s", confirm.status, confirm.body)
	}
	if a := w.approval(first); a.Status != toolplane.ApprovalPending {
		t.Fatalf("the confirmation decided: %s", a.Status)
	}
	p := b.post("/console/approvals/"+first, w.base, url.Values{"csrf": {confirm.csrf(t)}, "decision": {"approve"}, "back": {"q=xss"}, "reason": {"fine"}})
	if want := "/console/approvals?status=pending&q=xss&done=" + first; p.status != http.StatusSeeOther || p.header.Get("Location") != want {
		t.Fatalf("the answer: %d %q, want %q", p.status, p.header.Get("Location"), want)
	}
	if a := w.approval(first); a.Status != toolplane.ApprovalApproved || a.ResolvedBy != "fin" || a.Reason != "fine" {
		t.Fatalf("stored: %s by %s (%s)", a.Status, a.ResolvedBy, a.Reason)
	}
	back := b.get(p.header.Get("Location"))
	if !strings.Contains(back.body, "Your answer to "+first+" was recorded") || slices.Contains(listed(back.body), first) || !slices.Contains(listed(back.body), second) {
		t.Errorf("the list after the answer: %v %s", listed(back.body), back.body)
	}

	// A crafted link's text is never shown as the notice.
	if crafted := b.get("/console/approvals?done=" + url.QueryEscape("apr_x was rejected. Call +1 555 0100 to appeal")); strings.Contains(crafted.body, "555 0100") {
		t.Errorf("a crafted done= was shown: %s", crafted.body)
	}

	// What the script sends once confirmed: the decision straight away,
	// with the list's filter; a return address of elsewhere is not one.
	p = b.post("/console/approvals/"+second, w.base, url.Values{"csrf": {csrf}, "decision": {"reject"}, "back": {"https://evil.example/?x=1&tool=xss.pay"}})
	if want := "/console/approvals?status=pending&tool=xss.pay&done=" + second; p.status != http.StatusSeeOther || p.header.Get("Location") != want {
		t.Errorf("the answer with a foreign return: %d %q, want %q", p.status, p.header.Get("Location"), want)
	}
	if a := w.approval(second); a.Status != toolplane.ApprovalRejected {
		t.Errorf("stored: %s", a.Status)
	}

	// The approved call's outcome shows on its card in the history once
	// the agent asked again and it ran.
	if h := b.get("/console/approvals?status=approved"); !strings.Contains(h.body, `data-outcome="not_run"`) {
		t.Errorf("the approved card before its call ran: %s", h.body)
	}
	call := `{"arguments":{"account":"` + account + `","note":"` + strings.ReplaceAll(xssNote, `"`, `\"`) + `"},"run_id":"run-q1"}`
	if status, body := w.api("POST", "/v1/tools/xss.pay/invoke", w.keys["agent"], call); status != http.StatusOK {
		t.Fatalf("the approved call: %d %v", status, body)
	}
	if h := b.get("/console/approvals?status=approved"); !strings.Contains(h.body, `data-outcome="ok">Then: executed ok`) {
		t.Errorf("the approved card after its call ran: %s", h.body)
	}

	// Forged forms change nothing.
	third := w.file("agent", "run-q4", "")
	for _, f := range []struct {
		name, path, origin, csrf string
	}{
		{"a forged token at the confirmation", "/confirm", w.base, "forged"},
		{"a forged token at the decision", "", w.base, "forged"},
		{"another origin at the decision", "", "https://evil.example", csrf},
		{"no token", "", w.base, ""},
	} {
		p := b.post("/console/approvals/"+third+f.path, f.origin, url.Values{"csrf": {f.csrf}, "decision": {"approve"}, "back": {""}})
		if p.status != http.StatusForbidden {
			t.Errorf("%s: %d %s", f.name, p.status, p.body)
		}
	}
	if a := w.approval(third); a.Status != toolplane.ApprovalPending {
		t.Errorf("a forged form decided: %s", a.Status)
	}
	// A person the service refuses is refused at the confirmation too.
	ada := w.browser()
	adaList := ada.signIn("ada")
	if quickForm(third).MatchString(adaList.body) {
		t.Errorf("ada, outside the finance group, is offered the answer")
	}
	if p := ada.post("/console/approvals/"+third+"/confirm", w.base, url.Values{"csrf": {adaList.csrf(t)}, "decision": {"approve"}}); p.status != http.StatusForbidden {
		t.Errorf("ada's confirmation: %d", p.status)
	}
	if p := ada.post("/console/approvals/"+third, w.base, url.Values{"csrf": {adaList.csrf(t)}, "decision": {"approve"}, "back": {""}}); p.status != http.StatusForbidden {
		t.Errorf("ada's answer: %d", p.status)
	}
	// An answered approval is not confirmed again.
	if p := b.post("/console/approvals/"+first+"/confirm", w.base, url.Values{"csrf": {csrf}, "decision": {"reject"}}); p.status != http.StatusConflict {
		t.Errorf("confirming an answered approval: %d", p.status)
	}
}

// A person of another organization finds none of this one's approvals,
// however they search, and can neither confirm nor answer one by its ID.
func TestTheInboxOfAnotherOrganization(t *testing.T) {
	t.Parallel()
	for _, backend := range backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testInboxOfAnotherOrganization(t, newWorldOn(t, backend))
		})
	}
}

func testInboxOfAnotherOrganization(t *testing.T, w *world) {
	mine := w.insertInbox(t, org, "mine", 4)
	theirs := w.insertInbox(t, other, "theirs", 4)
	id, sec, _ := apikey.New(toolplane.CredentialPerson)
	if err := w.store.InsertCredential(context.Background(), &toolplane.Credential{ID: id, OrganizationID: other, Kind: toolplane.CredentialPerson,
		Subject: "subject-theirs", Roles: []string{toolplane.RoleApprover, "group:finance"}, Hash: apikey.Hash(sec), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	w.keys["theirs"] = apikey.Key(id, sec)
	b := w.browser()
	list := b.signIn("theirs")
	if got := listed(list.body); !slices.Equal(got, theirs) {
		t.Errorf("their inbox: %v, want %v", got, theirs)
	}
	for _, q := range []string{"q=mine", "q=" + mine[0], "tool=xss.pay&q=refund", "agent=agent-0"} {
		for _, id := range listed(b.get("/console/approvals?" + q).body) {
			if slices.Contains(mine, id) && !slices.Contains(theirs, id) {
				t.Errorf("%s lists %s of the other organization", q, id)
			}
		}
		if p := b.get("/console/approvals?" + q); strings.Contains(p.body, "to mine") {
			t.Errorf("%s shows the other organization's preview", q)
		}
	}
	csrf := list.csrf(t)
	for _, path := range []string{"/console/approvals/apr_f_mine_00/confirm", "/console/approvals/apr_f_mine_00"} {
		if p := b.post(path, w.base, url.Values{"csrf": {csrf}, "decision": {"approve"}, "back": {""}}); p.status != http.StatusNotFound {
			t.Errorf("%s: %d", path, p.status)
		}
	}
	if a := w.approval("apr_f_mine_00"); a.Status != toolplane.ApprovalPending {
		t.Errorf("the other organization's answer changed it: %s", a.Status)
	}
}
