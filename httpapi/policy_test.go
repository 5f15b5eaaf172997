package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/cedar"
	"github.com/toolplane/toolplane/rules"
)

// policyFixture is the fixture's server with the organization's rules
// enabled, reading time in zone where a bundle names none.
func policyFixture(t *testing.T, zone *time.Location) *fixture {
	t.Helper()
	f := newFixture(t)
	api := &httpapi.Server{Door: f.door, Store: f.store, Log: slog.New(slog.DiscardHandler),
		Rules: rules.New(rules.Config{Store: f.store, Engines: []policy.Engine{cedar.Engine{}}, Zone: zone})}
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
