package notify_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/webhook"
)

// receiver is a webhook endpoint that checks every request as a careful
// receiver does: the signature, a five-minute window, and a delivery seen
// once.
type receiver struct {
	key []byte
	mu  sync.Mutex
	// now is the receiver's clock; a test moves it to replay late.
	now      time.Time
	seen     map[string]bool
	got      []notify.Payload
	refused  []string
	captured []*capturedRequest
}

type capturedRequest struct {
	header http.Header
	body   []byte
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.captured = append(r.captured, &capturedRequest{header: req.Header.Clone(), body: body})
	now := r.now
	if now.IsZero() {
		now = time.Now()
	}
	if err := webhook.Check([][]byte{r.key}, req.Header.Get(webhook.HeaderTimestamp), req.Header.Get(webhook.HeaderSignature), body, now, 5*time.Minute); err != nil {
		r.refused = append(r.refused, err.Error())
		http.Error(w, "refused", http.StatusUnauthorized)
		return
	}
	id := req.Header.Get(webhook.HeaderDelivery) + "|" + req.Header.Get(webhook.HeaderTimestamp)
	if r.seen[id] {
		r.refused = append(r.refused, "replay")
		http.Error(w, "replay", http.StatusConflict)
		return
	}
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	r.seen[id] = true
	var p notify.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	r.got = append(r.got, p)
}

func TestWebhookSignedAndReplayRefused(t *testing.T) {
	t.Parallel()
	s, st := newService(t)
	rcv := &receiver{key: []byte(hmacKey)}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	ch, err := s.Create(t.Context(), notify.NewChannel{Name: "hook", Kind: toolplane.ChannelWebhook,
		Config: toolplane.ChannelConfig{URL: srv.URL}, Secrets: toolplane.ChannelSecrets{HMACKey: hmacKey}}, admin)
	if err != nil {
		t.Fatal(err)
	}
	a := fileApproval(t, st, "")
	ds, err := s.ForApproval(t.Context(), a, notify.ApprovalFiled)
	if err != nil || len(ds) != 1 || ds[0].Channel != ch.ID {
		t.Fatalf("ForApproval = %v, %v; want one delivery on %s", ds, err, ch.ID)
	}
	if err := s.Send(t.Context(), ds[0], 1); err != nil {
		t.Fatal(err)
	}
	if len(rcv.got) != 1 {
		t.Fatalf("receiver accepted %d, refused %v", len(rcv.got), rcv.refused)
	}
	p := rcv.got[0]
	if p.Event != notify.ApprovalFiled || p.Approval == nil || p.Approval.ID != a.ID || p.Approval.AgentID != "agent-billing" ||
		p.Approval.UserID != "ada@example.com" || p.Approval.Rule != "refunds" || p.Approval.ToolVersion != "1.2.0" {
		t.Errorf("payload lacks context: %+v", p.Approval)
	}
	if bytes.Contains(p.Approval.Arguments, []byte("sk_live_")) {
		t.Errorf("arguments show the credential: %s", p.Approval.Arguments)
	}
	if !strings.HasPrefix(p.Link, "https://toolplane.example/console/approvals/"+a.ID+"?link=") {
		t.Errorf("link = %q", p.Link)
	}
	if d, err := st.GetDelivery(t.Context(), "org-1", string(notify.ApprovalFiled), a.ID, ch.ID); err != nil || d.State != toolplane.DeliveryDelivered {
		t.Errorf("delivery recorded %+v, %v", d, err)
	}

	// The captured request sent again: refused as a repeat at once, and
	// as too old once the window has passed.
	req := rcv.captured[0]
	replay := func() int {
		r, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(req.body))
		r.Header = req.header.Clone()
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := replay(); code != http.StatusConflict {
		t.Errorf("immediate replay answered %d, want 409", code)
	}
	rcv.mu.Lock()
	rcv.now, rcv.seen = time.Now().Add(6*time.Minute), nil
	rcv.mu.Unlock()
	if code := replay(); code != http.StatusUnauthorized {
		t.Errorf("late replay answered %d, want 401", code)
	}
	// A forged body under the captured signature is refused.
	req.body = bytes.Replace(req.body, []byte("refund_order"), []byte("refund_ALL"), 1)
	rcv.mu.Lock()
	rcv.now = time.Time{}
	rcv.mu.Unlock()
	if code := replay(); code != http.StatusUnauthorized {
		t.Errorf("altered body answered %d, want 401", code)
	}
}

