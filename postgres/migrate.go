package postgres

import (
	"context"
	"embed"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

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

// migrationLock is the advisory lock key every Migrate transaction takes
// first: the bytes of "toolplan" read as a big-endian integer, to stay clear
// of keys other applications pick. Advisory locks are database-wide, so
// Migrate calls on different schemas of one database wait for each other
// too; migrations are rare and short, and one key is what makes the lock
// obviously held by everyone.
const migrationLock int64 = 0x746f6f6c706c616e

const createMigrationsTable = `CREATE TABLE schema_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT COLLATE "C" NOT NULL,
	applied_at BIGINT NOT NULL
)`

// migrationsTableExists asks whether schema_migrations exists in the schema
// tables are created in (the first existing schema on the search_path), not
// merely somewhere on the search_path.
const migrationsTableExists = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
	WHERE schemaname = current_schema() AND tablename = 'schema_migrations')`

// Migrate applies the migrations this database lacks, each in its own
// transaction together with its schema_migrations row, so a migration is
// either wholly applied and recorded or not at all (PostgreSQL DDL is
// transactional). Running it again, or from several nodes at once, applies
// nothing twice: each transaction first takes a transaction-scoped advisory
// lock, so concurrent Migrate calls take turns, and each finds what the one
// before it recorded. A database that records a migration this binary
// lacks is refused (migrate.ErrNewerSchema).
func (s *Store) Migrate(ctx context.Context) error {
	all, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range all {
		if err := s.apply(ctx, m); err != nil {
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

// apply runs m unless it is recorded. Everything it reads, it reads under
// the advisory lock, after the previous holder committed, so deciding and
// writing need no further care. A database already at m writes nothing, so
// a role without the right to create tables can call Migrate once its
// schema is current.
func (s *Store) apply(ctx context.Context, m migrate.File) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return err
	}
	var exists bool
	if err := tx.QueryRow(ctx, migrationsTableExists).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := tx.Exec(ctx, createMigrationsTable); err != nil {
			return err
		}
	}
	var applied bool
	err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.Version).Scan(&applied)
	if err != nil || applied {
		return err
	}
	// Without arguments, pgx sends the file over the simple protocol, which
	// runs every statement in it.
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
		m.Version, m.Name, time.Now().UnixMicro()); err != nil {
		return err
	}
	return tx.Commit(ctx)
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
// the schema was never migrated.
func (s *Store) appliedMigrations(ctx context.Context) (map[int]Migration, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, migrationsTableExists).Scan(&exists); err != nil || !exists {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT version, name, applied_at FROM schema_migrations`)
	if err != nil {
		return nil, err
	}
	applied := make(map[int]Migration)
	var (
		m  = Migration{Applied: true}
		at int64
	)
	_, err = pgx.ForEachRow(rows, []any{&m.Version, &m.Name, &at}, func() error {
		m.AppliedAt = fromMicros(at)
		applied[m.Version] = m
		return nil
	})
	return applied, err
}
