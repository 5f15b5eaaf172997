package catalog_test

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
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/compat"
	"github.com/toolplane/toolplane/internal/testclock"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

type fixture struct {
	ctx   context.Context
	store *sqlite.Store
	reg   *registry.Registry
	svc   *catalog.Service
	clock *testclock.Clock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	store := sqlitetest.New(t)
	opt := registry.Options{Bindings: registry.Static{Handlers: map[string]bool{"payments.refund_order": false, "payments.get_order": false, "crm.lookup": false}}}
	reg, _, err := registry.Build(nil, opt)
	if err != nil {
		t.Fatal(err)
	}
	c := testclock.New(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	return &fixture{ctx: ctx, store: store, reg: reg, clock: c,
		svc: catalog.New(catalog.Config{Store: store, Registry: reg, Options: opt, Now: c.Now})}
}

func person(subject string, roles ...string) *toolplane.Credential {
	return &toolplane.Credential{ID: "tpk_" + subject, OrganizationID: "default", Kind: toolplane.CredentialPerson, Subject: subject, Roles: roles}
}

var (
	owner     = person("olga", "tool_owner:payments")
	publisher = person("pete", "tool_publisher:payments")
	admin     = person("ada", "platform_admin")
	outsider  = person("otto", "tool_owner:crm")
)

// refund answers a definition of payments.get_order at version, with
// amount_cents optional unless required says otherwise.
func getOrder(version string, mutate ...func(*toolplane.Definition)) toolplane.Definition {
	d := toolplane.Definition{
		Name: "payments.get_order", Version: version, Kind: toolplane.KindInternal, Owner: "payments",
		Description:  "Read one order by its id.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","maxLength":40}},"required":["order_id"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"status":{"type":"string"}}}`),
		Effect:       toolplane.EffectRead, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "payments.get_order"}},
	}
	for _, m := range mutate {
		m(&d)
	}
	return d
}

// seedActive makes team payments trusted: one active tool of its own, so
// its next non-destructive tools are self-service.
func (f *fixture) seedActive(t *testing.T) {
	t.Helper()
	d := getOrder("1.0.0")
	d.Name, d.Binding.Handler.Key = "payments.refund_order", "payments.refund_order"
	p, err := f.svc.Publish(f.ctx, d, owner)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Review(f.ctx, d.Name, "1.0.0", true, "", admin); err != nil {
		t.Fatalf("review %s: %v", p.Version.Name, err)
	}
}

func TestFirstToolOfATeamGoesToReviewThenSelfService(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p, err := f.svc.Publish(f.ctx, getOrder("1.0.0"), owner)
	if err != nil {
		t.Fatal(err)
	}
	if p.Version.State != toolplane.StateInReview || len(p.Version.ReviewReasons) != 1 || p.Version.ReviewReasons[0] != "first tool of team payments" {
		t.Fatalf("first publish: %s %v", p.Version.State, p.Version.ReviewReasons)
	}
	if _, ok := f.reg.Get("default", "payments.get_order"); ok {
		t.Fatal("a version in review is served")
	}
	if _, err := f.svc.Review(f.ctx, "payments.get_order", "1.0.0", true, "", admin); err != nil {
		t.Fatal(err)
	}
	if tool, ok := f.reg.Get("default", "payments.get_order"); !ok || tool.Def.Version != "1.0.0" {
		t.Fatal("an approved version is not served")
	}
	// The team is trusted now: a non-destructive minor is active at once.
	p, err = f.svc.Publish(f.ctx, getOrder("1.1.0", func(d *toolplane.Definition) { d.Description = "Read one order." }), publisher)
	if err != nil || p.Version.State != toolplane.StateActive {
		t.Fatalf("second publish: %+v %v", p, err)
	}
	// Destructive and sensitive tags always need review.
	p, err = f.svc.Publish(f.ctx, getOrder("2.0.0", func(d *toolplane.Definition) {
		d.Effect, d.Annotations.Destructive, d.Tags = toolplane.EffectWrite, true, []string{"finance"}
		no := false
		d.Repeatable = &no
	}), owner)
	if err != nil || p.Version.State != toolplane.StateInReview || len(p.Version.ReviewReasons) != 2 {
		t.Fatalf("destructive publish: %+v %v", p.Version, err)
	}
}

func TestCompatibilityGate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seedActive(t)
	if _, err := f.svc.Publish(f.ctx, getOrder("1.0.0"), owner); err != nil {
		t.Fatal(err)
	}
	addRequired := func(d *toolplane.Definition) {
		d.InputSchema = json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","maxLength":40},"region":{"type":"string"}},"required":["order_id","region"]}`)
	}
	widen := func(d *toolplane.Definition) {
		d.InputSchema = json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","maxLength":80}},"required":["order_id"]}`)
	}
	tests := []struct {
		name    string
		def     toolplane.Definition
		by      *toolplane.Credential
		wantErr error
	}{
		{"a required field at a minor is refused", getOrder("1.1.0", addRequired), owner, toolplane.ErrInvalid},
		{"a schema change at a patch is refused", getOrder("1.0.1", widen), owner, toolplane.ErrInvalid},
		{"a widened constraint at a minor is accepted", getOrder("1.1.0", widen), publisher, nil},
		{"a required field at a new major is accepted", getOrder("2.0.0", addRequired), owner, nil},
		{"a version not above the one published is refused", getOrder("1.1.0", widen), owner, toolplane.ErrConflict},
	}
	for _, tt := range tests {
		_, err := f.svc.Publish(f.ctx, tt.def, tt.by)
		if !errors.Is(err, tt.wantErr) && !(tt.wantErr == nil && err == nil) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.wantErr)
		}
		var v *compat.Violation
		if errors.Is(tt.wantErr, toolplane.ErrInvalid) && !errors.As(err, &v) {
			t.Errorf("%s: the refusal does not list the changes: %v", tt.name, err)
		}
	}
	// Both majors stand side by side.
	if n := len(f.reg.Versions("default", "payments.get_order")); n != 3 {
		t.Errorf("%d versions served, want 3 (1.0.0, 1.1.0, 2.0.0)", n)
	}
}

