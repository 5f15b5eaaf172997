package httpapi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/demo"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
)

// Every registry and grant operation answers 403 to a caller without the
// role, in the one error envelope.
func TestRegistryAndGrantRoutesRefuseWithoutTheRole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.api.Catalog = catalog.New(catalog.Config{Store: f.store, Registry: f.door.Registry, Options: registry.Options{}})
	f.door.Authz = authz.New(authz.Config{Store: f.store, Registry: f.door.Registry})
	publisher := mint(t, f.store, toolplane.CredentialPerson, "pete", []string{"tool_publisher:support"}, nil, false)
	def := `{"name":"support.find","version":"1.0.0","kind":"internal","owner":"support","description":"Find.","effect":"read",
		"binding":{"handler":{"key":"demo.search_tickets"}},"input_schema":{"type":"object"},"output_schema":{"type":"object"}}`
	tests := []struct {
		name, method, path, key, body string
	}{
		{"a publisher's first publish", "POST", "/v1/registry/tools", publisher, def},
		{"an approver reviewing a version", "POST", "/v1/registry/tools/support.find/versions/1.0.0/approve", f.person, ""},
		{"an approver granting", "POST", "/v1/grants", f.person, `{"agent_id":"bot","pattern":"demo.*"}`},
		{"an auditor granting", "POST", "/v1/grants", f.auditor, `{"agent_id":"bot","pattern":"demo.*"}`},
		{"an agent listing grants", "GET", "/v1/grants", f.agent, ""},
		{"an approver denying", "POST", "/v1/denies", f.person, `{"agent_id":"*","pattern":"demo.*","reason":"x"}`},
		{"an approver making a bundle", "PUT", "/v1/bundles/b", f.person, `{"refs":["demo.search_tickets@^1.0.0"]}`},
		{"an approver reading the change log", "GET", "/v1/changes", f.person, ""},
		{"an approver explaining an agent", "GET", "/v1/agents/bot/explain", f.person, ""},
	}
	for _, tt := range tests {
		status, body := f.do(t, tt.method, tt.path, tt.key, tt.body)
		if status != http.StatusForbidden || errCode(body) != "denied" {
			t.Errorf("%s: %d %v", tt.name, status, body)
		}
	}
	// The auditor reads what the others may not change.
	for _, path := range []string{"/v1/changes", "/v1/grants", "/v1/agents/bot/explain", "/v1/denies"} {
		if status, body := f.do(t, "GET", path, f.auditor, ""); status != http.StatusOK {
			t.Errorf("auditor GET %s: %d %v", path, status, body)
		}
	}
}

func TestGrantListsArePaged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.api.Catalog = catalog.New(catalog.Config{Store: f.store, Registry: f.door.Registry, Options: registry.Options{}})
	f.door.Authz = authz.New(authz.Config{Store: f.store, Registry: f.door.Registry})
	admin := f.mintAdmin(t)
	for _, p := range []string{"demo.search_tickets", "demo.add_note", "demo.refund_order"} {
		if status, body := f.do(t, "POST", "/v1/grants", admin, `{"agent_id":"bot","pattern":"`+p+`"}`); status != http.StatusCreated {
			t.Fatalf("grant %s: %d %v", p, status, body)
		}
	}
	var seen []string
	cursor := ""
	for range 3 {
		path := "/v1/grants?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		status, body := f.do(t, "GET", path, admin, "")
		if status != http.StatusOK {
			t.Fatalf("page: %d %v", status, body)
		}
		for _, it := range body["items"].([]any) {
			seen = append(seen, it.(map[string]any)["pattern"].(string))
		}
		cursor, _ = body["next_cursor"].(string)
		if cursor == "" {
			break
		}
	}
	if len(seen) != 3 || seen[0] != "demo.search_tickets" || seen[2] != "demo.refund_order" {
		t.Errorf("pages gave %v", seen)
	}
	if status, _ := f.do(t, "GET", "/v1/grants?cursor=nope", admin, ""); status != http.StatusBadRequest {
		t.Errorf("a bad cursor: %d", status)
	}
}

