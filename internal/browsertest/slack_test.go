package browsertest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSlack is a local stand-in for Slack's side of an incoming-webhook
// channel: the webhook messages are posted to and the response_url
// presses are answered at. It records every request it is sent.
type fakeSlack struct {
	*httptest.Server
	mu   sync.Mutex
	sent []slackCall
}

// slackCall is one request the fake received.
type slackCall struct {
	path string
	body map[string]any
	raw  string
}

func newFakeSlack(t *testing.T) *fakeSlack {
	t.Helper()
	f := &fakeSlack{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		f.mu.Lock()
		f.sent = append(f.sent, slackCall{path: r.URL.Path, body: body, raw: string(raw)})
		f.mu.Unlock()
		// Slack answers an incoming webhook and a response_url with a
		// plain "ok".
		io.WriteString(w, "ok")
	}))
	t.Cleanup(f.Close)
	return f
}

// wait answers the first request to path that satisfies ok, within
// stepTimeout.
func (f *fakeSlack) wait(t *testing.T, what, path string, ok func(slackCall) bool) slackCall {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		f.mu.Lock()
		for _, c := range f.sent {
			if c.path == path && ok(c) {
				f.mu.Unlock()
				return c
			}
		}
		seen := make([]string, len(f.sent))
		for i, c := range f.sent {
			seen[i] = c.path
		}
		f.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("%s: Slack was sent nothing at %s within %v (it was sent %q)", what, path, stepTimeout, seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// count answers how many requests to path the fake received.
func (f *fakeSlack) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.sent {
		if c.path == path {
			n++
		}
	}
	return n
}

// slackPress answers the form body Slack POSTs when account user of
// workspace team presses the button action of approval id on a message
// posted through an incoming webhook, its reply to go to responseURL.
func slackPress(team, user, action, id, responseURL string) []byte {
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "team": map[string]any{"id": team, "domain": "shop"}, "user": map[string]any{"id": user, "team_id": team},
		"api_app_id": "A0TOOLPLANE", "trigger_id": "1.2.3",
		"container":    map[string]any{"type": "message", "message_ts": "1700000000.000100", "channel_id": "C0APPROVALS", "is_ephemeral": false},
		"channel":      map[string]any{"id": "C0APPROVALS", "name": "approvals"},
		"message":      map[string]any{"type": "message", "ts": "1700000000.000100"},
		"response_url": responseURL,
		"actions":      []any{map[string]any{"type": "button", "action_id": action, "block_id": "b1", "value": id, "action_ts": "1700000001.000200"}},
	})
	return []byte(url.Values{"payload": {string(p)}}.Encode())
}