func TestRolesAreEnforced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seedActive(t)
	if _, err := f.svc.Publish(f.ctx, getOrder("1.0.0"), publisher); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("a publisher's first publish: %v", err)
	}
	if _, err := f.svc.Publish(f.ctx, getOrder("1.0.0"), outsider); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("another team's owner: %v", err)
	}
	if _, err := f.svc.Publish(f.ctx, getOrder("1.0.0"), owner); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Publish(f.ctx, getOrder("2.0.0"), publisher); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("a publisher's major: %v", err)
	}
	if _, err := f.svc.Review(f.ctx, "payments.get_order", "1.0.0", true, "", owner); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("an owner reviewing: %v", err)
	}
	if _, err := f.svc.Deprecate(f.ctx, "payments.get_order", "1.0.0", f.clock.Now(), "", "", outsider); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("another team deprecating: %v", err)
	}
	self := person("olga", "tool_owner:payments", "platform_admin")
	p, _ := f.svc.Publish(f.ctx, getOrder("3.0.0", func(d *toolplane.Definition) { d.Annotations.OpenWorld = true }), self)
	if _, err := f.svc.Review(f.ctx, "payments.get_order", p.Version.Version, true, "", self); p.Version.State == toolplane.StateInReview && !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("approving one's own version: %v", err)
	}
}

