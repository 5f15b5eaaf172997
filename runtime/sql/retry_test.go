package sqlruntime_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/canonical"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/registry"
	sqlruntime "github.com/toolplane/toolplane/runtime/sql"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// These tests run the sql runtime through the invoker, whose retry loop
// decides whether a failed statement runs again: against a real
// PostgreSQL database, with the platform's journal on SQLite.

type fixedBroker struct{ rel *toolplane.Released }

func (b fixedBroker) Release(context.Context, invoke.Release) (*toolplane.Released, error) {
	return b.rel, nil
}

type runtimes struct {
	rt *sqlruntime.Runtime
	mu sync.Mutex
	b  map[string]*handler.Binding
}

func (r *runtimes) Binding(d *toolplane.Definition) (*handler.Binding, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.b[d.Name]; ok {
		return b, nil
	}
	b, err := r.rt.Bind(d)
	if err != nil {
		return nil, err
	}
	r.b[d.Name] = b
	return b, nil
}

// pgEnv is an invoker running one SQL tool on a fresh PostgreSQL schema
// holding items(name unique, qty).
type pgEnv struct {
	iv    *invoke.Invoker
	admin *sql.DB
	store interface {
		GetClaim(ctx context.Context, org, tool, key string) (*toolplane.Claim, error)
	}
}

