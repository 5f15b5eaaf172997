package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/upstream"
)

// The console is served at /console beside the sign-in: a person signed
// in with their key finds a waiting refund in their inbox, approves it
// from its card, and the background work completes the call without the
// agent asking again. The link the agent is answered opens that card.
func TestApprovingInTheServedConsoleCompletesTheCall(t *testing.T) {
	t.Parallel()
	r := start(t, Config{}, upstream.Relax{})
	status, got := post(t, r.base, "/v1/tools/demo.refund_order/invoke", r.agent,
		`{"arguments":{"order_id":"o-502","amount_cents":1250,"reason":"charged twice"},"run_id":"run-console"}`)
	var filed struct {
		Approval struct {
			ID  string `json:"id"`
			URL string `json:"url"`
		} `json:"approval"`
	}
	if status != http.StatusAccepted || json.Unmarshal([]byte(got), &filed) != nil || filed.Approval.ID == "" {
		t.Fatalf("refund: %d %s", status, got)
	}
	if want := r.base + "/console/approvals/" + filed.Approval.ID; filed.Approval.URL != want {
		t.Errorf("the answer links %q, want %q", filed.Approval.URL, want)
	}

	b := newPageBrowser(t, r.base)
	_, _, at, _ := b.get(filed.Approval.URL)
	if !strings.Contains(at, "/signin?return=") {
		t.Fatalf("the link signed out ended at %s, not the sign-in", at)
	}
	status, body, at, _ := b.get(r.base + "/signin?return=" + url.QueryEscape("/console/approvals"))
	m := formToken.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		t.Fatalf("sign-in page: %d %s", status, body)
	}
	form := url.Values{"csrf": {m[1]}, "key": {r.admin}, "return": {"/console/approvals"}}
	req, _ := http.NewRequest(http.MethodPost, r.base+"/signin/key", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", r.base)
	status, body, at, _ = b.open(req)
	if status != http.StatusOK || !strings.HasSuffix(at, "/console/approvals") || !strings.Contains(body, filed.Approval.ID) {
		t.Fatalf("the inbox after sign-in: %d at %s: %s", status, at, body)
	}

	status, body, _, _ = b.get(filed.Approval.URL)
	m = formToken.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil || !strings.Contains(body, "demo.refund_order") {
		t.Fatalf("the card: %d %s", status, body)
	}
	// The page's own form carries the session's token; the header's
	// sign-out form carries the same.
	form = url.Values{"csrf": {m[1]}, "decision": {"approve"}, "reason": {"charged twice, checked"}}
	req, _ = http.NewRequest(http.MethodPost, filed.Approval.URL, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", r.base)
	status, body, _, _ = b.open(req)
	if status != http.StatusOK || !strings.Contains(body, "approved by <strong>") {
		t.Fatalf("approve: %d %s", status, body)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if slices.Contains(r.audit(t, "demo.refund_order"), "ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the approved refund never ran: %q", r.audit(t, "demo.refund_order"))
		}
	}
}

// The served console's catalogue searches through the node's index, and
// a tool's page shows its dependency graph: the console is given the
// doors' search.
func TestTheServedConsoleSearchesTheCatalogue(t *testing.T) {
	t.Parallel()
	r := start(t, Config{}, upstream.Relax{})
	b := newPageBrowser(t, r.base)
	status, body, _, _ := b.get(r.base + "/signin?return=" + url.QueryEscape("/console/catalog"))
	m := formToken.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		t.Fatalf("sign-in page: %d %s", status, body)
	}
	form := url.Values{"csrf": {m[1]}, "key": {r.admin}, "return": {"/console/catalog"}}
	req, _ := http.NewRequest(http.MethodPost, r.base+"/signin/key", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", r.base)
	if status, body, at, _ := b.open(req); status != http.StatusOK || !strings.HasSuffix(at, "/console/catalog") || !strings.Contains(body, `role="search"`) {
		t.Fatalf("the catalogue after sign-in: %d at %s: %s", status, at, body)
	}
	status, body, _, _ = b.get(r.base + "/console/catalog?" + url.Values{"q": {"refund a customer's order"}}.Encode())
	if status != http.StatusOK || !strings.Contains(body, `">demo.refund_order</a>`) {
		t.Fatalf("the search: %d %s", status, body)
	}
	link := regexp.MustCompile(`href="(/console/catalog/demo\.refund_order/[^"]+)"`).FindStringSubmatch(body)
	if link == nil {
		t.Fatalf("no link to the tool's page: %s", body)
	}
	if status, body, _, _ = b.get(r.base + link[1]); status != http.StatusOK || !strings.Contains(body, "<h2>Dependencies</h2>") {
		t.Fatalf("the tool's page: %d %s", status, body)
	}
}
