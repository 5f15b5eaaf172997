package authz_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/internal/testclock"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

func def(name, version string, approval bool) toolplane.Definition {
	return toolplane.Definition{
		Name: name, Version: version, Kind: toolplane.KindInternal, Description: "A tool.",
		InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object"}`),
		Effect: toolplane.EffectRead, Annotations: toolplane.Annotations{RequiresApproval: approval},
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}},
	}
}

type fixture struct {
	ctx   context.Context
	svc   *authz.Service
	store *sqlite.Store
	reg   *registry.Registry
	clock *testclock.Clock
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	store := sqlitetest.New(t)
	names := []string{"payments.refund_order", "payments.get_order", "crm.delete_customer", "crm.lookup"}
	hs := map[string]bool{}
	for _, n := range names {
		hs[n] = false
	}
	opt := registry.Options{Bindings: registry.Static{Handlers: hs}}
	reg, _, err := registry.Build([]toolplane.Definition{def("crm.delete_customer", "1.0.0", true), def("crm.lookup", "1.0.0", false)}, opt)
	if err != nil {
		t.Fatal(err)
	}
	if ps := reg.SetVersions("published", []registry.Version{
		{Organization: "org-1", Def: def("payments.refund_order", "2.1.0", false), State: toolplane.StateActive},
		{Organization: "org-1", Def: def("payments.refund_order", "3.0.0", false), State: toolplane.StateActive},
		{Organization: "org-1", Def: def("payments.get_order", "1.4.0", false), State: toolplane.StateActive},
	}); len(ps) != 0 {
		t.Fatal(ps)
	}
	c := testclock.New(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	return &fixture{ctx: ctx, store: store, reg: reg, clock: c, svc: authz.New(authz.Config{Store: store, Registry: reg, Now: c.Now})}
}

func person(subject string, roles ...string) *toolplane.Credential {
	return &toolplane.Credential{ID: "tpk_" + subject, OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: subject, Roles: roles}
}

var (
	operator = person("opal", "agent_operator")
	admin    = person("ada", "platform_admin")
	auditor  = person("aud", "auditor")
)

// decide answers the policy's effect for agent calling tool at its
// default version with a key that admits it.
func (f *fixture) decide(t *testing.T, agent, tenant, tool string) policy.Effect {
	t.Helper()
	return f.decideAs(t, agent, tenant, tool, toolplane.Principal{ID: agent, Tools: []string{tool}})
}

// decideAs answers the policy's effect for agent calling tool at its
// default version, with the principal the door built.
func (f *fixture) decideAs(t *testing.T, agent, tenant, tool string, p toolplane.Principal) policy.Effect {
	t.Helper()
	tl, ok := f.reg.Get("org-1", tool)
	if !ok {
		t.Fatalf("no tool %s", tool)
	}
	d, err := authz.Policy{Service: f.svc}.Decide(f.ctx, policy.Input{Tool: &tl.Def,
		Invocation: &toolplane.Invocation{OrganizationID: "org-1", AgentID: agent, TenantID: tenant, Principal: p}})
	if err != nil {
		t.Fatal(err)
	}
	return d.Effect
}

func TestGrantsDeniesAndBundles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "bot", Pattern: "crm.*"}, operator))
	must(f.svc.PutBundle(f.ctx, &toolplane.Bundle{Name: "support-tier1", Refs: []string{"payments.refund_order@^2.1.0", "payments.get_order@^1.0.0"}}, operator))
	must(f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "bot", Bundle: "support-tier1"}, operator))
	must(f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "scoped", Pattern: "crm.lookup", TenantScope: []string{"acme"}}, operator))
	must(f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "temp", Pattern: "crm.lookup", ExpiresAt: f.clock.Now().Add(time.Hour)}, operator))

	tests := []struct {
		name, agent, tenant, tool string
		want                      policy.Effect
	}{
		{"a pattern grant", "bot", "", "crm.lookup", policy.Allow},
		{"requires_approval still applies", "bot", "", "crm.delete_customer", policy.RequireApproval},
		{"a bundle grant", "bot", "", "payments.get_order", policy.Allow},
		{"a bundle's range excludes the default 3.0.0", "bot", "", "payments.refund_order", policy.Deny},
		{"no grant", "stranger", "", "crm.lookup", policy.Deny},
		{"in tenant scope", "scoped", "acme", "crm.lookup", policy.Allow},
		{"outside tenant scope", "scoped", "globex", "crm.lookup", policy.Deny},
		{"before expiry", "temp", "", "crm.lookup", policy.Allow},
	}
	for _, tt := range tests {
		if got := f.decide(t, tt.agent, tt.tenant, tt.tool); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	// The grant allows, but the calling key's rights (the principal the
	// door built) do not include the tool: the intersection refuses. A key
	// naming a tool its identity is not granted widens nothing either.
	if got := f.decideAs(t, "bot", "", "crm.lookup", toolplane.Principal{ID: "bot", Tools: []string{"crm.delete_customer"}}); got != policy.Deny {
		t.Errorf("granted but outside the key's rights: %v", got)
	}
	if got := f.decideAs(t, "stranger", "", "crm.lookup", toolplane.Principal{ID: "stranger", Tools: []string{"crm.lookup"}}); got != policy.Deny {
		t.Errorf("in the key's rights but not granted: %v", got)
	}
	pins, err := f.svc.Pins(f.ctx, "org-1", "bot", "")
	must(err)
	if pins["payments.refund_order"] != "^2.1.0" || pins["crm.lookup"] != "" {
		t.Errorf("pins %v", pins)
	}
	if tool, ok := f.reg.Resolve("org-1", "payments.refund_order", pins["payments.refund_order"]); !ok || tool.Def.Version != "2.1.0" {
		t.Errorf("the pinned version resolves to %v", tool)
	}

	// Expiry.
	f.clock.Advance(2 * time.Hour)
	if got := f.decide(t, "temp", "", "crm.lookup"); got != policy.Deny {
		t.Errorf("after expiry: %v", got)
	}
	// A deny of one agent beats its grant; the others keep theirs.
	must(f.svc.AddDeny(f.ctx, &toolplane.Deny{AgentID: "bot", Pattern: "crm.lookup", Reason: "misuse under review"}, admin))
	if got := f.decide(t, "bot", "", "crm.lookup"); got != policy.Deny {
		t.Errorf("deny beats allow: %v", got)
	}
	if got := f.decide(t, "scoped", "acme", "crm.lookup"); got != policy.Allow {
		t.Errorf("another agent's grant: %v", got)
	}
	// The incident deny: every agent, every grant, at once.
	incident := &toolplane.Deny{AgentID: toolplane.EveryAgent, Pattern: "payments.*", Reason: "incident 4411"}
	must(f.svc.AddDeny(f.ctx, incident, admin))
	if got := f.decide(t, "bot", "", "payments.get_order"); got != policy.Deny {
		t.Errorf("the incident deny: %v", got)
	}
	must(f.svc.LiftDeny(f.ctx, incident.ID, admin))
	if got := f.decide(t, "bot", "", "payments.get_order"); got != policy.Allow {
		t.Errorf("after the incident: %v", got)
	}

	// Explain: every tool, at which version, by which grant.
	lines, err := f.svc.Explain(f.ctx, "bot", auditor)
	must(err)
	byTool := map[string]authz.Why{}
	for _, l := range lines {
		byTool[l.Tool] = l
	}
	if w := byTool["payments.refund_order"]; w.Version != "2.1.0" || w.Via != "bundle support-tier1" || w.GrantedBy != "opal" {
		t.Errorf("explain refund_order: %+v", w)
	}
	if w := byTool["crm.lookup"]; w.DeniedBy == "" || w.Via != "crm.*" {
		t.Errorf("explain crm.lookup: %+v", w)
	}

	// Every change is in the log.
	changes, _, err := f.store.ListChanges(f.ctx, "org-1", "", "", "", 100)
	must(err)
	if len(changes) != 8 {
		t.Errorf("%d changes logged, want 8", len(changes))
	}
}

