package notify_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/notify"
)

// A filed anomaly item is told on the organization's default channels:
// the webhook receives the item's agent, tool, signal, what was observed
// and the baseline, and a link to the console's page; Slack's message
// escapes the agent's name.
func TestAnomalyFiledIsTold(t *testing.T) {
	t.Parallel()
	s, st := newService(t)
	rcv := &receiver{key: []byte(hmacKey)}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	if _, err := s.Create(t.Context(), notify.NewChannel{Name: "hook", Kind: toolplane.ChannelWebhook,
		Config: toolplane.ChannelConfig{URL: srv.URL}, Secrets: toolplane.ChannelSecrets{HMACKey: hmacKey}}, admin); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Minute)
	a := &toolplane.Anomaly{ID: toolplane.NewID("ano_"), OrganizationID: "org-1", AgentID: "agent-<b>billing</b>", Tool: "payments.refund_order",
		Signal: toolplane.SignalDenialRate, Observed: 30, Mean: 0.5, StdDev: 0.6, Score: 49.2, WindowStart: now.Add(-5 * time.Minute),
		WindowEnd: now, Windows: 1, Status: toolplane.AnomalyOpen, CreatedAt: now, UpdatedAt: now}
	if _, _, err := st.FileAnomaly(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	ds, err := s.ForAnomaly(t.Context(), a)
	if err != nil || len(ds) != 1 || ds[0].Event != notify.AnomalyFiled || ds[0].Subject != notify.AnomalySubject(a.ID) {
		t.Fatalf("ForAnomaly = %+v, %v; want one delivery on the default channel", ds, err)
	}
	if err := s.Send(t.Context(), ds[0], 1); err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.got) != 1 {
		t.Fatalf("the receiver got %d payloads (refused %v)", len(rcv.got), rcv.refused)
	}
	p := rcv.got[0]
	if p.Event != notify.AnomalyFiled || p.Anomaly == nil || p.Anomaly.ID != a.ID || p.Anomaly.AgentID != a.AgentID ||
		p.Anomaly.Signal != "denial_rate" || p.Anomaly.Observed != 30 || p.Anomaly.Score != 49.2 ||
		p.Link != "https://toolplane.example/console/anomalies" {
		t.Fatalf("payload = %+v (anomaly %+v)", p, p.Anomaly)
	}
	msg := notify.SlackMessage(&p)
	if text, _ := msg["text"].(string); !strings.Contains(text, "agent-&lt;b&gt;billing") {
		t.Fatalf("Slack text = %q, want the agent's name escaped", text)
	}

	// An item gone (another organization's, or none) is never sent.
	gone := ds[0]
	gone.Org = "org-2"
	if err := s.Send(t.Context(), gone, 1); err == nil {
		t.Fatal("a delivery of another organization's item was sent")
	}
}
