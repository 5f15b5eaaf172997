package rules_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/internal/policytoy"
	"github.com/toolplane/toolplane/internal/testclock"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/rules"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

const org = "org-1"

func person(subject string, roles ...string) *toolplane.Credential {
	return &toolplane.Credential{ID: "tpk_" + subject, OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: subject, Roles: roles}
}

var (
	admin    = person("ada", toolplane.RolePlatformAdmin)
	operator = person("opal", toolplane.RoleAgentOperator)
	auditor  = person("aud", toolplane.RoleAuditor)
	nobody   = person("nob")
)

func def(name string, effect toolplane.Effect, failOpen bool) toolplane.Definition {
	d := toolplane.Definition{
		Name: name, Version: "1.0.0", Kind: toolplane.KindInternal, Description: "A tool.",
		InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object"}`),
		Effect: effect, Annotations: toolplane.Annotations{FailOpen: failOpen},
		Tags: []string{"finance"}, Classification: "confidential", Owner: "team-payments",
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}},
	}
	if d.Writes() {
		d.Repeatable = new(false)
	}
	return d
}

var tools = map[string]toolplane.Definition{
	"payments.refund_order": def("payments.refund_order", toolplane.EffectWrite, false),
	"payments.get_order":    def("payments.get_order", toolplane.EffectRead, true),
	"crm.lookup":            def("crm.lookup", toolplane.EffectRead, false),
	// The demo's refund, which the shipped example bundle rules on.
	"demo.refund_order": def("demo.refund_order", toolplane.EffectWrite, false),
}

// bundle is the toy bundle most tests publish: reads and refunds
// permitted, refunds over 500.00 routed to two finance approvers, payments
// forbidden outside 09:00-18:00 in the rules' zone.
func bundle() map[string]string {
	return map[string]string{
		"refunds.toy": `[
			{"id": "night", "effect": "forbid", "tool": "payments.*", "outside_hours": [9, 18]},
			{"id": "reads", "effect": "permit", "tool": "*.get_*"},
			{"id": "refunds", "effect": "permit", "tool": "payments.refund_order"},
			{"id": "big-refunds", "effect": "approve", "tool": "payments.refund_order", "arg": "amount_cents", "over": 50000,
			 "approval": {"group": "finance", "approvers": 2}}
		]`,
		"refunds.tests.json": `[
			{"name": "a small refund is allowed", "expect": "allow", "rule": "refunds",
			 "request": {"tool": {"name": "payments.refund_order"}, "arguments": {"amount_cents": 100}, "context": {"hour": 10}}},
			{"name": "a big refund asks finance", "expect": "require_approval", "rule": "big-refunds",
			 "request": {"tool": {"name": "payments.refund_order"}, "arguments": {"amount_cents": 90000}, "context": {"hour": 10}}},
			{"name": "no refund at night", "expect": "deny", "rule": "night",
			 "request": {"tool": {"name": "payments.refund_order"}, "arguments": {"amount_cents": 100}, "context": {"hour": 3}}}
		]`,
		"README.md": "Refund rules.",
	}
}

// flaky is a real SQLite store whose reads of grants and bundles fail
// while down is set: the store unreachable.
type flaky struct {
	*sqlite.Store
	down atomic.Bool
}

var errDown = errors.New("store unreachable")

func (f *flaky) AuthzRevision(ctx context.Context, o string) (int64, error) {
	if f.down.Load() {
		return 0, errDown
	}
	return f.Store.AuthzRevision(ctx, o)
}

func (f *flaky) PolicyBundleVersion(ctx context.Context, o string) (int64, error) {
	if f.down.Load() {
		return 0, errDown
	}
	return f.Store.PolicyBundleVersion(ctx, o)
}

type fixture struct {
	store  *flaky
	clock  *testclock.Clock
	grants *authz.Service
	svc    *rules.Service
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	st := &flaky{Store: sqlitetest.New(t)}
	hs := map[string]bool{}
	var defs []toolplane.Definition
	for n, d := range tools {
		hs[n] = false
		defs = append(defs, d)
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: registry.Static{Handlers: hs}})
	if err != nil {
		t.Fatal(err)
	}
	// 10:00 UTC: inside the rules' business hours in UTC.
	clock := testclock.New(time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC))
	g := authz.New(authz.Config{Store: st, Registry: reg, Now: clock.Now})
	for _, pat := range []string{"payments.*", "crm.lookup", "demo.refund_order"} {
		if err := g.AddGrant(t.Context(), &toolplane.Grant{AgentID: "agent-1", Pattern: pat}, operator); err != nil {
			t.Fatal(err)
		}
		// The calls act for user-sam: a delegated call needs the
		// person's grant beside the agent's.
		if err := g.AddGrant(t.Context(), &toolplane.Grant{UserID: "user-sam", Pattern: pat}, operator); err != nil {
			t.Fatal(err)
		}
	}
	svc := rules.New(rules.Config{Store: st, Grants: authz.Policy{Service: g}, Engines: []policy.Engine{policytoy.Toy{}}, Now: clock.Now,
		Budget: 50 * time.Millisecond})
	return &fixture{store: st, clock: clock, grants: g, svc: svc}
}

