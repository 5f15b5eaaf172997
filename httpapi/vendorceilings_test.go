package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/ceiling"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
)

// A vendor ceiling round trip through REST, on every store: refused with
// its arithmetic named and nothing stored when the lanes exceed the
// account, stored and versioned otherwise, read by an auditor, changed by
// a platform administrator only, and never seen or touched by another
// organization.
func TestVendorCeilingAPI(t *testing.T) {
	t.Parallel()
	for name, store := range streamStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testVendorCeilingAPI(t, store)
		})
	}
}

func mintStore(t *testing.T, s toolplane.Store, org, subject string, roles ...string) string {
	t.Helper()
	id, secret, err := apikey.New(toolplane.CredentialPerson)
	if err != nil {
		t.Fatal(err)
	}
	c := &toolplane.Credential{ID: id, OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: subject, Roles: roles,
		Hash: apikey.Hash(secret), CreatedAt: time.Now()}
	if err := s.InsertCredential(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return apikey.Key(id, secret)
}

func testVendorCeilingAPI(t *testing.T, store toolplane.Store) {
	reg, hs := demotest.Registry(t)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}})
	if err != nil {
		t.Fatal(err)
	}
	ceilings, ok := store.(ceiling.Store)
	if !ok {
		t.Fatalf("%T keeps no vendor ceilings", store)
	}
	api := &httpapi.Server{Door: &door.Door{Invoker: iv, Registry: reg, Store: store}, Store: store, VendorCeilings: ceiling.New(ceilings, nil)}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	org, other := "org-"+t.Name(), "org-other-"+t.Name()
	admin := mintStore(t, store, org, "root", toolplane.RolePlatformAdmin)
	auditor := mintStore(t, store, org, "grace", toolplane.RoleAuditor)
	approver := mintStore(t, store, org, "bob", toolplane.RoleApprover)
	stranger := mintStore(t, store, other, "eve", toolplane.RolePlatformAdmin)

	do := func(method, path, key, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return resp.StatusCode, m
	}
	ceilingOf := func(m map[string]any) map[string]any {
		t.Helper()
		c, _ := m["vendor_ceiling"].(map[string]any)
		if c == nil {
			t.Fatalf("no vendor_ceiling in %v", m)
		}
		return c
	}
	messageOf := func(m map[string]any) string {
		e, _ := m["error"].(map[string]any)
		msg, _ := e["message"].(string)
		return msg
	}

	if code, m := do("GET", "/v1/vendor-ceilings/exa", admin, ""); code != http.StatusNotFound {
		t.Fatalf("show before any ceiling: %d %v", code, m)
	}
	if code, m := do("GET", "/v1/vendor-ceilings", admin, ""); code != http.StatusOK || len(m["items"].([]any)) != 0 {
		t.Fatalf("list before any ceiling: %d %v", code, m)
	}

	over := `{"account_limit":100,"lanes":[
		{"name":"interactive","active_runs":20,"shape":{"kind":"parallel","parts":[{"kind":"call","provider":"exa","fanout":3},{"kind":"call","provider":"exa","fanout":3}]}},
		{"name":"batch","active_runs":5,"shape":{"kind":"sequence","parts":[{"kind":"call","provider":"exa","fanout":10},{"kind":"call","provider":"fullenrich","fanout":40}]}}]}`
	for _, key := range []string{auditor, approver} {
		if code, m := do("PUT", "/v1/vendor-ceilings/exa", key, strings.Replace(over, "100", "500", 1)); code != http.StatusForbidden {
			t.Fatalf("a set without platform_admin: %d %v", code, m)
		}
	}
	code, m := do("PUT", "/v1/vendor-ceilings/exa", admin, over)
	if code != http.StatusBadRequest || errCode(m) != "invalid_request" {
		t.Fatalf("a ceiling whose lanes exceed the account: %d %v", code, m)
	}
	if want := "interactive: 20 runs × 6 calls = 120; batch: 5 runs × 10 calls = 50; sum 170 > account limit 100"; !strings.Contains(messageOf(m), want) {
		t.Fatalf("the refusal says %q, want it to name %q", messageOf(m), want)
	}
	if code, m := do("GET", "/v1/vendor-ceilings/exa", admin, ""); code != http.StatusNotFound {
		t.Fatalf("a refused ceiling was stored: %d %v", code, m)
	}

	code, m = do("PUT", "/v1/vendor-ceilings/exa", admin, strings.Replace(over, "100", "170", 1))
	if code != http.StatusOK {
		t.Fatalf("set: %d %v", code, m)
	}
	c := ceilingOf(m)
	if c["version"] != 1.0 || c["account_limit"] != 170.0 || c["updated_by"] != "root" || c["organization_id"] != org {
		t.Fatalf("set answered %v", c)
	}
	if a := c["arithmetic"].(map[string]any); a["sum"] != 170.0 {
		t.Fatalf("arithmetic = %v, want sum 170", a)
	}

	// Lowering the account limit below the sum is refused as well, and
	// the stored ceiling stays.
	code, m = do("PUT", "/v1/vendor-ceilings/exa", admin, strings.Replace(strings.Replace(over, "100", "150", 1), `{"account_limit"`, `{"version":1,"account_limit"`, 1))
	if code != http.StatusBadRequest || !strings.Contains(messageOf(m), "sum 170 > account limit 150") {
		t.Fatalf("a lowered account limit: %d %v", code, m)
	}
	if code, m := do("PUT", "/v1/vendor-ceilings/exa", admin, `{"version":7,"account_limit":500}`); code != http.StatusConflict {
		t.Fatalf("a set from a stale version: %d %v", code, m)
	}
	code, m = do("GET", "/v1/vendor-ceilings/exa", auditor, "")
	if code != http.StatusOK || ceilingOf(m)["version"] != 1.0 || ceilingOf(m)["account_limit"] != 170.0 {
		t.Fatalf("an auditor's show after refused sets: %d %v", code, m)
	}

	// A lane calling the vendor under another name is stored, with a
	// warning.
	code, m = do("PUT", "/v1/vendor-ceilings/exa", admin, `{"version":1,"account_limit":200,"note":"plan: growth","lanes":[
		{"name":"batch","active_runs":5,"shape":{"kind":"call","provider":"exa-ai","fanout":10}}]}`)
	if code != http.StatusOK || ceilingOf(m)["version"] != 2.0 {
		t.Fatalf("a set from version 1: %d %v", code, m)
	}
	if w, _ := m["warnings"].([]any); len(w) != 1 || !strings.Contains(w[0].(string), "lane batch makes no call to exa") {
		t.Fatalf("warnings = %v", m["warnings"])
	}

	// Another organization neither sees nor changes it, and keeps a
	// ceiling of the same vendor of its own.
	if code, m := do("GET", "/v1/vendor-ceilings/exa", stranger, ""); code != http.StatusNotFound {
		t.Fatalf("another organization's show: %d %v", code, m)
	}
	if code, m := do("GET", "/v1/vendor-ceilings", stranger, ""); code != http.StatusOK || len(m["items"].([]any)) != 0 {
		t.Fatalf("another organization's list: %d %v", code, m)
	}
	if code, m := do("PUT", "/v1/vendor-ceilings/exa", stranger, `{"version":2,"account_limit":1}`); code != http.StatusConflict {
		t.Fatalf("another organization's set from this one's version: %d %v", code, m)
	}
	if code, m := do("DELETE", "/v1/vendor-ceilings/exa", stranger, ""); code != http.StatusNotFound {
		t.Fatalf("another organization's delete: %d %v", code, m)
	}
	if code, m := do("PUT", "/v1/vendor-ceilings/exa", stranger, `{"account_limit":3}`); code != http.StatusOK || ceilingOf(m)["organization_id"] != other {
		t.Fatalf("another organization's own ceiling: %d %v", code, m)
	}
	code, m = do("GET", "/v1/vendor-ceilings", admin, "")
	if items, _ := m["items"].([]any); code != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["account_limit"] != 200.0 {
		t.Fatalf("list after another organization's set: %d %v", code, m)
	}

	for _, bad := range []struct{ path, body, field string }{
		{"/v1/vendor-ceilings/Exa", `{"account_limit":5}`, "provider"},
		{"/v1/vendor-ceilings/exa", `{"account_limit":0}`, "account_limit"},
		{"/v1/vendor-ceilings/exa", `{"account_limit":5,"lanes":[{"name":"a","active_runs":1,"shape":{"kind":"loop"}}]}`, "lanes[0].shape.kind"},
		{"/v1/vendor-ceilings/exa", `{"account_limit":5,"burst":2}`, ""},
	} {
		code, m := do("PUT", bad.path, admin, bad.body)
		e, _ := m["error"].(map[string]any)
		if field, _ := e["field_path"].(string); code != http.StatusBadRequest || field != bad.field {
			t.Fatalf("PUT %s %s: %d %v, want 400 at %q", bad.path, bad.body, code, m, bad.field)
		}
	}

	if code, m := do("DELETE", "/v1/vendor-ceilings/exa", auditor, ""); code != http.StatusForbidden {
		t.Fatalf("an auditor's delete: %d %v", code, m)
	}
	if code, m := do("DELETE", "/v1/vendor-ceilings/exa?version=1", admin, ""); code != http.StatusConflict {
		t.Fatalf("a delete from a stale version: %d %v", code, m)
	}
	if code, m := do("DELETE", "/v1/vendor-ceilings/exa?version=2", admin, ""); code != http.StatusOK || m["deleted"] != true {
		t.Fatalf("delete: %d %v", code, m)
	}
	if code, m := do("GET", "/v1/vendor-ceilings/exa", admin, ""); code != http.StatusNotFound {
		t.Fatalf("show after delete: %d %v", code, m)
	}
	if code, m := do("GET", "/v1/vendor-ceilings/exa", stranger, ""); code != http.StatusOK || ceilingOf(m)["account_limit"] != 3.0 {
		t.Fatalf("the other organization's ceiling after this one's delete: %d %v", code, m)
	}
	// Every set and delete is in the change log, with its arithmetic.
	changes, _, err := store.ListChanges(context.Background(), org, "", "", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 3 || changes[0].Kind != "vendor_ceiling.delete" || changes[2].Kind != "vendor_ceiling.set" ||
		!strings.Contains(string(changes[2].Detail), "sum 170 <= account limit 170") {
		t.Fatalf("changes = %+v", changes)
	}
}