// postPress POSTs body to the interactivity endpoint at, signed as Slack
// signs a request: X-Slack-Signature is "v0=" and the hex HMAC-SHA256,
// under the signing secret, of "v0:{timestamp}:{body}". It answers the
// status.
func postPress(t *testing.T, at, signing string, ts time.Time, body []byte) int {
	t.Helper()
	stamp := strconv.FormatInt(ts.Unix(), 10)
	m := hmac.New(sha256.New, []byte(signing))
	m.Write([]byte("v0:" + stamp + ":"))
	m.Write(body)
	ctx, cancel := context.WithTimeout(t.Context(), stepTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, at, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", stamp)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("press: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// cli runs the toolplane binary as a client of s with key, env added
// (NAME=VALUE), and answers what it printed; it fails the test unless
// the command succeeds.
func (s *server) cli(t *testing.T, key string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), stepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	home := t.TempDir() // no config file of the host's is read
	cmd.Env = append(append(cleanEnv(), "HOME="+home, "XDG_CONFIG_HOME="+home, "TOOLPLANE_SERVER="+s.base, "TOOLPLANE_KEY="+key), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolplane %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// An approval answered from Slack, end to end against the built binary:
// an administrator adds the finance group's Slack channel (an incoming
// webhook, here a local fake, with the app's signing secret); an agent's
// wire waits for the finance group and its message reaches Slack with
// Approve and Reject buttons. A forged press (another secret, a stale
// timestamp) is refused. A press from an account not linked decides
// nothing and tells its presser, alone, how to link; the person links it
// with their own key, and their next press decides: the message is
// rewritten through the press's response_url to name the decision and
// who made it. The console, on each of sweepScreens (a phone's 390 px, a
// desktop's 1280 px, light and dark), shows the decision by that person, that it came from Slack, and that
// the wire then ran; no page scrolls sideways, breaks its
// Content-Security-Policy or has a serious accessibility violation.
func TestSlackApprovalEndToEnd(t *testing.T) {
	t.Parallel()
	axe := axeSource(t)
	const (
		signing = "8f742231b10e8888abcd99yyyzzz85a5" // as Slack shows an app's signing secret
		team    = "T0SHOP"
		user    = "U0PAT"
	)
	fake := newFakeSlack(t)
	s := startShopEnv(t, "Wire money to a supplier.", nil,
		"--notify-allow-cidr", "127.0.0.0/8", "--slack-hooks", fake.URL+"/hooks/")
	shots := screenshotDir(t)

	// 1. The administrator adds the finance group's Slack channel, its
	// webhook URL and signing secret given through the environment.
	hook := "/services/T0SHOP/B0HOOK/xoxhooksecretpath"
	out := s.cli(t, s.admin, []string{"SLACK_URL=" + fake.URL + hook, "SLACK_SIGNING_SECRET=" + signing},
		"notifications", "channels", "add", "--name", "finance-slack", "--group", "finance", "--kind", "slack",
		"--slack-team", team, "--slack-url-env", "SLACK_URL", "--slack-signing-secret-env", "SLACK_SIGNING_SECRET", "-o", "json")
	if strings.Contains(out, signing) || strings.Contains(out, "xoxhooksecretpath") {
		t.Errorf("adding the channel printed a secret: %s", out)
	}
	var added struct {
		Channel struct {
			ID  string `json:"id"`
			Org string `json:"organization_id"`
		} `json:"channel"`
	}
	if err := json.Unmarshal([]byte(out), &added); err != nil || added.Channel.ID == "" || added.Channel.Org == "" {
		t.Fatalf("the channel added: %v in %s", err, out)
	}
	interactivity := s.base + "/slack/interactivity/" + url.PathEscape(added.Channel.Org) + "/" + url.PathEscape(added.Channel.ID)
	pat := s.mint(t, "person", "pat@example.com", "approver", "group:finance")

	// 2. The agent's wire waits for the finance group; its message
	// reaches Slack with the two buttons, each valued with the approval.
	wire := s.call(t, s.agent, "shop.wire", "run-slack", map[string]any{"id": "sup-9", "amount_cents": 480000, "memo": "invoice 2026-201"})
	if wire.Approval == nil {
		t.Fatalf("the wire answered %d %s, want an approval", wire.status, wire.code())
	}
	id := wire.Approval.ID
	msg := fake.wait(t, "the approval's message", hook, func(c slackCall) bool { return strings.Contains(c.raw, id) })
	buttons := map[string]string{}
	blocks, _ := msg.body["blocks"].([]any)
	for _, b := range blocks {
		if bm, _ := b.(map[string]any); bm["type"] == "actions" {
			els, _ := bm["elements"].([]any)
			for _, e := range els {
				el, _ := e.(map[string]any)
				action, _ := el["action_id"].(string)
				value, _ := el["value"].(string)
				buttons[action] = value
			}
		}
	}
	if buttons["toolplane_approve"] != id || buttons["toolplane_reject"] != id {
		t.Fatalf("the message's buttons are %v, want toolplane_approve and toolplane_reject valued %s:\n%s", buttons, id, msg.raw)
	}
	pending := func(what string) {
		t.Helper()
		if a := s.must(t, "GET", "/v1/approvals/"+id, s.admin, "", http.StatusOK); a["status"] != "pending" {
			t.Fatalf("%s decided the approval: %v", what, a["status"])
		}
	}

	// A press signed with another secret, and one whose timestamp is six
	// minutes old, are refused, and decide nothing.
	forged := slackPress(team, user, "toolplane_approve", id, fake.URL+"/hooks/actions/forged")
	if got := postPress(t, interactivity, "another-signing-secret-0000", time.Now(), forged); got != http.StatusUnauthorized {
		t.Errorf("a press signed with another secret answered %d, want 401", got)
	}
	if got := postPress(t, interactivity, signing, time.Now().Add(-6*time.Minute), forged); got != http.StatusUnauthorized {
		t.Errorf("a press with a stale timestamp answered %d, want 401", got)
	}
	pending("a forged press")

	// 3. The person presses Approve before linking their account: nothing
	// is decided, and Slack shows them alone how to link it.
	first := "/hooks/actions/T0SHOP/1/first"
	if got := postPress(t, interactivity, signing, time.Now(), slackPress(team, user, "toolplane_approve", id, fake.URL+first)); got != http.StatusOK {
		t.Fatalf("the unlinked press answered %d, want 200", got)
	}
	told := fake.wait(t, "the unlinked presser told how to link", first, func(slackCall) bool { return true })
	text, _ := told.body["text"].(string)
	code := regexp.MustCompile("`toolplane slack link ([^`\\s]+)`").FindStringSubmatch(text)
	if told.body["response_type"] != "ephemeral" || told.body["replace_original"] != false || !strings.Contains(text, "not linked") || code == nil {
		t.Fatalf("the unlinked presser was told %s, want an ephemeral answer naming `toolplane slack link CODE`", told.raw)
	}
	pending("the unlinked press")

	// 4. The person links their own account with their own key.
	s.cli(t, pat, nil, "slack", "link", code[1])
	links := s.must(t, "GET", "/v1/slack/links", pat, "", http.StatusOK)
	if raw, _ := json.Marshal(links); !strings.Contains(string(raw), user) || !strings.Contains(string(raw), "pat@example.com") {
		t.Errorf("pat's links after linking: %s", raw)
	}

	// 5. The press again decides, as pat; the message is rewritten
	// through its response_url to name the decision, without buttons.
	second := "/hooks/actions/T0SHOP/2/second"
	if got := postPress(t, interactivity, signing, time.Now(), slackPress(team, user, "toolplane_approve", id, fake.URL+second)); got != http.StatusOK {
		t.Fatalf("the linked press answered %d, want 200", got)
	}
	// Who decided is read in the console below; the REST view says how
	// it stands.
	if a := s.must(t, "GET", "/v1/approvals/"+id, s.admin, "", http.StatusOK); a["status"] != "approved" {
		t.Fatalf("after pat's press the approval is %v, want approved", a["status"])
	}
	updated := fake.wait(t, "the message rewritten", second, func(slackCall) bool { return true })
	if updated.body["replace_original"] != true || !strings.Contains(updated.raw, "approved") || !strings.Contains(updated.raw, "pat@example.com") ||
		strings.Contains(updated.raw, "toolplane_approve") {
		t.Errorf("the message was rewritten as %s, want it to name the approval by pat@example.com, without buttons", updated.raw)
	}
	// The approved wire runs in the background.
	pollREST(t, "the approved wire to run", func() bool {
		v := s.must(t, "GET", "/v1/audit/events?run_id=run-slack&tool=shop.wire&outcome=ok", s.admin, "", http.StatusOK)
		items, _ := v["items"].([]any)
		return len(items) > 0
	})
	if n := fake.count(hook); n < 1 {
		t.Errorf("the channel's webhook was sent %d messages", n)
	}

	// 6. The console shows pat's decision, from Slack, and what the wire
	// did, on a phone and on a desktop.
	b := newBrowser(t)
	page := s.base + "/console/approvals/" + id
	b.signIn(t, page, pat, "p.decision")
	card := fmt.Sprintf(`article.card:has(a[href$=%s])`, jsString("/approvals/"+id))
	for _, sc := range sweepScreens {
		b.useScreen(t, sc)

		what := "the approval answered from Slack at " + sc.name
		b.open(t, page, "p.decision")
		decision := b.text(t, "p.decision")
		for _, want := range []string{"approved by pat@example.com", "answered in Slack", user, team} {
			if !strings.Contains(decision, want) {
				t.Errorf("%s: the decision reads %q, want it to say %q", what, decision, want)
			}
		}
		if got := b.text(t, "p.outcome"); !strings.Contains(got, "the approved call ran and answered ok") {
			t.Errorf("%s: the outcome reads %q, want the wire ran ok", what, got)
		}
		if eval[bool](t, b, `!!document.querySelector("#reason, button[name=decision]")`) {
			t.Errorf("%s: a decided approval offers a decision", what)
		}
		b.checkCSP(t)
		b.checkOverflow(t, what, sc.width)
		b.checkAxe(t, axe, what)
		b.screenshot(t, shots, "console-"+sc.name+"-slack-approval")

		what = "the approved list at " + sc.name
		b.open(t, s.base+"/console/approvals?status=approved&q="+url.QueryEscape(id), "main")
		b.waitFor(t, what+" lists the wire", fmt.Sprintf(`document.querySelector(%s)`, jsString(card)))
		got := b.text(t, card)
		for _, want := range []string{"shop.wire", "approved by pat@example.com", "answered in Slack", "Then: executed ok"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: the wire's card lacks %q:\n%s", what, want, got)
			}
		}
		b.checkCSP(t)
		b.checkOverflow(t, what, sc.width)
		b.checkAxe(t, axe, what)
		b.screenshot(t, shots, "console-"+sc.name+"-slack-approved")
	}
}