// input answers the policy input of agent calling tool with args.
func input(agent, tool string, args map[string]any) policy.Input {
	d := tools[tool]
	return policy.Input{
		Invocation: &toolplane.Invocation{OrganizationID: org, AgentID: agent, RunID: "run-1", UserID: "user-sam",
			Principal: toolplane.Principal{ID: agent, Tools: []string{tool}}, Source: toolplane.SourceREST},
		Tool: &d, Arguments: args,
	}
}

func (f *fixture) publish(t testing.TB, files map[string]string, opt rules.PublishOptions) *toolplane.PolicyBundle {
	t.Helper()
	b, err := f.svc.Publish(t.Context(), files, opt, admin)
	if err != nil {
		t.Fatalf("Publish = %v", err)
	}
	return b
}

func TestPublishRefusesAndChangesNothing(t *testing.T) {
	t.Parallel()
	with := func(change func(files map[string]string)) map[string]string {
		files := bundle()
		change(files)
		return files
	}
	many := map[string]string{}
	for i := range rules.MaxFiles + 1 {
		many[fmt.Sprintf("f%d.toy", i)] = "[]"
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		opt   rules.PublishOptions
		by    *toolplane.Credential
		want  error
		says  []string
	}{
		{"an operator", bundle(), rules.PublishOptions{}, operator, toolplane.ErrForbidden, []string{"platform_admin"}},
		{"an auditor", bundle(), rules.PublishOptions{}, auditor, toolplane.ErrForbidden, nil},
		{"no files", map[string]string{}, rules.PublishOptions{}, admin, toolplane.ErrInvalid, []string{"no files"}},
		{"no rule file", map[string]string{"README.md": "x"}, rules.PublishOptions{}, admin, toolplane.ErrInvalid, []string{"no rule file"}},
		{"mixed languages", with(func(f map[string]string) { f["extra.cedar"] = "permit (principal, action, resource);" }),
			rules.PublishOptions{}, admin, toolplane.ErrInvalid, []string{"mixes languages", "extra.cedar", "refunds.toy"}},
		{"too many files", many, rules.PublishOptions{}, admin, toolplane.ErrInvalid, []string{"65 files"}},
		{"a file too large", with(func(f map[string]string) { f["big.md"] = strings.Repeat("x", rules.MaxFileBytes+1) }),
			rules.PublishOptions{}, admin, toolplane.ErrInvalid, []string{"big.md"}},
		{"a directory in a name", with(func(f map[string]string) { f["../x.toy"] = "[]" }),
			rules.PublishOptions{}, admin, toolplane.ErrInvalid, []string{"relative slash-separated path"}},
		{"not parsing", with(func(f map[string]string) { f["refunds.toy"] = "[\n{\"id\": \"a\",\n oops}]" }),
			rules.PublishOptions{}, admin, toolplane.ErrInvalid, []string{"refunds.toy:3:"}},
		{"a failing test", with(func(f map[string]string) {
			f["more.tests.json"] = `[{"name": "crm is allowed", "expect": "allow", "request": {"tool": {"name": "crm.lookup"}}},
				{"name": "reads are allowed", "expect": "allow", "request": {"tool": {"name": "payments.get_order"}, "context": {"hour": 10}}}]`
		}), rules.PublishOptions{}, admin, toolplane.ErrInvalid, []string{"1 of the bundle's tests fail", "crm is allowed", "expected allow"}},
		{"no tests", map[string]string{"a.toy": `[{"id": "all", "effect": "permit"}]`}, rules.PublishOptions{}, admin, toolplane.ErrInvalid, []string{"no tests"}},
		{"an unknown zone", bundle(), rules.PublishOptions{TimeZone: "Mars/Olympus"}, admin, toolplane.ErrInvalid, []string{"Mars/Olympus"}},
		{"a cedar bundle without a cedar engine", map[string]string{"a.cedar": "permit (principal, action, resource);"},
			rules.PublishOptions{}, admin, toolplane.ErrInvalid, []string{"no cedar engine"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			_, err := f.svc.Publish(t.Context(), c.files, c.opt, c.by)
			if !errors.Is(err, c.want) {
				t.Fatalf("Publish = %v; want %v", err, c.want)
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Publish = %q; want it to say %q", err, s)
				}
			}
			if v, err := f.store.PolicyBundleVersion(t.Context(), org); err != nil || v != 0 {
				t.Errorf("after a refused publish the version is %d, %v; want 0", v, err)
			}
		})
	}
}

