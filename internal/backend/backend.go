// Package backend opens what a --database setting names: an embedded SQLite
// file (the default) or a PostgreSQL DSN. It answers the store, the
// maintenance reads the background sweeps need, River's driver for the
// same database, and migrations for both. It is wiring, shared by the
// commands; the stores themselves know nothing of each other.
package backend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/async"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/migrate"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/sqlite"
)

// Store is a store with the sweeps' maintenance reads, the notification
// tables, the callback signing secrets and the vendor ceilings.
type Store interface {
	toolplane.Store
	jobs.Maintenance
	toolplane.NotificationStore
	toolplane.ProviderJobStore
	toolplane.WebhookSecretStore
	toolplane.VendorCeilingStore
	toolplane.AuditOutboxStore
	toolplane.ClaimCounter
	toolplane.AnomalyStore
	toolplane.TrafficStore
}

// Runner is a node's background work runner, whichever driver it uses.
type Runner interface {
	invoke.Scheduler
	invoke.Notice
	async.Scheduler
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	// SettleLost decides, once, the claims whose worker was lost.
	SettleLost(ctx context.Context) error
	// EnqueueSettlement asks for a provider job's settlement
	// (providerjob.Settler).
	EnqueueSettlement(ctx context.Context, org, jobID string) error
	// AnomalyFiled tells of a new anomaly triage item on the
	// organization's notification channels.
	AnomalyFiled(ctx context.Context, a *toolplane.Anomaly) error
}

// Migration is one schema migration and whether it is applied.
type Migration = migrate.Migration

// Backend is an opened database.
type Backend struct {
	// Kind is "sqlite" or "postgres"; Where names the file or the server,
	// never a password.
	Kind, Where string
	Store       Store
	// RateLimits is the rate-limit store the nodes of this database
	// share: PostgreSQL's; nil for SQLite, whose one node keeps its
	// limits in memory.
	RateLimits ratelimit.Store
	migrate    func(ctx context.Context) error
	status     func(ctx context.Context) ([]Migration, error)
	runner     func(jobs.Deps, jobs.Options) (Runner, error)
	close      func()
}

// IsPostgres reports whether database names a PostgreSQL DSN.
func IsPostgres(database string) bool {
	return strings.HasPrefix(database, "postgres://") || strings.HasPrefix(database, "postgresql://")
}

// Open opens database: a PostgreSQL DSN, or the path of a SQLite file (its
// directory is created).
func Open(ctx context.Context, database string) (*Backend, error) {
	if IsPostgres(database) {
		return openPostgres(ctx, database)
	}
	return openSQLite(ctx, database)
}

func openSQLite(ctx context.Context, path string) (*Backend, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("data directory %s: %w", dir, err)
		}
	}
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	// River on SQLite wants one connection of its own: SQLite takes one
	// writer at a time, and River's maintenance runs in parallel.
	rdb, err := sqlite.Open(ctx, path)
	if err != nil {
		db.Close()
		return nil, err
	}
	rdb.SetMaxOpenConns(1)
	// Its one connection serves the sweep every 30 s at rest: closed when
	// idle for the pools' usual 4 s, it was opened again at each sweep
	// (its pragmas, the whole schema read, River's statements prepared),
	// a third of an idle node's CPU. Kept between sweeps instead; a node
	// going to rest after a burst still closes it once (ReleaseMemory).
	rdb.SetConnMaxIdleTime(riverConnIdle)
	store := sqlite.New(db)
	driver := inProcess{riversqlite.New(rdb)}
	return &Backend{
		Kind: "sqlite", Where: path, Store: store,
		migrate: func(ctx context.Context) error {
			if err := store.Migrate(ctx); err != nil {
				return err
			}
			return migrateRiverSQLite(ctx, rdb)
		},
		status: store.MigrationStatus,
		runner: func(d jobs.Deps, o jobs.Options) (Runner, error) { return jobs.New[*sql.Tx](driver, d, o) },
		close:  func() { rdb.Close(); db.Close() },
	}, nil
}

// riverConnIdle is how long River's pool on SQLite keeps its connection
// unused: longer than the sweep's period (jobs.Options.SweepEvery, 30 s),
// with room for a sweep that runs late.
const riverConnIdle = 2 * time.Minute