func TestLifecycleTransitions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seedActive(t)
	name := "payments.refund_order"
	sunset := f.clock.Now().Add(90 * 24 * time.Hour)
	steps := []struct {
		name    string
		do      func() (*toolplane.ToolVersion, error)
		wantErr error
		state   toolplane.VersionState
	}{
		{"submit an active version", func() (*toolplane.ToolVersion, error) { return f.svc.Submit(f.ctx, name, "1.0.0", "", owner) }, catalog.ErrTransition, ""},
		{"review an active version", func() (*toolplane.ToolVersion, error) { return f.svc.Review(f.ctx, name, "1.0.0", true, "", admin) }, catalog.ErrTransition, ""},
		{"retire an active version", func() (*toolplane.ToolVersion, error) { return f.svc.Retire(f.ctx, name, "1.0.0", "", owner) }, catalog.ErrTransition, ""},
		{"deprecate without a sunset", func() (*toolplane.ToolVersion, error) {
			return f.svc.Deprecate(f.ctx, name, "1.0.0", time.Time{}, "", "", owner)
		}, toolplane.ErrInvalid, ""},
		{"deprecate", func() (*toolplane.ToolVersion, error) {
			return f.svc.Deprecate(f.ctx, name, "1.0.0", sunset, "", "", owner)
		}, nil, toolplane.StateDeprecated},
		{"deprecate again", func() (*toolplane.ToolVersion, error) {
			return f.svc.Deprecate(f.ctx, name, "1.0.0", sunset, "", "", owner)
		}, catalog.ErrTransition, ""},
		{"retire", func() (*toolplane.ToolVersion, error) { return f.svc.Retire(f.ctx, name, "1.0.0", "", owner) }, nil, toolplane.StateRetired},
		{"retire again", func() (*toolplane.ToolVersion, error) { return f.svc.Retire(f.ctx, name, "1.0.0", "", owner) }, catalog.ErrTransition, ""},
		{"unknown version", func() (*toolplane.ToolVersion, error) { return f.svc.Retire(f.ctx, name, "9.9.9", "", owner) }, toolplane.ErrNotFound, ""},
	}
	for _, st := range steps {
		v, err := st.do()
		if !errors.Is(err, st.wantErr) && !(st.wantErr == nil && err == nil) {
			t.Fatalf("%s: %v, want %v", st.name, err, st.wantErr)
		}
		if st.state != "" && v.State != st.state {
			t.Fatalf("%s: state %s, want %s", st.name, v.State, st.state)
		}
	}
	if _, ok := f.reg.Get("default", name); ok {
		t.Error("a retired version is still served")
	}

	// Rejection sends a version back to its owner, who submits it again.
	p, err := f.svc.Publish(f.ctx, getOrder("1.0.0", func(d *toolplane.Definition) { d.Annotations.OpenWorld = true; d.Tags = []string{"pii"} }), owner)
	if err != nil || p.Version.State != toolplane.StateInReview {
		t.Fatalf("publish for review: %+v %v", p, err)
	}
	if _, err := f.svc.Review(f.ctx, "payments.get_order", "1.0.0", false, "", admin); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("a rejection without a note: %v", err)
	}
	v, err := f.svc.Review(f.ctx, "payments.get_order", "1.0.0", false, "the schema accepts any string as an order id", admin)
	if err != nil || v.State != toolplane.StatePendingApproval || v.ReviewedBy != "ada" {
		t.Fatalf("reject: %+v %v", v, err)
	}
	if v, err = f.svc.Submit(f.ctx, "payments.get_order", "1.0.0", "", owner); err != nil || v.State != toolplane.StateInReview {
		t.Fatalf("submit: %+v %v", v, err)
	}
	changes, _, err := f.store.ListChanges(f.ctx, "default", "", "", "", 100)
	if err != nil || len(changes) < 6 {
		t.Errorf("change log: %d changes, %v", len(changes), err)
	}
}

func TestConcurrentPublishesOfOneVersionConflict(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seedActive(t)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = f.svc.Publish(f.ctx, getOrder("1.0.0"), owner)
		}()
	}
	wg.Wait()
	ok, conflicts := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, toolplane.ErrConflict):
			conflicts++
		default:
			t.Errorf("publish: %v", err)
		}
	}
	if ok != 1 || conflicts != n-1 {
		t.Errorf("%d published, %d conflicts", ok, conflicts)
	}
}