func TestRevokedGrantRefusesTheNextDecision(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	g := &toolplane.Grant{AgentID: "bot", Pattern: "crm.lookup"}
	if err := f.svc.AddGrant(f.ctx, g, operator); err != nil {
		t.Fatal(err)
	}
	if got := f.decide(t, "bot", "", "crm.lookup"); got != policy.Allow {
		t.Fatalf("granted: %v", got)
	}
	if err := f.svc.RevokeGrant(f.ctx, g.ID, operator); err != nil {
		t.Fatal(err)
	}
	if got := f.decide(t, "bot", "", "crm.lookup"); got != policy.Deny {
		t.Errorf("revoked: %v", got)
	}
	if err := f.svc.RevokeGrant(f.ctx, g.ID, operator); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("revoking twice: %v", err)
	}
}

func TestRoleRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	agentKey := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "bot", Roles: []string{"platform_admin"}}
	tests := []struct {
		name string
		do   func(by *toolplane.Credential) error
		ok   []*toolplane.Credential
		no   []*toolplane.Credential
	}{
		{"grant", func(by *toolplane.Credential) error {
			return f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "bot", Pattern: "crm.lookup"}, by)
		}, []*toolplane.Credential{operator, admin}, []*toolplane.Credential{auditor, agentKey}},
		{"deny", func(by *toolplane.Credential) error {
			return f.svc.AddDeny(f.ctx, &toolplane.Deny{AgentID: "*", Pattern: "crm.*", Reason: "drill"}, by)
		}, []*toolplane.Credential{admin}, []*toolplane.Credential{operator, auditor, agentKey}},
		{"bundle", func(by *toolplane.Credential) error {
			return f.svc.PutBundle(f.ctx, &toolplane.Bundle{Name: "b", Refs: []string{"crm.lookup@^1.0.0"}}, by)
		}, []*toolplane.Credential{operator, admin}, []*toolplane.Credential{auditor, agentKey}},
	}
	for _, tt := range tests {
		for _, by := range tt.no {
			if err := tt.do(by); !errors.Is(err, toolplane.ErrForbidden) {
				t.Errorf("%s by %s: %v, want forbidden", tt.name, by.Subject, err)
			}
		}
		for _, by := range tt.ok {
			if err := tt.do(by); err != nil {
				t.Errorf("%s by %s: %v", tt.name, by.Subject, err)
			}
		}
	}
}

func TestInvalidGrantsAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tests := []struct {
		name string
		g    toolplane.Grant
	}{
		{"no agent", toolplane.Grant{Pattern: "crm.*"}},
		{"every agent", toolplane.Grant{AgentID: "*", Pattern: "crm.*"}},
		{"neither pattern nor bundle", toolplane.Grant{AgentID: "bot"}},
		{"both", toolplane.Grant{AgentID: "bot", Pattern: "crm.*", Bundle: "b"}},
		{"bad glob", toolplane.Grant{AgentID: "bot", Pattern: "crm.[x"}},
		{"bad range", toolplane.Grant{AgentID: "bot", Pattern: "crm.lookup@>=1"}},
		{"unknown bundle", toolplane.Grant{AgentID: "bot", Bundle: "nope"}},
		{"already expired", toolplane.Grant{AgentID: "bot", Pattern: "crm.*", ExpiresAt: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}},
	}
	for _, tt := range tests {
		g := tt.g
		if err := f.svc.AddGrant(f.ctx, &g, operator); !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// Decisions from many goroutines while the cached view ages and is
// rechecked: run with -race, the recheck must not race the readers.
func TestConcurrentDecisionsAcrossRechecks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "bot", Pattern: "crm.*"}, operator); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				f.clock.Advance(700 * time.Millisecond) // past the recheck now and then
				if _, ok, err := f.svc.Pin(f.ctx, "org-1", "bot", "", "crm.lookup"); err != nil || !ok {
					t.Errorf("Pin = %v, %v", ok, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// Another node's grant is seen once this node's view is older than the
// recheck: its revision is read again then, and the changed view loaded.
func TestAnotherNodesGrantIsSeenAfterTheRecheck(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other := authz.New(authz.Config{Store: f.store, Registry: f.reg, Now: f.clock.Now}) // a second node on the same store
	if _, ok, err := f.svc.Pin(f.ctx, "org-1", "bot", "", "crm.lookup"); err != nil || ok {
		t.Fatalf("before any grant: %v, %v", ok, err)
	}
	if err := other.AddGrant(f.ctx, &toolplane.Grant{AgentID: "bot", Pattern: "crm.*"}, operator); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := f.svc.Pin(f.ctx, "org-1", "bot", "", "crm.lookup"); ok {
		t.Error("the other node's grant was seen before this node's view aged")
	}
	f.clock.Advance(2 * time.Second)
	if _, ok, err := f.svc.Pin(f.ctx, "org-1", "bot", "", "crm.lookup"); err != nil || !ok {
		t.Errorf("after the recheck: %v, %v", ok, err)
	}
}

// An organization's published tools are in its own agents' view only: an
// agent of another organization granted everything is shown, and has
// explained, the platform's tools and nothing an organization published.
func TestPublishedToolsAreVisibleInTheirOrganizationOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, by := range []*toolplane.Credential{operator, {ID: "tpk_op2", OrganizationID: "org-2", Kind: toolplane.CredentialPerson, Subject: "op2", Roles: []string{"agent_operator"}}} {
		if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "bot", Pattern: "*"}, by); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		org  string
		want []string
	}{
		{"org-1", []string{"crm.delete_customer", "crm.lookup", "payments.get_order", "payments.refund_order"}},
		{"org-2", []string{"crm.delete_customer", "crm.lookup"}},
	} {
		pins, err := f.svc.Pins(f.ctx, tt.org, "bot", "")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for name := range pins {
			got = append(got, name)
		}
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Pins(%s) = %v, want %v", tt.org, got, tt.want)
		}
		lines, err := f.svc.Explain(f.ctx, "bot", &toolplane.Credential{ID: "tpk_aud_" + tt.org, OrganizationID: tt.org, Kind: toolplane.CredentialPerson, Subject: "aud", Roles: []string{"auditor"}})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, w := range lines {
			got = append(got, w.Tool)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Explain(%s) = %v, want %v", tt.org, got, tt.want)
		}
	}
}

