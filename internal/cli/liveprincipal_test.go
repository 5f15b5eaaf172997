package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/apikey"
)

// call sends a JSON request with key and answers the status and the
// decoded body.
func call(t *testing.T, method, url, key, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// A call that waited for a person is executed on the key as it is when the
// person approves: the key it was made with, revoked meanwhile, no longer
// carries it, and the served node refuses it rather than run it on the
// principal stored when it was filed.
func TestServeRunsAnApprovedCallOnTheLivePrincipal(t *testing.T) {
	t.Parallel()
	r := startServe(t)
	base, admin, agent := r.base, r.admin, r.agent
	keyID, _, err := apikey.Parse(agent)
	if err != nil {
		t.Fatal(err)
	}
	status, filed := call(t, "POST", base+"/v1/tools/demo.refund_order/invoke", agent,
		`{"arguments":{"order_id":"o-501","amount_cents":100,"reason":"damaged"},"run_id":"run-live"}`)
	ap, _ := filed["approval"].(map[string]any)
	id, _ := ap["id"].(string)
	if status != http.StatusAccepted || id == "" {
		t.Fatalf("refund: %d %v", status, filed)
	}
	if status, body := call(t, "POST", base+"/v1/keys/"+keyID+"/revoke", admin, ""); status != http.StatusOK {
		t.Fatalf("revoke the agent's key: %d %v", status, body)
	}
	if status, body := call(t, "POST", base+"/v1/approvals/"+id+"/approve", admin, `{"reason":"fine"}`); status != http.StatusOK {
		t.Fatalf("approve: %d %v", status, body)
	}
	// The approved call runs in the background: wait for its outcome.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		status, page := call(t, "GET", base+"/v1/audit/events?tool=demo.refund_order&run_id=run-live", admin, "")
		if status != http.StatusOK {
			t.Fatalf("audit: %d %v", status, page)
		}
		items, _ := page["items"].([]any)
		var outcomes []string
		for _, it := range items {
			ev, _ := it.(map[string]any)
			o, _ := ev["outcome"].(string)
			outcomes = append(outcomes, o)
			switch o {
			case "ok":
				t.Fatalf("the approved call ran on the revoked key's stored principal: %v", outcomes)
			case "denied":
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no outcome of the approved call: %v", outcomes)
		}
	}
}
