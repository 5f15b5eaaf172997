package cli

import (
	"github.com/spf13/cobra"
)

// upstreamSettingColumns are the table columns of an upstream tool's
// settings: the tool and those in force.
var upstreamSettingColumns = []string{"name", "effective", "stored", "updated_by", "updated_at"}

func newUpstreamsCmd(a *app) *cobra.Command {
	path := func(args []string) string {
		return "/v1/upstreams/" + esc(args[0]) + "/tools/" + esc(args[1]) + "/settings"
	}
	get := apiCmd(a, "get SLUG TOOL", "show an upstream tool's settings: in force, the upstreams file's, and the stored ones (platform_admin)", exactArgs(2, "SLUG TOOL"), upstreamSettingColumns,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "GET", path: path(args)}, nil
		})
	var effect string
	var destructive, approval, idempotent bool
	var attempts int
	set := apiCmd(a, "set SLUG TOOL", "relax or tighten an upstream tool on every node, replacing the upstreams file's entry for it (platform_admin)", exactArgs(2, "SLUG TOOL"), upstreamSettingColumns,
		func(cmd *cobra.Command, args []string) (request, error) {
			body := map[string]any{}
			flags := cmd.Flags()
			if flags.Changed("effect") {
				if effect != "read" && effect != "write" && effect != "send" {
					return request{}, usageErr("--effect: want read, write or send, got %q", effect)
				}
				body["effect"] = effect
			}
			if flags.Changed("destructive") {
				body["destructive"] = destructive
			}
			if flags.Changed("requires-approval") {
				body["requires_approval"] = approval
			}
			if flags.Changed("idempotent-downstream") {
				body["idempotent_downstream"] = idempotent
			}
			if flags.Changed("max-attempts") {
				body["max_attempts"] = attempts
			}
			if len(body) == 0 {
				return request{}, usageErr("name at least one setting (--effect, --destructive, --requires-approval, --idempotent-downstream, --max-attempts)")
			}
			return request{method: "PUT", path: path(args), body: body}, nil
		})
	set.Flags().StringVar(&effect, "effect", "", "read, write or send")
	set.Flags().BoolVar(&destructive, "destructive", false, "whether the tool destroys or overwrites (--destructive=false to say it does not)")
	set.Flags().BoolVar(&approval, "requires-approval", false, "whether every call waits for a person (--requires-approval=false to relax)")
	set.Flags().BoolVar(&idempotent, "idempotent-downstream", false, "the server honours the idempotency key toolplane sends, so a lost call may run again with it")
	set.Flags().IntVar(&attempts, "max-attempts", 0, "with --idempotent-downstream: how many times a lost call may run (1 to 100)")
	_ = set.RegisterFlagCompletionFunc("effect", cobra.FixedCompletions([]string{"read", "write", "send"}, cobra.ShellCompDirectiveNoFileComp))
	reset := apiCmd(a, "reset SLUG TOOL", "drop an upstream tool's stored settings, so the upstreams file's entry applies again on every node (platform_admin)", exactArgs(2, "SLUG TOOL"), upstreamSettingColumns,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "DELETE", path: path(args)}, nil
		})
	list := apiCmd(a, "list", "list the upstream MCP servers: where each is, whether this node is connected, how many tools it listed (platform_admin)", exactArgs(0, "no arguments"),
		[]string{"slug", "transport", "endpoint", "path", "connected", "tools"},
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/upstreams"}, nil
		})
	settings := group(&cobra.Command{Use: "settings", Short: "an upstream tool's settings at runtime: effect, destructiveness, approval, replay"}, get, set, reset)
	return group(&cobra.Command{Use: "upstreams", Short: "the upstream MCP servers toolplane fronts"}, list, settings)
}
