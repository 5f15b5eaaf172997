package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/signing"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
	"github.com/toolplane/toolplane/webhook"
)

// The rotation answers the new secret once; the metadata route, the logs
// and every other answer never hold it; each organization rotates and
// reads its own.
func TestWebhookSecretAPI(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	reg, hs := demotest.Registry(t)
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := signing.New(signing.Config{Store: store, Keys: testKeyring(t)})
	if err != nil {
		t.Fatal(err)
	}
	api := &httpapi.Server{Door: &door.Door{Invoker: iv, Registry: reg, Store: store, Log: log}, Store: store, Log: log, WebhookSecrets: secrets}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	admin := mint(t, store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil, false)
	admin2 := mintIn(t, store, "org-2", toolplane.CredentialPerson, "root2", []string{toolplane.RolePlatformAdmin}, nil, false)
	approver := mint(t, store, toolplane.CredentialPerson, "bob", []string{toolplane.RoleApprover}, nil, false)
	auditor := mint(t, store, toolplane.CredentialPerson, "grace", []string{toolplane.RoleAuditor}, nil, false)
	var answers []string
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
		if method == "POST" && resp.StatusCode == http.StatusOK && resp.Header.Get("Cache-Control") != "private, no-store" {
			t.Errorf("the rotation's answer may be cached: %q", resp.Header.Get("Cache-Control"))
		}
		answers = append(answers, string(b))
		return resp.StatusCode, b
	}
	if code, b := do("GET", "/v1/webhook-secret", admin, ""); code != http.StatusNotFound {
		t.Fatalf("metadata before any secret: %d %s", code, b)
	}
	for _, key := range []string{approver, auditor} {
		if code, b := do("POST", "/v1/webhook-secret:rotate", key, ""); code != http.StatusForbidden || !strings.Contains(string(b), `"denied"`) && !strings.Contains(string(b), "platform_admin") {
			t.Fatalf("a rotation without platform_admin: %d %s", code, b)
		}
	}
	if code, b := do("POST", "/v1/webhook-secret:rotate", admin, `{"grace":"1h"}`); code != http.StatusBadRequest {
		t.Fatalf("a rotation with an unknown field: %d %s", code, b)
	}
	code, b := do("POST", "/v1/webhook-secret:rotate", admin, "")
	if code != http.StatusOK {
		t.Fatalf("rotate: %d %s", code, b)
	}
	var first struct {
		WebhookSecret signing.Info `json:"webhook_secret"`
		Secret        string       `json:"secret"`
	}
	if err := json.Unmarshal(b, &first); err != nil || !strings.HasPrefix(first.Secret, signing.Prefix) || first.WebhookSecret.ID == "" {
		t.Fatalf("rotate answered %s", b)
	}
	code, b = do("POST", "/v1/webhook-secret:rotate", admin, "{}")
	if code != http.StatusOK {
		t.Fatalf("second rotate: %d %s", code, b)
	}
	var second struct {
		WebhookSecret signing.Info `json:"webhook_secret"`
		Secret        string       `json:"secret"`
	}
	json.Unmarshal(b, &second)
	if second.WebhookSecret.PreviousID != first.WebhookSecret.ID || second.WebhookSecret.PreviousValidUntil.Before(time.Now().Add(23*time.Hour)) {
		t.Errorf("the second rotation's metadata: %+v", second.WebhookSecret)
	}
	// What org-1 signs with now holds both secrets, either verifying.
	h, err := secrets.Headers(t.Context(), "org-1", "dlv_1", []byte("{}"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{first.Secret, second.Secret} {
		if err := webhook.Check([][]byte{[]byte(s)}, h.Get(webhook.HeaderTimestamp), h.Get(webhook.HeaderSignature), []byte("{}"), time.Now(), time.Minute); err != nil {
			t.Errorf("a receiver holding one of the two secrets: %v", err)
		}
	}
	for _, key := range []string{admin, auditor} {
		code, b := do("GET", "/v1/webhook-secret", key, "")
		if code != http.StatusOK || !strings.Contains(string(b), second.WebhookSecret.ID) || !strings.Contains(string(b), `"previous_valid_until"`) {
			t.Fatalf("metadata: %d %s", code, b)
		}
	}
	if code, b := do("GET", "/v1/webhook-secret", approver, ""); code != http.StatusForbidden {
		t.Fatalf("an approver reads the metadata: %d %s", code, b)
	}
	// Another organization sees nothing of org-1's, and rotates its own.
	if code, b := do("GET", "/v1/webhook-secret", admin2, ""); code != http.StatusNotFound {
		t.Fatalf("org-2 reads before its own secret: %d %s", code, b)
	}
	if code, b := do("POST", "/v1/webhook-secret:rotate", admin2, ""); code != http.StatusOK || strings.Contains(string(b), second.WebhookSecret.ID) {
		t.Fatalf("org-2 rotates: %d %s", code, b)
	}
	// The secrets were answered once each, by their own rotation.
	for _, s := range []string{first.Secret, second.Secret} {
		n := 0
		for _, a := range answers {
			n += strings.Count(a, strings.TrimPrefix(s, signing.Prefix))
		}
		if n != 1 {
			t.Errorf("a secret was answered %d times; want once", n)
		}
		if strings.Contains(logs.String(), strings.TrimPrefix(s, signing.Prefix)) {
			t.Error("a secret reached the log")
		}
	}
}

func TestWebhookSecretRoutesWithoutTheService(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	reg, hs := demotest.Registry(t)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&httpapi.Server{Door: &door.Door{Invoker: iv, Registry: reg, Store: store}, Store: store}).Handler())
	t.Cleanup(srv.Close)
	admin := mint(t, store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil, false)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/webhook-secret:rotate", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("rotate on a server that signs no callbacks: %d", resp.StatusCode)
	}
}