// migrateRiverSQLite brings River's schema up to date on the file rdb,
// River's pool, opens, in one transaction that takes SQLite's write lock
// before River reads which versions are applied, as toolplane's own
// migration takes it before it reads its record (sqlite's apply). Nodes
// that start at once on one file so migrate it one after another, and each
// after the first finds River's versions applied; River's plain Migrate
// reads them before its transactions, and a node that read them while
// another migrated applied them again and failed ("table river_migration
// already exists"). A node that waits for the lock past busy_timeout tries
// again, as toolplane's own migration does (sqlite.WhileBusy): the
// transaction rolls back whole, SQLite's DDL with the rest.
func migrateRiverSQLite(ctx context.Context, rdb *sql.DB) error {
	driver := inProcess{riversqlite.New(rdb)}
	return sqlite.WhileBusy(ctx, func() error {
		tx, err := rdb.BeginTx(ctx, nil) // immediate (sqlite.Open's _txlock): the write lock
		if err != nil {
			return fmt.Errorf("river migrate: %w", err)
		}
		defer tx.Rollback() // a no-op after Commit
		if err := jobs.MigrateTx(ctx, driver, tx); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("river migrate: %w", err)
		}
		return nil
	})
}

// inProcess is River's SQLite driver without its listener. The driver
// emulates LISTEN by querying a notification table every 50 ms, a
// statement parsed afresh each time: about a third of an idle node's CPU,
// and under load a few µs of every call. One process owns an embedded file
// (nodes that scale out share PostgreSQL), and toolplane inserts its jobs
// outside transactions, so River's own in-process wake-up of its producers
// on insert serves instead. Jobs that become due later (a scheduled expiry,
// a retry) and whatever another process inserts are found by the queues'
// fetch polls, within a poll interval.
type inProcess struct{ *riversqlite.Driver }

// SupportsListener reports false: River then neither starts the polling
// listener nor waits on it, and wakes its producers itself on insert.
func (inProcess) SupportsListener() bool { return false }

// SupportsListenNotify reports false: with nobody listening, an insert
// need not write a notification row.
func (inProcess) SupportsListenNotify() bool { return false }

// pingIdle is how long a PostgreSQL connection may sit idle in the pool
// before it is pinged when taken.
const pingIdle = 10 * time.Second

func openPostgres(ctx context.Context, dsn string) (*Backend, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("database DSN: %w", err)
	}
	// pgx pings a connection idle over a second before it hands it out:
	// on an idle node, where each loop's statement finds its connection
	// idle, that was one more round trip per statement. A connection in
	// use every few seconds is known alive; one idle longer is pinged.
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration > pingIdle }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %w", cfg.ConnConfig.Host, err)
	}
	store := postgres.New(pool)
	driver := riverpgxv5.New(pool)
	return &Backend{
		Kind: "postgres", Where: fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database), Store: store,
		RateLimits: postgres.NewRateLimits(pool),
		migrate: func(ctx context.Context) error {
			if err := store.Migrate(ctx); err != nil {
				return err
			}
			return migrateRiverPostgres(ctx, func() error { return jobs.Migrate(ctx, driver) })
		},
		status: store.MigrationStatus,
		runner: func(d jobs.Deps, o jobs.Options) (Runner, error) { return jobs.New(driver, d, o) },
		close:  pool.Close,
	}, nil
}

// migrateRiverPostgres runs River's migration (migrate) until it succeeds,
// at most riverMigrateAttempts times while it fails. River reads which
// versions are applied before it applies the rest, each in a transaction
// of its own, so of nodes that start at once on one database all but one
// may apply a version another applied meanwhile and fail (a duplicate key
// in pg_type, "relation river_migration already exists"), their
// transaction rolled back whole; another attempt reads the versions
// afresh and finds them applied. Its migrations cannot all share one
// transaction on PostgreSQL, as they do on SQLite (migrateRiverSQLite),
// and holding toolplane's advisory lock around them would hold a second
// connection while River needs one: a pool of one, or a role at its
// connection limit, would never finish starting. An error that outlasts
// the attempts is the migration's own, and is answered.
func migrateRiverPostgres(ctx context.Context, migrate func() error) error {
	var err error
	for attempt := 1; attempt <= riverMigrateAttempts; attempt++ {
		if err = migrate(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, context.Cause(ctx))
		case <-time.After(time.Duration(attempt) * riverMigratePause):
		}
	}
	return fmt.Errorf("after %d attempts: %w", riverMigrateAttempts, err)
}

// riverMigrateAttempts and riverMigratePause bound migrateRiverPostgres:
// River's migrations take well under a second a version, and a node that
// lost a race on one finds it applied at its next attempt.
const (
	riverMigrateAttempts = 8
	riverMigratePause    = 100 * time.Millisecond
)

// Migrate brings toolplane's schema and River's up to date.
func (b *Backend) Migrate(ctx context.Context) error { return b.migrate(ctx) }

// MigrationStatus lists toolplane's migrations and whether each is applied.
func (b *Backend) MigrationStatus(ctx context.Context) ([]Migration, error) { return b.status(ctx) }

// Runner builds this node's background work runner.
func (b *Backend) Runner(d jobs.Deps, o jobs.Options) (Runner, error) { return b.runner(d, o) }

// Close releases the database.
func (b *Backend) Close() { b.close() }
