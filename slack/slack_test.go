package slack_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/canonical"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/slack"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// The secrets the tests configure: neither may show in a log line or an
// answer.
const (
	signing  = "8f742231b10e8888abcd99yyyzzz85a5"
	botToken = "xoxb-1234-5678-bot-token-never-shown"
)

// call is one request the fake Slack received.
type call struct {
	path, auth string
	body       map[string]any
}

// fakeSlack is a local Slack: chat.postMessage, chat.update and the
// response_urls under /hooks/, each recorded.
type fakeSlack struct {
	*httptest.Server
	mu    sync.Mutex
	calls []call
}

func newFakeSlack(t testing.TB) *fakeSlack {
	f := &fakeSlack{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, "want JSON", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.calls = append(f.calls, call{path: r.URL.Path, auth: r.Header.Get("Authorization"), body: body})
		f.mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/"):
			if r.Header.Get("Authorization") != "Bearer "+botToken {
				io.WriteString(w, `{"ok":false,"error":"invalid_auth"}`)
				return
			}
			io.WriteString(w, `{"ok":true,"channel":"C0APPROVE","ts":"1700000000.000100"}`)
		case strings.HasPrefix(r.URL.Path, "/hooks/"):
			io.WriteString(w, "ok")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeSlack) take() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

// world is a server's Slack side over a real store: org-1 has a Slack
// channel with a bot token; org-2 has approvals of its own.
type world struct {
	st      *sqlite.Store
	notes   *notify.Service
	svc     *slack.Service
	mux     *http.ServeMux
	slack   *fakeSlack
	channel string
	now     time.Time
	logs    *bytes.Buffer
}

// decider is the approval service's Resolve, as the invoker calls it.
type decider struct{ svc *approval.Service }

func (d decider) Resolve(ctx context.Context, id string, dec approval.Decision, by *toolplane.Credential) (*toolplane.Approval, error) {
	return d.svc.Resolve(ctx, id, dec, by, nil)
}

func keyring(t testing.TB) *secret.Keyring {
	b := make([]byte, secret.KeySize)
	rand.Read(b)
	k, err := secret.ParseKeyring("k1 " + base64.StdEncoding.EncodeToString(b))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var admin = &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "root@example.com",
	Roles: []string{toolplane.RolePlatformAdmin}}

func newWorld(t *testing.T) *world { return newWorldTB(t) }

func newWorldTB(t testing.TB) *world {
	t.Helper()
	w := &world{st: sqlitetest.New(t), slack: newFakeSlack(t), now: time.Now(), logs: &bytes.Buffer{}}
	keys := keyring(t)
	var err error
	w.notes, err = notify.New(notify.Config{Store: w.st, Keys: keys, PublicURL: "https://toolplane.example",
		AllowCIDRs: []string{"127.0.0.0/8"}, SlackAPI: w.slack.URL + "/api", SlackHooks: w.slack.URL + "/hooks/"})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := w.notes.Create(t.Context(), notify.NewChannel{Name: "slack", Kind: toolplane.ChannelSlack,
		Config:  toolplane.ChannelConfig{SlackChannel: "C0APPROVE", SlackTeam: "T1"},
		Secrets: toolplane.ChannelSecrets{SlackBotToken: botToken, SlackSigningSecret: signing}}, admin)
	if err != nil {
		t.Fatal(err)
	}
	w.channel = ch.ID
	var mu sync.Mutex
	w.svc, err = slack.New(slack.Config{Store: w.st, Keys: keys, Channels: w.notes,
		Decider: decider{approval.New(approval.Config{Store: w.st})},
		Logger:  slogTo(w.logs, &mu)})
	if err != nil {
		t.Fatal(err)
	}
	w.mux = http.NewServeMux()
	w.mux.Handle(slack.Route, w.svc.Handler())
	// People: alice and bob approve for finance, carol for ops; dave is
	// org-2's. Each Slack account is linked to its person's key.
	for _, p := range []struct{ org, id, subject, user, group string }{
		{"org-1", "tpk_alice", "alice@example.com", "UALICE", "finance"},
		{"org-1", "tpk_bob", "bob@example.com", "UBOB", "finance"},
		{"org-1", "tpk_carol", "carol@example.com", "UCAROL", "ops"},
		{"org-2", "tpk_dave", "dave@example.com", "UDAVE", "finance"},
	} {
		if err := w.st.InsertCredential(t.Context(), &toolplane.Credential{ID: p.id, OrganizationID: p.org, Kind: toolplane.CredentialPerson,
			Subject: p.subject, Roles: []string{toolplane.RoleApprover, toolplane.GroupRolePrefix + p.group}, Hash: []byte("x"),
			CreatedAt: w.now, Version: 1}); err != nil {
			t.Fatal(err)
		}
		if err := w.st.PutSlackLink(t.Context(), &toolplane.SlackLink{OrganizationID: p.org, Team: "T1", User: p.user,
			CredentialID: p.id, Subject: p.subject, Channel: w.channel, CreatedAt: w.now}, linkEvent(p.org)); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// file stores a pending approval of org for group, needing approvers
// distinct people (0: one).
func (w *world) file(t testing.TB, org, group string, approvers int) *toolplane.Approval {
	t.Helper()
	args := []byte(`{"order":"ord_1"}`)
	hash, err := canonical.HashJSON(args)
	if err != nil {
		t.Fatal(err)
	}
	a := &toolplane.Approval{ID: toolplane.NewID("apr_"), OrganizationID: org, RunID: "run-1", StepPath: "s/1",
		Tool: "payments.refund_order", Key: "k-" + rand.Text(), ArgumentsHash: hash, Arguments: args,
		Invocation:  []byte(`{"AgentID":"agent-billing","UserID":"ada@example.com","RunID":"run-1"}`),
		PrincipalID: "agent-billing", Status: toolplane.ApprovalPending, DefaultOnTimeout: "deny", ApproverGroup: group,
		Approvers: approvers, ExpiresAt: w.now.Add(time.Hour), CreatedAt: w.now, Version: 1}
	if err := w.st.InsertApproval(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	return a
}

// press is a block_actions form body as Slack sends it.
func (w *world) press(team, user, action, value string) []byte {
	p := map[string]any{
		"type": "block_actions", "team": map[string]any{"id": team, "domain": "example"},
		"user":      map[string]any{"id": user, "username": "someone"},
		"actions":   []any{map[string]any{"action_id": action, "value": value, "type": "button"}},
		"container": map[string]any{"type": "message", "channel_id": "C0APPROVE", "message_ts": "1700000000.000100"},
		"channel":   map[string]any{"id": "C0APPROVE"}, "message": map[string]any{"ts": "1700000000.000100"},
		"response_url": w.slack.URL + "/hooks/actions/T1/1/" + rand.Text(),
	}
	b, _ := json.Marshal(p)
	return []byte(url.Values{"payload": {string(b)}}.Encode())
}

// sign answers Slack's headers of body at ts with secret.
func sign(secret string, ts time.Time, body []byte) http.Header {
	s := strconv.FormatInt(ts.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + s + ":"))
	m.Write(body)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", s)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	return h
}

func (w *world) send(t testing.TB, org, channel string, h http.Header, body []byte) int {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/slack/interactivity/"+org+"/"+channel, bytes.NewReader(body))
	r.Header = h
	rec := httptest.NewRecorder()
	w.mux.ServeHTTP(rec, r)
	// What the press sends Slack follows its answer (see Service.Wait).
	w.svc.Wait()
	return rec.Code
}

func (w *world) status(t testing.TB, org, id string) toolplane.ApprovalStatus {
	t.Helper()
	a, err := w.st.GetApproval(t.Context(), org, id)
	if err != nil {
		t.Fatal(err)
	}
	return a.Status
}

// linkEvent answers the audit event a fixture's link is stored with, in
// org.
func linkEvent(org string) *toolplane.AuditEvent {
	by := &toolplane.Credential{OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "fixture@example.com"}
	return toolplane.ControlEvent(by, toolplane.AuditSlack, "linked", "fixture", time.Now())
}
