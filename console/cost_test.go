package console_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// countingMeter is a usage store that counts the reads a page makes of
// it.
type countingMeter struct {
	toolplane.UsageStore
	estimates, spends atomic.Int64
}

func (m *countingMeter) ToolUsage(ctx context.Context, org, tool string, since time.Time) (toolplane.UsageStats, error) {
	m.estimates.Add(1)
	return m.UsageStore.ToolUsage(ctx, org, tool, since)
}

func (m *countingMeter) RunTreeCost(ctx context.Context, org, root string) (int64, error) {
	m.spends.Add(1)
	return m.UsageStore.RunTreeCost(ctx, org, root)
}

// A metered tool's card, in the inbox and on its own page, shows what the
// tool's calls of the last 30 days cost, from the organization's usage rows
// alone (another organization's calls of the same tool, and the same run
// tree's, never count), and what the run has spent against its ceiling.
func TestTheCardShowsWhatAMeteredCallCosts(t *testing.T) {
	t.Parallel()
	for _, backend := range backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testCosts(t, newWorldOn(t, backend))
		})
	}
}

func testCosts(t *testing.T, w *world) {
	ctx := context.Background()
	now := time.Now()
	metered := &toolplane.Approval{
		ID: "apr_cost_metered", OrganizationID: org, RunID: "run-c", Tool: "xss.meter", ToolVersion: "1.0.0",
		Key: "k-metered", Arguments: []byte(`{}`), PrincipalID: "agent-x", Status: toolplane.ApprovalPending, ApproverGroup: "finance",
		Invocation: fmt.Appendf(nil, `{"OrganizationID":%q,"AgentID":"agent-x","RunID":"run-c","RootRunID":"root-c","Ceilings":{"MaxCostCents":500}}`, org),
		CreatedAt:  now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour),
	}
	plain := &toolplane.Approval{
		ID: "apr_cost_plain", OrganizationID: org, RunID: "run-p", Tool: "xss.pay", ToolVersion: "1.2.0",
		Key: "k-plain", Arguments: []byte(`{}`), PrincipalID: "agent-x", Status: toolplane.ApprovalPending, ApproverGroup: "finance",
		Invocation: fmt.Appendf(nil, `{"OrganizationID":%q,"AgentID":"agent-x","RunID":"run-p"}`, org),
		CreatedAt:  now.Add(-2 * time.Minute), ExpiresAt: now.Add(time.Hour),
	}
	// A second call of the tool in the same run tree: the inbox reads the
	// tool's estimate and the tree's spend once for both cards.
	again := *metered
	again.ID, again.Key, again.RunID, again.CreatedAt = "apr_cost_again", "k-again", "run-c2", now.Add(-3*time.Minute)
	again.Invocation = fmt.Appendf(nil, `{"OrganizationID":%q,"AgentID":"agent-x","RunID":"run-c2","RootRunID":"root-c","Ceilings":{"MaxCostCents":500}}`, org)
	for _, a := range []*toolplane.Approval{metered, plain, &again} {
		if err := w.store.InsertApproval(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	b := w.browser()
	b.signIn("fin")
	pages := func() map[string]string {
		return map[string]string{
			"inbox":        b.get("/console/approvals").body,
			"metered card": b.get("/console/approvals/" + metered.ID).body,
		}
	}
	for name, body := range pages() {
		for _, want := range []string{"metered; no calls measured yet", "0¢ so far of the run's 500¢ ceiling"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s before any call: no %q in\n%s", name, want, body)
			}
		}
	}

	w.meter.estimates.Store(0)
	w.meter.spends.Store(0)
	if body := b.get("/console/approvals").body; strings.Count(body, "no calls measured yet") != 2 {
		t.Errorf("the inbox does not show both metered cards' estimates:\n%s", body)
	}
	if e, s := w.meter.estimates.Load(), w.meter.spends.Load(); e != 1 || s != 1 {
		t.Errorf("the inbox read %d estimates and %d spends, want one of each for one tool in one run tree", e, s)
	}

	usage := func(id, organization, tool, root string, cents int64, at time.Time) {
		u := &toolplane.Usage{ID: id, OrganizationID: organization, RunID: root + "/step", RootRunID: root, Tool: tool,
			CostCents: cents, Units: 1, CreatedAt: at}
		if err := w.store.InsertUsage(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	usage("use_1", org, "xss.meter", "root-c", 100, now.Add(-time.Hour))
	usage("use_2", org, "xss.meter", "root-c", 250, now.Add(-48*time.Hour))
	usage("use_3", org, "xss.meter", "root-other", 8, now.Add(-29*24*time.Hour))
	usage("use_4", org, "xss.meter", "root-old", 9000, now.Add(-31*24*time.Hour)) // before the window
	usage("use_5", org, "xss.pay", "root-c", 20, now.Add(-time.Hour))             // another tool, the same run tree
	usage("use_6", "org-2", "xss.meter", "root-c", 100_000, now.Add(-time.Hour))  // another organization

	for name, body := range pages() {
		for _, want := range []string{
			"about 119¢ a call (average of 3 calls in the last 30 days, at most 250¢)",
			"370¢ so far of the run's 500¢ ceiling",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: no %q in\n%s", name, want, body)
			}
		}
		for _, not := range []string{"9000", "100000", "no calls measured"} {
			if strings.Contains(body, not) {
				t.Errorf("%s shows %q:\n%s", name, not, body)
			}
		}
	}
	if body := b.get("/console/approvals/" + plain.ID).body; !strings.Contains(body, "no metered cost") || strings.Contains(body, "Run spend") {
		t.Errorf("the card of a tool that is not metered:\n%s", body)
	}
}
