package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/cedar"
	"github.com/toolplane/toolplane/policy/rego"
	"github.com/toolplane/toolplane/rules"
)

// policyEngines are the rule languages a policy bundle may be written in:
// the engines serve decides with and the offline policy test compiles
// with. A language added here is one serve accepts and the CLI tests.
var policyEngines = []policy.Engine{cedar.Engine{}, rego.Engine{}}

// readBundle reads a bundle's files from dir (see policy.ReadBundleDir),
// refusing more files than a bundle may hold before any is sent.
func readBundle(dir string) (map[string]string, error) {
	files, err := policy.ReadBundleDir(dir)
	if err != nil {
		return nil, err
	}
	if len(files) > rules.MaxFiles {
		return nil, fmt.Errorf("%s holds %d files; a bundle has at most %d", dir, len(files), rules.MaxFiles)
	}
	return files, nil
}

var policyColumns = []string{"version", "language", "digest", "time_zone", "disabled", "published_by", "published_at", "note"}

func newPolicyCmd(a *app) *cobra.Command {
	test := &cobra.Command{
		Use:   "test DIR",
		Short: "compile the bundle in DIR and run its tests (offline: no server)",
		Args:  exactArgs(1, "DIR"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			files, err := readBundle(args[0])
			if err != nil {
				return err
			}
			res, err := rules.Test(cmd.Context(), a.engines, files)
			if err != nil {
				return err
			}
			return printTests(a.stdout, res)
		}),
	}

	var days int
	var yes bool
	var note, zone string
	publish := &cobra.Command{
		Use:   "publish DIR",
		Short: "publish the bundle in DIR as the organization's next version, after a shadow run over the last days",
		Long: `publish first shadows the bundle against the calls of the last --shadow-days
days and prints what it would decide differently; it refuses to publish
when the report shows any difference, unless --yes. --shadow-days 0 skips
the shadow run. The server then runs the bundle's tests again and refuses
a bundle whose tests fail.`,
		Args: exactArgs(1, "DIR"),
	}
	r := addRemote(a, publish)
	pout := addOutput(publish)
	publish.RunE = action(func(cmd *cobra.Command, args []string) error {
		if err := pout.check(); err != nil {
			return err
		}
		files, err := readBundle(args[0])
		if err != nil {
			return err
		}
		if days > 0 {
			data, err := r.call(cmd, "POST", "/v1/policy/shadow", map[string]any{"files": files, "days": days}, "")
			if err != nil {
				return err
			}
			var rep rules.ShadowReport
			if err := json.Unmarshal(data, &rep); err != nil {
				return fmt.Errorf("the shadow report: %w", err)
			}
			printShadow(a.stdout, &rep)
			if rep.Changed > 0 && !yes {
				return &exitError{code: 1, err: fmt.Errorf("not published: %d past calls would be decided differently; read the report, then publish with --yes", rep.Changed)}
			}
		}
		data, err := r.call(cmd, "POST", "/v1/policy/bundles", map[string]any{"files": files, "note": note, "time_zone": zone}, "")
		if err != nil {
			return err
		}
		if pout.format != "table" {
			return pout.print(a.stdout, data)
		}
		var b struct {
			Version int64  `json:"version"`
			Digest  string `json:"digest"`
		}
		if err := json.Unmarshal(data, &b); err != nil {
			return fmt.Errorf("the server's answer: %w", err)
		}
		fmt.Fprintf(a.stdout, "published version %d (%s); in force on every node within 2s\n", b.Version, b.Digest)
		return nil
	})
	publish.Flags().IntVar(&days, "shadow-days", 7, "shadow the bundle against this many days of past calls first (0: skip)")
	publish.Flags().BoolVar(&yes, "yes", false, "publish even when the shadow run reports differences")
	publish.Flags().StringVar(&note, "note", "", "why, for the change log")
	publish.Flags().StringVar(&zone, "time-zone", "", "IANA zone the rules read time in (default: the version in force's, the deployment's at first)")

	shadow := &cobra.Command{
		Use:   "shadow DIR",
		Short: "report which past calls the bundle in DIR would decide differently (nothing is published)",
		Args:  exactArgs(1, "DIR"),
	}
	sr := addRemote(a, shadow)
	sout := addOutput(shadow)
	var shadowDays int
	shadow.RunE = action(func(cmd *cobra.Command, args []string) error {
		if err := sout.check(); err != nil {
			return err
		}
		files, err := readBundle(args[0])
		if err != nil {
			return err
		}
		data, err := sr.call(cmd, "POST", "/v1/policy/shadow", map[string]any{"files": files, "days": shadowDays}, "")
		if err != nil {
			return err
		}
		if sout.format != "table" {
			return sout.print(a.stdout, data)
		}
		var rep rules.ShadowReport
		if err := json.Unmarshal(data, &rep); err != nil {
			return fmt.Errorf("the shadow report: %w", err)
		}
		printShadow(a.stdout, &rep)
		return nil
	})
	shadow.Flags().IntVar(&shadowDays, "days", 7, "how many days of past calls to replay (at most 90)")

	var before string
	list := apiCmd(a, "list", "list the organization's bundle versions, newest first", exactArgs(0, "no arguments"), policyColumns,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/policy/bundles" + query("before", before)}, nil
		})
	list.Flags().StringVar(&before, "before", "", "only versions older than this one")
	show := apiCmd(a, "show [VERSION]", "show a version with its files (default: the latest)", rangeArgs(0, 1, "at most one VERSION"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			v := "latest"
			if len(args) == 1 {
				v = args[0]
			}
			return request{method: "GET", path: "/v1/policy/bundles/" + esc(v)}, nil
		})
	var rollbackNote string
	rollback := apiCmd(a, "rollback VERSION", "publish an earlier version's files again, as the next version", exactArgs(1, "VERSION"), policyColumns,
		func(_ *cobra.Command, args []string) (request, error) {
			if _, err := strconv.ParseInt(args[0], 10, 64); err != nil {
				return request{}, usageErr("VERSION is a number")
			}
			return request{method: "POST", path: "/v1/policy/bundles/" + esc(args[0]) + "/rollback", body: map[string]any{"note": rollbackNote}}, nil
		})
	rollback.Flags().StringVar(&rollbackNote, "note", "", "why, for the change log")
	var disableNote string
	disable := apiCmd(a, "disable --note WHY", "break-glass: turn the organization's rules off, so the grants alone decide (platform_admin)", exactArgs(0, "no arguments"), policyColumns,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "POST", path: "/v1/policy/disable", body: map[string]any{"note": disableNote}}, nil
		})
	disable.Flags().StringVar(&disableNote, "note", "", "why (required)")
	var argsJSON, user string
	explain := apiCmd(a, "explain AGENT TOOL", "how AGENT's call of TOOL would be decided now, and by which rule", exactArgs(2, "AGENT TOOL"),
		nil,
		func(_ *cobra.Command, args []string) (request, error) {
			body := map[string]any{"agent_id": args[0], "tool": args[1], "user_id": user}
			if argsJSON != "" {
				var v map[string]any
				if err := json.Unmarshal([]byte(argsJSON), &v); err != nil {
					return request{}, usageErr("--args: a JSON object: %v", err)
				}
				body["arguments"] = v
			}
			return request{method: "POST", path: "/v1/policy/explain", body: body}, nil
		})
	explain.Flags().StringVar(&argsJSON, "args", "", "the call's arguments, a JSON object")
	explain.Flags().StringVar(&user, "user", "", "the user the call acts for")
	return group(&cobra.Command{Use: "policy", Short: "the organization's policy bundles: test, shadow, publish, list, explain"},
		test, publish, shadow, list, show, rollback, disable, explain)
}

