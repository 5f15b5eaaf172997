package server

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/syncbuf"
)

// A served node answers its organization's anomaly triage items to an
// auditor or an admin, refuses an agent's key, lets an auditor
// acknowledge one, and never shows one organization's item to another;
// with --anomaly=off the routes answer 404.
func TestAnomaliesOnAServedNode(t *testing.T) {
	t.Parallel()
	for name, database := range onePendingBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			e := &e2e{log: &syncbuf.Buffer{}, seen: &traffic{}, ran: make(chan error, 1), conns: map[string]string{}}
			e.cfg = Config{Addr: "127.0.0.1:0", Database: database(t, dir), DataDir: dir, Demo: true}
			e.start(t, dir)
			now := time.Now().UTC().Truncate(time.Minute)
			item := &toolplane.Anomaly{ID: toolplane.NewID("ano_"), OrganizationID: DefaultOrganization, AgentID: "agent-billing",
				Tool: "payments.refund_order", Signal: toolplane.SignalDenialRate, Observed: 30, Mean: 0.4, StdDev: 0.5, Score: 59.2,
				WindowStart: now.Add(-5 * time.Minute), WindowEnd: now, Windows: 1, Status: toolplane.AnomalyOpen, CreatedAt: now, UpdatedAt: now}
			if _, _, err := e.s.b.Store.FileAnomaly(context.Background(), item); err != nil {
				t.Fatal(err)
			}
			agent := e.mintKey(t, e.admin, `{"kind":"agent","subject":"agent-billing"}`)
			auditor := e.mintKey(t, e.admin, `{"kind":"person","subject":"ada","roles":["auditor"]}`)
			approver := e.mintKey(t, e.admin, `{"kind":"person","subject":"bob","roles":["approver"]}`)
			stranger := e.mintInOrg(t, "org-other", "eve")

			list := e.must(t, "GET", "/v1/anomalies?status=open", e.admin, "", http.StatusOK)
			items, _ := list["items"].([]any)
			if len(items) != 1 || items[0].(map[string]any)["id"] != item.ID || items[0].(map[string]any)["signal"] != "denial_rate" {
				t.Fatalf("list as admin: %v", list)
			}
			for _, key := range []string{agent, approver} {
				e.must(t, "GET", "/v1/anomalies", key, "", http.StatusForbidden)
				e.must(t, "POST", "/v1/anomalies/"+item.ID+"/acknowledge", key, "", http.StatusForbidden)
			}
			e.must(t, "GET", "/v1/anomalies?status=closed", auditor, "", http.StatusBadRequest)
			if theirs, _ := e.must(t, "GET", "/v1/anomalies", stranger, "", http.StatusOK)["items"].([]any); len(theirs) != 0 {
				t.Fatalf("another organization lists %v", theirs)
			}
			e.must(t, "GET", "/v1/anomalies/"+item.ID, stranger, "", http.StatusNotFound)
			e.must(t, "POST", "/v1/anomalies/"+item.ID+"/acknowledge", stranger, "", http.StatusNotFound)

			acked := e.must(t, "POST", "/v1/anomalies/"+item.ID+"/acknowledge", auditor, "", http.StatusOK)
			if acked["status"] != "acknowledged" || acked["acknowledged_by"] != "ada" {
				t.Fatalf("acknowledged: %v", acked)
			}
			if open, _ := e.must(t, "GET", "/v1/anomalies?status=open", auditor, "", http.StatusOK)["items"].([]any); len(open) != 0 {
				t.Fatalf("still open after acknowledgement: %v", open)
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		e := &e2e{log: &syncbuf.Buffer{}, seen: &traffic{}, ran: make(chan error, 1), conns: map[string]string{}}
		e.cfg = Config{Addr: "127.0.0.1:0", Database: dir + "/toolplane.db", DataDir: dir, AnomalyOff: true}
		e.start(t, dir)
		e.must(t, "GET", "/v1/anomalies", e.admin, "", http.StatusNotFound)
	})
}

// An anomaly window or threshold no triage runs with is refused, named by
// its field.
func TestAnomalyConfigRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		field string
		cfg   Config
	}{
		{"AnomalyWindow", Config{AnomalyWindow: time.Second}},
		{"AnomalyThreshold", Config{AnomalyThreshold: -1}},
	} {
		_, err := c.cfg.withDefaults()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%+v: %v, want a ConfigError of %s", c.cfg, err, c.field)
		}
	}
}