// Guessing a known key's secret is slowed by the failure budget (the key's
// own budget is its holder's alone; see TestWrongSecretsNeverLockOutTheHolder).
func TestWrongSecretsAreRateLimited(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.door.Limiter = ratelimit.New(2, time.Minute)
	f.door.Failures = ratelimit.NewFailures(2, time.Minute)
	f.door.Now = frozen()
	id, _, err := apikey.Parse(f.agent)
	if err != nil {
		t.Fatal(err)
	}
	wrong := apikey.Key(id, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	var statuses []int
	for range 3 {
		status, _ := f.do(t, "GET", "/v1/tools", wrong, "")
		statuses = append(statuses, status)
	}
	if statuses[0] != http.StatusUnauthorized || statuses[2] != http.StatusTooManyRequests {
		t.Errorf("statuses %v, want 401 then 429", statuses)
	}
}

// A run's cost ceiling: the caller's, under the server's cap.
func TestRunBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.door.RunBudgetCents = 2
	key := mint(t, f.store, toolplane.CredentialAgent, "analyst", nil, []string{"demo.analyze_text"}, false)
	call := func(run string, asked int) string {
		body := `{"arguments":{"text":"Hello there."},"run_id":"` + run + `","max_cost_cents":` + strconv.Itoa(asked) + `}`
		status, got := f.do(t, "POST", "/v1/tools/demo.analyze_text/invoke", key, body)
		if status != http.StatusOK {
			t.Fatalf("%d %v", status, got)
		}
		return errCode(got)
	}
	// The caller asks for 1 cent: the second call is over it.
	if got := []string{call("run-a", 1), call("run-a", 1)}; got[0] != "" || got[1] != "budget_exhausted" {
		t.Errorf("caller's ceiling: %v", got)
	}
	// The caller asks for 100: the server's cap of 2 wins.
	if got := []string{call("run-b", 100), call("run-b", 100), call("run-b", 100)}; got[1] != "" || got[2] != "budget_exhausted" {
		t.Errorf("server's cap: %v", got)
	}
}

// withRegistry wires the catalogue and grant services into f's server.
func (f *fixture) withRegistry(t *testing.T) {
	t.Helper()
	_, bs, err := demo.New().Catalogue()
	if err != nil {
		t.Fatal(err)
	}
	hs := handler.NewRegistry()
	_ = hs.Register(bs...)
	f.api.Catalog = catalog.New(catalog.Config{Store: f.store, Registry: f.door.Registry, Options: registry.Options{Bindings: demotest.Bindings{Registry: hs}}})
	f.door.Authz = authz.New(authz.Config{Store: f.store, Registry: f.door.Registry})
}

// supportFind answers a definition of support.find at version, with tags.
func supportFind(version string, tags ...string) string {
	return toJSON(map[string]any{"name": "support.find", "version": version, "kind": "internal", "owner": "support",
		"description": "Find tickets.", "effect": "read", "tags": tags, "binding": map[string]any{"handler": map[string]any{"key": "demo.search_tickets"}},
		"input_schema":  map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}},
		"output_schema": map[string]any{"type": "object"}})
}

