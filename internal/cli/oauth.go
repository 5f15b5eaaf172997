package cli

import (
	"net/url"

	"github.com/spf13/cobra"
)

func newOAuthCmd(a *app) *cobra.Command {
	clients := group(&cobra.Command{Use: "clients", Short: "the OAuth clients that connect to /mcp by its URL (platform_admin)"},
		apiCmd(a, "list", "list every client, with your organization's agent identity and revocation of each",
			exactArgs(0, "no arguments"), []string{"@clients", "client_id", "client_name", "source", "agent_id", "revoked_at"},
			func(*cobra.Command, []string) (request, error) {
				return request{method: "GET", path: "/v1/oauth/clients"}, nil
			}),
		apiCmd(a, "revoke CLIENT_ID", "revoke a client in your organization: its consents end, its tokens are refused at their next call",
			exactArgs(1, "the client's id"), nil,
			func(_ *cobra.Command, args []string) (request, error) {
				return request{method: "POST", path: "/v1/oauth/clients:revoke", body: map[string]string{"client_id": args[0]}}, nil
			}),
		apiCmd(a, "set-agent CLIENT_ID AGENT", "make the client's new consents act as AGENT (\"\" for the deployment's default)",
			exactArgs(2, "the client's id and the agent identity"), nil,
			func(_ *cobra.Command, args []string) (request, error) {
				return request{method: "POST", path: "/v1/oauth/clients:set-agent", body: map[string]string{"client_id": args[0], "agent_id": args[1]}}, nil
			}))
	var subject string
	list := apiCmd(a, "list", "list your consents to OAuth clients (a platform_admin: --subject's, or everyone's)",
		exactArgs(0, "no arguments"), []string{"@consents", "id", "client_id", "subject", "agent_id", "scope", "expires_at", "revoked_at"},
		func(*cobra.Command, []string) (request, error) {
			path := "/v1/oauth/consents"
			if subject != "" {
				path += "?subject=" + url.QueryEscape(subject)
			}
			return request{method: "GET", path: path}, nil
		})
	list.Flags().StringVar(&subject, "subject", "", "the person whose consents to list (platform_admin)")
	consents := group(&cobra.Command{Use: "consents", Short: "people's consents to OAuth clients: their connected clients"},
		list,
		apiCmd(a, "revoke ID", "revoke a consent: its client's tokens are refused at their next call, on every node",
			exactArgs(1, "the consent's id"), nil,
			func(_ *cobra.Command, args []string) (request, error) {
				return request{method: "POST", path: "/v1/oauth/consents/" + esc(args[0]) + "/revoke"}, nil
			}))
	rotate := apiCmd(a, "rotate-key", "make a new access-token signing key; the previous one keeps verifying (the operator: a platform_admin of the operator's organization, default)",
		exactArgs(0, "no arguments"), nil,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "POST", path: "/v1/oauth/signing-key:rotate"}, nil
		})
	return group(&cobra.Command{Use: "oauth", Short: "toolplane's OAuth authorization server: clients, consents, signing key"},
		clients, consents, rotate)
}
