package notify_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/notify"
)

// A Slack channel sends through a bot token (with the conversation to
// post to) or an incoming webhook; its workspace and signing secret are
// checked for their shape; and the listing names the secrets set, never
// their values.
func TestSlackChannelChecks(t *testing.T) {
	t.Parallel()
	s, _ := newService(t)
	const bot, signing = "xoxb-1-2-bot-token-never-answered", "signing-secret-never-answered-0123"
	cases := []struct {
		name string
		cfg  toolplane.ChannelConfig
		sec  toolplane.ChannelSecrets
		ok   bool
	}{
		{"bot token and conversation", toolplane.ChannelConfig{SlackChannel: "C0123", SlackTeam: "T1"}, toolplane.ChannelSecrets{SlackBotToken: bot, SlackSigningSecret: signing}, true},
		{"bot token and a #name", toolplane.ChannelConfig{SlackChannel: "#approvals"}, toolplane.ChannelSecrets{SlackBotToken: bot}, true},
		{"bot token without a conversation", toolplane.ChannelConfig{}, toolplane.ChannelSecrets{SlackBotToken: bot}, false},
		{"a token with a space", toolplane.ChannelConfig{SlackChannel: "C0123"}, toolplane.ChannelSecrets{SlackBotToken: "xoxb- 1"}, false},
		{"neither token nor URL", toolplane.ChannelConfig{SlackChannel: "C0123"}, toolplane.ChannelSecrets{SlackSigningSecret: signing}, false},
		{"a workspace that is no Slack id", toolplane.ChannelConfig{SlackChannel: "C0123", SlackTeam: "t<1>"}, toolplane.ChannelSecrets{SlackBotToken: bot}, false},
		{"a signing secret too short", toolplane.ChannelConfig{SlackChannel: "C0123"}, toolplane.ChannelSecrets{SlackBotToken: bot, SlackSigningSecret: "short"}, false},
		{"incoming webhook with a signing secret", toolplane.ChannelConfig{}, toolplane.ChannelSecrets{SlackURL: "https://hooks.slack.example/services/T/B/x", SlackSigningSecret: signing}, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sh, err := s.Create(t.Context(), notify.NewChannel{Name: "slack " + string(rune('a'+i)), Kind: toolplane.ChannelSlack, Config: c.cfg, Secrets: c.sec}, admin)
			if !c.ok {
				if !errors.Is(err, notify.ErrChannel) {
					t.Fatalf("created: %v", err)
				}
				if strings.Contains(err.Error(), bot) || strings.Contains(err.Error(), signing) {
					t.Errorf("the refusal quotes a secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(t.Context(), sh.ID, admin)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{}
			for name, v := range map[string]toolplane.SecretString{"slack_url": c.sec.SlackURL, "slack_bot_token": c.sec.SlackBotToken, "slack_signing_secret": c.sec.SlackSigningSecret} {
				if v != "" {
					want = append(want, name)
				}
			}
			if len(got.SecretsSet) != len(want) {
				t.Errorf("secrets set %v, want %v", got.SecretsSet, want)
			}
			ep, err := s.SlackEndpoint(t.Context(), "org-1", sh.ID)
			if err != nil || ep.SigningSecret != c.sec.SlackSigningSecret || ep.Team != c.cfg.SlackTeam {
				t.Errorf("endpoint = %+v, %v", ep, err)
			}
		})
	}
}