func TestTestsFailedListsEveryFailingTest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	files := bundle()
	files["refunds.tests.json"] = strings.ReplaceAll(files["refunds.tests.json"], `"expect": "allow"`, `"expect": "deny"`)
	files["refunds.tests.json"] = strings.ReplaceAll(files["refunds.tests.json"], `"expect": "require_approval"`, `"expect": "allow"`)
	_, err := f.svc.Publish(t.Context(), files, rules.PublishOptions{}, admin)
	tf, ok := errors.AsType[*rules.TestsFailedError](err)
	if !ok {
		t.Fatalf("Publish = %v; want a *TestsFailedError", err)
	}
	var names []string
	for _, r := range tf.Failed {
		names = append(names, r.Name)
	}
	if got := strings.Join(names, ","); got != "a small refund is allowed,a big refund asks finance" {
		t.Errorf("failing tests = %s", got)
	}
	res, err := f.svc.Test(t.Context(), files, operator)
	if err != nil || len(res) != 3 {
		t.Fatalf("Test = %v, %v; want three results", res, err)
	}
	if _, err := f.svc.Test(t.Context(), files, nobody); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("Test by a caller with no role = %v; want ErrForbidden", err)
	}
}

func TestVersionsRollbackDisableAndChangeLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	v1 := f.publish(t, bundle(), rules.PublishOptions{Note: "first", TimeZone: "Europe/Paris"})
	second := bundle()
	second["refunds.toy"] = strings.Replace(second["refunds.toy"], `"over": 50000`, `"over": 10000`, 1)
	second["refunds.tests.json"] = strings.Replace(second["refunds.tests.json"], `"amount_cents": 90000`, `"amount_cents": 20000`, 1)
	v2 := f.publish(t, second, rules.PublishOptions{Note: "stricter"})
	if v1.Version != 1 || v2.Version != 2 || v2.TimeZone != "Europe/Paris" || v1.Digest == v2.Digest {
		t.Fatalf("versions %d, %d (zone %q, digests %s, %s); want 1 and 2, the zone kept, digests differing", v1.Version, v2.Version, v2.TimeZone, v1.Digest, v2.Digest)
	}
	if _, err := f.svc.Rollback(ctx, 1, "", operator); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("Rollback by an operator = %v; want ErrForbidden", err)
	}
	v3, err := f.svc.Rollback(ctx, 1, "", admin)
	if err != nil {
		t.Fatal(err)
	}
	if v3.Version != 3 || v3.Digest != v1.Digest || v3.Note != "rollback to version 1" {
		t.Errorf("rollback = version %d digest %s note %q; want 3, version 1's digest", v3.Version, v3.Digest, v3.Note)
	}
	if _, err := f.svc.Disable(ctx, "", admin); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("Disable without a note = %v; want ErrInvalid", err)
	}
	if _, err := f.svc.Disable(ctx, "incident 42", operator); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("Disable by an operator = %v; want ErrForbidden", err)
	}
	v4, err := f.svc.Disable(ctx, "incident 42", admin)
	if err != nil || !v4.Disabled || v4.Version != 4 {
		t.Fatalf("Disable = %+v, %v", v4, err)
	}

	list, err := f.svc.List(ctx, 0, 10, auditor)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range list {
		got = append(got, fmt.Sprintf("%d:%s", b.Version, b.Note))
	}
	if want := "4:incident 42,3:rollback to version 1,2:stricter,1:first"; strings.Join(got, ",") != want {
		t.Errorf("List = %s; want %s", strings.Join(got, ","), want)
	}
	shown, err := f.svc.Show(ctx, 2, operator)
	if err != nil || shown.Files["refunds.toy"] != second["refunds.toy"] {
		t.Errorf("Show(2) = %v, %v; want version 2's files", shown, err)
	}
	if _, err := f.svc.Show(ctx, 0, nobody); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("Show by a caller with no role = %v; want ErrForbidden", err)
	}
	changes, _, err := f.store.ListChanges(ctx, org, "", "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, c := range changes {
		if strings.HasPrefix(c.Kind, "policy.") {
			kinds = append(kinds, c.Kind+" "+c.Subject+" by "+c.Actor)
		}
	}
	if want := "policy.disable v4 by ada,policy.publish v3 by ada,policy.publish v2 by ada,policy.publish v1 by ada"; strings.Join(kinds, ",") != want {
		t.Errorf("change log = %s; want %s", strings.Join(kinds, ","), want)
	}
}

