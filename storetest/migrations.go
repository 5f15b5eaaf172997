package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/migrate"
)

// MigratingStore is a store that applies its own embedded schema history
// (package migrate) and reports it.
type MigratingStore interface {
	toolplane.Store
	Migrate(ctx context.Context) error
	MigrationStatus(ctx context.Context) ([]migrate.Migration, error)
}

// Migrations is what the migration checks need of a backend. Every field
// but AfterCatalogOrganizations is required.
type Migrations struct {
	// Embedded is the backend's schema history, as migrate.Read answers it.
	Embedded []migrate.File
	// Open answers a store on an empty database (no tables), released by
	// t.Cleanup.
	Open func(t *testing.T) MigratingStore
	// Reopen answers another store on s's database, as another node
	// opens it, released by t.Cleanup.
	Reopen func(t *testing.T, s MigratingStore) MigratingStore
	// Exec runs statement on s's database. The checks only run statements
	// written the same in every dialect.
	Exec func(t *testing.T, s MigratingStore, statement string)
	// Count answers the one integer query selects on s's database.
	Count func(t *testing.T, s MigratingStore, query string) int
	// BeforeCatalogOrganizations answers a store on a database whose
	// schema is the one before the catalogue had organizations, holding
	// what a binary of that time wrote: versions 1.0.0 and 1.1.0 of
	// payments.refund (state active, definition {}, owner payments, one
	// review reason, published by olga, revision 3), published in that
	// order.
	BeforeCatalogOrganizations func(t *testing.T) MigratingStore
	// Before answers a store on a fresh database with every migration
	// before version applied and recorded, and no later one: what a binary
	// of that time left behind, for the checks of a migration that
	// rewrites data.
	Before func(t *testing.T, version int) MigratingStore
	// AfterCatalogOrganizations, when set, runs the backend's own checks
	// of that upgrade's schema once the suite's have passed and another
	// organization has published its own 1.0.0.
	AfterCatalogOrganizations func(t *testing.T, s MigratingStore)
}

// migrationCases are the checks RunMigrations runs.
var migrationCases = []struct {
	name string
	run  func(t *testing.T, m Migrations)
}{
	{"NumberedInOrder", testMigrationsNumberedInOrder},
	{"Status", testMigrationStatus},
	{"Idempotent", testMigrateIdempotent},
	{"NewerSchemaRefused", testMigrateRefusesNewerSchema},
	{"Concurrent", testMigrateConcurrently},
	{"CatalogOrganizations", testMigrationCatalogOrganizations},
	{"OnePendingApproval", testMigrationOnePendingApproval},
}

// RunMigrations runs the schema history checks as subtests of t, named
// Migrations/Check: the history is numbered without gaps, a fresh database
// migrates and records every version, migrating again changes nothing,
// nodes migrating one database at once all succeed, and each migration
// that rewrites data keeps it.
func RunMigrations(t *testing.T, m Migrations) {
	t.Helper()
	if m.Open == nil || m.Reopen == nil || m.Exec == nil || m.Count == nil || m.BeforeCatalogOrganizations == nil || m.Before == nil {
		t.Fatal("RunMigrations needs Open, Reopen, Exec, Count, Before and BeforeCatalogOrganizations")
	}
	if len(m.Embedded) == 0 {
		t.Fatal("no migrations embedded")
	}
	var checks []check
	for _, c := range migrationCases {
		checks = append(checks, check{c.name, func(t *testing.T) { c.run(t, m) }})
	}
	runChecks(t, "Migrations", checks)
}

// testMigrationsNumberedInOrder: versions start at 1 and only increase
// (numbers handed out to work in progress may leave a gap, never a
// repeat or a step back), and none is empty.
func testMigrationsNumberedInOrder(t *testing.T, m Migrations) {
	for i, f := range m.Embedded {
		switch {
		case i == 0 && f.Version != 1:
			t.Errorf("migration %d_%s: versions must start at 1", f.Version, f.Name)
		case i > 0 && f.Version <= m.Embedded[i-1].Version:
			t.Errorf("migration %d_%s: versions must increase; it follows %d", f.Version, f.Name, m.Embedded[i-1].Version)
		}
		if strings.TrimSpace(f.SQL) == "" {
			t.Errorf("migration %d_%s is empty", f.Version, f.Name)
		}
	}
}

