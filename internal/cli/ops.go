package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolplane/toolplane/httperr"
)

// paging adds --limit and --cursor to a list command and answers them as
// query parameters.
func paging(cmd *cobra.Command) func() []string {
	var limit int
	var cursor string
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many (1 to 1000; default the server's, 100)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue a list from where the last page ended")
	return func() []string {
		l := ""
		if limit != 0 {
			l = strconv.Itoa(limit)
		}
		return []string{"limit", l, "cursor", cursor}
	}
}

var approvalColumns = []string{"id", "tool", "status", "run_id", "approver_group", "expires_at", "preview"}

func newApprovalsCmd(a *app) *cobra.Command {
	var status string
	var page func() []string
	list := apiCmd(a, "list", "list approvals (pending by default)", exactArgs(0, "no arguments"), approvalColumns,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/approvals" + query(append([]string{"status", status}, page()...)...)}, nil
		})
	page = paging(list)
	list.Flags().StringVar(&status, "status", "pending", "pending, approved, rejected or expired")

	show := apiCmd(a, "show APPROVAL_ID", "show one approval, whatever its state", exactArgs(1, "APPROVAL_ID"), approvalColumns,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "GET", path: "/v1/approvals/" + esc(args[0])}, nil
		})

	decide := func(decision, short string) *cobra.Command {
		var reason string
		cmd := apiCmd(a, decision+" APPROVAL_ID", short, exactArgs(1, "APPROVAL_ID"), nil,
			func(_ *cobra.Command, args []string) (request, error) {
				body := map[string]any{}
				if reason != "" {
					body["reason"] = reason
				}
				return request{method: "POST", path: "/v1/approvals/" + esc(args[0]) + "/" + decision, body: body}, nil
			})
		cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the decision")
		return cmd
	}
	return group(&cobra.Command{Use: "approvals", Short: "calls waiting for a person's decision (approver role)"},
		list, show,
		decide("approve", "approve a pending call: it runs, once, as filed"),
		decide("reject", "reject a pending call: the agent is told it was rejected"))
}

// findCmd builds a command that shows one item, by id, of the lists at
// paths (every page of each): the API lists these items but has no route
// for one (audit events).
func findCmd(a *app, use, short string, columns []string, paths func(id string) []string) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: exactArgs(1, "ID")}
	r := addRemote(a, cmd)
	out := addOutput(cmd, columns...)
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if err := out.check(); err != nil {
			return err
		}
		t, err := r.resolve(cmd)
		if err != nil {
			return err
		}
		for _, base := range paths(args[0]) {
			cursor := ""
			for {
				path := base
				if cursor != "" {
					path += "&cursor=" + cursor
				}
				data, err := t.call(cmd.Context(), "GET", path, nil, "")
				if err != nil {
					return err
				}
				var page struct {
					Items      []json.RawMessage `json:"items"`
					NextCursor string            `json:"next_cursor"`
				}
				if err := json.Unmarshal(data, &page); err != nil {
					return fmt.Errorf("the answer of %s is not a list: %w", t.server, err)
				}
				for _, it := range page.Items {
					var id struct {
						ID string `json:"id"`
					}
					if json.Unmarshal(it, &id) == nil && id.ID == args[0] {
						return out.print(a.stdout, it)
					}
				}
				if page.NextCursor == "" {
					break
				}
				cursor = page.NextCursor
			}
		}
		return &APIError{Status: httperr.NotFound.Status(), Code: string(httperr.NotFound), Message: "no " + strings.Fields(use)[0] + " item " + args[0] + " at " + t.server}
	})
	return cmd
}

var keyColumns = []string{"id", "kind", "subject", "roles", "tools", "label", "created_at", "expires_at", "revoked_at", "last_used_at", "listing"}

// listingBody answers the request body's listing members for --listing and
// --listing-top, or the usage error of a listing that is none.
func listingBody(body map[string]any, listing string, top int) error {
	switch listing {
	case "", "full", "meta", "hybrid":
	default:
		return usageErr("--listing: want full, meta or hybrid, got %q", listing)
	}
	if top != 0 && listing != "hybrid" {
		return usageErr("--listing-top is the number of most-used tools a hybrid listing shows: give it with --listing hybrid")
	}
	if listing != "" {
		body["listing"] = listing
	}
	if top != 0 {
		body["listing_top"] = top
	}
	return nil
}

