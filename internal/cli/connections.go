package cli

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

var connectionColumns = []string{"id", "name", "provider", "kind", "user_id", "state", "reason", "config.allow_privileged_role", "created_at"}

// secretSource is a secret's pair of flags: the name of an environment
// variable holding it, or a file holding it. A secret is never a flag's
// value itself, which the shell's history, ps and the audit of a CI job
// would keep.
type secretSource struct {
	name      string // the secret's field in the API (token, dsn, ...)
	env, file string
}

// addSecret gives cmd --NAME-env and --NAME-file for one secret.
func addSecret(cmd *cobra.Command, flag, field, what string) *secretSource {
	s := &secretSource{name: field}
	cmd.Flags().StringVar(&s.env, flag+"-env", "", "the environment variable holding "+what)
	cmd.Flags().StringVar(&s.file, flag+"-file", "", "a file holding "+what+" (one trailing newline is dropped)")
	return s
}

// read answers the secret, "" when neither flag is given.
func (s *secretSource) read(a *app, flag string) (string, error) {
	switch {
	case s.env != "" && s.file != "":
		return "", usageErr("give one of --%s-env and --%s-file", flag, flag)
	case s.env != "":
		v := a.getenv(s.env)
		if v == "" {
			return "", usageErr("--%s-env: $%s is not set or empty", flag, s.env)
		}
		return v, nil
	case s.file != "":
		b, err := os.ReadFile(s.file)
		if err != nil {
			return "", usageErr("--%s-file: %v", flag, err)
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if v == "" {
			return "", usageErr("--%s-file: %s is empty", flag, s.file)
		}
		return v, nil
	}
	return "", nil
}

// connectionKinds are the values of --kind.
var connectionKinds = []string{"static", "oauth2_client_credentials", "oauth2_authorization_code"}

func newConnectionsCmd(a *app) *cobra.Command {
	var (
		name, provider, kind, auth, header, driver   string
		baseURL                                      string
		issuer, authorizeURL, tokenURL, revokeURL    string
		clientID, resource, username, amountArgument string
		scopes, hosts, allowCIDRs, tools, agents     []string
		maxAmount                                    int64
		allowPrivileged                              bool
		token, password, dsn, clientSecret           *secretSource
	)
	create := apiCmd(a, "create --name NAME --provider PROVIDER --kind KIND [flags]",
		"store a connection: how tools reach one system, with its secret sealed (platform_admin)", exactArgs(0, "no arguments"), nil,
		func(cmd *cobra.Command, _ []string) (request, error) {
			if !slices.Contains(connectionKinds, kind) {
				return request{}, usageErr("--kind: want %s, got %q", strings.Join(connectionKinds, ", "), kind)
			}
			secrets := map[string]string{}
			for flag, s := range map[string]*secretSource{"token": token, "password": password, "dsn": dsn, "client-secret": clientSecret} {
				v, err := s.read(a, flag)
				if err != nil {
					return request{}, err
				}
				if v != "" {
					secrets[s.name] = v
				}
			}
			if username != "" {
				secrets["username"] = username
			}
			if cmd.Flags().Changed("max-amount-cents") && maxAmount <= 0 {
				return request{}, usageErr("--max-amount-cents: want a positive number of cents, got %d", maxAmount)
			}
			config := map[string]any{
				"auth": auth, "header": header, "base_url": baseURL, "driver": driver, "issuer": issuer, "authorize_url": authorizeURL,
				"token_url": tokenURL, "revoke_url": revokeURL, "client_id": clientID, "request_scopes": scopes, "resource": resource,
				"egress": map[string]any{"hosts": hosts, "allow_cidrs": allowCIDRs},
			}
			if allowPrivileged {
				config["allow_privileged_role"] = true
			}
			scope := map[string]any{"tools": tools, "agents": agents, "max_amount_cents_per_call": maxAmount, "amount_argument": amountArgument}
			return request{method: "POST", path: "/v1/connections", body: map[string]any{
				"name": name, "provider": provider, "kind": kind, "config": config, "scope": scope, "secrets": secrets}}, nil
		})
	f := create.Flags()
	f.StringVar(&name, "name", "", "the connection's name, unique among the organization's connections (required)")
	f.StringVar(&provider, "provider", "", "what tools declare they need, such as github or warehouse (required)")
	f.StringVar(&kind, "kind", "", "static, oauth2_client_credentials or oauth2_authorization_code (required)")
	f.StringVar(&auth, "auth", "", "how a static secret is presented over HTTP: bearer (the default), basic or header")
	f.StringVar(&header, "header", "", "the header of --auth header, such as X-API-Key")
	f.StringVar(&baseURL, "base-url", "", "an HTTP connection's base URL (http://127.0.0.1:9090), under which tools whose URL is a path (/orders/{order_id}) are sent")
	f.StringVar(&driver, "driver", "", "a SQL connection's database: postgres, sqlite or mysql (its DSN is --dsn-env or --dsn-file)")
	f.BoolVar(&allowPrivileged, "allow-privileged-role", false, "accept a SQL connection whose database role holds powers beyond its data (a superuser, server file access, FILE, ...), which is refused otherwise; recorded on the connection and in the change log")
	f.StringVar(&issuer, "issuer", "", "the OAuth provider's issuer URL; its endpoints are discovered")
	f.StringVar(&authorizeURL, "authorize-url", "", "the OAuth provider's authorization endpoint, without --issuer")
	f.StringVar(&tokenURL, "token-url", "", "the OAuth provider's token endpoint, without --issuer")
	f.StringVar(&revokeURL, "revoke-url", "", "the OAuth provider's revocation endpoint")
	f.StringVar(&clientID, "client-id", "", "the OAuth client's id")
	f.StringArrayVar(&scopes, "scope", nil, "an OAuth scope to request (repeatable)")
	f.StringVar(&resource, "resource", "", "the RFC 8707 resource indicator sent with token requests")
	f.StringArrayVar(&hosts, "host", nil, "a host calls may reach: a name, *.suffix or an IP address (repeatable; none refuses every host)")
	f.StringArrayVar(&allowCIDRs, "allow-cidr", nil, "a range refused by default (loopback, private, link-local) that calls may reach, such as 127.0.0.1/32 (repeatable)")
	f.StringArrayVar(&tools, "tool", nil, "a tool name or pattern the secret may be released for (repeatable; none: every tool of the provider)")
	f.StringArrayVar(&agents, "agent", nil, "an agent identity the secret may be released for (repeatable; none: every agent)")
	f.Int64Var(&maxAmount, "max-amount-cents", 0, "refuse a call whose amount argument is above this many cents")
	f.StringVar(&amountArgument, "amount-argument", "", "the argument --max-amount-cents reads (default amount_cents)")
	f.StringVar(&username, "username", "", "the user name of --auth basic")
	token = addSecret(create, "token", "token", "the API key or bearer token")
	password = addSecret(create, "password", "password", "the password of --auth basic")
	dsn = addSecret(create, "dsn", "dsn", "the SQL connection string")
	clientSecret = addSecret(create, "client-secret", "client_secret", "the OAuth client's secret")
	for _, flag := range []string{"name", "provider", "kind"} {
		_ = create.MarkFlagRequired(flag)
	}
	_ = create.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions(connectionKinds, cobra.ShellCompDirectiveNoFileComp))
	_ = create.RegisterFlagCompletionFunc("auth", cobra.FixedCompletions([]string{"bearer", "basic", "header"}, cobra.ShellCompDirectiveNoFileComp))
	_ = create.RegisterFlagCompletionFunc("driver", cobra.FixedCompletions([]string{"postgres", "sqlite", "mysql"}, cobra.ShellCompDirectiveNoFileComp))

	var listProvider, listUser, listState string
	var page func() []string
	list := apiCmd(a, "list", "list connections, never their secrets (platform_admin or auditor: the organization's; a person: their own)", exactArgs(0, "no arguments"), connectionColumns,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/connections" + query(append([]string{"provider", listProvider, "user_id", listUser, "state", listState}, page()...)...)}, nil
		})
	page = paging(list)
	list.Flags().StringVar(&listProvider, "provider", "", "only this provider's connections")
	list.Flags().StringVar(&listUser, "user", "", "only the connections holding this person's account")
	list.Flags().StringVar(&listState, "state", "", "only connections in this state: active, needs_reauth or revoked")

	show := apiCmd(a, "show CONNECTION_ID", "show one connection, never its secret", exactArgs(1, "CONNECTION_ID"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "GET", path: "/v1/connections/" + esc(args[0])}, nil
		})
	var reason string
	revoke := apiCmd(a, "revoke CONNECTION_ID", "revoke a connection: no call uses it from the next on, on every node (platform_admin, or the person whose account it holds)", exactArgs(1, "CONNECTION_ID"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			body := map[string]any{}
			if reason != "" {
				body["reason"] = reason
			}
			return request{method: "POST", path: "/v1/connections/" + esc(args[0]) + "/revoke", body: body}, nil
		})
	revoke.Flags().StringVar(&reason, "reason", "", "why, shown with the connection and recorded in the change log")
	authorize := apiCmd(a, "authorize APP_CONNECTION_ID", "answer the link that connects your own account to an OAuth application (your person's key); open it in a browser, once, within ten minutes", exactArgs(1, "APP_CONNECTION_ID"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "POST", path: "/v1/connections/" + esc(args[0]) + "/authorize"}, nil
		})
	cmd := &cobra.Command{
		Use:   "connections",
		Short: "how tools reach the systems behind them: connections and their sealed secrets",
		Long: fmt.Sprintf(`connections manages how tools reach the systems behind them. A secret is
never given on the command line: name the environment variable or the
file holding it (--token-env TOKEN_VAR, --dsn-file ./dsn). Kinds: %s.`, strings.Join(connectionKinds, ", ")),
	}
	return group(cmd, create, list, show, revoke, authorize)
}
