package invoke_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/internal/policytoy"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/rules"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// storageRun is what a run of calls grew an embedded database by: the
// whole file, and each table and index (from SQLite's dbstat table).
type storageRun struct {
	calls   int
	total   int64
	byTable map[string]int64
}

// perCall answers the bytes on disk a call added.
func (r storageRun) perCall() float64 { return float64(r.total) / float64(r.calls) }

// String lists the tables and indexes that grew, largest first, in bytes
// a call.
func (r storageRun) String() string {
	names := make([]string, 0, len(r.byTable))
	for n, b := range r.byTable {
		if b != 0 {
			names = append(names, n)
		}
	}
	sort.Slice(names, func(i, j int) bool { return r.byTable[names[i]] > r.byTable[names[j]] })
	var sb strings.Builder
	fmt.Fprintf(&sb, "%.0f B/call over %d calls;", r.perCall(), r.calls)
	for _, n := range names {
		fmt.Fprintf(&sb, " %s %.0f", n, float64(r.byTable[n])/float64(r.calls))
	}
	return sb.String()
}

// diskUsage checkpoints db's write-ahead log into the file and answers
// the file's pages in use by each table and index.
func diskUsage(t testing.TB, db *sql.DB) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, `SELECT name, SUM(pgsize) FROM dbstat GROUP BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			name string
			size int64
		)
		if err := rows.Scan(&name, &size); err != nil {
			t.Fatal(err)
		}
		out[name] = size
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var pages, size int64
	if err := db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size); err != nil {
		t.Fatal(err)
	}
	out[""] = pages * size
	return out
}

// measureStorage makes calls calls of tool (a read when write is false)
// through a real invoker deciding by the grants and the organization's
// rules (a bundle published first when bundle is set) on a fresh SQLite
// file, and answers what they grew the file by. A few calls first warm
// the tables, so the figure is the steady growth, not the first pages.
func measureStorage(t testing.TB, write, bundle bool, calls int) storageRun {
	t.Helper()
	ctx := context.Background()
	store, db := sqlitetest.OpenDB(t, filepath.Join(t.TempDir(), "storage.db"))
	name := "crm.get_contact"
	if write {
		name = "crm.update_contact"
	}
	effect := toolplane.EffectRead
	if write {
		effect = toolplane.EffectWrite
	}
	w := audit.NewWriter(audit.WriterConfig{Store: store, Logger: slog.New(slog.DiscardHandler)})
	e := newEnvWith(t, store, func(c *invoke.Config) {
		grants := authz.New(authz.Config{Store: store, Registry: c.Registry})
		by := &toolplane.Credential{ID: "tpk_opal", OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "opal",
			Roles: []string{toolplane.RoleAgentOperator, toolplane.RolePlatformAdmin}}
		if err := grants.AddGrant(ctx, &toolplane.Grant{AgentID: "agent-1", Pattern: "crm.*"}, by); err != nil {
			t.Fatal(err)
		}
		svc := rules.New(rules.Config{Store: store, Grants: authz.Policy{Service: grants}, Engines: []policy.Engine{policytoy.Toy{}}})
		if bundle {
			files := map[string]string{
				"all.toy":        `[{"id": "crm", "effect": "permit", "tool": "crm.*"}]`,
				"all.tests.json": `[{"name": "crm passes", "expect": "allow", "rule": "crm", "request": {"tool": {"name": "crm.get_contact"}}}]`,
			}
			if _, err := svc.Publish(ctx, files, rules.PublishOptions{Note: "allow the crm"}, by); err != nil {
				t.Fatal(err)
			}
		}
		c.Policy = svc
		c.Audit = w
	}, tool{def: def(name, effect), fn: ok(map[string]any{"id": "p1", "name": "Ada Lovelace", "email": "ada@example.com"})})
	in := inv(name)
	call := func(i int) {
		a := args("to", "contact-42", "body", "Renewal call booked for Tuesday.")
		if write {
			a["to"] = fmt.Sprintf("contact-%d", i)
		}
		r, err := e.iv.Invoke(ctx, name, a, in)
		if err != nil || !r.OK {
			t.Fatalf("call %d: %+v, %v", i, r, err)
		}
	}
	const warm = 50
	for i := range warm {
		call(i)
	}
	settled(t, db, name, warm)
	before := diskUsage(t, db)
	for i := range calls {
		call(warm + i)
	}
	settled(t, db, name, warm+calls)
	after := diskUsage(t, db)
	run := storageRun{calls: calls, total: after[""] - before[""], byTable: map[string]int64{}}
	for n, b := range after {
		if n != "" {
			run.byTable[n] = b - before[n]
		}
	}
	return run
}

// settled waits until the background writer stored n events of tool.
func settled(t testing.TB, db *sql.DB, tool string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got int
		if err := db.QueryRow(`SELECT COUNT(*) FROM audit_events WHERE tool = ? AND kind = ''`, tool).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events of %s stored; want %d", got, tool, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkStoragePerCall reports the bytes on disk a read call and a
// write call add to the embedded store (audit event, journal, indexes),
// with and without a policy bundle in force: go test -run '^$' -bench
// StoragePerCall -benchtime 1x ./invoke/. The breakdown by table and
// index is logged (-v).
func BenchmarkStoragePerCall(b *testing.B) {
	for _, c := range []struct {
		name          string
		write, bundle bool
	}{
		{"read", false, false},
		{"read_bundle", false, true},
		{"write", true, false},
		{"write_bundle", true, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			var run storageRun
			for b.Loop() {
				run = measureStorage(b, c.write, c.bundle, 2000)
			}
			b.ReportMetric(run.perCall(), "B/call-disk")
			b.Log(run)
		})
	}
}

// The bytes on disk a call adds to the embedded store stay within a
// budget set a little above today's figure (BENCHMARKS.md, "Storage per
// call"), so a wider audit row or another index on every event fails here
// rather than in an operator's disk plan. Lower a budget with every
// saving.
func TestStoragePerCallBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("makes a thousand calls per case")
	}
	t.Parallel()
	for _, c := range []struct {
		name   string
		write  bool
		budget float64 // bytes a call
	}{
		{"read", false, 610},
		{"write", true, 1300},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			run := measureStorage(t, c.write, true, 1000)
			t.Log(run)
			if run.perCall() > c.budget {
				t.Errorf("a %s call adds %.0f B on disk; budget %.0f B (%s)", c.name, run.perCall(), c.budget, run)
			}
		})
	}
}
