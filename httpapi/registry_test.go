package httpapi_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
)

// Every registry and grant operation answers 403 to a caller without the
// role, in the one error envelope.
func TestRegistryAndGrantRoutesRefuseWithoutTheRole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.api.Catalog = catalog.New(catalog.Config{Store: f.store, Registry: f.api.Registry, Options: registry.Options{}})
	f.api.Authz = authz.New(f.store, f.api.Registry, nil, nil)
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
	f.api.Catalog = catalog.New(catalog.Config{Store: f.store, Registry: f.api.Registry, Options: registry.Options{}})
	f.api.Authz = authz.New(f.store, f.api.Registry, nil, nil)
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
	f.api.Limiter = ratelimit.New(2, time.Minute)
	f.api.Failures = ratelimit.NewFailures(2, time.Minute)
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
	f.api.RunBudgetCents = 2
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
