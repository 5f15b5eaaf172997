package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolplane/toolplane/compat"
	"github.com/toolplane/toolplane/toolfile"
)

// request is one API request a command sends.
type request struct {
	method, path string
	body         any
	contentType  string
}

// apiCmd builds a command that sends one request, built by build from its
// arguments and flags, and prints the answer; columns are the fields its
// table shows for a list (a first column "@field" names the answer's field
// holding the rows, "items" when not given).
func apiCmd(a *app, use, short string, args cobra.PositionalArgs, columns []string, build func(cmd *cobra.Command, args []string) (request, error)) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: args}
	r := addRemote(a, cmd)
	out := addOutput(cmd, columns...)
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if err := out.check(); err != nil {
			return err
		}
		req, err := build(cmd, args)
		if err != nil {
			return err
		}
		data, err := r.call(cmd, req.method, req.path, req.body, req.contentType)
		if err != nil {
			return err
		}
		warn(a.stderr, data)
		return out.print(a.stdout, data)
	})
	return cmd
}

// warn writes the warnings an answer carries (its "warnings", such as a
// connection's egress allowing no host) to w, one a line, apart from the
// answer itself so that a script reading the answer is not disturbed.
func warn(w io.Writer, data []byte) {
	var answer struct {
		Warnings []string `json:"warnings"`
	}
	if json.Unmarshal(data, &answer) != nil {
		return
	}
	for _, m := range answer.Warnings {
		fmt.Fprintf(w, "warning: %s\n", m)
	}
}

// esc escapes one path segment.
func esc(s string) string { return url.PathEscape(s) }

// query answers ?k=v&... for the values that are set.
func query(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

var versionColumns = []string{"name", "version", "state", "source", "owner", "published_by", "published_at"}

func newToolsCmd(a *app) *cobra.Command {
	publish := apiCmd(a, "publish FILE", "publish a version of a definition (YAML or JSON)", exactArgs(1, "FILE"), versionColumns,
		func(_ *cobra.Command, args []string) (request, error) {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return request{}, err
			}
			ct := "application/json"
			if ext := strings.ToLower(filepath.Ext(args[0])); ext == ".yaml" || ext == ".yml" {
				ct = "application/x-yaml"
			}
			return request{"POST", "/v1/registry/tools", data, ct}, nil
		})
	var name, owner, state string
	list := apiCmd(a, "list", "list the registry's versions", exactArgs(0, "no arguments"), versionColumns,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/registry/tools" + query("name", name, "owner", owner, "state", state)}, nil
		})
	list.Flags().StringVar(&name, "name", "", "only this tool")
	list.Flags().StringVar(&owner, "owner", "", "only this team's tools")
	list.Flags().StringVar(&state, "state", "", "only versions in this state (in_review, active, deprecated, retired, rejected)")
	show := apiCmd(a, "show NAME VERSION", "show one version", exactArgs(2, "NAME VERSION"), versionColumns,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "GET", path: "/v1/registry/tools/" + esc(args[0]) + "/versions/" + esc(args[1])}, nil
		})
	// lifecycle is one transition of a version, with a --note.
	lifecycle := func(action, short string, noteHelp string, extra func(cmd *cobra.Command, body map[string]any) error) *cobra.Command {
		var note string
		cmd := apiCmd(a, action+" NAME VERSION", short, exactArgs(2, "NAME VERSION"), versionColumns,
			func(cmd *cobra.Command, args []string) (request, error) {
				body := map[string]any{}
				if note != "" {
					body["note"] = note
				}
				if extra != nil {
					if err := extra(cmd, body); err != nil {
						return request{}, err
					}
				}
				return request{method: "POST", path: "/v1/registry/tools/" + esc(args[0]) + "/versions/" + esc(args[1]) + "/" + action, body: body}, nil
			})
		cmd.Flags().StringVar(&note, "note", "", noteHelp)
		return cmd
	}
	var sunset, replacement string
	deprecate := lifecycle("deprecate", "deprecate a version: callers are told to move before the sunset", "why", func(_ *cobra.Command, body map[string]any) error {
		t, err := parseTime(sunset)
		if err != nil {
			return usageErr("--sunset: %v", err)
		}
		body["sunset_at"] = t
		if replacement != "" {
			body["replacement"] = replacement
		}
		return nil
	})
	deprecate.Flags().StringVar(&sunset, "sunset", "", "the earliest retirement, YYYY-MM-DD or RFC 3339 (required)")
	deprecate.Flags().StringVar(&replacement, "replacement", "", "the version callers should move to")
	return group(&cobra.Command{Use: "tools", Short: "the registry's versions and their lifecycle; search and dependencies of the tools your key may call"},
		publish, newDiffCmd(a), list, show, newSearchCmd(a), newDependenciesCmd(a),
		lifecycle("submit", "send a rejected version back to review", "what changed", nil),
		newReviewCmd(a, "approve", "approve versions in review (platform_admin; never your own)", "why"),
		newReviewCmd(a, "reject", "reject versions in review (platform_admin)", "why (a rejection needs one)"),
		deprecate,
		lifecycle("retire", "retire a version: it is no longer called", "why", nil),
	)
}