func TestDecideGrantsThenRules(t *testing.T) {
	t.Parallel()
	type want struct {
		effect policy.Effect
		rule   string
		bundle int64
		route  *policy.Approval
	}
	for _, c := range []struct {
		name    string
		publish []map[string]string // nil: none; an empty map: the break-glass
		agent   string
		tool    string
		args    map[string]any
		want    want
	}{
		{"no bundle: the grants alone allow", nil, "agent-1", "crm.lookup", nil, want{policy.Allow, "", 0, nil}},
		{"no grant: denied whatever the rules", []map[string]string{bundle()}, "agent-2", "payments.get_order", nil, want{policy.Deny, "", 0, nil}},
		{"a rule permits", []map[string]string{bundle()}, "agent-1", "payments.refund_order", map[string]any{"amount_cents": 100.0}, want{policy.Allow, "refunds", 1, nil}},
		{"a rule routes to approval", []map[string]string{bundle()}, "agent-1", "payments.refund_order", map[string]any{"amount_cents": 90000.0},
			want{policy.RequireApproval, "big-refunds", 1, &policy.Approval{Group: "finance", Approvers: 2}}},
		{"no rule permits", []map[string]string{bundle()}, "agent-1", "crm.lookup", nil, want{policy.Deny, "", 1, nil}},
		{"the break-glass: the grants alone again", []map[string]string{bundle(), {}}, "agent-1", "crm.lookup", nil, want{policy.Allow, "", 0, nil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			for _, files := range c.publish {
				if len(files) == 0 {
					if _, err := f.svc.Disable(t.Context(), "incident", admin); err != nil {
						t.Fatal(err)
					}
					continue
				}
				f.publish(t, files, rules.PublishOptions{})
			}
			d, err := f.svc.Decide(t.Context(), input(c.agent, c.tool, c.args))
			if err != nil {
				t.Fatalf("Decide = %v", err)
			}
			if d.Effect != c.want.effect || d.Rule != c.want.rule || d.Bundle != c.want.bundle || d.Degraded {
				t.Errorf("Decide = %s rule %q bundle %d degraded %v (%s); want %s rule %q bundle %d",
					d.Effect, d.Rule, d.Bundle, d.Degraded, d.Reason, c.want.effect, c.want.rule, c.want.bundle)
			}
			if fmt.Sprint(d.Approval) != fmt.Sprint(c.want.route) {
				t.Errorf("route = %+v; want %+v", d.Approval, c.want.route)
			}
			if c.want.effect != policy.Deny || c.want.bundle > 0 {
				var rec struct {
					Grants  string          `json:"grants"`
					Request *policy.Request `json:"request"`
				}
				if err := json.Unmarshal([]byte(d.Input), &rec); err != nil || rec.Request == nil || rec.Request.Tool.Name != c.tool {
					t.Errorf("recorded input = %s, %v; want the request of %s", d.Input, err, c.tool)
				}
			} else if d.Input != "" {
				t.Errorf("a call the grants refused recorded %s", d.Input)
			}
		})
	}
}

func TestTimeIsReadInTheRulesZone(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		zone string
		want policy.Effect
	}{
		{"", policy.Allow},                // 10:00 UTC: business hours
		{"America/New_York", policy.Deny}, // 05:00: night
		{"Asia/Tokyo", policy.Deny},       // 19:00: evening
		{"Europe/Berlin", policy.Allow},   // 11:00
	} {
		t.Run(c.zone, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.publish(t, bundle(), rules.PublishOptions{TimeZone: c.zone})
			d, err := f.svc.Decide(t.Context(), input("agent-1", "payments.refund_order", map[string]any{"amount_cents": 100.0}))
			if err != nil || d.Effect != c.want {
				t.Errorf("Decide in %q = %s (%s), %v; want %s", c.zone, d.Effect, d.Reason, err, c.want)
			}
		})
	}
}

