package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/policytoy"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/rules"
)

// controlStores answers a migrated store on each database the tests run
// on: SQLite always, PostgreSQL when TOOLPLANE_TEST_POSTGRES is set.
func controlStores(t *testing.T) map[string]toolplane.Store {
	t.Helper()
	ctx := context.Background()
	dsns := map[string]string{"sqlite": t.TempDir() + "/toolplane.db"}
	if dsn, ok := pgtest.LookupDSN(); ok {
		dsns["postgres"] = pgtest.SchemaDSN(t, dsn)
	} else {
		t.Log("PostgreSQL not tested: set " + pgtest.DSNVariable)
	}
	out := map[string]toolplane.Store{}
	for name, dsn := range dsns {
		b, err := backend.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		if err := b.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		out[name] = b.Store
	}
	return out
}

// trailOf answers the organization's events of kind, oldest first.
func trailOf(t *testing.T, s toolplane.Store, org string, kind toolplane.AuditKind) []toolplane.AuditEvent {
	t.Helper()
	evs, _, err := s.ListAudit(context.Background(), org, toolplane.AuditFilter{}, "", 500)
	if err != nil {
		t.Fatal(err)
	}
	var out []toolplane.AuditEvent
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == kind {
			out = append(out, evs[i])
		}
	}
	return out
}

// outcomeRank orders the approval events the test expects.
var outcomeRank = map[string]string{approval.RejectedOutcome: "1", approval.ExpiredOutcome: "2", approval.EscalatedOutcome: "3"}

// summary is what a control-plane test compares of an event.
func summary(evs []toolplane.AuditEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Outcome+" "+e.Subject+" by "+e.PrincipalID+" with "+e.KeyID+" from "+string(e.Source))
	}
	return out
}

func wantTrail(t *testing.T, what string, got []toolplane.AuditEvent, want ...string) {
	t.Helper()
	if g := summary(got); strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s trail:\n got %q\nwant %q", what, g, want)
	}
}