// newReviewCmd decides versions in review: one (NAME VERSION), several
// (NAME@VERSION...), or every one a person published (--published-by) or
// a connection brought (--connection). A set is decided by one request
// in which each version is decided and recorded on its own; the command
// prints each outcome and exits 1 when any version was refused.
func newReviewCmd(a *app, verb, short, noteHelp string) *cobra.Command {
	var note, publishedBy, connection string
	cmd := &cobra.Command{
		Use:   verb + " (NAME VERSION | NAME@VERSION... | --published-by PERSON | --connection CONNECTION)",
		Short: short,
		Example: "  toolplane tools " + verb + " billing.list_invoices 2.1.0 --note ok\n" +
			"  toolplane tools " + verb + " billing.list_invoices@2.1.0 billing.get_invoice@1.0.0 --note ok\n" +
			"  toolplane tools " + verb + " --connection billing --note 'reviewed the billing API tools'",
	}
	r := addRemote(a, cmd)
	single := addOutput(cmd, versionColumns...)
	cmd.Flags().StringVar(&note, "note", "", noteHelp)
	cmd.Flags().StringVar(&publishedBy, "published-by", "", "every version in review this person published")
	cmd.Flags().StringVar(&connection, "connection", "", "every version in review that needs this connection (a provider, or a remote tool's connection id)")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if err := single.check(); err != nil {
			return err
		}
		body := map[string]any{}
		if note != "" {
			body["note"] = note
		}
		filtered := publishedBy != "" || connection != ""
		if len(args) == 2 && !filtered && !strings.Contains(args[0], "@") && !strings.Contains(args[1], "@") {
			data, err := r.call(cmd, "POST", "/v1/registry/tools/"+esc(args[0])+"/versions/"+esc(args[1])+"/"+verb, body, "")
			if err != nil {
				return err
			}
			return single.print(a.stdout, data)
		}
		if filtered && len(args) > 0 {
			return usageErr("name versions or --published-by/--connection, not both")
		}
		if !filtered && len(args) == 0 {
			return usageErr("want NAME VERSION, NAME@VERSION... or --published-by/--connection")
		}
		versions := make([]map[string]string, 0, len(args))
		for _, arg := range args {
			name, version, ok := strings.Cut(arg, "@")
			if !ok || name == "" || version == "" {
				return usageErr("%q: name each version as NAME@VERSION (or give one as NAME VERSION)", arg)
			}
			versions = append(versions, map[string]string{"name": name, "version": version})
		}
		body["decision"] = verb
		if len(versions) > 0 {
			body["versions"] = versions
		}
		if publishedBy != "" {
			body["published_by"] = publishedBy
		}
		if connection != "" {
			body["connection"] = connection
		}
		data, err := r.call(cmd, "POST", "/v1/registry/reviews", body, "")
		if err != nil {
			return err
		}
		bulk := &output{format: single.format, field: single.field, list: "items",
			columns: []string{"name", "version", "outcome", "state", "error.code", "error.message"}}
		if err := bulk.print(a.stdout, data); err != nil {
			return err
		}
		var answer struct {
			Decided int `json:"decided"`
			Refused int `json:"refused"`
		}
		if err := json.Unmarshal(data, &answer); err != nil {
			return fmt.Errorf("the answer is not JSON: %w", err)
		}
		if bulk.format == "table" {
			fmt.Fprintf(a.stderr, "%d %s, %d refused\n", answer.Decided, map[string]string{"approve": "approved", "reject": "rejected"}[verb], answer.Refused)
		}
		if answer.Refused > 0 {
			return silent(1)
		}
		return nil
	})
	return cmd
}

// newDiffCmd prints the compatibility report between two definition files
// and exits 1 when the new version's bump is too small for its changes.
func newDiffCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "diff OLD_FILE NEW_FILE",
		Short: "the compatibility report between two definition files (offline)",
		Args:  exactArgs(2, "OLD_FILE NEW_FILE"),
		RunE: action(func(_ *cobra.Command, args []string) error {
			from, _, err := toolfile.ReadFile(args[0])
			if err != nil {
				return err
			}
			to, _, err := toolfile.ReadFile(args[1])
			if err != nil {
				return err
			}
			rep, err := compat.Classify(&from, &to)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s %s -> %s: the changes need %s\n", to.Name, from.Version, to.Version, rep.Required)
			for _, ch := range rep.Changes {
				fmt.Fprintf(a.stdout, "  %s\n", ch)
			}
			if err := compat.Gate(&from, &to, rep); err != nil {
				fmt.Fprintf(a.stderr, "refused: %v\n", err)
				return silent(1)
			}
			fmt.Fprintln(a.stdout, "accepted")
			return nil
		}),
	}
}

var grantColumns = []string{"id", "agent_id", "user_id", "group", "pattern", "bundle", "expires_at", "revoked_at"}