// printTests prints a bundle's test results and fails when one fails.
func printTests(w io.Writer, res []policy.TestResult) error {
	failed := 0
	for _, r := range res {
		if r.Pass {
			fmt.Fprintf(w, "PASS  %s\n", r.Name)
			continue
		}
		failed++
		fmt.Fprintf(w, "FAIL  %s: %s\n", r.Name, r.Message)
	}
	switch {
	case len(res) == 0:
		return fmt.Errorf("the bundle has no tests; a bundle is published with tests that show what it decides")
	case failed > 0:
		return fmt.Errorf("%d of %d tests fail", failed, len(res))
	}
	fmt.Fprintf(w, "ok: %d tests pass\n", len(res))
	return nil
}

// printShadow prints a shadow report: the counts, then each difference.
func printShadow(w io.Writer, rep *rules.ShadowReport) {
	fmt.Fprintf(w, "shadow %s..%s: %d calls decided, %d replayed, %d unchanged, %d changed, %d not replayable, %d faults\n",
		rep.Since.Format("2006-01-02 15:04"), rep.Until.Format("2006-01-02 15:04"), rep.Examined, rep.Replayed, rep.Unchanged, rep.Changed, rep.Unreplayable, rep.Faults)
	if rep.Truncated {
		fmt.Fprintln(w, "(the window held more calls than one run reads: the oldest were not examined)")
	}
	for _, d := range rep.Differences {
		fmt.Fprintf(w, "  %s  %s  %s  %s -> %s", d.At.Format("2006-01-02 15:04:05"), d.AgentID, d.Tool, d.Then, d.Now)
		if d.NowRule != "" {
			fmt.Fprintf(w, " (rule %s)", d.NowRule)
		}
		if d.NowReason != "" {
			fmt.Fprintf(w, ": %s", d.NowReason)
		}
		fmt.Fprintln(w)
	}
	if rep.Changed > len(rep.Differences) {
		fmt.Fprintf(w, "  ... and %d more\n", rep.Changed-len(rep.Differences))
	}
}
