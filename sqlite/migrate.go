package sqlite

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"slices"
	"time"

	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/toolplane/toolplane/migrate"
)

// migrationFiles holds the schema history: migrations/NNNN_name.sql, applied
// in version order. A released migration is never edited; a change is a new
// file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one schema version and whether this database has it.
type Migration = migrate.Migration

// migrations answers the embedded migrations in version order.
func migrations() ([]migrate.File, error) { return migrate.Read(migrationFiles, "migrations") }

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at INTEGER NOT NULL
) STRICT`

// Migrate applies the migrations this database lacks, each in its own
// transaction together with its schema_migrations row, so a migration is
// either wholly applied and recorded or not at all. Running it again, or from
// several processes at once, applies nothing twice; a Migrate that meets
// another's write lock waits for it as long as ctx allows (see WhileBusy).
// A database that records a migration this binary lacks is refused
// (migrate.ErrNewerSchema).
func (s *Store) Migrate(ctx context.Context) error {
	all, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	err = WhileBusy(ctx, func() error {
		_, err := s.db.ExecContext(ctx, createMigrationsTable)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range all {
		if err := WhileBusy(ctx, func() error { return s.apply(ctx, m) }); err != nil {
			return fmt.Errorf("migrate %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	// Checked once this binary's own are applied, so a newer node that
	// migrated meanwhile is seen too.
	applied, err := s.appliedMigrations(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := migrate.CheckKnown(all, applied); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// WhileBusy runs f, again each time it fails with SQLITE_BUSY, until it
// succeeds, fails otherwise, or ctx ends. A node that starts while another
// migrates the same file waits for the write lock under busy_timeout, and
// the other may hold it longer than that: a migration that rewrites a large
// table, or, when several nodes start at once, one node after another
// taking the lock for its next migration while this one sleeps between
// SQLite's polls (the lock is not handed out in turn; under -race on a
// loaded host a waiter lost it for over ten seconds). Migrate then waits as
// long as its caller allows, as PostgreSQL's waits on its advisory lock,
// instead of failing the node's start. Each f rolls back whole on failure
// (apply's transaction, an autocommit statement), so trying it again is
// safe. It is exported for River's migration of the same file
// (internal/backend), which meets the same lock when nodes start at once;
// an f given it must roll back whole on failure too.
func WhileBusy(ctx context.Context, f func() error) error {
	for {
		err := f()
		if !isBusy(err) {
			return err
		}
		// SQLite answers busy at once when it will not wait (a pool
		// without busy_timeout, WAL recovery): pause before trying again.
		select {
		case <-ctx.Done():
			return errors.Join(err, context.Cause(ctx))
		case <-time.After(busyRetryPause):
		}
	}
}

// busyRetryPause is WhileBusy's pause between tries.
const busyRetryPause = 10 * time.Millisecond

// isBusy reports whether err is SQLite's refusal to wait longer for a lock
// another connection holds (SQLITE_BUSY and its extended codes).
func isBusy(err error) bool {
	var e *modernc.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// apply runs m unless it is recorded. The record is written first: that
// takes the write lock before anything is read, so a concurrent Migrate
// waits for this one and then finds m recorded, even on a pool whose
// transactions begin deferred.
func (s *Store) apply(ctx context.Context, m migrate.File) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	res, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at)
		VALUES (?, ?, ?) ON CONFLICT (version) DO NOTHING`, m.Version, m.Name, time.Now().UnixMicro())
	if err != nil {
		return err
	}
	if ok, err := affected(res); err != nil || !ok {
		return err // already applied, or the error
	}
	// The driver runs every statement of a multi-statement string.
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	return tx.Commit()
}

// MigrationStatus answers every migration this binary embeds, and any the
// database records that it does not (a newer binary applied them), in
// version order.
func (s *Store) MigrationStatus(ctx context.Context) ([]Migration, error) {
	all, err := migrations()
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	applied, err := s.appliedMigrations(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	out := make([]Migration, 0, len(all))
	for _, m := range all {
		st := Migration{Version: m.Version, Name: m.Name}
		if a, ok := applied[m.Version]; ok {
			st.Applied, st.AppliedAt = true, a.AppliedAt
			delete(applied, m.Version)
		}
		out = append(out, st)
	}
	for _, a := range applied {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	return out, nil
}

// appliedMigrations answers the recorded migrations by version; none when
// the database was never migrated.
func (s *Store) appliedMigrations(ctx context.Context) (map[int]Migration, error) {
	var exists bool
	err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema
		WHERE type = 'table' AND name = 'schema_migrations')`).Scan(&exists)
	if err != nil || !exists {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT version, name, applied_at FROM schema_migrations`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	applied := make(map[int]Migration)
	for rows.Next() {
		var (
			m  = Migration{Applied: true}
			at int64
		)
		if err := rows.Scan(&m.Version, &m.Name, &at); err != nil {
			return nil, err
		}
		m.AppliedAt = fromMicros(at)
		applied[m.Version] = m
	}
	return applied, rows.Err()
}