const listingHelp = "how /mcp lists the agent key's tools: full (every tool, the default), meta (only find_tools, describe_tool and call_tool) or hybrid (the agent's most-used tools beside the meta-tools)"

func newKeysCmd(a *app) *cobra.Command {
	var kind, label, expires, listing string
	var top int
	var roles, tools []string
	var attrs map[string]string
	create := apiCmd(a, "create SUBJECT --kind agent|person", "mint a key for an agent identity or a person (platform_admin); shown once", exactArgs(1, "SUBJECT"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			if kind != "agent" && kind != "person" {
				return request{}, usageErr("--kind: want agent or person, got %q", kind)
			}
			body := map[string]any{"kind": kind, "subject": args[0], "roles": roles, "tools": tools, "label": label}
			if err := listingBody(body, listing, top); err != nil {
				return request{}, err
			}
			if len(attrs) > 0 {
				body["attributes"] = attrs
			}
			if expires != "" {
				t, err := parseTime(expires)
				if err != nil {
					return request{}, usageErr("--expires: %v", err)
				}
				body["expires_at"] = t
			}
			return request{method: "POST", path: "/v1/keys", body: body}, nil
		})
	create.Flags().StringVar(&kind, "kind", "", "agent or person (required)")
	create.Flags().StringArrayVar(&roles, "role", nil, "a person's role: approver, auditor, platform_admin, tool_owner:TEAM, group:NAME (repeatable)")
	create.Flags().StringArrayVar(&tools, "tool", nil, "an agent key's narrowing: a tool name or glob it may call, within its identity's grants (repeatable)")
	create.Flags().StringVar(&label, "label", "", "a note naming where the key is used")
	create.Flags().StringToStringVar(&attrs, "attribute", nil, "NAME=VALUE: what policy rules read of the caller, as principal.attributes.NAME (team=NAME is its team; repeatable)")
	create.Flags().StringVar(&expires, "expires", "", "when the key stops working, YYYY-MM-DD or RFC 3339")
	create.Flags().StringVar(&listing, "listing", "", listingHelp)
	create.Flags().IntVar(&top, "listing-top", 0, "with --listing hybrid: how many most-used tools are listed (1 to 50; default 10)")
	_ = create.MarkFlagRequired("kind")
	_ = create.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions([]string{"agent", "person"}, cobra.ShellCompDirectiveNoFileComp))

	var page func() []string
	list := apiCmd(a, "list", "list keys, never their secrets (platform_admin or auditor)", exactArgs(0, "no arguments"), keyColumns,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/keys" + query(page()...)}, nil
		})
	page = paging(list)
	revoke := apiCmd(a, "revoke KEY_ID", "revoke a key at once on this node, within the key cache's lifetime on others (platform_admin)", exactArgs(1, "KEY_ID"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "POST", path: "/v1/keys/" + esc(args[0]) + "/revoke"}, nil
		})
	var setListing string
	var setTop int
	set := apiCmd(a, "set-listing KEY_ID --listing full|meta|hybrid", "change how /mcp lists an agent key's tools (platform_admin); audited", exactArgs(1, "KEY_ID"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			if setListing == "" {
				return request{}, usageErr("--listing: want full, meta or hybrid")
			}
			body := map[string]any{}
			if err := listingBody(body, setListing, setTop); err != nil {
				return request{}, err
			}
			return request{method: "PATCH", path: "/v1/keys/" + esc(args[0]), body: body}, nil
		})
	set.Flags().StringVar(&setListing, "listing", "", listingHelp+" (required)")
	set.Flags().IntVar(&setTop, "listing-top", 0, "with --listing hybrid: how many most-used tools are listed (1 to 50; default 10)")
	_ = set.RegisterFlagCompletionFunc("listing", cobra.FixedCompletions([]string{"full", "meta", "hybrid"}, cobra.ShellCompDirectiveNoFileComp))
	return group(&cobra.Command{Use: "keys", Short: "API keys of agents and people; rotate-kek, the operator's rotation of the key sealing connection secrets",
		Long: `keys manages the API keys agents and people call the server with (create,
list, revoke, set-listing: clients of the REST API).

rotate-kek is another key altogether: the key-encryption key that seals
connection secrets in the database. It is an operator's offline command,
run on a host that reaches the database (--database), never through the
API.`}, create, list, revoke, set, newRotateKEKCmd(a))
}

