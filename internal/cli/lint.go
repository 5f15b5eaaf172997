package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/projection"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/schema"
	"github.com/toolplane/toolplane/toolfile"
)

func newLintCmd(a *app) *cobra.Command {
	var o lintOptions
	cmd := &cobra.Command{
		Use:   "lint [flags] FILE...",
		Short: "check tool definitions and show what a model would see (offline)",
		Long: `Loads each tool definition (YAML or JSON), runs every registration check, and
prints each tool's model-facing name and its MCP tools/list projection.
Handler, connection and policy-fact references are checked against the
deployment the --handler, --connection and --fact flags describe; without
any of them they are listed as not checked.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr("name at least one definition file")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, files []string) error {
			if code := lint(o, files, a.stdout, a.stderr); code != 0 {
				return silent(code)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.argsJSON, "args", "", "JSON arguments: print what the model would receive for them (one tool only)")
	fs.StringVar(&o.outputJSON, "output", "", "JSON handler answer: print the bounded result the model would read (one tool only)")
	fs.StringArrayVar(&o.handlers, "handler", nil, "a handler key the deployment registers; KEY+preview if it renders previews (repeatable)")
	fs.StringArrayVar(&o.connections, "connection", nil, "a connection id the deployment holds (repeatable)")
	fs.StringArrayVar(&o.facts, "fact", nil, "a policy fact the deployment resolves (repeatable)")
	return cmd
}

// lintOptions are lint's flags.
type lintOptions struct {
	argsJSON, outputJSON         string
	handlers, connections, facts []string
}

// lint checks files and answers the exit status: 1 when a definition is
// refused, 2 when the flags do not fit the files.
func lint(o lintOptions, files []string, stdout, stderr io.Writer) int {
	handlers, connections, facts, argsJSON, outputJSON := o.handlers, o.connections, o.facts, &o.argsJSON, &o.outputJSON
	failed := false
	var defs []toolplane.Definition
	for _, f := range files {
		d, notes, err := toolfile.ReadFile(f)
		for _, n := range notes {
			fmt.Fprintf(stderr, "%s: note: %s: %s\n", f, n.Field, n.Message)
		}
		if err != nil {
			fmt.Fprintf(stderr, "%v\n", err)
			failed = true
			continue
		}
		defs = append(defs, d)
	}
	if failed {
		return 1
	}

	opt := registry.Options{}
	if len(handlers)+len(connections)+len(facts) > 0 {
		s := registry.Static{Handlers: map[string]bool{}, Connections: map[string]bool{}, FactResolvers: map[string]bool{}}
		for _, h := range handlers {
			key, preview := strings.CutSuffix(h, "+preview")
			s.Handlers[key] = preview
		}
		for _, c := range connections {
			s.Connections[c] = true
		}
		for _, f := range facts {
			s.FactResolvers[f] = true
		}
		opt.Bindings = s
	}
	reg, rep, err := registry.Build(defs, opt)
	for _, u := range rep.Unresolved {
		fmt.Fprintf(stderr, "not checked (no deployment given): %s\n", u)
	}
	if err != nil {
		var ce *registry.CheckError
		if errors.As(err, &ce) {
			for _, p := range ce.Problems {
				fmt.Fprintln(stderr, p.String())
			}
		} else {
			fmt.Fprintf(stderr, "toolplane lint: %v\n", err)
		}
		return 1
	}

	for _, t := range reg.Tools("") {
		if w := outsideTextWarning(t); w != "" {
			fmt.Fprintln(stderr, w)
		}
	}

	if *argsJSON != "" || *outputJSON != "" {
		if len(reg.Tools("")) != 1 {
			fmt.Fprintln(stderr, "toolplane lint: --args and --output take exactly one definition file")
			return 2
		}
		t := reg.Tools("")[0]
		status := 0
		if *argsJSON != "" && !lintArgs(t, *argsJSON, stdout, stderr) {
			status = 1
		}
		if *outputJSON != "" && !lintOutput(t, *outputJSON, stdout, stderr) {
			status = 1
		}
		return status
	}

	for _, t := range reg.Tools("") {
		fmt.Fprintf(stdout, "%s  (model-facing name: %s, version %s, %s)\n", t.Def.Name, t.Model, t.Def.Version, t.Def.Effect)
		b, err := json.MarshalIndent(projection.Shown(t), "", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "toolplane lint: %s: MCP projection: %v\n", t.Def.Name, err)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n\n", b)
	}
	fmt.Fprintf(stderr, "%d tool(s) ok\n", len(reg.Tools("")))
	return 0
}

// maxWarnedFields bounds the fields a warning lists.
const maxWarnedFields = 5

// outsideTextWarning warns of a read tool whose answers hold free-text
// fields (strings no enum, const, pattern, format or short maxLength
// constrains) while its output schema says of none whether it holds text
// from outside the platform: a handler's answer is labelled untrusted only
// where its definition says so, and a ticket, an email or a web page
// reaches a model unlabelled otherwise. "" when there is nothing to say.
func outsideTextWarning(t *registry.Tool) string {
	out := t.OutputSchema()
	if t.Def.Writes() || out == nil || out.DeclaresText() {
		return ""
	}
	free := out.FreeText()
	if len(free) == 0 {
		return ""
	}
	var shown []string
	for _, f := range free[:min(len(free), maxWarnedFields)] {
		if f == "" {
			f = "the whole answer"
		}
		shown = append(shown, f)
	}
	fields := strings.Join(shown, ", ")
	if len(free) > len(shown) {
		fields += fmt.Sprintf(" and %d more", len(free)-len(shown))
	}
	return fmt.Sprintf("%s: warning: output_schema: a read tool answering free text (%s) declares none of it as outside text; mark each field a customer, a web page, an email or a ticket wrote with %q: true (fenced and labelled untrusted for the model), and the platform's own with %q: false",
		t.Def.Name, fields, schema.OutsideTextKeyword, schema.OutsideTextKeyword)
}

// lintArgs prints what the model would receive for args: the coerced
// arguments, or the refusal as the model reads it.
func lintArgs(t *registry.Tool, raw string, stdout, stderr io.Writer) bool {
	args, refusal := registry.DecodeArguments([]byte(raw))
	var coercions []schema.Coercion
	if refusal == nil {
		args, coercions, refusal = t.Arguments(args)
	}
	if refusal == nil {
		refusal = t.CheckBatch(args)
	}
	if refusal != nil {
		stdout.Write(boundary.Render(*refusal))
		fmt.Fprintln(stdout)
		fmt.Fprintf(stderr, "arguments refused: %s: %s\n", refusal.Error.Code, refusal.Error.Message)
		return false
	}
	b, err := json.Marshal(map[string]any{"arguments": args, "coercions": coercions})
	if err != nil {
		fmt.Fprintf(stderr, "toolplane lint: %v\n", err)
		return false
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return true
}

// lintOutput prints the bounded result a model would read for a handler
// answer.
func lintOutput(t *registry.Tool, raw string, stdout, stderr io.Writer) bool {
	answer, refusal := registry.DecodeArguments([]byte(raw))
	if refusal != nil {
		fmt.Fprintf(stderr, "--output is not valid JSON: %s\n", refusal.Error.Message)
		return false
	}
	res, violations := t.Output(answer)
	stdout.Write(boundary.Render(res))
	fmt.Fprintln(stdout)
	for _, v := range violations {
		fmt.Fprintf(stderr, "output violates its schema: %s: %s\n", v.FieldPath, v.Message)
	}
	return res.OK
}
