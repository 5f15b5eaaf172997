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

// wantFault fails t unless an answer is a server error that names none of
// the store's internals.
func wantFault(t *testing.T, what string, code int, body map[string]any) {
	t.Helper()
	if code < 500 || errCode(body) != "internal_error" {
		t.Errorf("%s with the database closed = %d %v, want 5xx internal_error", what, code, body)
		return
	}
	e, _ := body["error"].(map[string]any)
	if msg, _ := e["message"].(string); strings.Contains(msg, "sql") || strings.Contains(msg, "closed") {
		t.Errorf("%s answered the store's error to the caller: %q", what, msg)
	}
}

// outageFixture answers a served API with the catalogue and the grants
// service, and an admin's key the key cache will admit once the database
// is gone, so a request reaches its service rather than stopping at the
// gate when a test closes the database.
func outageFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	f := newFixture(t)
	f.api.Catalog = catalog.New(catalog.Config{Store: f.store, Registry: f.door.Registry, Options: registry.Options{}})
	f.door.Authz = authz.New(authz.Config{Store: f.store, Registry: f.door.Registry})
	f.door.Keys = apikey.NewCache(0, time.Hour)
	admin := mint(t, f.store, toolplane.CredentialPerson, "root", []string{"approver", "auditor", "platform_admin"}, nil, false)
	return f, admin
}

// TestAListAnswersAStoreOutageAsAServerError closes the database under a
// running server: every list must answer a server error that names no
// internals, never the 400 "cursor is not valid" a caller would take for
// their own mistake; a garbage cursor on a working store stays the
// caller's 400.
func TestAListAnswersAStoreOutageAsAServerError(t *testing.T) {
	t.Parallel()
	routes := []string{"/v1/approvals", "/v1/uncertain", "/v1/audit/events", "/v1/keys", "/v1/changes", "/v1/registry/tools"}
	f, admin := outageFixture(t)

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
		wantFault(t, "GET "+path, code, body)
	}
}

// TestAWriteAnswersAStoreOutageAsAServerError closes the database under a
// running server: a reconciliation and a key's creation that cannot reach
// the store are the platform's fault, a logged 500, never the 409 "not
// uncertain" or the 400 "check your input" that would send the caller to
// look for a mistake of theirs. With the database up, the caller's own
// mistakes keep their answers.
func TestAWriteAnswersAStoreOutageAsAServerError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// The key cache lets the keys authenticate once the database is gone,
	// so the requests reach their services rather than stopping at the
	// gate.
	f.door.Keys = apikey.NewCache(0, time.Hour)
	admin := mint(t, f.store, toolplane.CredentialPerson, "root", []string{"approver", "platform_admin"}, nil, false)
	reconcile := `{"tool":"demo.refund_order","key":"k-1","unconfirmed":"the bank has not answered"}`
	newKey := `{"kind":"agent","subject":"agent-new","tools":["demo.*"]}`

	if code, body := f.do(t, http.MethodPost, "/v1/uncertain/reconcile", admin, reconcile); code != http.StatusNotFound || errCode(body) != "not_found" {
		t.Errorf("reconciling no claim = %d %v, want 404 not_found", code, body)
	}
	// Text a store cannot hold is the caller's mistake, at its field.
	code, body := f.do(t, http.MethodPost, "/v1/keys", admin, `{"kind":"person","subject":"x","roles":["a\u0000b"]}`)
	if e, _ := body["error"].(map[string]any); code != http.StatusBadRequest || errCode(body) != "invalid_request" || e["field_path"] != "/roles/0" {
		t.Errorf("a role holding NUL = %d %v, want 400 invalid_request at /roles/0", code, body)
	}
	if code, body := f.do(t, http.MethodPost, "/v1/keys", admin, newKey); code != http.StatusCreated {
		t.Fatalf("a key with the database up = %d %v, want 201", code, body)
	}

	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	code, body = f.do(t, http.MethodPost, "/v1/uncertain/reconcile", admin, reconcile)
	wantFault(t, "POST /v1/uncertain/reconcile", code, body)
	code, body = f.do(t, http.MethodPost, "/v1/keys", admin, newKey)
	wantFault(t, "POST /v1/keys", code, body)
}

// TestAServiceWriteAnswersAStoreOutageAsAServerError: the writes whose
// services turned any store error into the caller's invalid request (a key
// minted, a grant of a bundle, a deprecation naming its replacement)
// answer a database outage as a server error, without its text.
func TestAServiceWriteAnswersAStoreOutageAsAServerError(t *testing.T) {
	t.Parallel()
	f, admin := outageFixture(t)
	if code, body := f.do(t, http.MethodGet, "/v1/keys", admin, ""); code != http.StatusOK {
		t.Fatalf("warm the key cache: %d %v", code, body)
	}
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, path, body string }{
		{"mint a key", "/v1/keys", `{"kind":"agent","subject":"bot"}`},
		{"grant a bundle", "/v1/grants", `{"agent_id":"bot","bundle":"ops"}`},
		{"deprecate naming a replacement", "/v1/registry/tools/payments.refund/versions/1.0.0/deprecate",
			`{"sunset_at":"2030-01-01T00:00:00Z","replacement":"2.0.0"}`},
	} {
		code, body := f.do(t, http.MethodPost, c.path, admin, c.body)
		wantFault(t, c.what, code, body)
	}
}
