package server

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane/upstream"
)

// A served node posts a refund's approval to Slack with buttons; a press
// by an account not linked decides nothing and shows a code, which the
// person links with their own key; their next press decides, through the
// console's call, and the message is updated.
func TestServedSlackApproval(t *testing.T) {
	t.Parallel()
	const (
		signing = "slack-signing-secret-0123456789abcdef"
		bot     = "xoxb-served-bot-token-never-shown"
	)
	var mu sync.Mutex
	var calls []map[string]any
	var paths []string
	fake := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(req.Body).Decode(&body)
		mu.Lock()
		calls, paths = append(calls, body), append(paths, req.URL.Path)
		mu.Unlock()
		if strings.HasPrefix(req.URL.Path, "/api/") && req.Header.Get("Authorization") != "Bearer "+bot {
			io.WriteString(w, `{"ok":false,"error":"invalid_auth"}`)
			return
		}
		io.WriteString(w, `{"ok":true,"channel":"C0APPROVE","ts":"1700000000.000200"}`)
	}))
	no := false
	r := start(t, Config{NotifyAllowCIDRs: []string{"127.0.0.0/8"}, SlackAPI: fake + "/api", SlackHooks: fake + "/hooks/"},
		upstream.Relax{RequiresApproval: &no})
	status, body := post(t, r.base, "/v1/notifications/channels", r.admin,
		`{"name":"slack","kind":"slack","config":{"slack_channel":"C0APPROVE","slack_team":"T1"},"secrets":{"slack_bot_token":"`+bot+`","slack_signing_secret":"`+signing+`"}}`)
	if status != http.StatusCreated || strings.Contains(body, bot) || strings.Contains(body, signing) {
		t.Fatalf("create channel: %d %s", status, body)
	}
	var ch struct {
		Channel struct {
			ID  string `json:"id"`
			Org string `json:"organization_id"`
		} `json:"channel"`
	}
	_ = json.Unmarshal([]byte(body), &ch)
	if status, body := post(t, r.base, "/v1/tools/demo.refund_order/invoke", r.agent,
		`{"arguments":{"order_id":"ord_1001","amount_cents":1250,"reason":"damaged"},"run_id":"run-s"}`); status != http.StatusAccepted {
		t.Fatalf("refund: %d %s", status, body)
	}
	// wait answers the first call to path's prefix, once made.
	wait := func(prefix string, from int) (int, map[string]any) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			for i := from; i < len(paths); i++ {
				if strings.HasPrefix(paths[i], prefix) {
					c := calls[i]
					mu.Unlock()
					return i, c
				}
			}
			mu.Unlock()
			if time.Now().After(deadline) {
				t.Fatalf("no call to %s", prefix)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	at, msg := wait("/api/chat.postMessage", 0)
	raw, _ := json.Marshal(msg)
	m := regexp.MustCompile(`"action_id":"toolplane_approve","style":"primary","text":\{[^}]*\},"type":"button","value":"([^"]+)"`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("no approve button in %s", raw)
	}
	id := string(m[1])
	// The approver: a person key of the approval's group.
	var ap struct {
		Approval struct {
			Group string `json:"approver_group"`
		} `json:"approval"`
	}
	_, got := getAs(t, r.base+"/v1/approvals/"+url.PathEscape(id), r.admin)
	_ = json.Unmarshal([]byte(got), &ap)
	roles := `["approver"]`
	if ap.Approval.Group != "" {
		roles = `["approver","group:` + ap.Approval.Group + `"]`
	}
	status, got = post(t, r.base, "/v1/keys", r.admin, `{"kind":"person","subject":"pat@example.com","roles":`+roles+`}`)
	if status != http.StatusCreated {
		t.Fatalf("mint: %d %s", status, got)
	}
	var minted struct {
		Key string `json:"key"`
	}
	_ = json.Unmarshal([]byte(got), &minted)

	press := func(action string) int {
		t.Helper()
		p, _ := json.Marshal(map[string]any{"type": "block_actions", "team": map[string]any{"id": "T1"}, "user": map[string]any{"id": "UPAT"},
			"actions":      []any{map[string]any{"action_id": action, "value": id}},
			"container":    map[string]any{"channel_id": "C0APPROVE", "message_ts": "1700000000.000200"},
			"response_url": fake + "/hooks/actions/T1/" + strconv.FormatInt(time.Now().UnixNano(), 10)})
		b := []byte(url.Values{"payload": {string(p)}}.Encode())
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, []byte(signing))
		mac.Write([]byte("v0:" + ts + ":"))
		mac.Write(b)
		req, _ := http.NewRequest(http.MethodPost, r.base+"/slack/interactivity/"+ch.Channel.Org+"/"+ch.Channel.ID, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := press("toolplane_approve"); code != http.StatusOK {
		t.Fatalf("press answered %d", code)
	}
	at, answer := wait("/hooks/actions/", at+1)
	text, _ := answer["text"].(string)
	cm := regexp.MustCompile("toolplane slack link ([A-Za-z0-9_.-]+)`").FindStringSubmatch(text)
	if cm == nil {
		t.Fatalf("the unlinked press was told %q", text)
	}
	if _, got := getAs(t, r.base+"/v1/approvals/"+url.PathEscape(id), r.admin); !strings.Contains(got, `"status":"pending"`) {
		t.Fatalf("an unlinked press decided: %s", got)
	}
	if status, got := post(t, r.base, "/v1/slack/links", minted.Key, `{"code":"`+cm[1]+`"}`); status != http.StatusCreated || !strings.Contains(got, "UPAT") {
		t.Fatalf("link: %d %s", status, got)
	}
	if code := press("toolplane_approve"); code != http.StatusOK {
		t.Fatalf("press answered %d", code)
	}
	_, up := wait("/api/chat.update", at+1)
	if raw, _ := json.Marshal(up); !strings.Contains(string(raw), "pat@example.com") {
		t.Errorf("the update does not say who decided: %s", raw)
	}
	if _, got := getAs(t, r.base+"/v1/approvals/"+url.PathEscape(id), r.admin); !strings.Contains(got, `"status":"approved"`) {
		t.Errorf("after the linked press: %s", got)
	}
	// An unsigned press reaches nothing.
	req, _ := http.NewRequest(http.MethodPost, r.base+"/slack/interactivity/"+ch.Channel.Org+"/"+ch.Channel.ID, strings.NewReader("payload=%7B%7D"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unsigned press answered %d", resp.StatusCode)
	}
}

// getAs GETs u with key.
func getAs(t *testing.T, u, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