// Every field of a grant, deny or bundle is bounded by the service, so
// every door refuses the same: invalid, naming the field, never quoting
// the value, and nothing is stored.
func TestOverlongGrantsDeniesAndBundlesAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	long := func(n int) string { return strings.Repeat("x", n) }
	many := func(n int, v string) []string { return slices.Repeat([]string{v}, n) }
	if err := f.svc.PutBundle(f.ctx, &toolplane.Bundle{Name: "b", Refs: []string{"crm.lookup@^1.0.0"}}, operator); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, field string
		add         func() error
	}{
		{"grant agent_id", "agent_id", func() error {
			return f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: long(100 << 10), Pattern: "crm.*"}, operator)
		}},
		{"grant pattern", "pattern", func() error {
			return f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "bot", Pattern: "crm." + long(100<<10)}, operator)
		}},
		{"grant pattern beside a bundle", "pattern", func() error {
			return f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "bot", Pattern: long(100 << 10), Bundle: "b"}, operator)
		}},
		{"grant bundle", "bundle", func() error {
			return f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "bot", Bundle: long(toolplane.MaxNameLen + 1)}, operator)
		}},
		{"grant tenant", "tenant_scope[1]", func() error {
			return f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "bot", Pattern: "crm.*", TenantScope: []string{"t", long(100 << 10)}}, operator)
		}},
		{"grant tenants", "tenant_scope", func() error {
			return f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "bot", Pattern: "crm.*", TenantScope: many(toolplane.MaxListLen+1, "t")}, operator)
		}},
		{"deny agent_id", "agent_id", func() error {
			return f.svc.AddDeny(f.ctx, &toolplane.Deny{AgentID: long(toolplane.MaxRefLen + 1), Pattern: "crm.*", Reason: "incident"}, admin)
		}},
		{"deny pattern", "pattern", func() error {
			return f.svc.AddDeny(f.ctx, &toolplane.Deny{AgentID: "*", Pattern: long(100 << 10), Reason: "incident"}, admin)
		}},
		{"deny reason", "reason", func() error {
			return f.svc.AddDeny(f.ctx, &toolplane.Deny{AgentID: "*", Pattern: "crm.*", Reason: long(100 << 10)}, admin)
		}},
		{"bundle name", "name", func() error {
			return f.svc.PutBundle(f.ctx, &toolplane.Bundle{Name: long(toolplane.MaxNameLen + 1), Refs: []string{"crm.lookup@^1.0.0"}}, operator)
		}},
		{"bundle ref", "refs[0]", func() error {
			return f.svc.PutBundle(f.ctx, &toolplane.Bundle{Name: "c", Refs: []string{"crm.lookup@^1.0.0" + long(100<<10)}}, operator)
		}},
		{"bundle refs", "refs", func() error {
			return f.svc.PutBundle(f.ctx, &toolplane.Bundle{Name: "c", Refs: many(toolplane.MaxListLen+1, "crm.lookup@^1.0.0")}, operator)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.add()
			var tooLong *toolplane.TooLongError
			if !errors.Is(err, toolplane.ErrInvalid) || !errors.As(err, &tooLong) || tooLong.Field != tt.field {
				t.Fatalf("got %v, want invalid at %s", err, tt.field)
			}
			if len(err.Error()) > 200 {
				t.Errorf("the refusal is %d bytes: it quotes what it refuses", len(err.Error()))
			}
		})
	}
	gs, _ := f.svc.Grants(f.ctx, "", true, admin)
	ds, _ := f.svc.Denies(f.ctx, admin)
	bs, _ := f.svc.Bundles(f.ctx, admin)
	if len(gs) != 0 || len(ds) != 0 || len(bs) != 1 {
		t.Errorf("stored %d grants, %d denies, %d bundles; want 0, 0, 1", len(gs), len(ds), len(bs))
	}
	// At their bounds, all of them are accepted.
	full := many(toolplane.MaxListLen, "t")
	if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: long(toolplane.MaxRefLen), Pattern: "crm.*", TenantScope: full}, operator); err != nil {
		t.Errorf("a grant at its bounds: %v", err)
	}
	if err := f.svc.AddDeny(f.ctx, &toolplane.Deny{AgentID: "*", Pattern: "crm.*", Reason: long(toolplane.MaxReasonLen)}, admin); err != nil {
		t.Errorf("a deny at its bounds: %v", err)
	}
}