func newGrantsCmd(a *app) *cobra.Command {
	var pattern, bundle, expires, user, toGroup string
	var tenants []string
	add := apiCmd(a, "add (AGENT | --user PERSON | --group GROUP) (--pattern P | --bundle B)", "grant an agent identity, a person or a group of people tools",
		rangeArgs(0, 1, "at most one AGENT"), grantColumns,
		func(_ *cobra.Command, args []string) (request, error) {
			if tenants == nil {
				tenants = []string{}
			}
			agent := ""
			if len(args) == 1 {
				agent = args[0]
			}
			if n := len(agent) + len(user) + len(toGroup); n == 0 || (agent != "" && n != len(agent)) || (user != "" && n != len(user)) {
				return request{}, usageErr("name exactly one of AGENT, --user and --group")
			}
			body := map[string]any{"agent_id": agent, "user_id": user, "group": toGroup, "pattern": pattern, "bundle": bundle, "tenant_scope": tenants}
			if expires != "" {
				t, err := parseTime(expires)
				if err != nil {
					return request{}, usageErr("--expires: %v", err)
				}
				body["expires_at"] = t
			}
			return request{method: "POST", path: "/v1/grants", body: body}, nil
		})
	add.Flags().StringVar(&pattern, "pattern", "", "a glob over tool names, optionally @range (payments.*, payments.refund_order@^2.1.0)")
	add.Flags().StringVar(&bundle, "bundle", "", "a bundle to grant")
	add.Flags().StringArrayVar(&tenants, "tenant", nil, "limit the grant to this tenant (repeatable)")
	add.Flags().StringVar(&expires, "expires", "", "when the grant ends, YYYY-MM-DD or RFC 3339")
	add.Flags().StringVar(&user, "user", "", "grant a person: what an agent acting for them may do (with the agent's own grant)")
	add.Flags().StringVar(&toGroup, "group", "", "grant every person whose identity provider's groups claim names this group")
	add.MarkFlagsMutuallyExclusive("pattern", "bundle")
	add.MarkFlagsMutuallyExclusive("user", "group")

	var revoked bool
	list := apiCmd(a, "list [AGENT]", "list grants, of one agent or all", rangeArgs(0, 1, "at most one AGENT"), grantColumns,
		func(_ *cobra.Command, args []string) (request, error) {
			agent, rev := "", ""
			if len(args) > 0 {
				agent = args[0]
			}
			if revoked {
				rev = "true"
			}
			return request{method: "GET", path: "/v1/grants" + query("agent_id", agent, "revoked", rev)}, nil
		})
	list.Flags().BoolVar(&revoked, "revoked", false, "include revoked grants")
	revoke := apiCmd(a, "revoke GRANT_ID", "revoke a grant", exactArgs(1, "GRANT_ID"), grantColumns,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "POST", path: "/v1/grants/" + esc(args[0]) + "/revoke"}, nil
		})
	explain := apiCmd(a, "explain AGENT", "every tool AGENT can call, at which version, and which grant allowed it", exactArgs(1, "AGENT"),
		[]string{"@tools", "tool", "version", "range", "grant", "via", "denied_by"},
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "GET", path: "/v1/agents/" + esc(args[0]) + "/explain"}, nil
		})
	var reason string
	deny := apiCmd(a, "deny AGENT|'*' PATTERN", "deny an agent (or, with '*', every agent: an incident deny) tools, above any grant", exactArgs(2, "AGENT|'*' PATTERN"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "POST", path: "/v1/denies", body: map[string]any{"agent_id": args[0], "pattern": args[1], "reason": reason}}, nil
		})
	deny.Flags().StringVar(&reason, "reason", "", "why")
	denies := apiCmd(a, "denies", "list denies", exactArgs(0, "no arguments"), []string{"id", "agent_id", "pattern", "reason", "created_by", "created_at"},
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/denies"}, nil
		})
	undeny := apiCmd(a, "undeny DENY_ID", "lift a deny", exactArgs(1, "DENY_ID"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "DELETE", path: "/v1/denies/" + esc(args[0])}, nil
		})
	return group(&cobra.Command{Use: "grants", Short: "which agents may call which tools"},
		add, list, revoke, explain, deny, denies, undeny)
}

func newBundlesCmd(a *app) *cobra.Command {
	put := apiCmd(a, "put NAME REF...", "create or replace a bundle (REF: name@range, e.g. payments.get_order@^1.0.0)",
		func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageErr("want NAME REF...")
			}
			return nil
		}, nil,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "PUT", path: "/v1/bundles/" + esc(args[0]), body: map[string]any{"refs": args[1:]}}, nil
		})
	list := apiCmd(a, "list", "list bundles", exactArgs(0, "no arguments"), []string{"name", "refs", "updated_at"},
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/bundles"}, nil
		})
	return group(&cobra.Command{Use: "bundles", Short: "named sets of tool references granted together"}, put, list)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("missing")
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339, s)
}