// The registry is each organization's own. Organization B's
// platform_admin and tool_owner (API keys and JWTs alike name their
// organization) cannot approve, publish a version of, deprecate, retire,
// read or list organization A's tool: each answers not_found, never
// forbidden, so its existence is not disclosed. What B publishes under the
// same name is B's own, and A's agents are never served it.
func TestAnotherOrganizationCannotReachAnOrganizationsTools(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withRegistry(t)
	aAdmin, aOwner := f.mintAdmin(t), mint(t, f.store, toolplane.CredentialPerson, "olga", []string{"tool_owner:support"}, nil, false)
	aAgent := mint(t, f.store, toolplane.CredentialAgent, "bot", nil, nil, false)
	bAdmin := mintIn(t, f.store, "orgb", toolplane.CredentialPerson, "mallory", []string{"platform_admin"}, nil, false)
	bOwner := mintIn(t, f.store, "orgb", toolplane.CredentialPerson, "trent", []string{"tool_owner:support"}, nil, false)
	bAgent := mintIn(t, f.store, "orgb", toolplane.CredentialAgent, "bot", nil, nil, false)
	mustDo := func(method, path, key, body string, want int) map[string]any {
		t.Helper()
		status, out := f.do(t, method, path, key, body)
		if status != want {
			t.Fatalf("%s %s: %d %v, want %d", method, path, status, out, want)
		}
		return out
	}
	// A publishes support.find 1.0.0 (active once reviewed) and 1.1.0
	// (tagged pii: in review), and grants its agent support.*.
	mustDo("POST", "/v1/registry/tools", aOwner, supportFind("1.0.0"), http.StatusCreated)
	mustDo("POST", "/v1/registry/tools/support.find/versions/1.0.0/approve", aAdmin, "", http.StatusOK)
	mustDo("POST", "/v1/registry/tools", aOwner, supportFind("1.1.0", "pii"), http.StatusCreated)
	mustDo("POST", "/v1/grants", aAdmin, `{"agent_id":"bot","pattern":"support.*"}`, http.StatusCreated)

	sunset := `{"sunset_at":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"}`
	attempts := []struct {
		name, method, path, key, body string
	}{
		{"B's admin approves A's version", "POST", "/v1/registry/tools/support.find/versions/1.1.0/approve", bAdmin, ""},
		{"B's admin rejects A's version", "POST", "/v1/registry/tools/support.find/versions/1.1.0/reject", bAdmin, `{"note":"no"}`},
		{"B's owner submits A's version", "POST", "/v1/registry/tools/support.find/versions/1.1.0/submit", bOwner, ""},
		{"B's owner deprecates A's version", "POST", "/v1/registry/tools/support.find/versions/1.0.0/deprecate", bOwner, sunset},
		{"B's admin deprecates A's version", "POST", "/v1/registry/tools/support.find/versions/1.0.0/deprecate", bAdmin, sunset},
		{"B's admin retires A's version", "POST", "/v1/registry/tools/support.find/versions/1.0.0/retire", bAdmin, ""},
		{"B's admin reads A's version", "GET", "/v1/registry/tools/support.find/versions/1.0.0", bAdmin, ""},
	}
	for _, tt := range attempts {
		if status, out := f.do(t, tt.method, tt.path, tt.key, tt.body); status != http.StatusNotFound || errCode(out) != "not_found" {
			t.Errorf("%s: %d %v, want 404 not_found", tt.name, status, out)
		}
	}
	for _, key := range []string{bAdmin, bOwner} {
		// B is listed the platform's own tools, and none of A's.
		for _, it := range mustDo("GET", "/v1/registry/tools", key, "", http.StatusOK)["items"].([]any) {
			if v := it.(map[string]any); v["source"] != "builtin" || v["name"] == "support.find" {
				t.Errorf("B lists %v", v)
			}
		}
	}
	for version, state := range map[string]string{"1.0.0": "active", "1.1.0": "in_review"} {
		if out := mustDo("GET", "/v1/registry/tools/support.find/versions/"+version, aAdmin, "", http.StatusOK); out["state"] != state {
			t.Errorf("A's %s is %v after B's attempts, want %s", version, out["state"], state)
		}
	}

	// B publishes "a new version" of support.find, and a tool of a new
	// name: both B's own, which B reviews, and which A's agent is never
	// served.
	if out := mustDo("POST", "/v1/registry/tools", bOwner, supportFind("1.2.0"), http.StatusCreated); out["state"] != "in_review" {
		t.Errorf("B's first publish of support.find is %v, want in_review (B's own first tool)", out["state"])
	}
	mustDo("POST", "/v1/registry/tools/support.find/versions/1.2.0/approve", bAdmin, "", http.StatusOK)
	other := strings.Replace(supportFind("1.0.0"), "support.find", "support.other", 1)
	mustDo("POST", "/v1/registry/tools", bOwner, other, http.StatusCreated)
	mustDo("POST", "/v1/grants", bAdmin, `{"agent_id":"bot","pattern":"support.*"}`, http.StatusCreated)

	served := func(key string) map[string]string {
		t.Helper()
		out := mustDo("GET", "/v1/tools", key, "", http.StatusOK)
		got := map[string]string{}
		for _, it := range out["items"].([]any) {
			m := it.(map[string]any)
			got[m["name"].(string)] = m["version"].(string)
		}
		return got
	}
	if got := served(aAgent); len(got) != 1 || got["support.find"] != "1.0.0" {
		t.Errorf("A's agent is served %v, want support.find 1.0.0 only", got)
	}
	if got := served(bAgent); len(got) != 2 || got["support.find"] != "1.2.0" || got["support.other"] != "1.0.0" {
		t.Errorf("B's agent is served %v, want its own support.find 1.2.0 and support.other 1.0.0", got)
	}
	if out := mustDo("GET", "/v1/tools/support.find", aAgent, "", http.StatusOK); out["tool"].(map[string]any)["version"] != "1.0.0" {
		t.Errorf("A's agent reads support.find at %v", out["tool"])
	}
	mustDo("GET", "/v1/tools/support.other", aAgent, "", http.StatusNotFound)
	if out := mustDo("GET", "/v1/tools", aAdmin, "", http.StatusOK); strings.Contains(toJSON(out), "support.other") {
		t.Errorf("A's admin is shown B's tool: %v", out)
	}
	// A's changes stay in A's change log, B's in B's.
	for _, key := range []string{aAdmin, bAdmin} {
		if out := mustDo("GET", "/v1/changes?kind=version.publish", key, "", http.StatusOK); len(out["items"].([]any)) != 2 {
			t.Errorf("change log: %v, want the organization's two publishes", out["items"])
		}
	}
}

