package cli

import (
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

var channelColumns = []string{"id", "name", "group", "kind", "secondary", "secrets_set", "created_at"}

// channelKinds are the values of --kind.
var channelKinds = []string{"webhook", "slack", "email"}

func newNotificationsCmd(a *app) *cobra.Command {
	var (
		name, grp, kind, url, secondary string
		slackChannel, slackTeam         string
		host, from, username, caFile    string
		port                            int
		to                              []string
		insecure                        bool
		hmacKey, slackURL, password     *secretSource
		slackBot, slackSigning          *secretSource
	)
	add := apiCmd(a, "add --name NAME --kind KIND [flags]",
		"add a notification channel for an approver group, its secrets sealed (platform_admin)", exactArgs(0, "no arguments"), nil,
		func(cmd *cobra.Command, _ []string) (request, error) {
			if !slices.Contains(channelKinds, kind) {
				return request{}, usageErr("--kind: want %s, got %q", strings.Join(channelKinds, ", "), kind)
			}
			secrets := map[string]string{}
			for flag, s := range map[string]*secretSource{"hmac-key": hmacKey, "slack-url": slackURL, "password": password,
				"slack-bot-token": slackBot, "slack-signing-secret": slackSigning} {
				v, err := s.read(a, flag)
				if err != nil {
					return request{}, err
				}
				if v != "" {
					secrets[s.name] = v
				}
			}
			config := map[string]any{"url": url, "host": host, "port": port, "from": from, "to": to, "username": username, "insecure": insecure,
				"slack_channel": slackChannel, "slack_team": slackTeam}
			if caFile != "" {
				ca, err := os.ReadFile(caFile)
				if err != nil {
					return request{}, usageErr("--ca-file: %v", err)
				}
				config["ca_pem"] = string(ca)
			}
			return request{method: "POST", path: "/v1/notifications/channels", body: map[string]any{
				"name": name, "group": grp, "kind": kind, "config": config, "secondary": secondary, "secrets": secrets}}, nil
		})
	f := add.Flags()
	f.StringVar(&name, "name", "", "the channel's name, unique in the organization (required)")
	f.StringVar(&grp, "group", "", "the approver group it serves; none makes it the organization's default")
	f.StringVar(&kind, "kind", "", "webhook, slack or email (required)")
	f.StringVar(&url, "url", "", "a webhook's endpoint")
	f.StringVar(&secondary, "secondary", "", "the id of the channel tried when a delivery on this one is given up")
	f.StringVar(&host, "smtp-host", "", "an email channel's SMTP server")
	f.IntVar(&port, "smtp-port", 587, "the SMTP server's port")
	f.StringVar(&from, "from", "", "an email channel's sender address")
	f.StringArrayVar(&to, "to", nil, "a recipient address (repeatable)")
	f.StringVar(&username, "smtp-username", "", "the SMTP user, when the server wants authentication")
	f.StringVar(&caFile, "ca-file", "", "a PEM file of the authorities the SMTP server's certificate is checked against")
	f.BoolVar(&insecure, "insecure-loopback", false, "send without STARTTLS: allowed to a loopback SMTP relay only")
	hmacKey = addSecret(add, "hmac-key", "hmac_key", "the webhook's signing key (at least 32 characters)")
	slackURL = addSecret(add, "slack-url", "slack_url", "the Slack incoming webhook URL")
	password = addSecret(add, "password", "password", "the SMTP password")
	slackBot = addSecret(add, "slack-bot-token", "slack_bot_token", "a Slack app's bot token (xoxb-…): messages go through chat.postMessage and are updated once decided")
	slackSigning = addSecret(add, "slack-signing-secret", "slack_signing_secret", "the Slack app's signing secret, which button presses are verified with")
	f.StringVar(&slackChannel, "slack-channel", "", "the Slack conversation (C0123… or #name) a channel with a bot token posts to")
	f.StringVar(&slackTeam, "slack-team", "", "the only Slack workspace (T0123…) whose button presses are accepted")
	for _, flag := range []string{"name", "kind"} {
		_ = add.MarkFlagRequired(flag)
	}
	_ = add.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions(channelKinds, cobra.ShellCompDirectiveNoFileComp))

	list := apiCmd(a, "list", "list the organization's notification channels, never their secrets (platform_admin)", exactArgs(0, "no arguments"), channelColumns,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/notifications/channels"}, nil
		})
	show := apiCmd(a, "show CHANNEL_ID", "show one notification channel, never its secrets", exactArgs(1, "CHANNEL_ID"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "GET", path: "/v1/notifications/channels/" + esc(args[0])}, nil
		})
	remove := apiCmd(a, "remove CHANNEL_ID", "remove a notification channel (platform_admin)", exactArgs(1, "CHANNEL_ID"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "DELETE", path: "/v1/notifications/channels/" + esc(args[0])}, nil
		})
	deadColumns := []string{"event", "subject", "channel_id", "attempts", "error", "updated_at"}
	var page func() []string
	dead := apiCmd(a, "dead-letters", "list notifications given up after every attempt failed (platform_admin or auditor)", exactArgs(0, "no arguments"), deadColumns,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/notifications/dead-letters" + query(page()...)}, nil
		})
	var limit string
	dead.Flags().StringVar(&limit, "limit", "", "how many, 1 to 1000 (default 100)")
	page = func() []string { return []string{"limit", limit} }
	channels := &cobra.Command{
		Use:   "channels",
		Short: "where people are told of approvals and uncertain calls",
		Long: `channels manages where an organization's approver groups are told that an
approval needs them or a call went uncertain: a signed webhook, a Slack
incoming webhook or a Slack app's bot token (whose messages carry Approve and
Reject buttons, see "toolplane slack"), or email over SMTP with STARTTLS. A secret is never given
on the command line: name the environment variable or the file holding it
(--hmac-key-env HOOK_KEY, --slack-url-file ./slack-url, --password-env SMTP_PASSWORD).`,
	}
	return group(&cobra.Command{Use: "notifications", Short: "notification channels and the notifications given up"},
		group(channels, add, list, show, remove), dead)
}
