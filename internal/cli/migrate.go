package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/server"
)

// DefaultDatabase is the embedded store's file when neither --database nor
// TOOLPLANE_DATABASE names one.
const DefaultDatabase = server.DefaultDatabase

// databaseFlag adds --database to fs, defaulting to TOOLPLANE_DATABASE and
// then the embedded file.
func databaseFlag(fs *pflag.FlagSet) *string {
	def := os.Getenv("TOOLPLANE_DATABASE")
	if def == "" {
		def = DefaultDatabase
	}
	return fs.String("database", def, "a SQLite file path, or a PostgreSQL DSN (postgres://...); default $TOOLPLANE_DATABASE or "+DefaultDatabase)
}

func newMigrateCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate up|status",
		Short: "apply or list database migrations",
		Long: `migrate applies or lists the database's migrations (--database: a SQLite file,
the default, or a PostgreSQL DSN).`,
	}
	database := databaseFlag(cmd.PersistentFlags())
	// open opens the database for one subcommand.
	open := func(cmd *cobra.Command) (*backend.Backend, context.Context, context.CancelFunc, error) {
		ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
		b, err := backend.Open(ctx, *database)
		if err != nil {
			cancel()
			return nil, nil, nil, err
		}
		return b, ctx, cancel, nil
	}
	up := &cobra.Command{
		Use:   "up",
		Short: "apply every pending migration (toolplane's tables and River's) and say which",
		Args:  exactArgs(0, "no arguments"),
		RunE: action(func(cmd *cobra.Command, _ []string) error {
			b, ctx, cancel, err := open(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer b.Close()
			before, err := b.MigrationStatus(ctx)
			if err != nil {
				return err
			}
			if err := b.Migrate(ctx); err != nil {
				return err
			}
			after, err := b.MigrationStatus(ctx)
			if err != nil {
				return err
			}
			was := map[int]bool{}
			for _, m := range before {
				was[m.Version] = m.Applied
			}
			var applied []string
			for _, m := range after {
				if m.Applied && !was[m.Version] {
					applied = append(applied, fmt.Sprintf("%04d %s", m.Version, m.Name))
				}
			}
			if len(applied) == 0 {
				fmt.Fprintf(a.stdout, "%s %s: already up to date\n", b.Kind, b.Where)
				return nil
			}
			fmt.Fprintf(a.stdout, "%s %s: applied %d migration(s): %s\n", b.Kind, b.Where, len(applied), strings.Join(applied, ", "))
			return nil
		}),
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "list toolplane's migrations and whether each is applied",
		Args:  exactArgs(0, "no arguments"),
	}
	out := addOutput(status)
	status.RunE = action(func(cmd *cobra.Command, _ []string) error {
		if err := out.check(); err != nil {
			return err
		}
		b, ctx, cancel, err := open(cmd)
		if err != nil {
			return err
		}
		defer cancel()
		defer b.Close()
		ms, err := b.MigrationStatus(ctx)
		if err != nil {
			return err
		}
		if out.format != "table" {
			type row struct {
				Version   int        `json:"version"`
				Name      string     `json:"name"`
				Applied   bool       `json:"applied"`
				AppliedAt *time.Time `json:"applied_at,omitempty"`
			}
			rows := make([]row, len(ms))
			for i, m := range ms {
				rows[i] = row{Version: m.Version, Name: m.Name, Applied: m.Applied}
				if m.Applied {
					rows[i].AppliedAt = &ms[i].AppliedAt
				}
			}
			return printValue(a, out, map[string]any{"database": b.Kind + " " + b.Where, "migrations": rows})
		}
		fmt.Fprintf(a.stdout, "%s %s\n", b.Kind, b.Where)
		pending := 0
		for _, m := range ms {
			state := "pending"
			if m.Applied {
				state = "applied " + m.AppliedAt.UTC().Format(time.RFC3339)
			} else {
				pending++
			}
			fmt.Fprintf(a.stdout, "%04d %-24s %s\n", m.Version, m.Name, state)
		}
		if pending > 0 {
			fmt.Fprintf(a.stderr, "%d migration(s) pending: run toolplane migrate up\n", pending)
		}
		return nil
	})
	return group(cmd, up, status)
}