func TestEvaluationPastItsBudgetIsAFault(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	files := bundle()
	f.publish(t, files, rules.PublishOptions{})
	// A bundle that slows down only on crm (its tests never reach it).
	files["slow.toy"] = `[{"id": "slow", "effect": "permit", "tool": "crm.*", "slow": true}]`
	files["refunds.toy"] = strings.Replace(files["refunds.toy"], `[`, `[{"id": "crm", "effect": "permit", "tool": "x.none"},`, 1)
	// The slow rule sorts before the others: every evaluation spends the
	// budget, so it is published straight to the store.
	ctx := t.Context()
	err := f.store.InsertPolicyBundle(ctx, &toolplane.PolicyBundle{OrganizationID: org, Version: 2, Language: "toy", Files: files,
		Digest: toolplane.PolicyBundleDigest(files), PublishedBy: "ada", PublishedAt: f.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Second)
	_, err = f.svc.Decide(ctx, input("agent-1", "crm.lookup", nil))
	if !errors.Is(err, policy.ErrBudget) {
		t.Errorf("Decide with a rule that runs past its budget = %v; want ErrBudget", err)
	}
}

func TestFailClosedAndFailOpen(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	f.publish(t, bundle(), rules.PublishOptions{})
	read := input("agent-1", "payments.get_order", nil)
	write := input("agent-1", "payments.refund_order", map[string]any{"amount_cents": 100.0})
	for _, in := range []policy.Input{read, write} {
		if d, err := f.svc.Decide(ctx, in); err != nil || d.Effect != policy.Allow {
			t.Fatalf("Decide while the store answers = %s, %v", d.Effect, err)
		}
	}
	f.store.down.Store(true)
	f.clock.Advance(2 * time.Second) // past the recheck: the store is read again

	if _, err := f.svc.Decide(ctx, write); !errors.Is(err, errDown) {
		t.Errorf("a write decided while the store is down = %v; want the store's error (a fault)", err)
	}
	d, err := f.svc.Decide(ctx, read)
	if err != nil || d.Effect != policy.Allow || !d.Degraded || d.Bundle != 1 || d.Rule != "reads" {
		t.Errorf("a fail_open read while the store is down = %+v, %v; want allowed by rule reads of bundle 1, degraded", d, err)
	}
	if d, err := f.svc.Decide(ctx, input("agent-1", "crm.lookup", nil)); err == nil {
		t.Errorf("a read not annotated fail_open = %+v; want a fault", d)
	}
	f.clock.Advance(rules.FailOpenFor)
	if d, err := f.svc.Decide(ctx, read); err == nil {
		t.Errorf("a fail_open read %s after the last good read = %+v; want a fault", rules.FailOpenFor+2*time.Second, d)
	}
	f.store.down.Store(false)
	if d, err := f.svc.Decide(ctx, read); err != nil || d.Degraded {
		t.Errorf("once the store answers again = %+v, %v; want a decision not degraded", d, err)
	}
}

func TestShadowReportsWhatACandidateDecidesDifferently(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	f.publish(t, bundle(), rules.PublishOptions{})
	calls := []policy.Input{
		input("agent-1", "payments.refund_order", map[string]any{"amount_cents": 100.0, "api_key": "sk_live_abcdefghijklmnopqrstuvwx"}),
		input("agent-1", "payments.refund_order", map[string]any{"amount_cents": 90000.0}),
		input("agent-1", "payments.get_order", nil),
		input("agent-2", "payments.get_order", nil), // no grant
	}
	for i, in := range calls {
		d, err := f.svc.Decide(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		// What the invoker records of the decision.
		e := &toolplane.AuditEvent{ID: fmt.Sprint("aud-", i), OrganizationID: org, RunID: "run-1", AgentID: in.Invocation.AgentID,
			Tool: in.Tool.Name, Source: toolplane.SourceREST, Outcome: "ok", CreatedAt: f.clock.Now(),
			PolicyDecision: d.Effect.String(), PolicyBundle: d.Bundle, PolicyRule: d.Rule, PolicyInput: []byte(d.Input)}
		if err := f.store.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(d.Input, "sk_live") {
			t.Errorf("the recorded input keeps a credential: %s", d.Input)
		}
		f.clock.Advance(time.Minute)
	}
	// One call recorded before documents were kept, one before the policy step.
	for i, e := range []toolplane.AuditEvent{
		{ID: "aud-old", PolicyDecision: "allow"},
		{ID: "aud-invalid", Outcome: "invalid_input"},
	} {
		e.OrganizationID, e.Tool, e.Source, e.CreatedAt = org, "crm.lookup", toolplane.SourceREST, f.clock.Now().Add(time.Duration(i)*time.Second)
		if err := f.store.AppendAudit(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	since := f.clock.Now().Add(-time.Hour)

	same, err := f.svc.Shadow(ctx, bundle(), since, admin)
	if err != nil {
		t.Fatal(err)
	}
	if same.Examined != 5 || same.Replayed != 3 || same.Unchanged != 4 || same.Unreplayable != 1 || same.Changed != 0 {
		t.Errorf("shadow of the bundle in force = %+v; want 5 examined, 3 replayed, 4 unchanged, 1 unreplayable, none changed", same)
	}

	denyAll := map[string]string{"all.toy": `[{"id": "everything", "effect": "forbid"}]`}
	rep, err := f.svc.Shadow(ctx, denyAll, since, auditor)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Changed != 3 || len(rep.Differences) != 3 {
		t.Fatalf("shadow of a deny-everything bundle = %+v; want the three calls allowed or routed then", rep)
	}
	var got []string
	for _, d := range rep.Differences {
		got = append(got, fmt.Sprintf("%s %s->%s (%s)", d.Tool, d.Then, d.Now, d.NowRule))
	}
	want := "payments.get_order allow->deny (everything),payments.refund_order require_approval->deny (everything),payments.refund_order allow->deny (everything)"
	if strings.Join(got, ",") != want {
		t.Errorf("differences = %s; want %s", strings.Join(got, ","), want)
	}
	if _, err := f.svc.Shadow(ctx, denyAll, since, nobody); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("Shadow by a caller with no role = %v; want ErrForbidden", err)
	}
	// A shadow run reads the audit trail, which is the auditor's: an
	// agent_operator, who may read and test bundles, would otherwise read
	// past calls' events, and their arguments through a candidate's
	// reasons or its decisions.
	if _, err := f.svc.Shadow(ctx, denyAll, since, operator); !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("Shadow by an agent_operator = %v; want ErrForbidden", err)
	}
	if _, err := f.svc.Shadow(ctx, denyAll, f.clock.Now().Add(-100*24*time.Hour), auditor); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("Shadow over 100 days = %v; want ErrInvalid", err)
	}
}

// The document a call's audit event keeps of its decision never holds a
// value the tool's input schema marks x-sensitive, in the arguments or
// echoed by a resolved fact: an auditor reading the trail, or a shadow
// run, sees where such a value was and never the value. The rules read
// where the sensitive arguments are (tool.sensitive).
func TestRecordedInputHidesSensitiveArguments(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publish(t, bundle(), rules.PublishOptions{})
	in := input("agent-1", "payments.refund_order", map[string]any{"amount_cents": 100.0, "to_account": "acct-evil-7781"})
	in.Sensitive = []string{"/to_account"}
	in.Facts = map[string]any{"order_account": map[string]any{"asked": "refund to acct-evil-7781", "account": "acct-o-501"}}
	d, err := f.svc.Decide(t.Context(), in)
	if err != nil {
		t.Fatalf("Decide = %v", err)
	}
	if d.Effect != policy.Allow || d.Input == "" {
		t.Fatalf("Decide = %s (%s), input %q; want allow with a recorded input", d.Effect, d.Reason, d.Input)
	}
	if strings.Contains(d.Input, "acct-evil-7781") {
		t.Errorf("the recorded input keeps the sensitive argument: %s", d.Input)
	}
	var rec struct {
		Request *policy.Request `json:"request"`
	}
	if err := json.Unmarshal([]byte(d.Input), &rec); err != nil || rec.Request == nil {
		t.Fatalf("recorded input = %s, %v", d.Input, err)
	}
	// Text is kept as its digest, numbers as they were.
	sum := sha256.Sum256([]byte("acct-o-501"))
	account := "sha256:" + hex.EncodeToString(sum[:16])
	if fmt.Sprint(rec.Request.Tool.Sensitive) != "[/to_account]" || !strings.Contains(d.Input, account) || strings.Contains(d.Input, "acct-o-501") ||
		rec.Request.Arguments["amount_cents"] != 100.0 || rec.Request.Arguments["to_account"] != boundary.Redacted {
		t.Errorf("recorded input = %s; want tool.sensitive [/to_account], the sensitive argument redacted, the fact's text as its digest %s and the amount as it was", d.Input, account)
	}
}

// A value at a pointer the input schema marks x-sensitive is kept out of
// the recorded input whatever its type: a number or a boolean there (a
// card number, a PIN, sent as JSON numbers) is as secret as text, though
// only text can be looked for where a fact echoed it.
func TestRecordedInputHidesSensitiveNumbers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publish(t, bundle(), rules.PublishOptions{})
	in := input("agent-1", "payments.refund_order", map[string]any{"amount_cents": 100.0,
		"card": map[string]any{"number": 4111111111111111.0, "pin": 4321.0, "debit": true}})
	in.Sensitive = []string{"/card/number", "/card/pin", "/card/debit"}
	d, err := f.svc.Decide(t.Context(), in)
	if err != nil || d.Input == "" {
		t.Fatalf("Decide = %v, input %q; want a recorded input", err, d.Input)
	}
	var rec struct {
		Request *policy.Request `json:"request"`
	}
	if err := json.Unmarshal([]byte(d.Input), &rec); err != nil || rec.Request == nil {
		t.Fatalf("recorded input = %s, %v", d.Input, err)
	}
	card, _ := rec.Request.Arguments["card"].(map[string]any)
	for _, name := range []string{"number", "pin", "debit"} {
		if card[name] != boundary.Redacted {
			t.Errorf("recorded card %s = %v, want %q", name, card[name], boundary.Redacted)
		}
	}
	if rec.Request.Arguments["amount_cents"] != 100.0 {
		t.Errorf("recorded amount = %v, want 100 as it was", rec.Request.Arguments["amount_cents"])
	}
	if in.Arguments.(map[string]any)["card"].(map[string]any)["pin"] != 4321.0 {
		t.Errorf("recording changed the caller's arguments: %v", in.Arguments)
	}
}