// testMigrationStatus: before Migrate every embedded migration is listed
// as not applied; after it, each is applied at a UTC time of this test; a
// version this binary does not know (a newer binary applied it) is
// reported, not hidden.
func testMigrationStatus(t *testing.T, m Migrations) {
	ctx := t.Context()
	s := m.Open(t)
	before, err := s.MigrationStatus(ctx)
	if err != nil {
		t.Fatalf("MigrationStatus before Migrate: %v", err)
	}
	if len(before) != len(m.Embedded) {
		t.Fatalf("MigrationStatus answered %d migrations, want %d", len(before), len(m.Embedded))
	}
	for i, got := range before {
		want := migrate.Migration{Version: m.Embedded[i].Version, Name: m.Embedded[i].Name}
		if got != want {
			t.Errorf("before Migrate: %+v, want %+v", got, want)
		}
	}

	start := time.Now().Add(-time.Second)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := s.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(m.Embedded) {
		t.Fatalf("after Migrate, MigrationStatus answered %d migrations, want %d", len(after), len(m.Embedded))
	}
	for i, got := range after {
		if got.Version != m.Embedded[i].Version || got.Name != m.Embedded[i].Name || !got.Applied {
			t.Errorf("after Migrate: %+v, want version %d %q applied", got, m.Embedded[i].Version, m.Embedded[i].Name)
		}
		if got.AppliedAt.Before(start) || got.AppliedAt.After(time.Now()) || got.AppliedAt.Location() != time.UTC {
			t.Errorf("migration %d AppliedAt = %v, want a UTC time from this test", got.Version, got.AppliedAt)
		}
	}

	m.Exec(t, s, `INSERT INTO schema_migrations VALUES (9999, 'from_the_future', 0)`)
	withFuture, err := s.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := withFuture[len(withFuture)-1]
	if len(withFuture) != len(after)+1 || last.Version != 9999 || last.Name != "from_the_future" || !last.Applied {
		t.Errorf("unknown applied migration reported as %+v (of %d)", last, len(withFuture))
	}
}

// testMigrateRefusesNewerSchema: a database that records a migration this
// binary lacks (a newer toolplane migrated it) is refused by Migrate with
// ErrNewerSchema, naming it, every time: the older code would read and
// write that schema as the one it knows. Its status is still read.
func testMigrateRefusesNewerSchema(t *testing.T, m Migrations) {
	ctx := t.Context()
	s := m.Open(t)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	m.Exec(t, s, `INSERT INTO schema_migrations VALUES (9999, 'from_a_newer_toolplane', 0)`)
	for range 2 {
		err := s.Migrate(ctx)
		if !errors.Is(err, migrate.ErrNewerSchema) || !strings.Contains(err.Error(), "9999_from_a_newer_toolplane") {
			t.Fatalf("Migrate of a database a newer toolplane migrated = %v, want ErrNewerSchema naming 9999_from_a_newer_toolplane", err)
		}
	}
	if _, err := s.MigrationStatus(ctx); err != nil {
		t.Fatalf("MigrationStatus of a newer schema: %v", err)
	}
}

// testMigrateIdempotent: migrating a migrated database changes nothing,
// and each version is recorded once.
func testMigrateIdempotent(t *testing.T, m Migrations) {
	ctx := t.Context()
	s := m.Open(t)
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("first Migrate: %v", err)
	}
	first, err := s.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate again: %v", err)
		}
	}
	again, err := s.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(first) {
		t.Fatalf("after re-running, %d migrations, want %d", len(again), len(first))
	}
	for i := range first {
		if again[i] != first[i] {
			t.Errorf("re-running changed migration %d: %+v, was %+v", first[i].Version, again[i], first[i])
		}
	}
	if rows := m.Count(t, s, `SELECT COUNT(*) FROM schema_migrations`); rows != len(first) {
		t.Errorf("schema_migrations has %d rows, want %d", rows, len(first))
	}
}