func TestSlackMessageShapeAndEscaping(t *testing.T) {
	t.Parallel()
	s, st := newService(t)
	var got map[string]any
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		if r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want json", http.StatusBadRequest)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	slackURL := srv.URL + "/services/T000/B000/XXXXSECRETXXXX"
	if _, err := s.Create(t.Context(), notify.NewChannel{Name: "slack", Group: "finance", Kind: toolplane.ChannelSlack,
		Secrets: toolplane.ChannelSecrets{SlackURL: toolplane.SecretString(slackURL)}}, admin); err != nil {
		t.Fatal(err)
	}
	a := fileApproval(t, st, "finance")
	ds, err := s.ForApproval(t.Context(), a, notify.ApprovalFiled)
	if err != nil || len(ds) != 1 {
		t.Fatalf("ForApproval = %v, %v", ds, err)
	}
	if err := s.Send(t.Context(), ds[0], 1); err != nil {
		t.Fatal(err)
	}
	if path != "/services/T000/B000/XXXXSECRETXXXX" {
		t.Errorf("posted to %q", path)
	}
	text, _ := got["text"].(string)
	blocks, _ := got["blocks"].([]any)
	if text == "" || len(blocks) != 3 {
		t.Fatalf("message = %v, want text and header, section, actions blocks", got)
	}
	kinds := []string{}
	for _, b := range blocks {
		kinds = append(kinds, b.(map[string]any)["type"].(string))
	}
	if strings.Join(kinds, ",") != "header,section,actions" {
		t.Errorf("blocks %v", kinds)
	}
	section := blocks[1].(map[string]any)["text"].(map[string]any)["text"].(string)
	if strings.Contains(section, "<http://evil") || strings.Contains(section, "`x`") {
		t.Errorf("outside text is live mrkdwn: %s", section)
	}
	if !strings.Contains(section, "&lt;http://evil.example|click me&gt;") {
		t.Errorf("preview not shown escaped: %s", section)
	}
}

