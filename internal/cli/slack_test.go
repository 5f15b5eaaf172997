package cli

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/slack"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

func TestSlackThroughTheCommandLine(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	reg, hs := demotest.Registry(t)
	quiet := slog.New(slog.DiscardHandler)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	keys := parseRing(t, "k1 "+keyText(t))
	notes, err := notify.New(notify.Config{Store: store, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	sl, err := slack.New(slack.Config{Store: store, Keys: keys, Channels: notes, Decider: iv, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	api := &httpapi.Server{Door: &door.Door{Invoker: iv, Registry: reg, Store: store, Log: quiet}, Store: store, Log: quiet,
		Notifications: notes, Slack: sl}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	admin := mintKey(t, store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil)
	pat := mintKey(t, store, toolplane.CredentialPerson, "pat@example.com", []string{toolplane.RoleApprover}, nil)
	const bot, signing = "xoxb-cli-bot-token-never-printed", "cli-signing-secret-never-printed"
	cli := func(key string, args ...string) (int, string) {
		t.Helper()
		env := map[string]string{"TOOLPLANE_SERVER": srv.URL, "TOOLPLANE_KEY": key, "SLACK_BOT": bot, "SLACK_SIGNING": signing}
		code, out, errOut := runIn(env, args...)
		for _, leak := range []string{bot, signing} {
			if strings.Contains(out, leak) || strings.Contains(errOut, leak) {
				t.Errorf("%v printed a secret:\n%s\n%s", args, out, errOut)
			}
		}
		return code, out + errOut
	}
	code, out := cli(admin, "notifications", "channels", "add", "--name", "slack", "--kind", "slack", "--slack-channel", "C0APPROVE",
		"--slack-team", "T1", "--slack-bot-token-env", "SLACK_BOT", "--slack-signing-secret-env", "SLACK_SIGNING", "-o", "json")
	if code != 0 {
		t.Fatalf("add: %d %s", code, out)
	}
	var created struct {
		Channel notify.Shown `json:"channel"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || strings.Join(created.Channel.SecretsSet, ",") != "slack_bot_token,slack_signing_secret" ||
		created.Channel.Config.SlackChannel != "C0APPROVE" || created.Channel.Config.SlackTeam != "T1" {
		t.Fatalf("created %+v (%v) from %s", created.Channel, err, out)
	}
	if code, out := cli(pat, "slack", "link", "not-a-code"); code == 0 || !strings.Contains(out, "slack link code not valid") {
		t.Errorf("a forged code: %d %s", code, out)
	}
	// pat's account, linked (as a press and a code would), is pat's to
	// list and to remove.
	id, _, _ := apikey.Parse(pat)
	if err := store.PutSlackLink(t.Context(), &toolplane.SlackLink{OrganizationID: "org-1", Team: "T1", User: "UPAT", CredentialID: id,
		Subject: "pat@example.com", CreatedAt: time.Now()}, toolplane.ControlEvent(&toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "pat@example.com"}, toolplane.AuditSlack, "linked", "T1/UPAT", time.Now())); err != nil {
		t.Fatal(err)
	}
	if code, out := cli(pat, "slack", "links"); code != 0 || !strings.Contains(out, "UPAT") {
		t.Errorf("links: %d %s", code, out)
	}
	if code, out := cli(pat, "slack", "unlink", "T1", "UPAT"); code != 0 {
		t.Errorf("unlink: %d %s", code, out)
	}
	if code, out := cli(pat, "slack", "unlink", "T1", "UPAT"); code == 0 {
		t.Errorf("unlink of nothing: %d %s", code, out)
	}
}
