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

// outageFixture answers a served API whose database is closed after an
// admin's key was verified once (the key cache then admits it), so every
// request below reaches its service, which meets the outage.
func outageFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	f := newFixture(t)
	f.api.Catalog = catalog.New(catalog.Config{Store: f.store, Registry: f.door.Registry, Options: registry.Options{}})
	f.door.Authz = authz.New(authz.Config{Store: f.store, Registry: f.door.Registry})
	f.door.Keys = apikey.NewCache(0, time.Hour)
	admin := mint(t, f.store, toolplane.CredentialPerson, "root", []string{"approver", "auditor", "platform_admin"}, nil, false)
	if code, body := f.do(t, http.MethodGet, "/v1/keys", admin, ""); code != http.StatusOK {
		t.Fatalf("warm the key cache: %d %v", code, body)
	}
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	return f, admin
}

// wantServerError fails unless the answer is a 5xx that names none of the
// store's internals: a store that does not answer is the platform's fault,
// never a 400 or 409 the caller would take for their own mistake.
func wantServerError(t *testing.T, what string, code int, body map[string]any) {
	t.Helper()
	if code < 500 {
		t.Errorf("%s with the database closed = %d %v, want 5xx", what, code, body)
		return
	}
	e, _ := body["error"].(map[string]any)
	if msg, _ := e["message"].(string); strings.Contains(msg, "sql") || strings.Contains(msg, "closed") {
		t.Errorf("%s answered the store's error to the caller: %q", what, msg)
	}
}

// TestAServiceWriteAnswersAStoreOutageAsAServerError: the writes whose
// services turned any store error into the caller's invalid request (a key
// minted, a grant of a bundle, a deprecation naming its replacement)
// answer a database outage as a server error, without its text.
func TestAServiceWriteAnswersAStoreOutageAsAServerError(t *testing.T) {
	t.Parallel()
	f, admin := outageFixture(t)
	for _, c := range []struct{ what, path, body string }{
		{"mint a key", "/v1/keys", `{"kind":"agent","subject":"bot"}`},
		{"grant a bundle", "/v1/grants", `{"agent_id":"bot","bundle":"ops"}`},
		{"deprecate naming a replacement", "/v1/registry/tools/payments.refund/versions/1.0.0/deprecate",
			`{"sunset_at":"2030-01-01T00:00:00Z","replacement":"2.0.0"}`},
	} {
		code, body := f.do(t, http.MethodPost, c.path, admin, c.body)
		wantServerError(t, c.what, code, body)
	}
}
