package slack_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/slack"
)

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func slogTo(b *bytes.Buffer, mu *sync.Mutex) *slog.Logger {
	return slog.New(slog.NewTextHandler(lockedWriter{mu, b}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// ephemeral answers the texts of the ephemeral answers among calls.
func ephemeral(calls []call) []string {
	var out []string
	for _, c := range calls {
		if c.body["response_type"] == "ephemeral" {
			out = append(out, c.body["text"].(string))
		}
	}
	return out
}

func TestApprovalMessageCarriesButtons(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.file(t, "org-1", "finance", 0)
	ds, err := w.notes.ForApproval(t.Context(), a, notify.ApprovalFiled)
	if err != nil || len(ds) != 1 {
		t.Fatalf("ForApproval = %v, %v", ds, err)
	}
	if err := w.notes.Send(t.Context(), ds[0], 1); err != nil {
		t.Fatal(err)
	}
	calls := w.slack.take()
	if len(calls) != 1 || calls[0].path != "/api/chat.postMessage" || calls[0].auth != "Bearer "+botToken {
		t.Fatalf("calls = %+v, want one chat.postMessage with the bot token", calls)
	}
	msg := calls[0].body
	if msg["channel"] != "C0APPROVE" {
		t.Errorf("posted to %v", msg["channel"])
	}
	got := map[string]string{}
	for _, b := range msg["blocks"].([]any) {
		if b.(map[string]any)["type"] != "actions" {
			continue
		}
		for _, e := range b.(map[string]any)["elements"].([]any) {
			el := e.(map[string]any)
			id, _ := el["action_id"].(string)
			v, _ := el["value"].(string)
			got[id] = v
		}
	}
	if got[notify.ActionApprove] != a.ID || got[notify.ActionReject] != a.ID {
		t.Errorf("buttons = %v, want approve and reject valued %s", got, a.ID)
	}
}

func TestPressDecidesAndUpdatesTheMessage(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.file(t, "org-1", "finance", 0)
	body := w.press("T1", "UALICE", notify.ActionApprove, a.ID)
	if code := w.send(t, "org-1", w.channel, sign(signing, time.Now(), body), body); code != http.StatusOK {
		t.Fatalf("press answered %d", code)
	}
	stored, err := w.st.GetApproval(t.Context(), "org-1", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != toolplane.ApprovalApproved || stored.ResolvedBy != "alice@example.com" {
		t.Fatalf("approval %s by %q, want approved by alice", stored.Status, stored.ResolvedBy)
	}
	// The decision says it came from Slack, and from which account.
	if want := slack.Reason("T1", "UALICE"); stored.Reason != want || !strings.Contains(want, "Slack") || !strings.Contains(want, "UALICE") {
		t.Errorf("the decision's reason is %q, want %q naming Slack and the account", stored.Reason, want)
	}
	calls := w.slack.take()
	if len(calls) != 1 || calls[0].path != "/api/chat.update" || calls[0].auth != "Bearer "+botToken {
		t.Fatalf("calls = %+v, want one chat.update", calls)
	}
	up := calls[0].body
	if up["channel"] != "C0APPROVE" || up["ts"] != "1700000000.000100" {
		t.Errorf("updated %v/%v", up["channel"], up["ts"])
	}
	raw, _ := json.Marshal(up["blocks"])
	if !strings.Contains(string(raw), "alice@example.com") || !strings.Contains(string(raw), "approved") {
		t.Errorf("updated message does not say who decided: %s", raw)
	}
	if strings.Contains(string(raw), notify.ActionApprove) {
		t.Errorf("a decided message keeps its buttons: %s", raw)
	}
	// Another press of the decided approval decides nothing, and says so.
	again := w.press("T1", "UBOB", notify.ActionReject, a.ID)
	if code := w.send(t, "org-1", w.channel, sign(signing, time.Now(), again), again); code != http.StatusOK {
		t.Errorf("a press of a decided approval answered %d", code)
	}
	if s := w.status(t, "org-1", a.ID); s != toolplane.ApprovalApproved {
		t.Errorf("after a second press: %s", s)
	}
	if calls := w.slack.take(); len(ephemeral(calls)) != 1 || !strings.Contains(ephemeral(calls)[0], "answered already") {
		t.Errorf("a second press of a decided approval: %+v", calls)
	}
}

func TestPressRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	other := w.file(t, "org-2", "finance", 0)
	huge := bytes.Repeat([]byte("a"), slack.MaxBody+1)
	cases := []struct {
		name string
		// req answers the press's headers and body for approval id.
		req      func(id string) (string, string, http.Header, []byte)
		code     int
		answered string // what the presser alone is told, when anything
		pending  string // "" the approval filed for the case; else org-2's
	}{
		{"bad signature", func(id string) (string, string, http.Header, []byte) {
			b := w.press("T1", "UALICE", notify.ActionApprove, id)
			return "org-1", w.channel, sign("another-signing-secret-000", time.Now(), b), b
		}, http.StatusUnauthorized, "", ""},
		{"body altered after signing", func(id string) (string, string, http.Header, []byte) {
			b := w.press("T1", "UALICE", notify.ActionReject, id)
			h := sign(signing, time.Now(), b)
			return "org-1", w.channel, h, bytes.Replace(b, []byte("reject"), []byte("approve"), 1)
		}, http.StatusUnauthorized, "", ""},
		{"no signature", func(id string) (string, string, http.Header, []byte) {
			b := w.press("T1", "UALICE", notify.ActionApprove, id)
			h := sign(signing, time.Now(), b)
			h.Del("X-Slack-Signature")
			return "org-1", w.channel, h, b
		}, http.StatusUnauthorized, "", ""},
		{"stale timestamp", func(id string) (string, string, http.Header, []byte) {
			b := w.press("T1", "UALICE", notify.ActionApprove, id)
			return "org-1", w.channel, sign(signing, time.Now().Add(-6*time.Minute), b), b
		}, http.StatusUnauthorized, "", ""},
		{"timestamp from the future", func(id string) (string, string, http.Header, []byte) {
			b := w.press("T1", "UALICE", notify.ActionApprove, id)
			return "org-1", w.channel, sign(signing, time.Now().Add(6*time.Minute), b), b
		}, http.StatusUnauthorized, "", ""},
		{"oversized body", func(id string) (string, string, http.Header, []byte) {
			b := append(w.press("T1", "UALICE", notify.ActionApprove, id), append([]byte("&pad="), huge...)...)
			return "org-1", w.channel, sign(signing, time.Now(), b), b
		}, http.StatusRequestEntityTooLarge, "", ""},
		{"channel of another organization", func(id string) (string, string, http.Header, []byte) {
			b := w.press("T1", "UDAVE", notify.ActionApprove, id)
			return "org-2", w.channel, sign(signing, time.Now(), b), b
		}, http.StatusUnauthorized, "", ""},
		{"another workspace", func(id string) (string, string, http.Header, []byte) {
			b := w.press("T2", "UALICE", notify.ActionApprove, id)
			return "org-1", w.channel, sign(signing, time.Now(), b), b
		}, http.StatusForbidden, "", ""},
		{"unlinked user", func(id string) (string, string, http.Header, []byte) {
			b := w.press("T1", "UNOBODY", notify.ActionApprove, id)
			return "org-1", w.channel, sign(signing, time.Now(), b), b
		}, http.StatusOK, "not linked", ""},
		{"other organization's approval id", func(string) (string, string, http.Header, []byte) {
			b := w.press("T1", "UALICE", notify.ActionApprove, other.ID)
			return "org-1", w.channel, sign(signing, time.Now(), b), b
		}, http.StatusOK, "no such approval", "org-2"},
		{"person not in the approver group", func(id string) (string, string, http.Header, []byte) {
			b := w.press("T1", "UCAROL", notify.ActionApprove, id)
			return "org-1", w.channel, sign(signing, time.Now(), b), b
		}, http.StatusOK, "toolplane refused", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := w.file(t, "org-1", "finance", 0)
			org, ch, h, b := c.req(a.ID)
			w.slack.take()
			if code := w.send(t, org, ch, h, b); code != c.code {
				t.Errorf("answered %d, want %d", code, c.code)
			}
			if s := w.status(t, "org-1", a.ID); s != toolplane.ApprovalPending {
				t.Errorf("approval %s, want pending", s)
			}
			if s := w.status(t, "org-2", other.ID); s != toolplane.ApprovalPending {
				t.Errorf("org-2's approval %s, want pending", s)
			}
			calls := w.slack.take()
			texts := ephemeral(calls)
			if c.answered == "" && len(calls) != 0 {
				t.Errorf("Slack was called: %+v", calls)
			}
			if c.answered != "" && (len(calls) != 1 || len(texts) != 1 || !strings.Contains(texts[0], c.answered)) {
				t.Errorf("answers = %q (calls %+v), want one ephemeral saying %q", texts, calls, c.answered)
			}
		})
	}
	if logs := w.logs.String(); strings.Contains(logs, signing) || strings.Contains(logs, botToken) {
		t.Errorf("a secret was logged: %s", logs)
	}
}

func TestReplayRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.file(t, "org-1", "finance", 2)
	body := w.press("T1", "UALICE", notify.ActionApprove, a.ID)
	h := sign(signing, time.Now(), body)
	if code := w.send(t, "org-1", w.channel, h, body); code != http.StatusOK {
		t.Fatalf("press answered %d", code)
	}
	w.slack.take()
	if code := w.send(t, "org-1", w.channel, h.Clone(), body); code != http.StatusUnauthorized {
		t.Errorf("replayed press answered %d, want 401", code)
	}
	if calls := w.slack.take(); len(calls) != 0 {
		t.Errorf("a replay reached Slack: %+v", calls)
	}
	stored, _ := w.st.GetApproval(t.Context(), "org-1", a.ID)
	if len(stored.ApprovedBy) != 1 {
		t.Errorf("approved by %v after a replay, want alice once", stored.ApprovedBy)
	}
}

func TestFourEyesFromSlack(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.file(t, "org-1", "finance", 2)
	press := func(user string) {
		t.Helper()
		b := w.press("T1", user, notify.ActionApprove, a.ID)
		if code := w.send(t, "org-1", w.channel, sign(signing, time.Now(), b), b); code != http.StatusOK {
			t.Fatalf("press of %s answered %d", user, code)
		}
	}
	press("UALICE")
	if s := w.status(t, "org-1", a.ID); s != toolplane.ApprovalPending {
		t.Fatalf("after one of two approvers: %s", s)
	}
	calls := w.slack.take()
	if len(calls) != 1 || calls[0].path != "/api/chat.update" {
		t.Fatalf("calls = %+v, want the message updated", calls)
	}
	raw, _ := json.Marshal(calls[0].body["blocks"])
	if !strings.Contains(string(raw), "1 of 2") || !strings.Contains(string(raw), notify.ActionApprove) {
		t.Errorf("a message waiting for more approvers: %s", raw)
	}
	press("UALICE") // the same person again
	if texts := ephemeral(w.slack.take()); len(texts) != 1 || !strings.Contains(texts[0], "approved this call already") {
		t.Errorf("the same person twice was told %q", texts)
	}
	if s := w.status(t, "org-1", a.ID); s != toolplane.ApprovalPending {
		t.Fatalf("after the same person twice: %s", s)
	}
	press("UBOB")
	stored, _ := w.st.GetApproval(t.Context(), "org-1", a.ID)
	if stored.Status != toolplane.ApprovalApproved || strings.Join(stored.ApprovedBy, ",") != "alice@example.com,bob@example.com" {
		t.Errorf("after two people: %s by %v", stored.Status, stored.ApprovedBy)
	}
}

func TestRevokedKeyDecidesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	cred, err := w.st.GetCredential(t.Context(), "tpk_bob")
	if err != nil {
		t.Fatal(err)
	}
	cred.RevokedAt = time.Now().Add(-time.Second)
	if ok, err := w.st.UpdateCredential(t.Context(), cred); err != nil || !ok {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	a := w.file(t, "org-1", "finance", 0)
	b := w.press("T1", "UBOB", notify.ActionApprove, a.ID)
	if code := w.send(t, "org-1", w.channel, sign(signing, time.Now(), b), b); code != http.StatusOK {
		t.Fatalf("answered %d", code)
	}
	if texts := ephemeral(w.slack.take()); len(texts) != 1 || !strings.Contains(texts[0], "no longer works") {
		t.Errorf("told %q", texts)
	}
	if s := w.status(t, "org-1", a.ID); s != toolplane.ApprovalPending {
		t.Errorf("approval %s", s)
	}
}

var codeInAnswer = regexp.MustCompile("toolplane slack link ([A-Za-z0-9_.-]+)`")

func TestLinkYourOwnAccount(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	erin := &toolplane.Credential{ID: "tpk_erin", OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "erin@example.com",
		Roles: []string{toolplane.RoleApprover, toolplane.GroupRolePrefix + "finance"}, Hash: []byte("x"), CreatedAt: time.Now(), Version: 1}
	if err := w.st.InsertCredential(t.Context(), erin); err != nil {
		t.Fatal(err)
	}
	a := w.file(t, "org-1", "finance", 0)
	b := w.press("T1", "UERIN", notify.ActionReject, a.ID)
	w.send(t, "org-1", w.channel, sign(signing, time.Now(), b), b)
	texts := ephemeral(w.slack.take())
	if len(texts) != 1 {
		t.Fatalf("answers %q", texts)
	}
	m := codeInAnswer.FindStringSubmatch(texts[0])
	if m == nil {
		t.Fatalf("no code in %q", texts[0])
	}
	code := m[1]
	if strings.Contains(w.logs.String(), code) {
		t.Error("the link code was logged")
	}
	dave, _ := w.st.GetCredential(t.Context(), "tpk_dave")
	agent := &toolplane.Credential{ID: "tpk_agent", OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-billing"}
	tampered := code[:len(code)-2] + "AA"
	for _, bad := range []struct {
		name string
		code string
		by   *toolplane.Credential
	}{
		{"another organization's person", code, dave},
		{"an agent's key", code, agent},
		{"a tampered code", tampered, erin},
		{"a token the store does not keep", code, &toolplane.Credential{ID: "oidc:x", OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "erin@example.com"}},
	} {
		if _, err := w.svc.Link(t.Context(), bad.code, bad.by); !errors.Is(err, toolplane.ErrForbidden) {
			t.Errorf("%s linked: %v", bad.name, err)
		}
	}
	l, err := w.svc.Link(t.Context(), code, erin)
	if err != nil {
		t.Fatal(err)
	}
	if l.Team != "T1" || l.User != "UERIN" || l.CredentialID != "tpk_erin" {
		t.Errorf("link = %+v", l)
	}
	if _, err := w.svc.Link(t.Context(), code, erin); !errors.Is(err, slack.ErrCode) {
		t.Errorf("a code used twice: %v", err)
	}
	b = w.press("T1", "UERIN", notify.ActionReject, a.ID)
	w.send(t, "org-1", w.channel, sign(signing, time.Now(), b), b)
	stored, _ := w.st.GetApproval(t.Context(), "org-1", a.ID)
	if stored.Status != toolplane.ApprovalRejected || stored.ResolvedBy != "erin@example.com" {
		t.Errorf("after linking: %s by %q", stored.Status, stored.ResolvedBy)
	}
	// Links are a person's own: carol neither sees nor removes erin's;
	// erin does, and an administrator sees every one.
	carol, _ := w.st.GetCredential(t.Context(), "tpk_carol")
	if ls, err := w.svc.Links(t.Context(), carol); err != nil || len(ls) != 1 || ls[0].Subject != "carol@example.com" {
		t.Errorf("carol's links: %+v, %v", ls, err)
	}
	if ls, err := w.svc.Links(t.Context(), admin); err != nil || len(ls) != 4 {
		t.Errorf("the administrator's links: %d, %v", len(ls), err)
	}
	if err := w.svc.Unlink(t.Context(), "T1", "UERIN", carol); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("carol removed erin's link: %v", err)
	}
	if err := w.svc.Unlink(t.Context(), "T1", "UERIN", erin); err != nil {
		t.Errorf("erin's unlink: %v", err)
	}
	if _, err := w.st.GetSlackLink(t.Context(), "org-1", "T1", "UERIN"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("after unlink: %v", err)
	}
	// The trail says who gave which Slack account their power, and who
	// took it back.
	all, _, err := w.st.ListAudit(t.Context(), "org-1", toolplane.AuditFilter{Kinds: []toolplane.AuditKind{toolplane.AuditSlack}}, "", 20)
	if err != nil {
		t.Fatal(err)
	}
	evs := slices.DeleteFunc(all, func(e toolplane.AuditEvent) bool { return e.Subject != "T1/UERIN" })
	if len(evs) != 2 || evs[0].Outcome != "unlinked" || evs[1].Outcome != "linked" || evs[1].PrincipalID != "erin@example.com" ||
		!strings.Contains(evs[1].Reason, "erin@example.com") || !strings.Contains(evs[1].Reason, w.channel) {
		t.Errorf("the trail's link events: %+v", evs)
	}
}

func TestIncomingWebhookChannelUpdatesThroughResponseURL(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ch, err := w.notes.Create(t.Context(), notify.NewChannel{Name: "slack hook", Group: "hooks", Kind: toolplane.ChannelSlack,
		Secrets: toolplane.ChannelSecrets{SlackURL: toolplane.SecretString(w.slack.URL + "/hooks/services/T1/B1/secret"), SlackSigningSecret: signing}}, admin)
	if err != nil {
		t.Fatal(err)
	}
	// Alice's account linked through this channel (a link is its
	// channel's alone).
	if err := w.st.PutSlackLink(t.Context(), &toolplane.SlackLink{OrganizationID: "org-1", Team: "T1", User: "UALICE",
		CredentialID: "tpk_alice", Subject: "alice@example.com", Channel: ch.ID, CreatedAt: w.now}, linkEvent("org-1")); err != nil {
		t.Fatal(err)
	}
	a := w.file(t, "org-1", "finance", 0)
	b := w.press("T1", "UALICE", notify.ActionReject, a.ID)
	if code := w.send(t, "org-1", ch.ID, sign(signing, time.Now(), b), b); code != http.StatusOK {
		t.Fatalf("answered %d", code)
	}
	calls := w.slack.take()
	if len(calls) != 1 || !strings.HasPrefix(calls[0].path, "/hooks/actions/") || calls[0].body["replace_original"] != true || calls[0].auth != "" {
		t.Fatalf("calls = %+v, want the message replaced through the response_url", calls)
	}
	if s := w.status(t, "org-1", a.ID); s != toolplane.ApprovalRejected {
		t.Errorf("approval %s", s)
	}
}

// TestALinkDecidesThroughItsOwnChannel: an account linked through one of
// the organization's Slack apps decides nothing through another. Whoever
// holds the second app's signing secret (a collaborator of that app, say)
// signs a press as the linked account and is told nothing was decided;
// the approval stays pending.
func TestALinkDecidesThroughItsOwnChannel(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const secondSigning = "5e2d0c9b8a7f6e5d4c3b2a1908f7e6d5"
	second, err := w.notes.Create(t.Context(), notify.NewChannel{Name: "slack-second-app", Kind: toolplane.ChannelSlack,
		Config:  toolplane.ChannelConfig{SlackChannel: "C0OTHER", SlackTeam: "T1"},
		Secrets: toolplane.ChannelSecrets{SlackBotToken: botToken, SlackSigningSecret: secondSigning}}, admin)
	if err != nil {
		t.Fatal(err)
	}
	a := w.file(t, "org-1", "finance", 0)
	b := w.press("T1", "UALICE", notify.ActionApprove, a.ID)
	w.slack.take()
	if code := w.send(t, "org-1", second.ID, sign(secondSigning, time.Now(), b), b); code != http.StatusOK {
		t.Fatalf("the press through the second app answered %d", code)
	}
	if s := w.status(t, "org-1", a.ID); s != toolplane.ApprovalPending {
		t.Fatalf("a press through another app than the link's decided: %s", s)
	}
	if texts := ephemeral(w.slack.take()); len(texts) != 1 || !strings.Contains(texts[0], "another of the organization's Slack apps") {
		t.Errorf("the presser was told %q", texts)
	}
	// Through the link's own channel the same account decides.
	b = w.press("T1", "UALICE", notify.ActionApprove, a.ID)
	if code := w.send(t, "org-1", w.channel, sign(signing, time.Now(), b), b); code != http.StatusOK {
		t.Fatalf("the press through the link's channel answered %d", code)
	}
	if s := w.status(t, "org-1", a.ID); s != toolplane.ApprovalApproved {
		t.Errorf("the press through the link's own channel left the approval %s", s)
	}
}