// An agent's key, narrowed or not, reads no registry definition, version
// list, bundle, grant or deny, and is refused before any body is read (a
// malformed body still answers 403); the answer does not depend on whether
// what it names exists.
func TestAgentKeysAreRefusedTheRegistry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withRegistry(t)
	admin := f.mintAdmin(t)
	if status, out := f.do(t, "POST", "/v1/registry/tools", admin, supportFind("1.0.0")); status != http.StatusCreated {
		t.Fatalf("publish: %d %v", status, out)
	}
	if status, out := f.do(t, "PUT", "/v1/bundles/tier1", admin, `{"refs":["demo.search_tickets@^1.0.0"]}`); status != http.StatusOK {
		t.Fatalf("bundle: %d %v", status, out)
	}
	wide := mint(t, f.store, toolplane.CredentialAgent, "bot", nil, nil, false)
	routes := []struct {
		name, method, path, body string
	}{
		{"list versions", "GET", "/v1/registry/tools", ""},
		{"read a version", "GET", "/v1/registry/tools/support.find/versions/1.0.0", ""},
		{"read a version that does not exist", "GET", "/v1/registry/tools/support.find/versions/9.9.9", ""},
		{"publish a malformed body", "POST", "/v1/registry/tools", "{not json"},
		{"publish", "POST", "/v1/registry/tools", supportFind("2.0.0")},
		{"change a version with a malformed body", "POST", "/v1/registry/tools/support.find/versions/1.0.0/deprecate", "{not json"},
		{"retire", "POST", "/v1/registry/tools/support.find/versions/1.0.0/retire", ""},
		{"diff", "POST", "/v1/registry/diff", "{not json"},
		{"list bundles", "GET", "/v1/bundles", ""},
		{"put a bundle with a malformed body", "PUT", "/v1/bundles/tier1", "{not json"},
		{"list grants", "GET", "/v1/grants", ""},
		{"grant with a malformed body", "POST", "/v1/grants", "{not json"},
		{"list denies", "GET", "/v1/denies", ""},
		{"deny with a malformed body", "POST", "/v1/denies", "{not json"},
		{"read the change log", "GET", "/v1/changes", ""},
	}
	for _, key := range []struct{ name, key string }{{"narrowed", f.agent}, {"unnarrowed", wide}} {
		for _, rt := range routes {
			if status, out := f.do(t, rt.method, rt.path, key.key, rt.body); status != http.StatusForbidden || errCode(out) != "denied" {
				t.Errorf("%s agent key, %s: %d %v, want 403 denied", key.name, rt.name, status, out)
			}
		}
	}
	// A person without the role is refused before the body is read, too.
	for _, rt := range []struct{ method, path string }{
		{"POST", "/v1/registry/tools"},
		{"POST", "/v1/registry/tools/support.find/versions/1.0.0/deprecate"},
		{"POST", "/v1/grants"},
		{"POST", "/v1/denies"},
		{"PUT", "/v1/bundles/tier1"},
	} {
		if status, out := f.do(t, rt.method, rt.path, f.person, "{not json"); status != http.StatusForbidden {
			t.Errorf("an approver's malformed %s %s: %d %v, want 403", rt.method, rt.path, status, out)
		}
	}
	// The people of the organization read the catalogue.
	for _, key := range []string{f.person, f.auditor, admin} {
		if status, out := f.do(t, "GET", "/v1/registry/tools/support.find/versions/1.0.0", key, ""); status != http.StatusOK {
			t.Errorf("a person reading a version: %d %v", status, out)
		}
	}
	if status, out := f.do(t, "GET", "/v1/bundles", f.auditor, ""); status != http.StatusOK {
		t.Errorf("an auditor listing bundles: %d %v", status, out)
	}
}
