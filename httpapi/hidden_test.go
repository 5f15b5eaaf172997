package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// GET /v1/tools/{name} of a tool the key may call names, in its
// dependencies, its replacement and its description, only tools the key
// may call, as search and the dependency graph do.
func TestToolViewNamesOnlyWhatTheKeyMayCall(t *testing.T) {
	t.Parallel()
	store, _ := sqlitetest.NewDB(t)
	hidden := searchTool("payroll.export_salaries", "Export the payroll.")
	refund := searchTool("payments.refund", "Refund an order.", requires("payroll.export_salaries"))
	old := searchTool("crm.search_customers", "Search customers by name, email or phone.")
	repl := searchTool("hr.find_people", "Find people records by name or email.")
	handlers := map[string]bool{}
	var vs []registry.Version
	for _, d := range []toolplane.Definition{hidden, refund, repl} {
		handlers[d.Name] = false
		vs = append(vs, registry.Version{Organization: "org-1", Def: d, State: toolplane.StateActive})
	}
	handlers[old.Name] = false
	vs = append(vs, registry.Version{Organization: "org-1", Def: old, State: toolplane.StateDeprecated, Replacement: "hr.find_people"})
	reg, _, err := registry.Build(nil, registry.Options{Bindings: registry.Static{Handlers: handlers}})
	if err != nil {
		t.Fatal(err)
	}
	if ps := reg.SetVersions("published", vs); len(ps) > 0 {
		t.Fatal(ps)
	}
	index := discovery.New(discovery.Options{})
	t.Cleanup(index.Follow(reg))
	quiet := slog.New(slog.DiscardHandler)
	srv := httptest.NewServer((&httpapi.Server{Door: &door.Door{Registry: reg, Store: store, Log: quiet, Discovery: index}, Store: store, Log: quiet}).Handler())
	t.Cleanup(srv.Close)
	f := &searchFixture{srv: srv}
	key := mint(t, store, toolplane.CredentialAgent, "agent-narrow", nil, []string{"payments.*", "crm.*"}, false)

	res := f.search(t, key, url.Values{"q": {"search customers by email"}})
	for _, m := range res.Matches {
		if m.Replacement != "" {
			t.Fatalf("search names the replacement: %+v", m)
		}
	}
	status, body := f.get(t, key, "/v1/tools/payments.refund/dependencies")
	if status != 200 || strings.Contains(string(body), hidden.Name) {
		t.Fatalf("dependencies: %d %s", status, body)
	}
	for _, p := range []string{"/v1/tools/payments.refund", "/v1/tools/crm.search_customers"} {
		status, body = f.get(t, key, p)
		if status != 200 {
			t.Fatalf("%s: %d", p, status)
		}
		if s := string(body); strings.Contains(s, hidden.Name) || strings.Contains(s, "hr.find_people") || strings.Contains(s, "hr_find_people") {
			t.Errorf("%s names a tool the key may not call, which search and dependencies hide: %s", p, body)
		}
	}
}

// A bad version range is quoted back clipped, not whole.
func TestVersionRangeNotEchoedWhole(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	status, body := f.get(t, f.all, "/v1/tools/search?"+url.Values{"version": {"^" + strings.Repeat("9", 60_000)}}.Encode())
	var e struct {
		Error httpErr `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	if status != http.StatusBadRequest || len(e.Error.Message) > 2048 {
		t.Errorf("%d, a %d-byte message", status, len(e.Error.Message))
	}
}