func TestSunsetRetiresUncalledAndBlocksCalled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seedActive(t)
	if _, err := f.svc.Publish(f.ctx, getOrder("1.0.0"), owner); err != nil {
		t.Fatal(err)
	}
	sunset := f.clock.Now().Add(24 * time.Hour)
	for _, name := range []string{"payments.refund_order", "payments.get_order"} {
		if _, err := f.svc.Deprecate(f.ctx, name, "1.0.0", sunset, "", "", owner); err != nil {
			t.Fatal(err)
		}
	}
	// An agent still calls get_order.
	f.clock.Advance(20 * time.Hour)
	if err := f.store.AppendAudit(f.ctx, &toolplane.AuditEvent{ID: toolplane.NewID("evt_"), OrganizationID: "default", RunID: "r", AgentID: "support-bot",
		Tool: "payments.get_order", ToolVersion: "1.0.0", Source: toolplane.SourceREST, Outcome: "ok", CreatedAt: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	// Before the sunset nothing happens.
	if retired, blocked, err := f.svc.Sunset(f.ctx); err != nil || len(retired)+len(blocked) != 0 {
		t.Fatalf("before sunset: %v %v %v", retired, blocked, err)
	}
	f.clock.Advance(5 * time.Hour)
	retired, blocked, err := f.svc.Sunset(f.ctx)
	if err != nil || len(retired) != 1 || retired[0] != "default/payments.refund_order 1.0.0" || len(blocked) != 1 {
		t.Fatalf("at sunset: retired %v blocked %v %v", retired, blocked, err)
	}
	v, _ := f.store.GetToolVersion(f.ctx, "default", "payments.get_order", "1.0.0")
	if v.State != toolplane.StateDeprecated || v.RetireBlocked == "" {
		t.Errorf("called version: %s, blocked %q", v.State, v.RetireBlocked)
	}
	// A week without calls later, it retires too.
	f.clock.Advance(8 * 24 * time.Hour)
	if retired, _, err := f.svc.Sunset(f.ctx); err != nil || len(retired) != 1 {
		t.Fatalf("a week later: %v %v", retired, err)
	}
}

// A version published on another node reaches this node's registry at its
// next Refresh, not before.
func TestRefreshSeesAnotherNodesPublish(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	opt := registry.Options{Bindings: registry.Static{Handlers: map[string]bool{"payments.refund_order": false, "payments.get_order": false}}}
	reg, _, err := registry.Build(nil, opt)
	if err != nil {
		t.Fatal(err)
	}
	other := catalog.New(catalog.Config{Store: f.store, Registry: reg, Options: opt, Now: f.clock.Now})
	if err := other.Refresh(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.seedActive(t) // published and approved on f's node
	if _, ok := reg.Get("default", "payments.refund_order"); ok {
		t.Fatal("the other node served the version before refreshing")
	}
	if err := other.Refresh(f.ctx); err != nil {
		t.Fatal(err)
	}
	if tl, ok := reg.Get("default", "payments.refund_order"); !ok || tl.Def.Version != "1.0.0" {
		t.Fatalf("after a refresh: %v, %v", tl, ok)
	}
}

// inOrg answers c acting in another organization.
func inOrg(org string, c *toolplane.Credential) *toolplane.Credential {
	cp := *c
	cp.ID, cp.OrganizationID = c.ID+"-"+org, org
	return &cp
}

// Another organization's people, whatever their roles, reach none of an
// organization's versions: each operation answers not found (never
// forbidden, which would tell the version exists), nothing changes, and
// the organization's agents are served what they were. The other
// organization's own version of the name is its own, served to it alone.
func TestAnotherOrganizationReachesNoneOfAnOrganizationsVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seedActive(t) // payments.refund_order 1.0.0, active in default
	if _, err := f.svc.Publish(f.ctx, getOrder("1.0.0", func(d *toolplane.Definition) { d.Tags = []string{"pii"} }), owner); err != nil {
		t.Fatal(err) // payments.get_order 1.0.0, in review in default
	}
	bOwner, bAdmin := inOrg("orgb", owner), inOrg("orgb", admin)
	sunset := f.clock.Now().Add(time.Hour)
	tests := []struct {
		name string
		do   func() (*toolplane.ToolVersion, error)
	}{
		{"approve", func() (*toolplane.ToolVersion, error) {
			return f.svc.Review(f.ctx, "payments.get_order", "1.0.0", true, "", bAdmin)
		}},
		{"reject", func() (*toolplane.ToolVersion, error) {
			return f.svc.Review(f.ctx, "payments.get_order", "1.0.0", false, "no", bAdmin)
		}},
		{"submit", func() (*toolplane.ToolVersion, error) {
			return f.svc.Submit(f.ctx, "payments.get_order", "1.0.0", "", bOwner)
		}},
		{"deprecate", func() (*toolplane.ToolVersion, error) {
			return f.svc.Deprecate(f.ctx, "payments.refund_order", "1.0.0", sunset, "", "", bOwner)
		}},
		{"deprecate as admin", func() (*toolplane.ToolVersion, error) {
			return f.svc.Deprecate(f.ctx, "payments.refund_order", "1.0.0", sunset, "", "", bAdmin)
		}},
		{"retire", func() (*toolplane.ToolVersion, error) {
			return f.svc.Retire(f.ctx, "payments.refund_order", "1.0.0", "", bAdmin)
		}},
		{"read", func() (*toolplane.ToolVersion, error) {
			return f.svc.Get(f.ctx, "payments.refund_order", "1.0.0", bAdmin)
		}},
	}
	for _, tt := range tests {
		if v, err := tt.do(); !errors.Is(err, toolplane.ErrNotFound) {
			t.Errorf("%s as orgb: %+v, %v; want not found", tt.name, v, err)
		}
	}
	if vs, _, err := f.svc.List(f.ctx, toolplane.VersionFilter{}, "", 100, bAdmin); err != nil || len(vs) != 0 {
		t.Errorf("List as orgb = %d versions, %v; want none", len(vs), err)
	}
	for name, state := range map[string]toolplane.VersionState{"payments.refund_order": toolplane.StateActive, "payments.get_order": toolplane.StateInReview} {
		if v, err := f.svc.Get(f.ctx, name, "1.0.0", admin); err != nil || v.State != state {
			t.Errorf("%s in default: %+v, %v; want %s", name, v, err, state)
		}
	}

	// orgb publishes a version of the same name: its own, which starts
	// its team's trust over, and which only orgb is served.
	d := getOrder("2.0.0")
	d.Name, d.Binding.Handler.Key, d.Description = "payments.refund_order", "payments.refund_order", "orgb's own."
	p, err := f.svc.Publish(f.ctx, d, bOwner)
	if err != nil || p.Version.OrganizationID != "orgb" || p.Version.State != toolplane.StateInReview {
		t.Fatalf("orgb's publish: %+v, %v; want its own version in review", p, err)
	}
	if _, err := f.svc.Review(f.ctx, d.Name, "2.0.0", true, "", admin); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("default's admin approving orgb's version: %v, want not found", err)
	}
	if _, err := f.svc.Review(f.ctx, d.Name, "2.0.0", true, "", bAdmin); err != nil {
		t.Fatal(err)
	}
	for org, want := range map[string]string{"default": "1.0.0", "orgb": "2.0.0", "orgc": ""} {
		got, ok := f.reg.Get(org, d.Name)
		if want == "" && ok || want != "" && (!ok || got.Def.Version != want) {
			t.Errorf("%s is served %v, %v; want %q", org, got, ok, want)
		}
	}
	// Each organization's change log holds its own changes only.
	for org, want := range map[string]int{"default": 3, "orgb": 2} {
		cs, _, err := f.store.ListChanges(f.ctx, org, "", "", "", 100)
		if err != nil || len(cs) != want {
			t.Errorf("%s's change log: %d changes, %v; want %d", org, len(cs), err, want)
		}
	}
}