func TestChannelSecretsNeverShown(t *testing.T) {
	t.Parallel()
	s, st := newService(t)
	slackURL := "https://hooks.slack.example/services/T/B/slack-secret-path"
	for _, n := range []notify.NewChannel{
		{Name: "hook", Kind: toolplane.ChannelWebhook, Config: toolplane.ChannelConfig{URL: "https://hooks.example/x"},
			Secrets: toolplane.ChannelSecrets{HMACKey: hmacKey}},
		{Name: "slack", Kind: toolplane.ChannelSlack, Secrets: toolplane.ChannelSecrets{SlackURL: toolplane.SecretString(slackURL)}},
		{Name: "mail", Kind: toolplane.ChannelEmail, Config: toolplane.ChannelConfig{Host: "smtp.example", Port: 587,
			From: "tp@example.com", To: []string{"ops@example.com"}, Username: "tp"}, Secrets: toolplane.ChannelSecrets{Password: password}},
	} {
		created, err := s.Create(t.Context(), n, admin)
		if err != nil {
			t.Fatal(err)
		}
		if len(created.SecretsSet) != 1 {
			t.Errorf("%s: secrets set %v", n.Name, created.SecretsSet)
		}
	}
	list, err := s.List(t.Context(), admin)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(list)
	for _, secret := range []string{hmacKey, "slack-secret-path", password} {
		if bytes.Contains(out, []byte(secret)) {
			t.Errorf("listing shows a secret: %s", out)
		}
		// Nor is it stored in clear.
		cs, _ := st.ListNotificationChannels(t.Context(), "org-1")
		for _, c := range cs {
			if bytes.Contains(c.Secret, []byte(secret)) {
				t.Errorf("channel %s stores a secret in clear", c.Name)
			}
		}
	}
	if _, err := json.Marshal(toolplane.ChannelSecrets{HMACKey: hmacKey}); err != nil {
		t.Fatal(err)
	}
	// A Slack endpoint that fails: its error names no URL.
	a := fileApproval(t, st, "")
	ds, _ := s.ForApproval(t.Context(), a, notify.ApprovalFiled)
	for _, d := range ds {
		err := s.Send(t.Context(), d, 1)
		if err == nil {
			continue
		}
		if strings.Contains(err.Error(), "slack-secret-path") || strings.Contains(err.Error(), password) {
			t.Errorf("delivery error shows a secret: %v", err)
		}
		if _, err := s.Dead(t.Context(), d, 1, err); err != nil {
			t.Fatal(err)
		}
	}
	dead, err := s.DeadLetters(t.Context(), 100, admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 3 {
		t.Errorf("dead letters = %d, want 3", len(dead))
	}
	out, _ = json.Marshal(dead)
	for _, secret := range []string{hmacKey, "slack-secret-path", password} {
		if bytes.Contains(out, []byte(secret)) {
			t.Errorf("dead letters show a secret: %s", out)
		}
	}
}

func TestConfigureNeedsPlatformAdmin(t *testing.T) {
	t.Parallel()
	s, _ := newService(t)
	approver := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "bob", Roles: []string{toolplane.RoleApprover}}
	agent := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent", Roles: []string{toolplane.RolePlatformAdmin}}
	n := notify.NewChannel{Name: "hook", Kind: toolplane.ChannelWebhook, Config: toolplane.ChannelConfig{URL: "https://hooks.example/x"},
		Secrets: toolplane.ChannelSecrets{HMACKey: hmacKey}}
	for _, by := range []*toolplane.Credential{approver, agent, nil} {
		if _, err := s.Create(t.Context(), n, by); !errors.Is(err, toolplane.ErrForbidden) {
			t.Errorf("Create by %v = %v, want forbidden", by, err)
		}
		if _, err := s.List(t.Context(), by); !errors.Is(err, toolplane.ErrForbidden) {
			t.Errorf("List by %v = %v, want forbidden", by, err)
		}
	}
	for _, bad := range []notify.NewChannel{
		{Name: "", Kind: toolplane.ChannelWebhook},
		{Name: "short key", Kind: toolplane.ChannelWebhook, Config: toolplane.ChannelConfig{URL: "https://x.example"}, Secrets: toolplane.ChannelSecrets{HMACKey: "short"}},
		{Name: "slack in clear", Kind: toolplane.ChannelSlack, Config: toolplane.ChannelConfig{URL: "https://hooks.slack.com/x"}, Secrets: toolplane.ChannelSecrets{SlackURL: "https://hooks.slack.com/x"}},
		{Name: "insecure remote", Kind: toolplane.ChannelEmail, Config: toolplane.ChannelConfig{Host: "smtp.example", Port: 25, From: "a@example.com", To: []string{"b@example.com"}, Insecure: true}},
		{Name: "header in to", Kind: toolplane.ChannelEmail, Config: toolplane.ChannelConfig{Host: "smtp.example", Port: 25, From: "a@example.com", To: []string{"b@example.com\r\nBcc: c@example.com"}}},
		{Name: "no such secondary", Kind: toolplane.ChannelWebhook, Config: toolplane.ChannelConfig{URL: "https://x.example"}, Secrets: toolplane.ChannelSecrets{HMACKey: hmacKey}, Secondary: "nch_missing"},
	} {
		if _, err := s.Create(t.Context(), bad, admin); !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("Create(%s) = %v, want invalid", bad.Name, err)
		}
	}
}

