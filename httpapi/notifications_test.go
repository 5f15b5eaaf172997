package httpapi_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

func TestNotificationChannelsAPI(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	reg, hs := demotest.Registry(t)
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	notes, err := notify.New(notify.Config{Store: store, Keys: testKeyring(t)})
	if err != nil {
		t.Fatal(err)
	}
	api := &httpapi.Server{Door: &door.Door{Invoker: iv, Registry: reg, Store: store, Log: log}, Store: store, Log: log, Notifications: notes}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	admin := mint(t, store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil, false)
	admin2 := mintIn(t, store, "org-2", toolplane.CredentialPerson, "root2", []string{toolplane.RolePlatformAdmin}, nil, false)
	approver := mint(t, store, toolplane.CredentialPerson, "bob", []string{toolplane.RoleApprover}, nil, false)
	auditor := mint(t, store, toolplane.CredentialPerson, "grace", []string{toolplane.RoleAuditor}, nil, false)
	do := func(method, path, key, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	const hmacKey, slackPath = "whsec-api-0123456789abcdef0123456789", "T0/B0/slack-secret-path"
	hook := `{"name":"ops hook","kind":"webhook","config":{"url":"https://hooks.example/tp"},"secrets":{"hmac_key":"` + hmacKey + `"}}`
	slack := `{"name":"finance slack","group":"finance","kind":"slack","secrets":{"slack_url":"https://hooks.slack.com/services/` + slackPath + `"}}`
	if code, b := do("POST", "/v1/notifications/channels", approver, hook); code != http.StatusForbidden {
		t.Fatalf("an approver creates a channel: %d %s", code, b)
	}
	code, b := do("POST", "/v1/notifications/channels", admin, hook)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	id, _ := decode(t, b)["channel"].(map[string]any)["id"].(string)
	if code, b := do("POST", "/v1/notifications/channels", admin, slack); code != http.StatusCreated {
		t.Fatalf("create slack: %d %s", code, b)
	}
	if code, b := do("POST", "/v1/notifications/channels", admin, `{"name":"bad","kind":"pager"}`); code != http.StatusBadRequest {
		t.Fatalf("an unknown kind: %d %s", code, b)
	}
	// A destination egress refuses is the channel's fault, named by its
	// field, and not a refusal of the caller.
	for _, url := range []string{"http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:6379/", "http://[::ffff:10.0.0.1]/"} {
		code, b := do("POST", "/v1/notifications/channels", admin, `{"name":"probe","kind":"webhook","config":{"url":"`+url+`"},"secrets":{"hmac_key":"`+hmacKey+`"}}`)
		if code != http.StatusBadRequest || !strings.Contains(string(b), `"invalid_request"`) || !strings.Contains(string(b), "config.url: the destination is not allowed") {
			t.Errorf("a channel to %s: %d %s", url, code, b)
		}
	}
	code, list := do("GET", "/v1/notifications/channels", admin, "")
	if code != http.StatusOK || len(decode(t, list)["items"].([]any)) != 2 {
		t.Fatalf("list: %d %s", code, list)
	}
	code, shown := do("GET", "/v1/notifications/channels/"+id, admin, "")
	if code != http.StatusOK || !strings.Contains(string(shown), `"secrets_set":["hmac_key"]`) {
		t.Fatalf("show: %d %s", code, shown)
	}
	if code, _ := do("GET", "/v1/notifications/channels/"+id, admin2, ""); code != http.StatusNotFound {
		t.Errorf("another organization's admin reads the channel: %d", code)
	}
	if code, _ := do("DELETE", "/v1/notifications/channels/"+id, admin2, ""); code != http.StatusNotFound {
		t.Errorf("another organization's admin deletes the channel: %d", code)
	}
	if code, b := do("GET", "/v1/notifications/dead-letters", auditor, ""); code != http.StatusOK || !strings.Contains(string(b), `"items":[]`) {
		t.Errorf("dead letters for an auditor: %d %s", code, b)
	}
	if code, _ := do("GET", "/v1/notifications/dead-letters", approver, ""); code != http.StatusForbidden {
		t.Errorf("dead letters for an approver: %d", code)
	}
	if code, _ := do("DELETE", "/v1/notifications/channels/"+id, admin, ""); code != http.StatusOK {
		t.Errorf("delete: %d", code)
	}
	if code, _ := do("GET", "/v1/notifications/channels/"+id, admin, ""); code != http.StatusNotFound {
		t.Errorf("show after delete: %d", code)
	}
	for _, secret := range []string{hmacKey, slackPath} {
		for what, text := range map[string]string{"answer": string(b) + string(list) + string(shown), "log": logs.String()} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s shows a secret", what)
			}
		}
	}
}
