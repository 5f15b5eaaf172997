package cli

import (
	"github.com/spf13/cobra"
)

var slackLinkColumns = []string{"team", "user", "subject", "credential_id", "created_at"}

func newSlackCmd(a *app) *cobra.Command {
	link := apiCmd(a, "link CODE",
		"link the Slack account Slack showed CODE to, to yourself: it then decides approvals with the key you run this with", exactArgs(1, "CODE"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "POST", path: "/v1/slack/links", body: map[string]any{"code": args[0]}}, nil
		})
	list := apiCmd(a, "links", "list Slack accounts linked to people: your own, or every one (platform_admin)", exactArgs(0, "no arguments"), slackLinkColumns,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/slack/links"}, nil
		})
	unlink := apiCmd(a, "unlink TEAM USER", "remove a Slack account's link: your own, or any (platform_admin)", exactArgs(2, "TEAM USER"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "DELETE", path: "/v1/slack/links/" + esc(args[0]) + "/" + esc(args[1])}, nil
		})
	return group(&cobra.Command{
		Use:   "slack",
		Short: "Slack accounts that answer approvals with their buttons",
		Long: `slack manages which toolplane person a Slack account answers approvals as.
When an account that is not linked presses Approve or Reject on an approval
message, Slack shows it alone a one-time code (it works for ten minutes);
its person runs "toolplane slack link CODE" with their own person key, and
the account then decides with that key: its roles and groups, four eyes,
and nothing once the key is revoked or expired.`,
	}, link, list, unlink)
}