// The catalogue is read by people: an agent's key lists and reads no
// version, whatever it names, and the refusal is the same for a version
// that exists and one that does not.
func TestAgentsDoNotReadTheCatalogue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seedActive(t)
	agent := &toolplane.Credential{ID: "tpk_bot", OrganizationID: "default", Kind: toolplane.CredentialAgent, Subject: "bot", Tools: []string{"*"}}
	if _, _, err := f.svc.List(f.ctx, toolplane.VersionFilter{}, "", 10, agent); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("List as an agent: %v, want forbidden", err)
	}
	for _, version := range []string{"1.0.0", "9.9.9"} {
		if _, err := f.svc.Get(f.ctx, "payments.refund_order", version, agent); !errors.Is(err, toolplane.ErrForbidden) {
			t.Errorf("Get(%s) as an agent: %v, want forbidden", version, err)
		}
	}
	if err := catalog.MayPublish(agent); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("MayPublish(agent) = %v, want forbidden", err)
	}
	if _, err := f.svc.Publish(f.ctx, getOrder("1.0.0"), agent); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("Publish as an agent: %v, want forbidden", err)
	}
	for _, c := range []*toolplane.Credential{owner, publisher, admin} {
		if err := catalog.MayPublish(c); err != nil {
			t.Errorf("MayPublish(%s) = %v", c.Subject, err)
		}
	}
	if err := catalog.MayPublish(person("aud", "auditor")); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("MayPublish(auditor) = %v, want forbidden", err)
	}
}

