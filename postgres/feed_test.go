package postgres

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/postgres/pgtest"
)

// recorder is a watcher noting what it is told.
type recorder struct {
	mu      sync.Mutex
	changed []string
	lost    int
	until   time.Time
}

func (r *recorder) ConnectionChanged(org, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changed = append(r.changed, org+"/"+id)
}

func (r *recorder) ConnectionsCurrent(until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.until = until
}

func (r *recorder) ConnectionsLost() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost++
	r.until = time.Time{}
}

// await waits until ok holds of r, or fails t.
func (r *recorder) await(t *testing.T, what string, ok func(r *recorder) bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		r.mu.Lock()
		done := ok(r)
		r.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %s", what)
		}
	}
}

func current(r *recorder) bool { return time.Now().Before(r.until) }

// TestWatchConnections: a change to a connection of the store's schema is
// told, whoever writes it (another node's store, or a statement of an
// operator's), one of another schema is not; the watcher is trusted only
// while the listener hears its sync points, and when the listener's
// connection is cut it is told that changes may be lost, then the
// listener connects again and what is changed meanwhile is told.
func TestWatchConnections(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	// The listener's connection is configured as the pool's: named so,
	// this test cuts its own and no other test's.
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.ConnConfig.RuntimeParams["application_name"] = "feed_" + schema
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := New(pool)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	other := newTestStore(t)
	node2 := New(openPool(t, schema))
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{}
	done := make(chan error, 1)
	go func() { done <- s.WatchConnections(ctx, r) }()
	defer func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("WatchConnections = %v, want context.Canceled", err)
		}
		if current(r) {
			t.Error("trusted after the watch ended")
		}
	}()
	r.await(t, "trusted", current)
	if settle := s.ConnectionSettle(); !r.until.Before(time.Now().Add(settle)) {
		t.Errorf("trusted until %v, more than the settle time %v from now", r.until, settle)
	}

	now := time.Now()
	c := &toolplane.Connection{ID: "con_1", OrganizationID: "org_a", Name: "crm", Provider: "crm",
		Kind: toolplane.ConnectionStatic, State: toolplane.ConnectionActive, CreatedAt: now, UpdatedAt: now}
	record := func() *toolplane.Change {
		return &toolplane.Change{ID: toolplane.NewID("chg_"), OrganizationID: "org_a", Kind: "connection.create", Subject: c.ID, CreatedAt: now}
	}
	if err := other.InsertConnection(t.Context(), c, record()); err != nil {
		t.Fatal(err)
	}
	if err := node2.InsertConnection(t.Context(), c, record()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(t.Context(), `UPDATE connections SET reason = 'by hand' WHERE id = 'con_1'`); err != nil {
		t.Fatal(err)
	}
	r.await(t, "told of two changes", func(r *recorder) bool { return len(r.changed) >= 2 })
	time.Sleep(2 * feedPing) // a change of the other schema would be told by now
	r.mu.Lock()
	if len(r.changed) != 2 || r.changed[0] != "org_a/con_1" || r.changed[1] != "org_a/con_1" {
		t.Errorf("told %v, want org_a/con_1 twice", r.changed)
	}
	lost := r.lost
	r.mu.Unlock()

	// The listener's connection cut: lost, then listening again.
	var cut int
	if err := s.pool.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN %'`, "feed_"+schema).Scan(&cut); err != nil || cut != 1 {
		t.Fatalf("cut %d listeners: %v", cut, err)
	}
	r.await(t, "told of the loss", func(r *recorder) bool { return r.lost > lost })
	r.await(t, "trusted again", current)
	if ok, err := node2.UpdateConnection(t.Context(), c, nil); !ok || err != nil {
		t.Fatalf("update: %t, %v", ok, err)
	}
	r.await(t, "told of the change after connecting again", func(r *recorder) bool { return len(r.changed) == 3 })
}