// Explaining an agent's grants is the service's to authorize, whichever
// door asks: the people who read grants may, an agent's key (whatever
// roles it names) and a person without those roles may not, and the
// refusal says which roles it takes.
func TestExplainIsAuthorizedByTheService(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := f.svc.AddGrant(f.ctx, &toolplane.Grant{AgentID: "bot", Pattern: "crm.lookup"}, operator); err != nil {
		t.Fatal(err)
	}
	for _, by := range []*toolplane.Credential{operator, auditor, admin} {
		lines, err := f.svc.Explain(f.ctx, "bot", by)
		if err != nil || len(lines) != 1 || lines[0].Tool != "crm.lookup" {
			t.Errorf("Explain by %s = %+v, %v; want crm.lookup", by.Subject, lines, err)
		}
	}
	agentKey := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "bot", Roles: []string{"platform_admin"}}
	for _, by := range []*toolplane.Credential{agentKey, person("abe", "approver"), nil} {
		lines, err := f.svc.Explain(f.ctx, "bot", by)
		var denied *toolplane.DeniedError
		if !errors.Is(err, toolplane.ErrForbidden) || !errors.As(err, &denied) || lines != nil {
			t.Errorf("Explain by %+v = %+v, %v; want a refusal", by, lines, err)
			continue
		}
		if !strings.Contains(denied.Why, "explaining grants needs the agent_operator, auditor or platform_admin role") {
			t.Errorf("Explain by %+v refused as %q, want the roles it takes", by, denied.Why)
		}
	}
}

// A grant named before it exists keeps its name, and is role-checked and
// recorded like any other.
func TestGrantWithANamedID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := f.svc.AddGrantWithID(f.ctx, "grt_named", &toolplane.Grant{AgentID: "bot", Pattern: "crm.lookup"}, auditor); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("by an auditor: %v, want forbidden", err)
	}
	g := &toolplane.Grant{AgentID: "bot", Pattern: "crm.lookup"}
	if err := f.svc.AddGrantWithID(f.ctx, "grt_named", g, operator); err != nil || g.ID != "grt_named" {
		t.Fatalf("AddGrantWithID: %v, id %q", err, g.ID)
	}
	if got := f.decide(t, "bot", "", "crm.lookup"); got != policy.Allow {
		t.Errorf("granted: %v", got)
	}
	changes, _, err := f.store.ListChanges(f.ctx, "org-1", "grant.add", "", "", 10)
	if err != nil || len(changes) != 1 || changes[0].Actor != operator.Subject || !strings.Contains(string(changes[0].Detail), `"grt_named"`) {
		t.Errorf("changes: %+v, %v; want the grant recorded once, by its granter", changes, err)
	}
	if err := f.svc.AddGrantWithID(f.ctx, "grt_named", &toolplane.Grant{AgentID: "bot", Pattern: "crm.*"}, operator); err == nil {
		t.Error("a second grant took the same ID")
	}
}