func TestGroupChannelsElseDefault(t *testing.T) {
	t.Parallel()
	s, st := newService(t)
	mk := func(name, group string) string {
		c, err := s.Create(t.Context(), notify.NewChannel{Name: name, Group: group, Kind: toolplane.ChannelWebhook,
			Config: toolplane.ChannelConfig{URL: "https://hooks.example/" + name}, Secrets: toolplane.ChannelSecrets{HMACKey: hmacKey}}, admin)
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	dflt, fin := mk("default", ""), mk("finance", "finance")
	for _, tt := range []struct{ group, want string }{{"finance", fin}, {"legal", dflt}, {"", dflt}} {
		a := fileApproval(t, st, tt.group)
		ds, err := s.ForApproval(t.Context(), a, notify.ApprovalFiled)
		if err != nil || len(ds) != 1 || ds[0].Channel != tt.want {
			t.Errorf("group %q: deliveries %v, %v; want on %s", tt.group, ds, err, tt.want)
		}
	}
}

// TestUncertainCallSettledBeforeItsNotification: an uncertain call's
// notification is built from its claim when it is sent. Sent while the
// claim is uncertain, it shows the arguments (redacted) and says so; sent
// again (a retry) after the claim was completed, whose stored form keeps
// no arguments, it says the call is completed rather than showing an
// uncertain call with nothing asked.
func TestUncertainCallSettledBeforeItsNotification(t *testing.T) {
	t.Parallel()
	s, st := newService(t)
	rcv := &receiver{key: []byte(hmacKey)}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	if _, err := s.Create(t.Context(), notify.NewChannel{Name: "hook", Kind: toolplane.ChannelWebhook,
		Config: toolplane.ChannelConfig{URL: srv.URL}, Secrets: toolplane.ChannelSecrets{HMACKey: hmacKey}}, admin); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c := &toolplane.Claim{OrganizationID: "org-1", Tool: "payments.refund_order", Key: "k-1", RequestHash: "h",
		Status: toolplane.ClaimUncertain, Dispatched: true, Attempts: 1, RunID: "run-1", StepPath: "s/1",
		Arguments: []byte(`{"order":"ord_1","api_key":"sk_live_abcdefghijklmnop"}`), Reason: "the answer was lost",
		CreatedAt: now, UpdatedAt: now}
	if ok, err := st.InsertClaim(t.Context(), c); err != nil || !ok {
		t.Fatalf("InsertClaim = %v, %v", ok, err)
	}
	ds, err := s.ForClaim(t.Context(), c)
	if err != nil || len(ds) != 1 {
		t.Fatalf("ForClaim = %v, %v; want one delivery", ds, err)
	}
	if err := s.Send(t.Context(), ds[0], 1); err != nil {
		t.Fatal(err)
	}
	c.Status, c.Result, c.Arguments, c.Invocation = toolplane.ClaimCompleted, []byte(`{"ok":true}`), nil, nil
	if ok, err := st.UpdateClaim(t.Context(), c); err != nil || !ok {
		t.Fatalf("UpdateClaim = %v, %v", ok, err)
	}
	// The retry may fall in the same second as the first send, which the
	// receiver would take for a replay; this test is about what it says.
	rcv.mu.Lock()
	rcv.seen = nil
	rcv.mu.Unlock()
	if err := s.Send(t.Context(), ds[0], 2); err != nil {
		t.Fatal(err)
	}
	if len(rcv.got) != 2 {
		t.Fatalf("the receiver got %d notifications, want 2 (refused: %v)", len(rcv.got), rcv.refused)
	}
	first, second := rcv.got[0].Call, rcv.got[1].Call
	if first == nil || first.Status != "uncertain" || !strings.Contains(string(first.Arguments), "ord_1") || strings.Contains(string(first.Arguments), "sk_live") {
		t.Errorf("sent while uncertain: %+v, want status uncertain and the arguments, redacted", first)
	}
	if second == nil || second.Status != "completed" || len(second.Arguments) != 0 {
		t.Errorf("sent after completion: %+v, want status completed and no arguments", second)
	}
}
