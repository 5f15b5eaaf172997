package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// The spend page shows an auditor the organization's spend by day, agent
// and tool, matching the usage rows, and today's spend against the daily
// ceiling; never another organization's rows; an approver is refused as
// the API refuses them. Names from outside are escaped.
func TestSpendPageShowsTheOrganizationsSpend(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	now := time.Now().UTC()
	for _, u := range []toolplane.Usage{
		{ID: "u1", OrganizationID: org, RunID: "r1", RootRunID: "r1", AgentID: "support-bot", Tool: "search.web", CostCents: 1234, Units: 1, CreatedAt: now},
		{ID: "u2", OrganizationID: org, RunID: "r1", RootRunID: "r1", AgentID: "<b>bot</b>", Tool: "crm.lookup", CostCents: 66, Units: 1, CreatedAt: now},
		{ID: "u3", OrganizationID: "org-2", RunID: "r9", RootRunID: "r9", AgentID: "theirs-bot", Tool: "theirs.tool", CostCents: 99999, Units: 1, CreatedAt: now},
	} {
		if err := w.store.InsertUsage(ctx, &u); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.store.PutSpendCeiling(ctx, &toolplane.SpendCeiling{OrganizationID: org, DailyCents: 1000, UpdatedBy: "root", UpdatedAt: now},
		&toolplane.Change{ID: toolplane.NewID("chg_"), OrganizationID: org, Kind: "spend_ceiling.set", Subject: "spend", Actor: "root", Detail: []byte(`{}`), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	grace := w.browser()
	grace.signIn("grace")
	for _, tc := range []struct {
		by   string
		want []string
	}{
		{"agent", []string{"support-bot", "$12.34", "&lt;b&gt;bot&lt;/b&gt;", "$0.66"}},
		{"tool", []string{"search.web", "crm.lookup"}},
		{"day", []string{now.Format(time.DateOnly), "$13.00"}},
	} {
		p := grace.get("/console/spend?by=" + tc.by)
		if p.status != http.StatusOK {
			t.Fatalf("by %s: %d %s", tc.by, p.status, p.body)
		}
		for _, want := range append(tc.want, "$13.00", "$10.00", "reached") {
			if !strings.Contains(p.body, want) {
				t.Errorf("by %s: the page lacks %q", tc.by, want)
			}
		}
		if strings.Contains(p.body, "theirs") || strings.Contains(p.body, "999.99") || strings.Contains(p.body, "<b>bot") {
			t.Errorf("by %s: the page shows another organization's spend, or markup unescaped: %s", tc.by, p.body)
		}
	}
	if p := grace.get("/console/spend?from=yesterday"); p.status != http.StatusBadRequest {
		t.Errorf("a bad date: %d", p.status)
	}
	ada := w.browser()
	ada.signIn("ada")
	if p := ada.get("/console/spend"); p.status != http.StatusForbidden || strings.Contains(p.body, "support-bot") {
		t.Errorf("an approver's spend page: %d %s", p.status, p.body)
	}
}