// testMigrateConcurrently is several nodes starting at once on one empty
// database: each has its own store, so only the database can order them.
// Every Migrate succeeds, each version is recorded once, and the schema
// works from every node.
func testMigrateConcurrently(t *testing.T, m Migrations) {
	const nodes = 8
	stores := make([]MigratingStore, nodes)
	stores[0] = m.Open(t)
	for i := range stores[1:] {
		stores[i+1] = m.Reopen(t, stores[0])
	}
	for i, s := range stores {
		// Connect now, so the Migrate calls below start together.
		if _, err := s.MigrationStatus(t.Context()); err != nil {
			t.Fatalf("node %d: MigrationStatus: %v", i, err)
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() {
			<-start
			if err := s.Migrate(t.Context()); err != nil {
				t.Errorf("node %d: concurrent Migrate: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()

	status, err := stores[0].MigrationStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range status {
		if !st.Applied {
			t.Errorf("migration %d not applied", st.Version)
		}
	}
	if rows := m.Count(t, stores[0], `SELECT COUNT(*) FROM schema_migrations`); rows != len(status) {
		t.Errorf("schema_migrations has %d rows, want %d", rows, len(status))
	}
	for i, s := range stores {
		c := &toolplane.Claim{OrganizationID: "org", Tool: "t", Key: fmt.Sprint(i), Status: toolplane.ClaimProcessing}
		if ok, err := s.InsertClaim(t.Context(), c); !ok || err != nil {
			t.Errorf("node %d: InsertClaim = %v, %v", i, ok, err)
		}
	}
}

// testMigrationCatalogOrganizations upgrades a database that holds
// versions from before the catalogue had organizations: each is the
// "default" organization's afterwards, whole, the catalogue's revision
// grows so every node reloads it, and another organization may then
// publish the same version.
func testMigrationCatalogOrganizations(t *testing.T, m Migrations) {
	ctx := t.Context()
	s := m.BeforeCatalogOrganizations(t)
	before, err := s.CatalogRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if after, err := s.CatalogRevision(ctx); err != nil || after <= before {
		t.Errorf("CatalogRevision after the migration = %d, %v; want it grown from %d", after, err, before)
	}
	got, _, err := s.ListToolVersions(ctx, "default", toolplane.VersionFilter{}, "", 10)
	if err != nil || len(got) != 2 || got[0].Version != "1.0.0" || got[1].Version != "1.1.0" {
		t.Fatalf("ListToolVersions(default) = %+v, %v; want both versions in publication order", got, err)
	}
	if v := got[0]; v.OrganizationID != "default" || v.State != toolplane.StateActive || string(v.Definition) != "{}" ||
		v.Revision != 3 || len(v.ReviewReasons) != 1 || v.PublishedBy != "olga" {
		t.Errorf("migrated version = %+v", v)
	}
	if _, err := s.GetToolVersion(ctx, "other", "payments.refund", "1.0.0"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetToolVersion(other) = %v, want ErrNotFound", err)
	}
	// The key now holds the organization: another organization publishes
	// the same version.
	v := got[0]
	v.OrganizationID = "other"
	if err := s.InsertToolVersion(ctx, &v); err != nil {
		t.Fatalf("InsertToolVersion(other) = %v", err)
	}
	if m.AfterCatalogOrganizations != nil {
		m.AfterCatalogOrganizations(t, s)
	}
}

// onePendingApprovalVersion is the migration after which one call (an
// organization's tool and key) has at most one pending approval.
const onePendingApprovalVersion = 17

// testMigrationOnePendingApproval: a database where one call was filed
// for several times (identical calls at once, a key repeated in a new
// session) still migrates. The oldest pending approval of each call stays
// pending; each later one is expired, naming the one kept, with its
// approval_expired audit event; approvals of other calls, other states
// and other organizations are untouched; and the call is then filed for
// once.
func testMigrationOnePendingApproval(t *testing.T, m Migrations) {
	ctx := t.Context()
	s := m.Before(t, onePendingApprovalVersion)
	org, other := newOrg(), newOrg()
	kept := pendingApproval(org, "apr-b-kept", "run-1", "k", base)
	later := pendingApproval(org, "apr-a-later", "run-2", "k", at(time.Second))
	tie := pendingApproval(org, "apr-c-tie", "run-3", "k", base) // same time: the ID orders it after kept
	decided := fullApproval(org, "apr-decided", "run-0", "k", at(-time.Hour))
	decided.Status = toolplane.ApprovalRejected
	otherCall := pendingApproval(org, "apr-other-call", "run-1", "k2", at(2*time.Second))
	otherTool := pendingApproval(org, "apr-other-tool", "run-1", "k", at(3*time.Second))
	otherTool.Tool = "payments.void_order"
	otherOrg := pendingApproval(other, "apr-z-other-org", "run-1", "k", at(4*time.Second))
	for _, a := range []*toolplane.Approval{later, tie, kept, decided, otherCall, otherTool, otherOrg} {
		if err := s.InsertApproval(ctx, a); err != nil {
			t.Fatalf("InsertApproval(%s) before the migration: %v", a.ID, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate over duplicate pending approvals: %v", err)
	}

	for _, a := range []*toolplane.Approval{kept, decided, otherCall, otherTool, otherOrg} {
		wantApproval(t, s, a)
	}
	for _, a := range []*toolplane.Approval{later, tie} {
		got, err := s.GetApproval(ctx, org, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != toolplane.ApprovalExpired || !strings.Contains(got.Reason, kept.ID) || got.ResolvedAt.IsZero() || got.Version != a.Version+1 {
			t.Errorf("%s after the migration: status %s, reason %q, resolved %v, version %d; want expired naming %s", a.ID, got.Status, got.Reason, got.ResolvedAt, got.Version, kept.ID)
		}
	}
	events := listAudit(t, s, org, toolplane.AuditFilter{}, 10)
	byApproval := map[string]toolplane.AuditEvent{}
	for _, e := range events {
		byApproval[e.ApprovalID] = e
	}
	if len(events) != 2 {
		t.Errorf("audit events after the migration: %d, want 2 (one a superseded approval)", len(events))
	}
	for _, a := range []*toolplane.Approval{later, tie} {
		e, ok := byApproval[a.ID]
		if !ok || e.Outcome != "approval_expired" || e.AuthorizedBy != kept.ID || e.Tool != a.Tool || e.Key != a.Key || e.RunID != a.RunID || e.PrincipalID != a.PrincipalID {
			t.Errorf("audit event of %s = %+v; want approval_expired naming %s", a.ID, e, kept.ID)
		}
	}
	if got := listAudit(t, s, other, toolplane.AuditFilter{}, 10); len(got) != 0 {
		t.Errorf("the other organization has audit events: %+v", got)
	}

	// From now on the store holds the call to one pending approval.
	again := pendingApproval(org, "apr-again", "run-4", "k", at(time.Minute))
	if got, err := s.FileApproval(ctx, again); err != nil || got == nil || got.ID != kept.ID {
		t.Fatalf("FileApproval after the migration = %+v, %v; want %s", got, err, kept.ID)
	}
}