func newPGEnv(t *testing.T, d toolplane.Definition) *pgEnv {
	t.Helper()
	dsn := pgtest.SchemaDSN(t, pgtest.DSN(t))
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	if _, err := admin.Exec(`CREATE TABLE items (name TEXT PRIMARY KEY, qty INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(`INSERT INTO items VALUES ('widget', 1)`); err != nil {
		t.Fatal(err)
	}
	rel := &toolplane.Released{
		Connection: &toolplane.Connection{ID: "con_pg", OrganizationID: "org-1", Version: 1,
			Config: toolplane.ConnectionConfig{Driver: sqlruntime.DriverPostgres, AllowPrivilegedRole: true}},
		Secrets: toolplane.Secrets{DSN: toolplane.SecretString(dsn)},
	}
	rt := sqlruntime.New(sqlruntime.Config{})
	t.Cleanup(func() { rt.Close() })
	reg, _, err := registry.Build([]toolplane.Definition{d}, registry.Options{Bindings: registry.Static{}})
	if err != nil {
		t.Fatal(err)
	}
	store := sqlitetest.New(t)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: handler.NewRegistry(), Store: store, Policy: policy.Grants{},
		Runtimes: &runtimes{rt: rt, b: map[string]*handler.Binding{}}, Broker: fixedBroker{rel},
		Node: "test", LeaseMargin: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return &pgEnv{iv: iv, admin: admin, store: store}
}

func sqlDef(effect toolplane.Effect, stmt string, e *toolplane.Execution) toolplane.Definition {
	d := toolplane.Definition{
		Name: "stock.tool", Version: "1.0.0", Description: "A tool answered by a SQL statement.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Kind:         toolplane.KindInternal, Effect: effect, Connection: "warehouse",
		Binding:   toolplane.Binding{SQL: &toolplane.SQLBinding{Statement: stmt}},
		Timeout:   toolplane.Duration(5 * time.Second),
		Execution: e,
	}
	if effect.Writes() {
		no := false
		d.Repeatable = &no
	} else {
		d.Retry = toolplane.RetrySafe
	}
	return d
}

func invocation() *toolplane.Invocation {
	return &toolplane.Invocation{OrganizationID: "org-1", RunID: "run-1", AgentID: "agent-1", StepPath: "agent",
		Principal: toolplane.Principal{ID: "agent-1", Tools: []string{"stock.tool"}}, Source: toolplane.SourceSDK}
}

// lockFor holds lock (a statement run in a transaction of the admin's)
// for hold, then rolls it back; the test waits for it at its end.
func lockFor(t *testing.T, admin *sql.DB, lock string, hold time.Duration) {
	t.Helper()
	tx, err := admin.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(lock); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(hold)
		tx.Rollback()
	}()
	t.Cleanup(func() { <-done })
}

func (e *pgEnv) qty(t *testing.T) int {
	t.Helper()
	var n int
	if err := e.admin.QueryRow(`SELECT qty FROM items WHERE name = 'widget'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *pgEnv) claim(t *testing.T, args map[string]any) (*toolplane.Claim, error) {
	t.Helper()
	b, _ := json.Marshal(args)
	h, err := canonical.HashJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return e.store.GetClaim(context.Background(), "org-1", "stock.tool", invoke.Key(invocation(), h))
}

var bounded = &toolplane.Execution{MaxAttempts: 3, AttemptTimeout: toolplane.Duration(300 * time.Millisecond), Backoff: toolplane.Duration(50 * time.Millisecond)}

// A read whose first attempt runs past its attempt timeout (the table is
// locked) is attempted again and answers once the lock is gone.
func TestSQLReadRetriedAfterAnAttemptTimeout(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t, sqlDef(toolplane.EffectRead, `SELECT qty FROM items WHERE name = :name`, bounded))
	lockFor(t, e.admin, `LOCK TABLE items IN ACCESS EXCLUSIVE MODE`, 450*time.Millisecond)
	start := time.Now()
	r, err := e.iv.Invoke(context.Background(), "stock.tool", map[string]any{"name": "widget"}, invocation())
	if err != nil || !r.OK {
		t.Fatalf("result %+v (%v), want the rows", r.Error, err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("answered after %v: the first attempt was not the one that waited", took)
	}
}

// A write whose statement ran past its attempt timeout was rolled back,
// so it is attempted again under the same claim and takes effect once;
// when every attempt is rolled back the claim is released and nothing
// changed; a constraint the database refuses completes the claim after
// one attempt.
func TestSQLWriteRetriedOnlyWhereRolledBack(t *testing.T) {
	t.Parallel()
	const bump = `UPDATE items SET qty = qty + 1 WHERE name = :name`
	lockRow := `SELECT qty FROM items WHERE name = 'widget' FOR UPDATE`
	t.Run("rolled back once, then done", func(t *testing.T) {
		t.Parallel()
		e := newPGEnv(t, sqlDef(toolplane.EffectWrite, bump, bounded))
		lockFor(t, e.admin, lockRow, 450*time.Millisecond)
		args := map[string]any{"name": "widget"}
		r, err := e.iv.Invoke(context.Background(), "stock.tool", args, invocation())
		if err != nil || !r.OK {
			t.Fatalf("result %+v (%v), want the update", r.Error, err)
		}
		if n := e.qty(t); n != 2 {
			t.Fatalf("qty %d, want 2: one effect", n)
		}
		if cl, err := e.claim(t, args); err != nil || cl.Status != toolplane.ClaimCompleted || cl.Attempts != 1 {
			t.Fatalf("claim %+v (%v), want completed after one dispatch", cl, err)
		}
	})
	t.Run("rolled back throughout", func(t *testing.T) {
		t.Parallel()
		e := newPGEnv(t, sqlDef(toolplane.EffectWrite, bump, bounded))
		lockFor(t, e.admin, lockRow, 3*time.Second)
		args := map[string]any{"name": "widget"}
		start := time.Now()
		r, err := e.iv.Invoke(context.Background(), "stock.tool", args, invocation())
		if err != nil || r.OK || r.Error.Code != toolplane.CodeRetryableUpstream {
			t.Fatalf("result %+v (%v), want retryable_upstream", r, err)
		}
		// Three attempts, each cut at about 300ms by the lock (a statement
		// may be cut a little early, and the pauses between them may be
		// drawn near zero); a loaded host adds, never removes, time.
		if took := time.Since(start); took < 750*time.Millisecond || took > 3*time.Second {
			t.Errorf("the call took %v, want three attempts of about 300ms", took)
		}
		if cl, err := e.claim(t, args); !errors.Is(err, toolplane.ErrNotFound) {
			t.Fatalf("claim %+v (%v), want it released", cl, err)
		}
	})
	t.Run("a constraint refuses it", func(t *testing.T) {
		t.Parallel()
		e := newPGEnv(t, sqlDef(toolplane.EffectWrite, `INSERT INTO items VALUES (:name, 1)`, bounded))
		args := map[string]any{"name": "widget"}
		r, err := e.iv.Invoke(context.Background(), "stock.tool", args, invocation())
		if err != nil || r.OK || r.Error.Code != toolplane.CodeConflict || !strings.Contains(r.Error.Message, "conflicting") {
			t.Fatalf("result %+v (%v), want conflict", r.Error, err)
		}
		if cl, err := e.claim(t, args); err != nil || cl.Status != toolplane.ClaimCompleted {
			t.Fatalf("claim %+v (%v), want completed", cl, err)
		}
	})
}