var auditColumns = []string{"id", "created_at", "run_id", "agent_id", "tool", "outcome", "approval_id", "replayed"}

func newAuditCmd(a *app) *cobra.Command {
	var runID, agent, tool, outcome string
	var f auditFlags
	var page func() []string
	list := apiCmd(a, "list", "list audit events, newest first (auditor)", exactArgs(0, "no arguments"), auditColumns,
		func(*cobra.Command, []string) (request, error) {
			kv := append([]string{"run_id", runID, "agent_id", agent, "tool", tool, "outcome", outcome}, f.query()...)
			path := "/v1/audit/events" + query(append(kv, page()...)...)
			for _, k := range f.kinds {
				path += sep(path) + "kind=" + url.QueryEscape(k)
			}
			return request{method: "GET", path: path}, nil
		})
	page = paging(list)
	list.Flags().StringVar(&runID, "run", "", "only this run's events")
	list.Flags().StringVar(&agent, "agent", "", "only this agent's events")
	list.Flags().StringVar(&tool, "tool", "", "only this tool's events")
	list.Flags().StringVar(&outcome, "outcome", "", "only events with this outcome (ok, approval_required, or an error code)")
	f.add(list)
	var showRun string
	show := findCmd(a, "show EVENT_ID", "show one audit event (auditor); --run narrows the search", auditColumns,
		func(string) []string { return []string{"/v1/audit/events" + query("run_id", showRun, "limit", "1000")} })
	show.Flags().StringVar(&showRun, "run", "", "the event's run, if known: the search reads only its events")
	return group(&cobra.Command{Use: "audit", Short: "the audit trail of every call's outcome"}, list, show, newAuditVerifyCmd(a), newAuditKeygenCmd(a),
		newAuditReportCmd(a), newExportSubjectCmd(a), newAuditPurgeCmd(a), newAuditSinksCmd(a))
}

func newUncertainCmd(a *app) *cobra.Command {
	var page func() []string
	list := apiCmd(a, "list", "list uncertain actions: writes whose outcome nobody knows, holding their key (approver or auditor)", exactArgs(0, "no arguments"),
		[]string{"tool", "key", "run_id", "reason", "owner", "since"},
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/uncertain" + query(page()...)}, nil
		})
	page = paging(list)
	var result, failure, unconfirmed string
	reconcile := apiCmd(a, "reconcile TOOL KEY (--result JSON | --failure CODE:MESSAGE | --unconfirmed NOTE)",
		"say what happened to an uncertain action (approver)", exactArgs(2, "TOOL KEY"), nil,
		func(cmd *cobra.Command, args []string) (request, error) {
			body := map[string]any{"tool": args[0], "key": args[1]}
			set := 0
			if result != "" {
				if !json.Valid([]byte(result)) {
					return request{}, usageErr("--result is not JSON")
				}
				body["output"] = json.RawMessage(result)
				set++
			}
			if failure != "" {
				code, msg, ok := strings.Cut(failure, ":")
				if !ok || code == "" || strings.TrimSpace(msg) == "" {
					return request{}, usageErr("--failure: want CODE:MESSAGE, e.g. not_found:the order does not exist")
				}
				body["failure"] = map[string]string{"Code": code, "Message": strings.TrimSpace(msg)}
				set++
			}
			if unconfirmed != "" {
				body["unconfirmed"] = unconfirmed
				set++
			}
			if set != 1 {
				return request{}, usageErr("give exactly one of --result, --failure and --unconfirmed")
			}
			return request{method: "POST", path: "/v1/uncertain/reconcile", body: body}, nil
		})
	reconcile.Flags().StringVar(&result, "result", "", "it happened: the tool's answer, as its handler would have given it (JSON)")
	reconcile.Flags().StringVar(&failure, "failure", "", "it did not happen: CODE:MESSAGE (not_found, conflict, invalid_input, unavailable, retryable_upstream)")
	reconcile.Flags().StringVar(&unconfirmed, "unconfirmed", "", "nobody can say yet: a note the model reads")
	return group(&cobra.Command{Use: "uncertain", Short: "writes whose outcome is unknown, and their reconciliation"}, list, reconcile)
}
