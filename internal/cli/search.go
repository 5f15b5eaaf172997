package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/toolplane/toolplane/discovery"
)

// newSearchCmd searches the tools the key may call (GET /v1/tools/search)
// and prints the matches as a table: a person reads which tool fits, what
// replaces a deprecated one, and when nothing fits, that nothing does.
func newSearchCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "search [QUERY...] [--tag TAG]... [--effect read|write|send] [--owner TEAM] [--state active|deprecated] [--version RANGE] [--classification CLASS] [--limit N]",
		Short: "search the tools your key may call, best match first",
		Long: `search ranks the tools your key may call against what you want done, in
your own words (the words of QUERY, joined), and keeps those the filters
allow. Without QUERY it lists the tools the filters keep, by name. A tool
your key may not call is never found.`,
		Args: cobra.ArbitraryArgs,
	}
	r := addRemote(a, cmd)
	out := addOutput(cmd)
	var (
		tags                                          []string
		effect, owner, state, versions, class, tenant string
		limit                                         int
		asJSON                                        bool
	)
	f := cmd.Flags()
	f.StringArrayVar(&tags, "tag", nil, "only tools holding this tag (repeat for several; each must hold)")
	f.StringVar(&effect, "effect", "", "only tools of this effect: read, write or send")
	f.StringVar(&owner, "owner", "", "only this team's tools")
	f.StringVar(&state, "state", "", "only versions in this state: active or deprecated")
	f.StringVar(&versions, "version", "", "only versions in this range (^2.0.0)")
	f.StringVar(&class, "classification", "", "only tools touching this data classification")
	f.StringVar(&tenant, "tenant", "", "the tenant the key acts for")
	f.IntVar(&limit, "limit", 0, fmt.Sprintf("how many matches to show, 1 to %d (default %d)", discovery.MaxLimit, discovery.DefaultLimit))
	f.BoolVar(&asJSON, "json", false, "print the API's answer as JSON (as -o json)")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if asJSON {
			out.format = "json"
		}
		if err := out.check(); err != nil {
			return err
		}
		if cmd.Flags().Changed("limit") && (limit < 1 || limit > discovery.MaxLimit) {
			return usageErr("--limit %d: give 1 to %d", limit, discovery.MaxLimit)
		}
		text := strings.Join(args, " ")
		q := url.Values{}
		for k, v := range map[string]string{"q": text, "effect": effect, "owner": owner, "state": state, "version": versions,
			"classification": class, "tenant_id": tenant} {
			if v != "" {
				q.Set(k, v)
			}
		}
		q["tag"] = tags
		if limit > 0 {
			q.Set("limit", strconv.Itoa(limit))
		}
		path := "/v1/tools/search"
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		data, err := r.call(cmd, "GET", path, nil, "")
		if err != nil {
			return err
		}
		if out.format != "table" {
			return out.print(a.stdout, data)
		}
		var res discovery.Results
		if err := json.Unmarshal(data, &res); err != nil {
			return fmt.Errorf("the answer is not a search's: %w", err)
		}
		if res.Degraded != "" {
			fmt.Fprintf(a.stderr, "warning: %s was not used this time; the matches are the other signals'\n", res.Degraded)
		}
		return printMatches(a.stdout, text, &res)
	})
	return cmd
}

// printMatches prints a search's answer for people.
func printMatches(w io.Writer, text string, res *discovery.Results) error {
	if res.NoGoodMatch {
		_, err := fmt.Fprintf(w, "no good match: no tool you may call fits %q well enough; try other words, or fewer filters\n", text)
		return err
	}
	if len(res.Matches) == 0 {
		_, err := fmt.Fprintln(w, "no tool you may call passes these filters")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tEFFECT\tSCORE\tMATCHED\tSUMMARY")
	for _, m := range res.Matches {
		summary := m.Summary
		if m.State == "deprecated" {
			if m.Replacement != "" {
				summary = "[deprecated: use " + m.Replacement + "] " + summary
			} else {
				summary = "[deprecated] " + summary
			}
		}
		score := "-"
		if text != "" {
			score = strconv.FormatFloat(m.Score, 'f', 2, 64)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Version, m.Effect, score, cell(toAnySlice(m.Why)), cell(summary))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.Total > len(res.Matches) {
		_, err := fmt.Fprintf(w, "(%d of %d matches: --limit to see more)\n", len(res.Matches), res.Total)
		return err
	}
	return nil
}

// toAnySlice answers ss as cell reads a JSON list.
func toAnySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// newDependenciesCmd prints the dependency graph around a tool the key
// may call (GET /v1/tools/{name}/dependencies): what to call before it,
// what takes its output, and what is usually called beside it.
func newDependenciesCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "dependencies NAME", Short: "what a tool needs called first, what takes its output, and what pairs with it",
		Args: exactArgs(1, "NAME")}
	r := addRemote(a, cmd)
	out := addOutput(cmd)
	var tenant string
	var asJSON bool
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant the key acts for")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's answer as JSON (as -o json)")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if asJSON {
			out.format = "json"
		}
		if err := out.check(); err != nil {
			return err
		}
		data, err := r.call(cmd, "GET", "/v1/tools/"+esc(args[0])+"/dependencies"+query("tenant_id", tenant), nil, "")
		if err != nil {
			return err
		}
		if out.format != "table" {
			return out.print(a.stdout, data)
		}
		var g discovery.Graph
		if err := json.Unmarshal(data, &g); err != nil {
			return fmt.Errorf("the answer is not a dependency graph: %w", err)
		}
		return printGraph(a.stdout, &g)
	})
	return cmd
}

// printGraph prints a dependency graph for people.
func printGraph(w io.Writer, g *discovery.Graph) error {
	nodes := map[string]discovery.GraphNode{}
	for _, n := range g.Nodes {
		nodes[n.Name] = n
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(prefix, name string) {
		n, ok := nodes[name]
		if !ok {
			fmt.Fprintf(tw, "%s%s\n", prefix, name)
			return
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", prefix, n.Name, n.Version, n.Effect, cell(n.Summary))
	}
	line("", g.Tool)
	if len(g.Before)+len(g.After)+len(g.PairsWith) == 0 {
		fmt.Fprintln(tw, "no dependencies among the tools you may call")
		return tw.Flush()
	}
	section := func(title string, names []string, numbered bool) {
		if len(names) == 0 {
			return
		}
		fmt.Fprintln(tw, title)
		for i, n := range names {
			prefix := "  "
			if numbered {
				prefix = fmt.Sprintf("  %d. ", i+1)
			}
			line(prefix, n)
		}
	}
	section("before (call these first, in this order):", g.Before, true)
	section("after (these take its output):", g.After, false)
	section("paired with (usually called beside it):", g.PairsWith, false)
	return tw.Flush()
}