// The change log is read through the service, which authorizes it
// whichever door asks: an auditor (or a platform_admin) reads their own
// organization's changes, newest first; a person without the role and an
// agent's key (whatever roles it names) are refused; a cursor the store
// never answered is the caller's mistake.
func TestChangesAreAuthorizedByTheService(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := f.svc.Publish(f.ctx, getOrder("1.0.0"), owner); err != nil {
		t.Fatal(err)
	}
	auditor := person("aud", "auditor")
	for _, by := range []*toolplane.Credential{auditor, admin} {
		cs, next, err := f.svc.Changes(f.ctx, "", "", "", 10, by)
		if err != nil || next != "" || len(cs) == 0 || cs[0].Subject != "payments.get_order@1.0.0" || cs[0].Kind != "version.publish" {
			t.Errorf("Changes by %s = %+v, %q, %v; want the publish", by.Subject, cs, next, err)
		}
	}
	other := &toolplane.Credential{ID: "tpk_aud2", OrganizationID: "orgb", Kind: toolplane.CredentialPerson, Subject: "aud2", Roles: []string{"auditor"}}
	if cs, _, err := f.svc.Changes(f.ctx, "", "", "", 10, other); err != nil || len(cs) != 0 {
		t.Errorf("Changes by another organization's auditor = %+v, %v; want none", cs, err)
	}
	agentKey := &toolplane.Credential{OrganizationID: "default", Kind: toolplane.CredentialAgent, Subject: "bot", Roles: []string{"platform_admin"}}
	for _, by := range []*toolplane.Credential{owner, agentKey, nil} {
		cs, _, err := f.svc.Changes(f.ctx, "", "", "", 10, by)
		var denied *toolplane.DeniedError
		if !errors.Is(err, toolplane.ErrForbidden) || !errors.As(err, &denied) || cs != nil {
			t.Errorf("Changes by %+v = %+v, %v; want a refusal", by, cs, err)
			continue
		}
		if !strings.Contains(denied.Why, "the change log needs the auditor role") {
			t.Errorf("Changes by %+v refused as %q, want the role it takes", by, denied.Why)
		}
	}
	if _, _, err := f.svc.Changes(f.ctx, "", "", "not-a-cursor", 10, auditor); !errors.Is(err, toolplane.ErrBadCursor) {
		t.Errorf("Changes after a garbage cursor = %v, want toolplane.ErrBadCursor", err)
	}
}