// TestControlPlaneChangesAreAuditedOnce: each change to what calls may do
// is one audit event of its kind, naming the person and the key they used
// and what it is about: a key created and revoked (a second revocation
// changes nothing and records nothing, and no event holds the key's
// secret); a grant given and revoked; a policy version published, rolled
// back and disabled; an approval rejected (a repeated answer records
// nothing), one expired, one escalated. On SQLite and PostgreSQL.
func TestControlPlaneChangesAreAuditedOnce(t *testing.T) {
	t.Parallel()
	for name, store := range controlStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			org := toolplane.NewID("org_")
			root := &toolplane.Credential{ID: "key_root", OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "root",
				Roles: []string{toolplane.RolePlatformAdmin, toolplane.RoleAgentOperator, toolplane.RoleApprover}}

			// Keys.
			keys := apikey.NewKeys(apikey.KeysConfig{Store: store})
			secret, cred, err := keys.Create(ctx, apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "agent-7", Tools: []string{"crm.*"}}, root)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := keys.Revoke(ctx, cred.ID, root); err != nil {
					t.Fatal(err)
				}
			}
			wantTrail(t, "key", trailOf(t, store, org, toolplane.AuditKey),
				"created "+cred.ID+" by root with key_root from control", "revoked "+cred.ID+" by root with key_root from control")

			// Grants.
			grants := authz.New(authz.Config{Store: store})
			g := &toolplane.Grant{AgentID: "agent-7", Pattern: "crm.*"}
			if err := grants.AddGrant(ctx, g, root); err != nil {
				t.Fatal(err)
			}
			if err := grants.RevokeGrant(ctx, g.ID, root); err != nil {
				t.Fatal(err)
			}
			wantTrail(t, "grant", trailOf(t, store, org, toolplane.AuditGrant),
				"granted agent-7 by root with key_root from control", "revoked "+g.ID+" by root with key_root from control")

			// Policy.
			svc := rules.New(rules.Config{Store: store, Grants: authz.Policy{Service: grants}, Engines: []policy.Engine{policytoy.Toy{}}})
			files := map[string]string{
				"all.toy":        `[{"id": "reads", "effect": "permit", "tool": "*.get_*"}]`,
				"all.tests.json": `[{"name": "reads pass", "expect": "allow", "rule": "reads", "request": {"tool": {"name": "crm.get_contact"}}}]`,
			}
			if _, err := svc.Publish(ctx, files, rules.PublishOptions{Note: "first"}, root); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Disable(ctx, "break glass", root); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Rollback(ctx, 1, "", root); err != nil {
				t.Fatal(err)
			}
			pol := trailOf(t, store, org, toolplane.AuditPolicy)
			wantTrail(t, "policy", pol, "published v1 by root with key_root from control", "disabled v2 by root with key_root from control",
				"rolled_back v3 by root with key_root from control")
			if len(pol) == 3 && (pol[2].PolicyBundle != 3 || pol[2].Reason != "rollback to version 1") {
				t.Errorf("rollback event = %+v", pol[2])
			}

			// Approvals: a rejection, answered twice; an expiry; an
			// escalation.
			now := time.Now()
			clock := func() time.Time { return now }
			approvals := approval.New(approval.Config{Store: store, Now: clock, TTL: time.Hour})
			invJSON, _ := json.Marshal(toolplane.Invocation{OrganizationID: org, AgentID: "agent-7", TenantID: "tenant-x", Principal: toolplane.Principal{ID: "agent-7"}})
			file := func(key string) *toolplane.Approval {
				a := &toolplane.Approval{OrganizationID: org, RunID: "run-1", StepPath: "s/1", Tool: "crm.delete", ToolVersion: "1.0.0",
					Key: key, ArgumentsHash: "sha256:" + key, Arguments: []byte(`{}`), Invocation: invJSON, PrincipalID: "agent-7",
					DefaultOnTimeout: toolplane.OnTimeoutDeny}
				if _, err := approvals.File(ctx, a); err != nil {
					t.Fatal(err)
				}
				return a
			}
			rejected := file("k-reject")
			for i := range 2 {
				_, err := approvals.Resolve(ctx, rejected.ID, approval.Decision{Approve: false, Reason: "no"}, root, nil)
				if i == 1 && !errors.Is(err, approval.ErrNotPending) {
					t.Fatalf("a second answer: %v, want ErrNotPending", err)
				} else if i == 0 && err != nil {
					t.Fatal(err)
				}
			}
			expiring, escalating := file("k-expire"), file("k-escalate")
			now = now.Add(2 * time.Hour)
			for range 2 {
				if _, err := approvals.Expire(ctx, expiring); err != nil {
					t.Fatal(err)
				}
			}
			next, err := approvals.Escalate(ctx, escalating, "finance", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			apr := trailOf(t, store, org, toolplane.AuditApproval)
			// The expiry and the escalation happen at one instant: their
			// order in the trail is the IDs'.
			slices.SortStableFunc(apr, func(a, b toolplane.AuditEvent) int {
				return strings.Compare(outcomeRank[a.Outcome], outcomeRank[b.Outcome])
			})
			wantTrail(t, "approval", apr, "rejected "+rejected.ID+" by root with key_root from control",
				approval.ExpiredOutcome+" "+expiring.ID+" by agent-7 with  from worker",
				approval.EscalatedOutcome+" "+escalating.ID+" by agent-7 with  from worker")
			for _, e := range apr {
				switch e.Outcome {
				case approval.RejectedOutcome:
					if e.ApproverID != "root" || e.ApprovalID != rejected.ID || e.TenantID != "tenant-x" || e.StepPath != "s/1" || e.Reason != "no" {
						t.Errorf("rejection event = %+v", e)
					}
				case approval.EscalatedOutcome:
					if e.AuthorizedBy != next.ID || e.ApproverID != "" {
						t.Errorf("escalation event = %+v", e)
					}
				}
			}

			// No event holds the key's secret.
			evs, _, err := store.ListAudit(ctx, org, toolplane.AuditFilter{}, "", 500)
			if err != nil {
				t.Fatal(err)
			}
			_, sec, _ := strings.Cut(secret, cred.ID+"_")
			for _, e := range evs {
				b, _ := json.Marshal(e)
				if strings.Contains(string(b), sec) {
					t.Errorf("event %s holds the key's secret: %s", e.ID, b)
				}
			}
		})
	}
}
