package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/registry"
)

// TestAListAnswersAStoreOutageAsAServerError closes the database under a
// running server: every list must answer a server error that names no
// internals, never the 400 "cursor is not valid" a caller would take for
// their own mistake; a garbage cursor on a working store stays the
// caller's 400.
func TestAListAnswersAStoreOutageAsAServerError(t *testing.T) {
	t.Parallel()
	routes := []string{"/v1/approvals", "/v1/uncertain", "/v1/audit/events", "/v1/keys", "/v1/changes", "/v1/registry/tools"}
	f := newFixture(t)
	f.api.Catalog = catalog.New(catalog.Config{Store: f.store, Registry: f.api.Registry, Options: registry.Options{}})
	f.api.Authz = authz.New(authz.Config{Store: f.store, Registry: f.api.Registry, Now: nil})
	// The key cache lets the key authenticate once the database is gone,
	// so the request reaches the list rather than stopping at the gate.
	f.api.Keys = apikey.NewCache(0, time.Hour)
	admin := mint(t, f.store, toolplane.CredentialPerson, "root", []string{"approver", "auditor", "platform_admin"}, nil, false)

	for _, path := range routes {
		code, body := f.do(t, http.MethodGet, path+"?cursor=not-a-cursor", admin, "")
		if code != http.StatusBadRequest || errCode(body) != "invalid_request" {
			t.Errorf("GET %s with a garbage cursor = %d %v, want 400 invalid_request", path, code, body)
		}
	}

	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, path := range routes {
		code, body := f.do(t, http.MethodGet, path, admin, "")
		if code < 500 || errCode(body) != "internal_error" {
			t.Errorf("GET %s with the database closed = %d %v, want 5xx internal_error", path, code, body)
			continue
		}
		e, _ := body["error"].(map[string]any)
		if msg, _ := e["message"].(string); strings.Contains(msg, "sql") || strings.Contains(msg, "closed") {
			t.Errorf("GET %s answered the store's error to the caller: %q", path, msg)
		}
	}
}
