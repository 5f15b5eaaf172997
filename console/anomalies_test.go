package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/anomaly"
	"github.com/toolplane/toolplane/console"
)

// anomalyTriage answers the triage over the world's store.
func anomalyTriage(t testing.TB, s toolplane.Store) *anomaly.Service {
	t.Helper()
	as, ok := s.(toolplane.AnomalyStore)
	if !ok {
		t.Fatalf("%T keeps no anomaly triage", s)
	}
	svc, err := anomaly.New(as, anomaly.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// fileAnomaly stores an open item of agent in org and answers its ID.
func (w *world) fileAnomaly(org, agent string) string {
	w.t.Helper()
	now := time.Now().UTC().Truncate(time.Minute)
	a := &toolplane.Anomaly{ID: toolplane.NewID("ano_"), OrganizationID: org, AgentID: agent, Tool: "xss.pay",
		Signal: toolplane.SignalDenialRate, Observed: 31, Mean: 0.5, StdDev: 0.7, Score: 43.6, WindowStart: now.Add(-5 * time.Minute),
		WindowEnd: now, Windows: 1, Status: toolplane.AnomalyOpen, CreatedAt: now, UpdatedAt: now}
	if _, _, err := w.store.(toolplane.AnomalyStore).FileAnomaly(context.Background(), a); err != nil {
		w.t.Fatal(err)
	}
	return a.ID
}

// The anomalies page lists the organization's open items, escaped, to an
// auditor, who acknowledges one with its button; an approver is refused,
// a form without the page's token changes nothing, and another
// organization's item never shows.
func TestAnomaliesPage(t *testing.T) {
	t.Parallel()
	for _, backend := range backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			w := newWorldOn(t, backend)
			mine := w.fileAnomaly(org, xssAgent)
			theirs := w.fileAnomaly(other, "agent-theirs")

			b := w.browser()
			b.signIn("grace")
			p := b.get(console.Path + "/anomalies")
			if p.status != http.StatusOK || !strings.Contains(p.body, mine) || !strings.Contains(p.body, "denial_rate") ||
				!strings.Contains(p.body, "31 in the window") || !strings.Contains(p.body, "43.6 deviations") {
				t.Fatalf("the page: %d %s", p.status, p.body)
			}
			if strings.Contains(p.body, "<script>alert") {
				t.Fatal("the agent's name is not escaped")
			}
			if strings.Contains(p.body, theirs) || strings.Contains(p.body, "agent-theirs") {
				t.Fatal("another organization's item shows")
			}

			// Without the page's token nothing changes.
			if f := b.post(console.Path+"/anomalies/acknowledge", w.base, url.Values{"id": {mine}}); f.status != http.StatusForbidden {
				t.Fatalf("a form without its token: %d", f.status)
			}
			// Another organization's item is not found.
			if f := b.post(console.Path+"/anomalies/acknowledge", w.base, url.Values{"csrf": {p.csrf(t)}, "id": {theirs}}); f.status != http.StatusNotFound {
				t.Fatalf("acknowledging another organization's item: %d", f.status)
			}
			done := b.post(console.Path+"/anomalies/acknowledge", w.base, url.Values{"csrf": {p.csrf(t)}, "id": {mine}})
			if done.status != http.StatusSeeOther || done.header.Get("Location") != console.Path+"/anomalies?done=1" {
				t.Fatalf("acknowledge: %d %s", done.status, done.header.Get("Location"))
			}
			if after := b.get(console.Path + "/anomalies"); strings.Contains(after.body, mine) {
				t.Fatal("the acknowledged item is still listed open")
			}
			acked := b.get(console.Path + "/anomalies?status=acknowledged")
			if !strings.Contains(acked.body, mine) || !strings.Contains(acked.body, "grace") || strings.Contains(acked.body, ">Acknowledge<") {
				t.Fatalf("the acknowledged list: %s", acked.body)
			}

			approver := w.browser()
			approver.signIn("ada")
			if p := approver.get(console.Path + "/anomalies"); p.status != http.StatusForbidden || strings.Contains(p.body, mine) {
				t.Fatalf("an approver opening the page: %d", p.status)
			}
		})
	}
}
