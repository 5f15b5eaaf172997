package discoveryeval

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/toolplane/toolplane/discovery"
)

// Main runs the harness as the toolplane-eval command does, with args its
// flags, and answers the exit code. opt are the search's options (a
// node's offline default, see discovery/offline), less the thesaurus with
// -thesaurus=false.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, opt discovery.Options) int {
	fs := flag.NewFlagSet("toolplane-eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	split := fs.String("split", "all", "queries to report: tuning, heldout or all (all prints the three)")
	verbose := fs.Bool("v", false, "list each failed query with what ranked first")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	useThesaurus := fs.Bool("thesaurus", true, "widen queries with the shipped thesaurus")
	file := fs.String("queries", "", "a query set (JSON, in the embedded set's form) to run instead of the embedded one")
	perf := fs.Bool("perf", true, "also count tools/list tokens for a 1,000-tool grant and time searches over 10,000 versions")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !*useThesaurus {
		opt.Thesaurus = nil
	}
	cfg := Config{Split: *split, Perf: *perf, Options: opt}
	if *file != "" {
		f, err := os.Open(*file)
		if err != nil {
			fmt.Fprintln(stderr, "toolplane-eval:", err)
			return 1
		}
		cfg.Queries, err = ReadQueries(f)
		f.Close()
		if err != nil {
			fmt.Fprintln(stderr, "toolplane-eval:", err)
			return 1
		}
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "toolplane-eval:", err)
		return 1
	}
	if *asJSON {
		err = res.WriteJSON(stdout)
	} else {
		err = res.WriteTable(stdout, *verbose)
	}
	if err != nil {
		fmt.Fprintln(stderr, "toolplane-eval:", err)
		return 1
	}
	return 0
}
