package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/upstream"
)

// A served node tells the organization's webhook of a refund waiting for
// approval, signed, with a link to the console page on its own address.
func TestServedApprovalIsNotified(t *testing.T) {
	t.Parallel()
	no := false
	r := start(t, Config{}, upstream.Relax{RequiresApproval: &no})
	const key = "whsec-server-0123456789abcdef0123456789"
	var mu sync.Mutex
	var got []notify.Payload
	hook := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if err := notify.VerifyWebhook([]byte(key), req.Header.Get(notify.HeaderTimestamp), req.Header.Get(notify.HeaderSignature), body, time.Now(), time.Minute); err != nil {
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
		t.Errorf("notification = %+v, approval %+v", p, p.Approval)
	}
}
