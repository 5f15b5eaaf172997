package rules_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/internal/policytoy"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/rules"
)

// TestANewBundleTakesEffectOnEveryNodeWithinTwoSeconds: two nodes on one
// PostgreSQL database, each with its own cached rules; a bundle published
// through one decides the other's calls within two seconds, and so does
// the break-glass after it.
func TestANewBundleTakesEffectOnEveryNodeWithinTwoSeconds(t *testing.T) {
	t.Parallel()
	dsn := pgtest.SchemaDSN(t, pgtest.DSN(t))
	ctx := context.Background()
	node := func() (*postgres.Store, *rules.Service) {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		st := postgres.New(pool)
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		var defs []toolplane.Definition
		hs := map[string]bool{}
		for n, d := range tools {
			defs, hs[n] = append(defs, d), false
		}
		reg, _, err := registry.Build(defs, registry.Options{Bindings: registry.Static{Handlers: hs}})
		if err != nil {
			t.Fatal(err)
		}
		g := authz.New(authz.Config{Store: st, Registry: reg})
		return st, rules.New(rules.Config{Store: st, Grants: authz.Policy{Service: g}, Engines: []policy.Engine{policytoy.Toy{}}})
	}
	stA, a := node()
	_, b := node()
	g := authz.New(authz.Config{Store: stA, Registry: nil})
	// The call acts for user-sam (input): the person needs the grant too.
	for _, gr := range []toolplane.Grant{{AgentID: "agent-1", Pattern: "crm.lookup"}, {UserID: "user-sam", Pattern: "crm.lookup"}} {
		if err := g.AddGrant(ctx, &gr, operator); err != nil {
			t.Fatal(err)
		}
	}
	call := input("agent-1", "crm.lookup", nil)
	effect := func(s *rules.Service) policy.Effect {
		t.Helper()
		d, err := s.Decide(ctx, call)
		if err != nil {
			t.Fatal(err)
		}
		return d.Effect
	}
	// Both nodes hold the organization's rules (none) in their caches.
	if effect(a) != policy.Allow || effect(b) != policy.Allow {
		t.Fatal("with no bundle the grant should allow crm.lookup on both nodes")
	}
	waitFor := func(want policy.Effect, what string) {
		t.Helper()
		start := time.Now()
		for effect(b) != want {
			if time.Since(start) > 2*time.Second {
				t.Fatalf("%s: node B still decides otherwise after %s", what, time.Since(start))
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("%s: node B decides %s after %s", what, want, time.Since(start).Round(time.Millisecond))
	}
	// The bundle permits no crm tool: a published version denies it.
	if _, err := a.Publish(ctx, bundle(), rules.PublishOptions{}, admin); err != nil {
		t.Fatal(err)
	}
	if effect(a) != policy.Deny {
		t.Fatal("the publishing node should decide with its bundle at once")
	}
	waitFor(policy.Deny, "publish")
	if _, err := a.Disable(ctx, "incident", admin); err != nil {
		t.Fatal(err)
	}
	waitFor(policy.Allow, "break-glass")
}
