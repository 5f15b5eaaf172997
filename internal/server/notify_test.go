package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/upstream"
	"github.com/toolplane/toolplane/webhook"
)

// A served node tells the organization's webhook of a refund waiting for
// approval, signed, with a link to the console page on its own address.
func TestServedApprovalIsNotified(t *testing.T) {
	t.Parallel()
	no := false
	// The receiver listens on loopback: the operator's switch admits it.
	r := start(t, Config{NotifyAllowCIDRs: []string{"127.0.0.0/8"}}, upstream.Relax{RequiresApproval: &no})
	const key = "whsec-server-0123456789abcdef0123456789"
	var mu sync.Mutex
	var got []notify.Payload
	hook := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if err := webhook.Check([][]byte{[]byte(key)}, req.Header.Get(webhook.HeaderTimestamp), req.Header.Get(webhook.HeaderSignature), body, time.Now(), time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var p notify.Payload
		_ = json.Unmarshal(body, &p)
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	}))
	if status, body := post(t, r.base, "/v1/notifications/channels", r.admin,
		`{"name":"ops","kind":"webhook","config":{"url":"`+hook+`"},"secrets":{"hmac_key":"`+key+`"}}`); status != http.StatusCreated || strings.Contains(body, key) {
		t.Fatalf("create channel: %d %s", status, body)
	}
	status, body := post(t, r.base, "/v1/tools/demo.refund_order/invoke", r.agent,
		`{"arguments":{"order_id":"ord_1001","amount_cents":1250,"reason":"damaged"},"run_id":"run-n"}`)
	if status != http.StatusAccepted {
		t.Fatalf("refund: %d %s", status, body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no notification of the refund")
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	p := got[0]
	mu.Unlock()
	if p.Event != notify.ApprovalFiled || p.Approval == nil || p.Approval.Tool != "demo.refund_order" ||
		!strings.HasPrefix(p.Link, r.base+"/console/approvals/"+p.Approval.ID+"?link=") {
		t.Fatalf("notification = %+v, approval %+v", p, p.Approval)
	}

	// The link opens a confirmation in the console, signed in; fetching it
	// decides nothing. The approver's POST carrying it decides, once: the
	// same link posted for another waiting refund is refused.
	link, err := url.Parse(p.Link)
	if err != nil {
		t.Fatal(err)
	}
	token := link.Query().Get("link")
	b := newPageBrowser(t, r.base)
	status, page, _, _ := b.get(r.base + "/signin")
	m := formToken.FindStringSubmatch(page)
	if status != http.StatusOK || m == nil {
		t.Fatalf("sign-in page: %d %s", status, page)
	}
	status, page, _, _ = b.open(form(r.base, "/signin/key", url.Values{"csrf": {m[1]}, "key": {r.admin}, "return": {link.RequestURI()}}))
	m = formToken.FindStringSubmatch(page)
	if status != http.StatusOK || m == nil || !strings.Contains(page, `name="link" value="`+token+`"`) {
		t.Fatalf("the link's page after sign-in: %d %s", status, page)
	}
	if got := r.approvalStatus(t, p.Approval.ID); got != "pending" {
		t.Fatalf("opening the link left the approval %s", got)
	}
	status, page, _, _ = b.open(form(r.base, link.Path, url.Values{"csrf": {m[1]}, "decision": {"approve"}, "link": {token}}))
	if status != http.StatusOK || r.approvalStatus(t, p.Approval.ID) != "approved" {
		t.Fatalf("the decision with the link: %d %s", status, page)
	}
	status, body = post(t, r.base, "/v1/tools/demo.refund_order/invoke", r.agent,
		`{"arguments":{"order_id":"ord_1002","amount_cents":900,"reason":"late"},"run_id":"run-n2"}`)
	var second struct {
		Approval struct{ ID string } `json:"approval"`
	}
	if status != http.StatusAccepted || json.Unmarshal([]byte(body), &second) != nil {
		t.Fatalf("second refund: %d %s", status, body)
	}
	status, _, _, _ = b.open(form(r.base, "/console/approvals/"+second.Approval.ID, url.Values{"csrf": {m[1]}, "decision": {"approve"}, "link": {token}}))
	if status != http.StatusConflict || r.approvalStatus(t, second.Approval.ID) != "pending" {
		t.Fatalf("a used link on another approval: %d, approval %s", status, r.approvalStatus(t, second.Approval.ID))
	}
}

// form is a browser's POST of a page's form on base.
func form(base, path string, v url.Values) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	return req
}

// approvalStatus answers an approval's status as the admin reads it.
func (r *running) approvalStatus(t *testing.T, id string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.base+"/v1/approvals/"+url.PathEscape(id), nil)
	req.Header.Set("Authorization", "Bearer "+r.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct{ Status string }
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("approval %s: %d %v", id, resp.StatusCode, err)
	}
	return a.Status
}