// TestARequestThroughAConnectionIsReviewed: a tool the platform runs
// itself spends the organization's connection on whatever request it
// names, so a request no person has looked at is reviewed, even from a
// trusted team; a new version making the same request is not.
func TestARequestThroughAConnectionIsReviewed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seedActive(t)
	httpOrder := func(version, url string) toolplane.Definition {
		return getOrder(version, func(d *toolplane.Definition) {
			d.Connection = "orders"
			d.Binding = toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "GET", URL: url}}
		})
	}
	const reason = "a new request through connection orders (its http binding)"
	p, err := f.svc.Publish(f.ctx, httpOrder("1.0.0", "https://orders.example/orders/{order_id}"), owner)
	if err != nil || p.Version.State != toolplane.StateInReview || len(p.Version.ReviewReasons) != 1 || p.Version.ReviewReasons[0] != reason {
		t.Fatalf("first http version: %+v %v", p, err)
	}
	if _, err := f.svc.Review(f.ctx, "payments.get_order", "1.0.0", true, "", admin); err != nil {
		t.Fatal(err)
	}
	// The same request, described better: self-service.
	p, err = f.svc.Publish(f.ctx, getOrder("1.0.1", func(d *toolplane.Definition) {
		*d = httpOrder("1.0.1", "https://orders.example/orders/{order_id}")
		d.Description = "Read one order by its id, such as ord_1."
	}), owner)
	if err != nil || p.Version.State != toolplane.StateActive {
		t.Fatalf("same request: %+v %v", p.Version, err)
	}
	// Another request through the same connection: reviewed again.
	p, err = f.svc.Publish(f.ctx, httpOrder("1.1.0", "https://orders.example/admin/orders/{order_id}"), owner)
	if err != nil {
		t.Fatal(err)
	}
	if p.Version.State != toolplane.StateInReview || !slices.Contains(p.Version.ReviewReasons, reason) {
		t.Fatalf("changed request: %+v", p.Version)
	}
	// The same request taking a new argument sends it downstream (in the
	// body, the query...): reviewed too.
	p, err = f.svc.Publish(f.ctx, getOrder("1.2.0", func(d *toolplane.Definition) {
		*d = httpOrder("1.2.0", "https://orders.example/orders/{order_id}")
		d.InputSchema = json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","maxLength":40},"expand":{"type":"string"}},"required":["order_id"]}`)
	}), owner)
	if err != nil {
		t.Fatal(err)
	}
	if p.Version.State != toolplane.StateInReview || !slices.Contains(p.Version.ReviewReasons, reason) {
		t.Fatalf("wider input: %+v", p.Version)
	}
}

// TestFollowHearsTheFeed: a second node's service on the same store,
// following its change feed with a poll an hour away, serves a version
// the first publishes, and drops one it retires, as soon as the write
// returns.
func TestFollowHearsTheFeed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seedActive(t)
	opt := registry.Options{Bindings: registry.Static{Handlers: map[string]bool{"payments.refund_order": false, "payments.get_order": false}}}
	reg2, _, err := registry.Build(nil, opt)
	if err != nil {
		t.Fatal(err)
	}
	node2 := catalog.New(catalog.Config{Store: f.store, Registry: reg2, Options: opt, Now: f.clock.Now})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); node2.Follow(ctx, f.store, time.Hour) }()
	t.Cleanup(func() { cancel(); <-done })
	// served waits until node 2's registry serves payments.get_order as
	// want ("" for not at all).
	served := func(want toolplane.VersionState) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			tool, ok := reg2.Get("default", "payments.get_order")
			var got toolplane.VersionState
			if ok {
				got = tool.State
			}
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("node 2 serves payments.get_order as %q, want %q", got, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The seeded tool was there before the watch began: the first Lost
	// makes node 2 load it.
	deadline := time.Now().Add(5 * time.Second)
	for _, ok := reg2.Get("default", "payments.refund_order"); !ok; _, ok = reg2.Get("default", "payments.refund_order") {
		if time.Now().After(deadline) {
			t.Fatal("node 2 never loaded the catalogue")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p, err := f.svc.Publish(f.ctx, getOrder("1.0.0"), owner)
	if err != nil || p.Version.State != toolplane.StateActive {
		t.Fatalf("publish: %+v %v", p, err)
	}
	served(toolplane.StateActive)
	if _, err := f.svc.Deprecate(f.ctx, "payments.get_order", "1.0.0", f.clock.Now().Add(time.Hour), "", "old", owner); err != nil {
		t.Fatal(err)
	}
	served(toolplane.StateDeprecated)
	if _, err := f.svc.Retire(f.ctx, "payments.get_order", "1.0.0", "gone", owner); err != nil {
		t.Fatal(err)
	}
	served("")
}
