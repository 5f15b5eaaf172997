package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/registry"
)

// TestRegistryListsNameTheFieldAtFault: a bad cursor on the catalogue's
// or the grants' lists is answered at field cursor, a bad limit at field
// limit, by the same rule on every list, so a client corrects the right
// parameter.
func TestRegistryListsNameTheFieldAtFault(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.api.Catalog = catalog.New(catalog.Config{Store: f.store, Registry: f.door.Registry, Options: registry.Options{}})
	f.door.Authz = authz.New(authz.Config{Store: f.store, Registry: f.door.Registry})
	admin := mint(t, f.store, toolplane.CredentialPerson, "root", []string{"auditor", "platform_admin"}, nil, false)
	tests := []struct{ path, field string }{
		{"/v1/registry/tools?cursor=not-a-cursor", "cursor"},
		{"/v1/grants?cursor=not-a-cursor", "cursor"},
		{"/v1/denies?cursor=not-a-cursor", "cursor"},
		{"/v1/bundles?cursor=not-a-cursor", "cursor"},
		{"/v1/changes?cursor=not-a-cursor", "cursor"},
		{"/v1/registry/tools?limit=0", "limit"},
		{"/v1/grants?limit=0", "limit"},
		{"/v1/denies?limit=1001", "limit"},
		{"/v1/bundles?limit=x", "limit"},
	}
	for _, tt := range tests {
		code, body := f.do(t, http.MethodGet, tt.path, admin, "")
		e, _ := body["error"].(map[string]any)
		if code != http.StatusBadRequest || errCode(body) != "invalid_request" || e["field_path"] != tt.field {
			t.Errorf("GET %s = %d %v; want 400 invalid_request at %s", tt.path, code, body, tt.field)
		}
	}
}
