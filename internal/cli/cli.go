// Package cli implements the toolplane command line: argument parsing and
// output for each subcommand. It holds no domain logic of its own; each
// command calls the package that owns the mechanism, and the commands that
// manage a running deployment are clients of its REST API.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolplane/toolplane/internal/server"
	"github.com/toolplane/toolplane/policy"
)

// Main runs the command line with args (without the program name) and
// answers the process exit status: 0 on success, 1 when the command
// failed, 2 when it was not understood (unknown command, bad flag, wrong
// arguments).
func Main(args []string, stdout, stderr io.Writer) int {
	return execute(&app{stdout: stdout, stderr: stderr, getenv: os.Getenv, signals: true, engines: policyEngines}, args)
}

// MainWith runs the command line as Main does, and hands `serve`'s
// configuration, built from its flags and environment, to tune before the
// server is built from it: how a program built in this module that
// compiles its own tools into toolplane (what only Go can give a
// server.Config, such as tools that submit provider jobs) keeps every
// flag and command of the toolplane binary. The chaos test's nodes are
// such a program.
func MainWith(args []string, stdout, stderr io.Writer, tune func(*server.Config)) int {
	return execute(&app{stdout: stdout, stderr: stderr, getenv: os.Getenv, signals: true, engines: policyEngines, tune: tune}, args)
}

// app is what every command shares: where it writes and how it reads the
// environment (a function, so tests can run in parallel with their own).
type app struct {
	// stdin is what a command reads its input from; nil is the process's.
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// signals makes serve stop on SIGINT and SIGTERM; off when a test
	// runs serve inside its own process.
	signals bool
	// engines are the rule languages the offline policy test compiles.
	engines []policy.Engine
	// tune, when set, completes serve's configuration (MainWith).
	tune func(*server.Config)
}

// exitError ends a command with a status; err, when set, is printed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErr is an error in how a command was invoked (exit 2).
func usageErr(format string, a ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, a...)}
}

// silent ends a command with code after it has said why itself.
func silent(code int) error { return &exitError{code: code} }

// action adapts a command's work to cobra: any error it returns that does
// not carry its own status is a failure (exit 1), not a usage error.
func action(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		var ee *exitError
		if err != nil && !errors.As(err, &ee) {
			return &exitError{code: 1, err: err}
		}
		return err
	}
}

// exactArgs wants n positional arguments, named by what in the error.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErr("want %s, got %d argument(s)", what, len(args))
		}
		return nil
	}
}

// rangeArgs wants from min to max positional arguments.
func rangeArgs(min, max int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return usageErr("want %s, got %d argument(s)", what, len(args))
		}
		return nil
	}
}

// synonyms are the names people type for a subcommand from other tools
// (kubectl get, docker inspect): an unknown one is answered with the
// subcommand meant.
var synonyms = map[string][]string{
	"show": {"get", "describe", "view", "inspect", "info"},
	"list": {"ls", "get-all", "all"},
}

// group makes cmd a command that only holds subcommands: bare, it prints
// its help and exits 2 (nothing was done); with an unknown subcommand it
// says so, with the subcommands meant (by spelling or by synonyms), and
// exits 2; with --help it exits 0.
func group(cmd *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			if meant := slices.Compact(c.SuggestionsFor(args[0])); len(meant) > 0 {
				return usageErr("unknown command %q for %q; did you mean %s?", args[0], c.CommandPath(), strings.Join(meant, " or "))
			}
			return usageErr("unknown command %q for %q", args[0], c.CommandPath())
		}
		return nil
	}
	cmd.SuggestionsMinimumDistance = 2
	for _, sub := range subs {
		sub.SuggestFor = append(sub.SuggestFor, synonyms[sub.Name()]...)
	}
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		c.SetOut(c.ErrOrStderr())
		_ = c.Help()
		return silent(2)
	}
	cmd.AddCommand(subs...)
	return cmd
}

// newRoot builds the whole command tree.
func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "toolplane",
		Short: "the control plane every agent tool call passes through",
		Long: `toolplane is the control plane every agent tool call passes through.

serve runs it; migrate, lint, keys rotate-kek and webhooks verify work
offline; every other command is a client of a running server's REST API. The
server and key come from --server/--key, then $TOOLPLANE_SERVER/$TOOLPLANE_KEY,
then the current context of the config file (toolplane login), then
http://localhost:8080.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	if a.stdin != nil {
		root.SetIn(a.stdin)
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	group(root,
		newServeCmd(a),
		newMigrateCmd(a),
		newLintCmd(a),
		newToolsCmd(a),
		newGrantsCmd(a),
		newBundlesCmd(a),
		newPolicyCmd(a),
		newApprovalsCmd(a),
		newKeysCmd(a),
		newConnectionsCmd(a),
		newVendorsCmd(a),
		newSpendCmd(a),
		newNotificationsCmd(a),
		newSlackCmd(a),
		newWebhooksCmd(a),
		newOAuthCmd(a),
		newAuditCmd(a),
		newUncertainCmd(a),
		newUpstreamsCmd(a),
		newClientCmd(a),
		newLoginCmd(a),
		newConfigCmd(a),
		newVersionCmd(a),
	)
	// cobra adds completion (bash, zsh, fish, powershell) and help.
	return root
}

// execute runs args against the tree and maps the outcome to a status.
func execute(a *app, args []string) int {
	root := newRoot(a)
	root.SetArgs(longDashes(root, args))
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	code, msg := 2, err
	var ee *exitError
	if errors.As(err, &ee) {
		code, msg = ee.code, ee.err
	}
	if msg != nil {
		fmt.Fprintf(a.stderr, "toolplane: %v\n", msg)
		if code == 2 && cmd != nil {
			fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	}
	return code
}

// longDashes rewrites -name to --name where name is a long flag of the
// command args select: Go's flag package, which the command line used
// before, accepts both, and scripts written then keep working. Single
// letters stay shorthands (-o json).
func longDashes(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		return args
	}
	return rewriteDashes(args, func(name string) bool {
		return cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil
	})
}

// rewriteDashes turns -name[=v] into --name[=v] where known(name), up to a
// "--" that ends the flags.
func rewriteDashes(args []string, known func(string) bool) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i, s := range out {
		if s == "--" {
			break
		}
		if len(s) < 3 || s[0] != '-' || s[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(s[1:], "=")
		if len(name) > 1 && known(name) {
			out[i] = "-" + s
		}
	}
	return out
}

// longDashesIn is rewriteDashes for a plain flag set.
func longDashesIn(fs *pflag.FlagSet, args []string) []string {
	return rewriteDashes(args, func(name string) bool { return fs.Lookup(name) != nil })
}
