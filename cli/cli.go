// Package cli implements the toolplane command line: argument parsing and
// output for each subcommand. It holds no domain logic of its own; each
// command calls the package that owns the mechanism.
package cli

import (
	"fmt"
	"io"
)

// Main runs the command line with args (without the program name) and
// answers the process exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "lint":
		return lint(args[1:], stdout, stderr)
	case "migrate":
		return migrate(args[1:], stdout, stderr)
	case "serve":
		return serveCmd(args[1:], stdout, stderr)
	case "tools":
		return tools(args[1:], stdout, stderr)
	case "grants":
		return grantsCmd(args[1:], stdout, stderr)
	case "bundles":
		return bundlesCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "toolplane: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: toolplane <command> [arguments]

commands:
  lint FILE...   check tool definitions and show what a model would see
                 (toolplane lint -h for its options)
  serve          run the API (--demo for a catalogue that really works;
                 --database for PostgreSQL; toolplane serve -h)
  migrate up|status
                 apply or list database migrations (--database: a SQLite
                 file, the default, or a PostgreSQL DSN)
  tools publish|diff|list|show|submit|approve|reject|deprecate|retire
                 the registry's versions and their lifecycle
  grants add|list|revoke|explain|deny|denies|undeny
                 which agents may call which tools
  bundles put|list
                 named sets of tool references granted together

tools, grants and bundles talk to a server: --server (or $TOOLPLANE_SERVER,
default http://127.0.0.1:8080) and --key (or $TOOLPLANE_KEY).
`)
}