// A value at an x-sensitive pointer is redacted from the recorded input
// whatever its type: a PIN or a card number sent as a number, a flag, an
// object of numbers. Only strings are hidden wherever they were copied
// to; at its own place, every value is.
func TestRecordedInputRedactsSensitiveValuesOfEveryType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    map[string]any
		pointer string
		leak    string
	}{
		{"a number", map[string]any{"amount_cents": 100.0, "pin": 4921.0}, "/pin", "4921"},
		{"a long number", map[string]any{"amount_cents": 100.0, "card": 4111111111111111.0}, "/card", "4111111111111111"},
		{"an object of numbers", map[string]any{"amount_cents": 100.0, "card": map[string]any{"number": 5500000000000004.0, "cvc": 737.0}}, "/card", "737"},
		{"each element of an array", map[string]any{"amount_cents": 100.0, "codes": []any{8812.0, 9923.0}}, "/codes/*", "8812"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.publish(t, bundle(), rules.PublishOptions{})
			in := input("agent-1", "payments.refund_order", tt.args)
			in.Sensitive = []string{tt.pointer}
			d, err := f.svc.Decide(t.Context(), in)
			if err != nil {
				t.Fatalf("Decide = %v", err)
			}
			if d.Input == "" || strings.Contains(d.Input, tt.leak) || !strings.Contains(d.Input, `"amount_cents":100`) {
				t.Errorf("recorded input = %s; want %s redacted and the amount kept", d.Input, tt.pointer)
			}
		})
	}
}

