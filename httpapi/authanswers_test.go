package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/apikey"
)

// Every refusal of the REST door is the JSON envelope, and a 401 carries
// a Bearer challenge (RFC 6750) naming the server's protected resource
// metadata where there is one (RFC 9728); a valid key of the wrong kind
// is a 403 saying which kind the route takes, as curl would see them.
func TestRESTAuthAnswersAreStandard(t *testing.T) {
	t.Parallel()
	const meta = "https://tp.example/.well-known/oauth-protected-resource"
	f := newFixture(t)
	admin := f.mintAdmin(t)
	id, _, _ := apikey.Parse(admin)
	wrong := apikey.Key(id, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	withMeta := newFixture(t)
	withMeta.api.ResourceMetadata = meta
	tests := []struct {
		name                 string
		f                    *fixture
		method, path, key    string
		status               int
		challenge, code, say string
		allow                string
	}{
		{"no key", f, "GET", "/v1/tools", "", http.StatusUnauthorized, `Bearer realm="toolplane"`, "unauthenticated", "send an API key", ""},
		{"a wrong key", f, "GET", "/v1/tools", wrong, http.StatusUnauthorized, `Bearer realm="toolplane", error="invalid_token"`, "unauthenticated", "the API key is not valid", ""},
		{"no key, metadata configured", withMeta, "GET", "/v1/tools", "", http.StatusUnauthorized,
			`Bearer realm="toolplane", resource_metadata="` + meta + `"`, "unauthenticated", "send an API key", ""},
		{"a wrong key, metadata configured", withMeta, "GET", "/v1/keys", wrong, http.StatusUnauthorized,
			`Bearer realm="toolplane", resource_metadata="` + meta + `", error="invalid_token"`, "unauthenticated", "not valid", ""},
		{"an agent's key on an admin route", f, "POST", "/v1/keys", f.agent, http.StatusForbidden, "", "denied", "roles are carried by a person's key", ""},
		{"an agent's key on the audit trail", f, "GET", "/v1/audit/events", f.agent, http.StatusForbidden, "", "denied", "this is an agent's key", ""},
		{"a person's key on a tool", f, "POST", "/v1/tools/demo.add_note/invoke", admin, http.StatusForbidden, "", "denied", "this is a person's key", ""},
		{"a method the route does not take", f, "DELETE", "/v1/tools", f.agent, http.StatusMethodNotAllowed, "", "method_not_allowed", "/v1/tools takes GET, not DELETE", "GET"},
		{"no such route", f, "GET", "/v2/nothing", "", http.StatusNotFound, "", "not_found", "no such route", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest(tt.method, tt.f.srv.URL+tt.path, strings.NewReader(`{}`))
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.status, raw)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json: %s", ct, raw)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tt.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tt.challenge)
			}
			if tt.allow != "" && resp.Header.Get("Allow") != tt.allow {
				t.Errorf("Allow %q, want %q", resp.Header.Get("Allow"), tt.allow)
			}
			var env struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal(raw, &env); err != nil || env.Error == nil {
				t.Fatalf("the body is not the error envelope: %v: %s", err, raw)
			}
			if env.Error["code"] != tt.code || !strings.Contains(env.Error["message"].(string), tt.say) || env.Error["request_id"] == "" {
				t.Errorf("error %v, want code %q saying %q with a request id", env.Error, tt.code, tt.say)
			}
		})
	}
}
