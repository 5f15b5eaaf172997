package cli

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

func TestNotificationChannelsThroughTheCommandLine(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	reg, hs := demotest.Registry(t)
	quiet := slog.New(slog.DiscardHandler)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	notes, err := notify.New(notify.Config{Store: store, Keys: parseRing(t, "k1 "+keyText(t))})
	if err != nil {
		t.Fatal(err)
	}
	api := &httpapi.Server{Door: &door.Door{Invoker: iv, Registry: reg, Store: store, Log: quiet}, Store: store, Log: quiet, Notifications: notes}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	admin := mintKey(t, store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil)
	const hookKey, smtpPassword = "whsec-cli-0123456789abcdef0123456789", "smtp-cli-password-never-printed"
	env := map[string]string{"TOOLPLANE_SERVER": srv.URL, "TOOLPLANE_KEY": admin, "HOOK_KEY": hookKey, "SMTP_PASSWORD": smtpPassword}
	cli := func(args ...string) (int, string) {
		t.Helper()
		code, out, errOut := runIn(env, args...)
		for _, leak := range []string{hookKey, smtpPassword} {
			if strings.Contains(out, leak) || strings.Contains(errOut, leak) {
				t.Errorf("%v printed a secret:\n%s\n%s", args, out, errOut)
			}
		}
		if code != 0 {
			t.Logf("%v: %s", args, errOut)
		}
		return code, out
	}
	code, out := cli("notifications", "channels", "add", "--name", "ops", "--kind", "webhook", "--url", "https://hooks.example/tp",
		"--hmac-key-env", "HOOK_KEY", "-o", "json")
	if code != 0 {
		t.Fatalf("add: %d %s", code, out)
	}
	var created struct {
		Channel notify.Shown `json:"channel"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Channel.ID == "" {
		t.Fatalf("add answered %s: %v", out, err)
	}
	if code, out := cli("notifications", "channels", "add", "--name", "finance mail", "--group", "finance", "--kind", "email",
		"--smtp-host", "smtp.example", "--from", "tp@example.com", "--to", "fin@example.com", "--smtp-username", "tp",
		"--password-env", "SMTP_PASSWORD", "--secondary", created.Channel.ID); code != 0 {
		t.Fatalf("add email: %d %s", code, out)
	}
	if code, out := cli("notifications", "channels", "add", "--name", "x", "--kind", "pager"); code == 0 {
		t.Fatalf("an unknown kind was accepted: %s", out)
	}
	code, out = cli("notifications", "channels", "list")
	if code != 0 || !strings.Contains(out, "ops") || !strings.Contains(out, "finance mail") {
		t.Fatalf("list: %d %s", code, out)
	}
	if code, out := cli("notifications", "channels", "show", created.Channel.ID); code != 0 || !strings.Contains(out, "hmac_key") {
		t.Fatalf("show: %d %s", code, out)
	}
	if code, out := cli("notifications", "dead-letters"); code != 0 {
		t.Fatalf("dead-letters: %d %s", code, out)
	}
	if code, out := cli("notifications", "channels", "remove", created.Channel.ID); code != 0 {
		t.Fatalf("remove: %d %s", code, out)
	}
	if code, _ := cli("notifications", "channels", "show", created.Channel.ID); code == 0 {
		t.Fatal("a removed channel is shown")
	}
}