// A shadow run spends at most its run budget evaluating, whatever the
// candidate: one whose every decision runs to the evaluation budget,
// replayed over many past calls, stops when the run's time is spent and
// says the older calls were not examined, rather than holding a core for
// events × budget. The caller needs only the role that reads bundles.
func TestShadowRunTimeIsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.svc = rules.New(rules.Config{Store: f.store, Grants: authz.Policy{Service: f.grants}, Engines: []policy.Engine{policytoy.Toy{}},
		Now: f.clock.Now, Budget: 20 * time.Millisecond, RunBudget: 200 * time.Millisecond})
	ctx := t.Context()
	f.publish(t, bundle(), rules.PublishOptions{})
	const calls = 40 // 40 × 20ms: four times the run budget
	for i := range calls {
		d, err := f.svc.Decide(ctx, input("agent-1", "payments.get_order", nil))
		if err != nil {
			t.Fatal(err)
		}
		e := &toolplane.AuditEvent{ID: fmt.Sprint("aud-", i), OrganizationID: org, RunID: "run-1", AgentID: "agent-1",
			Tool: "payments.get_order", Source: toolplane.SourceREST, Outcome: "ok", CreatedAt: f.clock.Now(),
			PolicyDecision: d.Effect.String(), PolicyBundle: d.Bundle, PolicyRule: d.Rule, PolicyInput: []byte(d.Input)}
		if err := f.store.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Second)
	}
	slow := map[string]string{"slow.toy": `[{"id": "slow", "effect": "permit", "tool": "*", "slow": true}]`}
	start := time.Now()
	rep, err := f.svc.Shadow(ctx, slow, f.clock.Now().Add(-time.Hour), auditor)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Truncated || rep.Examined >= calls || took > 600*time.Millisecond {
		t.Errorf("a shadow run of a candidate that spends every budget took %v: examined %d, truncated %v; want it stopped near 200ms, truncated",
			took, rep.Examined, rep.Truncated)
	}
}

// Running a bundle's tests (the test endpoint, which needs only the role
// that reads bundles, and publishing) spends at most the run budget: a
// bundle whose tests never finish is answered, not run forever.
func TestBundleTestsRunTimeIsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.svc = rules.New(rules.Config{Store: f.store, Grants: authz.Policy{Service: f.grants}, Engines: []policy.Engine{policytoy.Toy{}},
		Now: f.clock.Now, TestBudget: 200 * time.Millisecond})
	slow := bundle()
	slow["slow.toy"] = `[{"id": "slow", "effect": "permit", "tool": "*", "slow": true}]`
	for name, run := range map[string]func(context.Context) error{
		"test": func(ctx context.Context) error { _, err := f.svc.Test(ctx, slow, auditor); return err },
		"publish": func(ctx context.Context) error {
			_, err := f.svc.Publish(ctx, slow, rules.PublishOptions{}, admin)
			if err == nil {
				return errors.New("published")
			}
			return nil
		},
	} {
		done := make(chan error, 1)
		go func() { done <- run(t.Context()) }()
		select {
		case err := <-done:
			if name == "publish" && err != nil {
				t.Errorf("publish of a bundle whose tests never finish: %v", err)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("%s of a bundle whose tests never finish did not answer within 3s", name)
		}
	}
	if v, err := f.store.PolicyBundleVersion(t.Context(), org); err != nil || v != 0 {
		t.Errorf("version in force = %d, %v; want none", v, err)
	}
}

// What the identity provider's claims say of the person and the agent
// reaches the rules, and the recorded document keeps it with every
// credential-named attribute redacted, as it keeps the arguments.
func TestRecordedInputRedactsClaimedAttributes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publish(t, bundle(), rules.PublishOptions{})
	in := input("agent-1", "payments.get_order", nil)
	in.Invocation.User = &toolplane.User{Groups: []string{"support"}, Attributes: map[string]any{"region": "eu", "session_token": "idp-tok-0193"}}
	in.Invocation.AgentAttributes = map[string]any{"team": "ops", "api_key": "agent-key-7f31"}
	d, err := f.svc.Decide(t.Context(), in)
	if err != nil || d.Effect != policy.Allow || d.Input == "" {
		t.Fatalf("Decide = %s (%s), %v; want allow with a recorded input", d.Effect, d.Reason, err)
	}
	if strings.Contains(d.Input, "idp-tok-0193") || strings.Contains(d.Input, "agent-key-7f31") {
		t.Errorf("the recorded input keeps a claimed credential: %s", d.Input)
	}
	if !strings.Contains(d.Input, `"region":"eu"`) || !strings.Contains(d.Input, `"team":"ops"`) || !strings.Contains(d.Input, `"support"`) {
		t.Errorf("the recorded input lost the claims rules read: %s", d.Input)
	}
}

