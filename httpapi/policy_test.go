package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/cedar"
	"github.com/toolplane/toolplane/policy/policytest"
	"github.com/toolplane/toolplane/rules"
)

// policyFixture is the fixture's server with the organization's rules
// enabled, reading time in zone where a bundle names none.
func policyFixture(t *testing.T, zone *time.Location) *fixture {
	t.Helper()
	f := newFixture(t)
	reg, _ := demotest.Registry(t)
	grants := authz.New(authz.Config{Store: f.store, Registry: reg})
	operator := &toolplane.Credential{ID: "tpk_opal", OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "opal",
		Roles: []string{toolplane.RoleAgentOperator}}
	if err := grants.AddGrant(t.Context(), &toolplane.Grant{AgentID: "agent-support", Pattern: "demo.*"}, operator); err != nil {
		t.Fatal(err)
	}
	api := &httpapi.Server{Door: f.door, Store: f.store, Log: slog.New(slog.DiscardHandler),
		Rules: rules.New(rules.Config{Store: f.store, Grants: authz.Policy{Service: grants}, Engines: []policy.Engine{cedar.Engine{}}, Zone: zone})}
	f.api, f.srv = api, httptest.NewServer(api.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

// A version that names no zone reads time in the deployment's, and the
// API shows that zone, not UTC.
func TestABundleShowsTheZoneItsRulesReadTimeIn(t *testing.T) {
	t.Parallel()
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	f := policyFixture(t, tokyo)
	admin := mint(t, f.store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil, false)
	files, err := policy.ReadBundleDir("../examples/policy/cedar")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ zone, want string }{{"", "Asia/Tokyo"}, {"Europe/Paris", "Europe/Paris"}} {
		body, _ := json.Marshal(map[string]any{"files": files, "time_zone": c.zone})
		status, got := f.do(t, "POST", "/v1/policy/bundles", admin, string(body))
		if status != http.StatusCreated || got["time_zone"] != c.want {
			t.Fatalf("publish naming zone %q = %d %v; want time_zone %s", c.zone, status, got, c.want)
		}
	}
	status, got := f.do(t, "GET", "/v1/policy/bundles/1", admin, "")
	if status != http.StatusOK || got["time_zone"] != "Asia/Tokyo" {
		t.Fatalf("GET version 1 = %d %v; want time_zone Asia/Tokyo", status, got)
	}
}

// The door refuses a shadow run to whoever the service would, before it
// reads the body: an agent_operator may test bundles but not shadow them.
func TestAShadowRunIsRefusedAtTheDoorToAnOperator(t *testing.T) {
	t.Parallel()
	f := policyFixture(t, nil)
	operator := mint(t, f.store, toolplane.CredentialPerson, "opal", []string{toolplane.RoleAgentOperator}, nil, false)
	for _, body := range []string{`{"files":{"a.cedar":"permit(principal, action, resource);"}}`, `not json`} {
		if status, got := f.do(t, "POST", "/v1/policy/shadow", operator, body); status != http.StatusForbidden {
			t.Errorf("shadow by an operator with body %s = %d %v; want 403", body, status, got)
		}
	}
}

// Explain decides on the arguments a call would carry to the rules: the
// tool's input schema validates them first, so an argument of the wrong
// type is the caller's mistake (400), never a rule failing to evaluate
// (a fault).
func TestExplainDecidesOnValidatedArguments(t *testing.T) {
	t.Parallel()
	f := policyFixture(t, nil)
	admin := mint(t, f.store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil, false)
	files := map[string]string{
		"a.cedar": `@id("all") permit (principal, action, resource);
@id("big") @approval("finance") forbid (principal, action, resource)
when { context.arguments has amount_cents && context.arguments.amount_cents > 50000 };`,
		"schema.cedarschema": `type Arguments = { amount_cents?: Long, to_account?: String };`,
		"tests.yaml": `tests:
  - name: a big refund asks finance
    request: {principal: {agent: a}, tool: {name: demo.refund_order}, arguments: {amount_cents: 90000}}
    expect: require_approval
    rule: big
`,
	}
	body, _ := json.Marshal(map[string]any{"files": files})
	if status, got := f.do(t, "POST", "/v1/policy/bundles", admin, string(body)); status != http.StatusCreated {
		t.Fatalf("publish = %d %v", status, got)
	}
	for _, c := range []struct {
		name, args string
		status     int
		rule       string
	}{
		{"valid", `{"order_id":"o-1","amount_cents":90000,"reason":"r"}`, http.StatusOK, "big"},
		{"an amount written as text", `{"order_id":"o-1","amount_cents":"90000","reason":"r"}`, http.StatusBadRequest, ""},
	} {
		status, got := f.do(t, "POST", "/v1/policy/explain", admin,
			`{"agent_id":"agent-support","tool":"demo.refund_order","arguments":`+c.args+`}`)
		if status != c.status || (c.rule != "" && got["rule"] != c.rule) {
			t.Errorf("%s: explain = %d %v; want %d, rule %q", c.name, status, got, c.status, c.rule)
		}
	}
}

// The hostile array of issue 27 in a bundle's test table, sent by an
// agent_operator to the test endpoint: answered about as fast as an
// array of as many plain integers (it took seconds, against the plain
// array's milliseconds), the case decided by the input bound. The time is
// compared with the plain array's, not a clock, so that a loaded machine
// slows both alike.
func TestAHostileBundleTestIsAnsweredQuickly(t *testing.T) {
	t.Parallel()
	f := policyFixture(t, nil)
	operator := mint(t, f.store, toolplane.CredentialPerson, "opal", []string{toolplane.RoleAgentOperator}, nil, false)
	run := func(values string) time.Duration {
		files := map[string]string{
			"a.cedar": `@id("all") permit (principal, action, resource);
@id("no-zero") forbid (principal, action, resource) when { context.arguments has values && context.arguments.values.contains(0) };`,
			"schema.cedarschema": `type Arguments = { values?: Set<Long> };`,
			"tests.json": `{"tests": [{"name": "hostile", "expect": "deny", "rule": "` + policy.RuleInputBound + `",
			"request": {"tool": {"name": "stats.sum"}, "arguments": {"values": ` + values + `}}}]}`,
		}
		body, _ := json.Marshal(map[string]any{"files": files})
		start := time.Now()
		status, got := f.do(t, "POST", "/v1/policy/test", operator, string(body))
		took := time.Since(start)
		if status != http.StatusOK || got["passed"] != true {
			t.Errorf("test = %d %v; want 200, the case decided by the bound", status, got)
		}
		return took
	}
	plain := run(policytest.PlainNumbersJSON(20000))
	hostile := run(policytest.CollidingNumbersJSON(20000))
	if hostile > 3*plain+300*time.Millisecond {
		t.Errorf("the test endpoint took %v for the colliding array, %v for the plain one; want them alike", hostile, plain)
	}
}