// TestWatchCatalog: a version published, changed or moved by hand, by any
// node or statement, in the store's schema is told as its organization
// and name (migration 0043); another schema's is not.
func TestWatchCatalog(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := New(openPool(t, schema))
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	other := newTestStore(t)
	node2 := New(openPool(t, schema))
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{}
	done := make(chan error, 1)
	go func() { done <- s.WatchChanges(ctx, toolplane.TopicCatalog, toolplane.ConnectionChanges(r)) }()
	defer func() {
		cancel()
		<-done
	}()
	r.await(t, "trusted", current)
	now := time.Now()
	v := &toolplane.ToolVersion{OrganizationID: "org_a", Name: "crm.lookup", Version: "1.0.0", State: toolplane.StateActive,
		Definition: []byte(`{}`), SchemaHash: "h", Owner: "crm", PublishedBy: "ada", PublishedAt: now, Revision: 1, UpdatedAt: now}
	if err := other.InsertToolVersion(t.Context(), v); err != nil {
		t.Fatal(err)
	}
	if err := node2.InsertToolVersion(t.Context(), v); err != nil {
		t.Fatal(err)
	}
	r.await(t, "told of the publish", func(r *recorder) bool { return len(r.changed) >= 1 })
	v.State = toolplane.StateDeprecated
	if ok, err := node2.UpdateToolVersion(t.Context(), v); !ok || err != nil {
		t.Fatalf("update: %t, %v", ok, err)
	}
	if _, err := s.pool.Exec(t.Context(), `UPDATE tool_versions SET organization_id = 'org_b' WHERE name = 'crm.lookup'`); err != nil {
		t.Fatal(err)
	}
	r.await(t, "told of four changes", func(r *recorder) bool { return len(r.changed) >= 4 })
	time.Sleep(2 * feedPing) // a change of the other schema would be told by now
	r.mu.Lock()
	defer r.mu.Unlock()
	want := []string{"org_a/crm.lookup", "org_a/crm.lookup", "org_b/crm.lookup", "org_a/crm.lookup"}
	if !slices.Equal(r.changed, want) {
		t.Errorf("told %v, want %v", r.changed, want)
	}
}

// demandRecorder is a recorder that says when it is read
// (toolplane.TrustDemand), counting the Currents it is told.
type demandRecorder struct {
	recorder
	toolplane.Demand
	currents int
}

func (r *demandRecorder) ConnectionsCurrent(until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.until = until
	r.currents++
}

// TestSyncPointsFollowReads: a watcher nobody reads is sent sync points
// only to keep the listener alive (a few over seconds, not one every
// feedPing); a read that finds nothing trusted brings Current at once,
// and sync points come every feedPing while reads go on.
func TestSyncPointsFollowReads(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := New(openPool(t, schema))
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &demandRecorder{}
	done := make(chan error, 1)
	go func() { done <- s.WatchConnections(ctx, r) }()
	defer func() {
		cancel()
		<-done
	}()
	r.await(t, "trusted", current)
	count := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.currents
	}
	// Unread past feedQuiet: keep-alives only.
	time.Sleep(feedQuiet + feedPing)
	before := count()
	const window = feedKeepAlive + feedKeepAlive/2
	time.Sleep(window)
	if got, most := count()-before, int(window/feedKeepAlive)+1; got > most {
		t.Fatalf("an unread watcher was told Current %d times in %s, want at most %d", got, window, most)
	}
	r.await(t, "untrusted between keep-alives", func(r *recorder) bool { return !current(r) })
	// A read finds nothing trusted: Current comes well before the next
	// keep-alive.
	asked := time.Now()
	r.Read(false)
	r.await(t, "trusted after the read", current)
	if waited := time.Since(asked); waited >= feedKeepAlive {
		t.Fatalf("Current came %s after an untrusted read, want well under %s", waited, feedKeepAlive)
	}
	// Read on: sync points every feedPing again.
	before = count()
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		r.Read(true)
	}
	if got := count() - before; got < 3 {
		t.Fatalf("a watcher read for a second was told Current %d times, want about %d", got, int(time.Second/feedPing))
	}
}

// TestWatchUpstreamSettings: an upstream tool setting stored, changed or
// removed, by any node or statement, in the store's schema is told as an
// empty organization and the upstream's slug (migration 0048).
func TestWatchUpstreamSettings(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := New(openPool(t, schema))
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{}
	done := make(chan error, 1)
	go func() { done <- s.WatchChanges(ctx, toolplane.TopicUpstreamSettings, toolplane.ConnectionChanges(r)) }()
	defer func() {
		cancel()
		<-done
	}()
	r.await(t, "trusted", current)
	for _, q := range []string{
		`INSERT INTO upstream_tool_settings (upstream, tool, settings, updated_by, updated_at) VALUES ('crm', 'lookup', '\x7b7d', 'ops', 1)`,
		`UPDATE upstream_tool_settings SET settings = '\x7b20207d' WHERE upstream = 'crm'`,
		`DELETE FROM upstream_tool_settings WHERE upstream = 'crm'`,
	} {
		if _, err := s.pool.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	r.await(t, "told of three changes", func(r *recorder) bool { return len(r.changed) >= 3 })
	r.mu.Lock()
	defer r.mu.Unlock()
	if want := []string{"/crm", "/crm", "/crm"}; !slices.Equal(r.changed, want) {
		t.Errorf("told %v, want %v", r.changed, want)
	}
}