// TestTheDeploymentZoneIsTheDefault: an organization whose bundle names no
// zone, or that has no bundle, reads time in the deployment's zone; a
// bundle's own zone wins. Zone answers the same zone the rules read, which
// the org_time fact reads too.
func TestTheDeploymentZoneIsTheDefault(t *testing.T) {
	t.Parallel()
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	for _, c := range []struct {
		name, bundleZone string
		publish          bool
		wantZone         string
		want             policy.Effect
	}{
		{"no bundle", "", false, "Asia/Tokyo", policy.Allow},
		{"a bundle naming no zone", "", true, "Asia/Tokyo", policy.Deny}, // 19:00 in Tokyo: evening
		{"a bundle naming its zone", "Europe/Berlin", true, "Europe/Berlin", policy.Allow},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.svc = rules.New(rules.Config{Store: f.store, Grants: authz.Policy{Service: f.grants}, Engines: []policy.Engine{policytoy.Toy{}},
				Now: f.clock.Now, Budget: 50 * time.Millisecond, Zone: tokyo})
			if c.publish {
				f.publish(t, bundle(), rules.PublishOptions{TimeZone: c.bundleZone})
			}
			z, err := f.svc.Zone(t.Context(), org)
			if err != nil || z.String() != c.wantZone {
				t.Fatalf("Zone = %v, %v; want %s", z, err, c.wantZone)
			}
			d, err := f.svc.Decide(t.Context(), input("agent-1", "payments.refund_order", map[string]any{"amount_cents": 100.0}))
			if err != nil || d.Effect != c.want {
				t.Errorf("Decide = %s (%s), %v; want %s", d.Effect, d.Reason, err, c.want)
			}
		})
	}
}

// The zone is kept through the break-glass: while the rules are disabled
// the org_time fact still reads the organization's zone, and the bundle
// published after it, naming no zone, keeps the one set before.
func TestTheZoneOutlivesTheBreakGlass(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	f.publish(t, bundle(), rules.PublishOptions{TimeZone: "Europe/Paris"})
	off, err := f.svc.Disable(ctx, "incident 42", admin)
	if err != nil {
		t.Fatal(err)
	}
	if z, err := f.svc.Zone(ctx, org); err != nil || z.String() != "Europe/Paris" || off.TimeZone != "Europe/Paris" {
		t.Fatalf("while disabled: Zone = %v, %v, the version's zone %q; want Europe/Paris", z, err, off.TimeZone)
	}
	again := f.publish(t, bundle(), rules.PublishOptions{Note: "incident over"})
	if again.TimeZone != "Europe/Paris" {
		t.Errorf("the bundle published after the break-glass reads time in %q; want Europe/Paris", again.TimeZone)
	}
}

// A call a bundle denied with no rule named ("no rule allows this call")
// whose document was too large to keep cannot be replayed: it is not
// counted as the grants' refusal, which no candidate could change.
func TestShadowDoesNotTakeABundlesDenialForTheGrants(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	f.publish(t, bundle(), rules.PublishOptions{})
	for _, e := range []toolplane.AuditEvent{
		{ID: "aud-grants", PolicyDecision: "deny"},
		{ID: "aud-bundle", PolicyDecision: "deny", PolicyBundle: 1},
	} {
		e.OrganizationID, e.Tool, e.Source, e.Outcome, e.CreatedAt = org, "crm.lookup", toolplane.SourceREST, "denied", f.clock.Now()
		if err := f.store.AppendAudit(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := f.svc.Shadow(ctx, bundle(), f.clock.Now().Add(-time.Hour), auditor)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Examined != 2 || rep.Unchanged != 1 || rep.Unreplayable != 1 {
		t.Errorf("shadow = %+v; want 2 examined: the grants' denial unchanged, the bundle's not replayable", rep)
	}
}

// The rules read what the call's run tree has spent; a call outside any
// run has spent nothing, whatever the organization's other run-less calls
// cost (their usage shares the empty root), as the run_spend_cents fact
// answers.
func TestACallOutsideARunHasSpentNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	f.svc = rules.New(rules.Config{Store: f.store, Grants: authz.Policy{Service: f.grants}, Engines: []policy.Engine{policytoy.Toy{}},
		Now: f.clock.Now, Budget: 50 * time.Millisecond, RunCost: f.store.RunTreeCost})
	f.publish(t, bundle(), rules.PublishOptions{})
	for i, u := range []toolplane.Usage{{RunID: "run-1", RootRunID: "run-1", CostCents: 700}, {CostCents: 5000}} {
		u.ID, u.OrganizationID, u.Tool, u.CreatedAt = fmt.Sprint("use-", i), org, "payments.get_order", f.clock.Now()
		if err := f.store.InsertUsage(ctx, &u); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		run  string
		want int64
	}{{"run-1", 700}, {"", 0}} {
		in := input("agent-1", "payments.get_order", nil)
		in.Invocation.RunID = c.run
		d, err := f.svc.Decide(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Request policy.Request `json:"request"`
		}
		if err := json.Unmarshal([]byte(d.Input), &rec); err != nil {
			t.Fatalf("recorded input %q: %v", d.Input, err)
		}
		if got := rec.Request.Context.RunCostCents; got != c.want {
			t.Errorf("run %q: the rules read a run cost of %d; want %d", c.run, got, c.want)
		}
	}
}
