package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/toolplane/toolplane/backend"
)

// DefaultDatabase is the embedded store's file when neither --database nor
// TOOLPLANE_DATABASE names one.
const DefaultDatabase = "toolplane-data/toolplane.db"

// databaseFlag adds --database to fs, defaulting to TOOLPLANE_DATABASE and
// then the embedded file.
func databaseFlag(fs *flag.FlagSet) *string {
	def := os.Getenv("TOOLPLANE_DATABASE")
	if def == "" {
		def = DefaultDatabase
	}
	return fs.String("database", def, "a SQLite file path, or a PostgreSQL DSN (postgres://...); default $TOOLPLANE_DATABASE or "+DefaultDatabase)
}

func migrate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	database := databaseFlag(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: toolplane migrate [--database DB] up|status

up      applies every pending migration (toolplane's tables and River's)
status  lists toolplane's migrations and whether each is applied

options:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 || (fs.Arg(0) != "up" && fs.Arg(0) != "status") {
		fs.Usage()
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := backend.Open(ctx, *database)
	if err != nil {
		fmt.Fprintf(stderr, "toolplane migrate: %v\n", err)
		return 1
	}
	defer b.Close()
	if fs.Arg(0) == "up" {
		if err := b.Migrate(ctx); err != nil {
			fmt.Fprintf(stderr, "toolplane migrate: %v\n", err)
			return 1
		}
	}
	ms, err := b.MigrationStatus(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "toolplane migrate: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s %s\n", b.Kind, b.Where)
	pending := 0
	for _, m := range ms {
		state := "pending"
		if m.Applied {
			state = "applied " + m.AppliedAt.UTC().Format(time.RFC3339)
		} else {
			pending++
		}
		fmt.Fprintf(stdout, "%04d %-24s %s\n", m.Version, m.Name, state)
	}
	if fs.Arg(0) == "status" && pending > 0 {
		fmt.Fprintf(stderr, "%d migration(s) pending: run toolplane migrate up\n", pending)
	}
	return 0
}
