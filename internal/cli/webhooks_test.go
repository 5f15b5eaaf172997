package cli

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/signing"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
	"github.com/toolplane/toolplane/webhook"
)

// runWith runs the command line with stdin and env.
func runWith(stdin string, env map[string]string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := execute(&app{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, getenv: func(k string) string { return env[k] }}, args)
	return code, out.String(), errOut.String()
}

func TestWebhooksVerify(t *testing.T) {
	t.Parallel()
	const oldSecret, newSecret = "tpwhs_old-0123456789abcdef0123456789abcdef", "tpwhs_new-0123456789abcdef0123456789abcdef"
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret.txt")
	os.WriteFile(secretFile, []byte(newSecret+"\n"), 0o600)
	body := `{"invocation_id":"inv_1","status":"succeeded"}`
	bodyFile := filepath.Join(dir, "body.json")
	os.WriteFile(bodyFile, []byte(body), 0o600)
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	signedNew := webhook.Sign([]byte(newSecret), now.Unix(), []byte(body))
	signedBoth := webhook.Signature([][]byte{[]byte(newSecret), []byte(oldSecret)}, now.Unix(), []byte(body))
	signedOld := webhook.Sign([]byte(oldSecret), now.Unix(), []byte(body))
	late := strconv.FormatInt(now.Add(-10*time.Minute).Unix(), 10)
	signedLate := webhook.Sign([]byte(newSecret), now.Add(-10*time.Minute).Unix(), []byte(body))
	env := map[string]string{"CB_SECRET": newSecret, "CB_OLD": oldSecret}
	for _, tt := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		out   string
	}{
		{"secret file, body on stdin", body, []string{"--secret-file", secretFile, "--timestamp", ts, "--signature", signedNew}, 0, "valid"},
		{"secret env, body file", "", []string{"--secret-env", "CB_SECRET", "--body-file", bodyFile, "--timestamp", ts, "--signature", signedNew}, 0, "valid"},
		{"header lines", body, []string{"--secret-env", "CB_SECRET", "--header", "X-Toolplane-Timestamp: " + ts, "--header", "x-toolplane-signature:" + signedBoth}, 0, "valid"},
		{"during a rotation, the old secret", body, []string{"--secret-env", "CB_OLD", "--timestamp", ts, "--signature", signedBoth}, 0, "valid"},
		{"the receiver holds both", body, []string{"--secret-env", "CB_SECRET", "--secret-env", "CB_OLD", "--timestamp", ts, "--signature", signedOld}, 0, "valid"},
		{"another secret", body, []string{"--secret-env", "CB_SECRET", "--timestamp", ts, "--signature", signedOld}, 1, "invalid: signature"},
		{"a changed body", body + "\n", []string{"--secret-env", "CB_SECRET", "--timestamp", ts, "--signature", signedNew}, 1, "invalid: signature"},
		{"ten minutes old", body, []string{"--secret-env", "CB_SECRET", "--timestamp", late, "--signature", signedLate}, 1, "invalid: stale"},
		{"ten minutes old, wider tolerance", body, []string{"--secret-env", "CB_SECRET", "--timestamp", late, "--signature", signedLate, "--tolerance", "15m"}, 0, "valid"},
		{"checked as of when it was recorded", body, []string{"--secret-env", "CB_SECRET", "--timestamp", late, "--signature", signedLate, "--at", late}, 0, "valid"},
		{"not hex", body, []string{"--secret-env", "CB_SECRET", "--timestamp", ts, "--signature", "v1=zz"}, 1, "invalid: malformed"},
		{"no secret", body, []string{"--timestamp", ts, "--signature", signedNew}, 2, ""},
		{"a secret on the command line is no flag", body, []string{"--secret", newSecret, "--timestamp", ts, "--signature", signedNew}, 2, ""},
		{"no signature", body, []string{"--secret-env", "CB_SECRET", "--timestamp", ts}, 2, ""},
		{"both a flag and a header", body, []string{"--secret-env", "CB_SECRET", "--timestamp", ts, "--header", "X-Toolplane-Timestamp: " + ts, "--signature", signedNew}, 2, ""},
		{"an unset variable", body, []string{"--secret-env", "NOPE", "--timestamp", ts, "--signature", signedNew}, 2, ""},
	} {
		// Not parallel: the cases check against the time taken above, so
		// they run now, not after the package's other tests let them.
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runWith(tt.stdin, env, append([]string{"webhooks", "verify"}, tt.args...)...)
			if code != tt.code || strings.TrimSpace(out) != tt.out {
				t.Fatalf("exit %d, %q (stderr %q); want %d, %q", code, out, errOut, tt.code, tt.out)
			}
			for _, s := range []string{newSecret, oldSecret} {
				if strings.Contains(errOut, s) || strings.Contains(out, s) {
					t.Errorf("the secret was printed: %s %s", out, errOut)
				}
			}
		})
	}
}

func TestWebhookSecretThroughTheCommandLine(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	reg, hs := demotest.Registry(t)
	quiet := slog.New(slog.DiscardHandler)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := signing.New(signing.Config{Store: store, Keys: parseRing(t, "k1 "+keyText(t))})
	if err != nil {
		t.Fatal(err)
	}
	api := &httpapi.Server{Door: &door.Door{Invoker: iv, Registry: reg, Store: store, Log: quiet}, Store: store, Log: quiet, WebhookSecrets: secrets}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	admin := mintKey(t, store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil)
	approver := mintKey(t, store, toolplane.CredentialPerson, "bob", []string{toolplane.RoleApprover}, nil)
	env := map[string]string{"TOOLPLANE_SERVER": srv.URL, "TOOLPLANE_KEY": admin}
	if code, _, errOut := runIn(map[string]string{"TOOLPLANE_SERVER": srv.URL, "TOOLPLANE_KEY": approver}, "webhooks", "rotate-secret"); code == 0 || !strings.Contains(errOut, "platform_admin") {
		t.Fatalf("an approver rotates: %d %s", code, errOut)
	}
	code, out, errOut := runIn(env, "webhooks", "rotate-secret", "-o", "field=secret")
	if code != 0 {
		t.Fatalf("rotate-secret: %d %s", code, errOut)
	}
	secret := strings.TrimSpace(out)
	if !strings.HasPrefix(secret, signing.Prefix) {
		t.Fatalf("rotate-secret printed %q", out)
	}
	code, out, errOut = runIn(env, "webhooks", "secret", "-o", "json")
	if code != 0 || strings.Contains(out, strings.TrimPrefix(secret, signing.Prefix)) {
		t.Fatalf("secret: %d %s %s", code, out, errOut)
	}
	var info struct {
		WebhookSecret signing.Info `json:"webhook_secret"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.WebhookSecret.ID == "" || info.WebhookSecret.RotatedBy != "root" {
		t.Fatalf("secret answered %s", out)
	}
	// What the server signs verifies on the command line with the secret
	// printed.
	body := []byte(`{"invocation_id":"inv_1"}`)
	h, err := secrets.Headers(t.Context(), "org-1", "dlv_1", body, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(file, []byte(secret), 0o600)
	code, out, errOut = runWith(string(body), nil, "webhooks", "verify", "--secret-file", file,
		"--timestamp", h.Get(webhook.HeaderTimestamp), "--signature", h.Get(webhook.HeaderSignature))
	if code != 0 || strings.TrimSpace(out) != "valid" {
		t.Fatalf("verify: %d %s %s", code, out, errOut)
	}
}
