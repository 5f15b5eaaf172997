package facts_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/facts"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// brokenSpend is a meter that does not answer.
type brokenSpend struct{}

func (brokenSpend) RunTreeCost(context.Context, string, string) (int64, error) {
	return 0, errors.New("database is locked")
}

func TestBuiltinFacts(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	ctx := context.Background()
	for i, c := range []int64{120, 35} {
		u := &toolplane.Usage{ID: toolplane.NewID("use_"), OrganizationID: "org-a", RunID: []string{"run-1", "run-1.child"}[i], RootRunID: "run-1",
			Tool: "demo.analyze_text", CostCents: c, CreatedAt: time.Now()}
		if err := store.InsertUsage(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	// The other organization's spend on a run of the same id is not this
	// run's.
	if err := store.InsertUsage(ctx, &toolplane.Usage{ID: toolplane.NewID("use_"), OrganizationID: "org-b", RunID: "run-1", RootRunID: "run-1", Tool: "x", CostCents: 9000, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	// Tuesday 1 December 2026, 22:30 UTC: 23:30 in Paris.
	now := time.Date(2026, 12, 1, 22, 30, 0, 0, time.UTC)
	f := facts.Builtin(facts.Config{Spend: store, Now: func() time.Time { return now },
		Zone: func(_ context.Context, org string) (*time.Location, error) {
			if org == "org-a" {
				return paris, nil
			}
			return nil, nil
		}})
	def := &toolplane.Definition{Name: "payments.refund", Version: "1.0.0", Tags: []string{"finance", "pii"}, Classification: "confidential",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"card":{"type":"string","x-sensitive":true},"note":{"type":"string","x-sensitive":true}}}`)}
	agentInv := &toolplane.Invocation{OrganizationID: "org-a", RunID: "run-1.child", RootRunID: "run-1", AgentID: "agent-support", CredentialID: "tpk_1",
		Credential:      &toolplane.Credential{Kind: toolplane.CredentialAgent, Roles: []string{toolplane.RoleActForUsers}},
		AgentAttributes: map[string]any{"tier": "l1"}}
	userInv := *agentInv
	userInv.UserID, userInv.User = "sam", &toolplane.User{Roles: []string{"support"}, Groups: []string{"emea"}, Manager: "kim", Attributes: map[string]any{"clearance": "pii"}}
	args := map[string]any{"order_id": "o-1", "card": "4111"}
	tests := []struct {
		fact string
		inv  *toolplane.Invocation
		want any
	}{
		{facts.OrgTime, agentInv, map[string]any{"time": "2026-12-01T23:30:00+01:00", "zone": "Europe/Paris", "hour": 23, "weekday": 2, "date": "2026-12-01"}},
		{facts.OrgTime, &toolplane.Invocation{OrganizationID: "org-b"}, map[string]any{"time": "2026-12-01T22:30:00Z", "zone": "UTC", "hour": 22, "weekday": 2, "date": "2026-12-01"}},
		{facts.RunSpendCents, agentInv, int64(155)},
		{facts.RunSpendCents, &toolplane.Invocation{OrganizationID: "org-a"}, int64(0)},
		{facts.AgentAttributes, agentInv, map[string]any{"id": "agent-support", "key": "tpk_1", "tenant": "", "roles": []any{"act_for_users"}, "attributes": map[string]any{"tier": "l1"}}},
		{facts.UserAttributes, agentInv, nil},
		{facts.UserAttributes, &userInv, map[string]any{"id": "sam", "roles": []any{"support"}, "groups": []any{"emea"}, "manager": "kim", "attributes": map[string]any{"clearance": "pii"}}},
		{facts.UserAttributes, &toolplane.Invocation{UserID: "ada"}, map[string]any{"id": "ada", "roles": []any{}, "groups": []any{}, "manager": "", "attributes": map[string]any{}}},
		{facts.ToolTags, agentInv, []any{"finance", "pii"}},
		{facts.ToolClassification, agentInv, "confidential"},
		{facts.SensitiveArguments, agentInv, []any{"/card"}},
	}
	for _, tt := range tests {
		t.Run(tt.fact, func(t *testing.T) {
			t.Parallel()
			d := *def
			d.PolicyFacts = []string{tt.fact}
			got, err := f.Resolve(ctx, tt.inv, &d, args)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got[tt.fact], tt.want) {
				t.Fatalf("%s = %#v, want %#v", tt.fact, got[tt.fact], tt.want)
			}
		})
	}
	for _, name := range facts.Names() {
		if !f.FactResolver(name) {
			t.Errorf("%s is not registered", name)
		}
	}
}

// A meter that does not answer is a fault of the fact, never a spend of 0.
func TestRunSpendFailureIsAFault(t *testing.T) {
	t.Parallel()
	f := facts.Builtin(facts.Config{Spend: brokenSpend{}})
	d := &toolplane.Definition{Name: "x.y", PolicyFacts: []string{facts.RunSpendCents}}
	_, err := f.Resolve(context.Background(), &toolplane.Invocation{OrganizationID: "o", RunID: "r"}, d, nil)
	var fe *policy.FactError
	if !errors.As(err, &fe) || fe.Fact != facts.RunSpendCents {
		t.Fatalf("err = %v, want a FactError", err)
	}
	if facts.Builtin(facts.Config{}).FactResolver(facts.RunSpendCents) {
		t.Error("run_spend_cents is registered without a meter")
	}
}

// TestZoneFailureIsAFault: an organization's zone that cannot be read (its
// rules unreadable) makes org_time a fault, never a time in another zone.
func TestZoneFailureIsAFault(t *testing.T) {
	t.Parallel()
	unreadable := errors.New("policy bundle version: the store is down")
	f := facts.Builtin(facts.Config{Zone: func(context.Context, string) (*time.Location, error) { return nil, unreadable }})
	d := &toolplane.Definition{Name: "x.y", PolicyFacts: []string{facts.OrgTime}}
	_, err := f.Resolve(context.Background(), &toolplane.Invocation{OrganizationID: "o"}, d, nil)
	var fe *policy.FactError
	if !errors.As(err, &fe) || fe.Fact != facts.OrgTime || !errors.Is(err, unreadable) {
		t.Fatalf("err = %v, want org_time's FactError wrapping the store's", err)
	}
}
