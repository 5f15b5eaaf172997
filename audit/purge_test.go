package audit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// purgeStore is a store of each dialect the purge tests run on.
type purgeStore interface {
	audit.PurgeStore
	audit.SinkStore
}

func eachPurgeStore(t *testing.T, fn func(t *testing.T, s purgeStore)) {
	eachFaultyPurgeStore(t, func(t *testing.T, s purgeStore, _ func(bool)) { fn(t, s) })
}

// eachFaultyPurgeStore runs fn on a store of each dialect with fault,
// which makes the database refuse every drop of the trail while on: on
// SQLite a trigger refusing retention's door, on PostgreSQL a retention
// floor (audit_retention_floor) of a century. The refusal is the
// database's own, as a full disk or a floor set by its owner would be.
func eachFaultyPurgeStore(t *testing.T, fn func(t *testing.T, s purgeStore, fault func(on bool))) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		s, db := sqlitetest.NewDB(t)
		fn(t, s, func(on bool) {
			t.Helper()
			q := `DROP TRIGGER purge_test_fault`
			if on {
				q = `CREATE TRIGGER purge_test_fault BEFORE INSERT ON audit_retention BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`
			}
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pool, err := pgxpool.New(context.Background(), pgtest.SchemaDSN(t, pgtest.DSN(t)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s := postgres.New(pool)
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		fn(t, s, func(on bool) {
			t.Helper()
			floor := 86400
			if on {
				floor = 100 * 365 * 86400
			}
			if _, err := pool.Exec(context.Background(), `UPDATE audit_retention_floor SET min_age_seconds = $1`, floor); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func person(org, name string, roles ...string) *toolplane.Credential {
	return &toolplane.Credential{ID: "tpk_" + name, OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: name, Roles: roles}
}

// TestPurgeNeedsTwoPlatformAdmins: a purge is proposed by one platform
// admin and confirmed by another before it expires; the proposer, a
// person without the role and a late confirmation are refused; the
// proposal and the drop are audit events of the organization's chain,
// and the chain verifies before and after.
func TestPurgeNeedsTwoPlatformAdmins(t *testing.T) {
	t.Parallel()
	eachPurgeStore(t, func(t *testing.T, s purgeStore) {
		ctx := context.Background()
		org := "org-purge"
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := range 5 {
			e := &toolplane.AuditEvent{ID: "ev-" + string(rune('a'+i)), OrganizationID: org, Tool: "email.send", Outcome: "ok",
				CreatedAt: start.Add(time.Duration(i) * 24 * time.Hour)}
			if err := s.AppendAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		keys := &auditchain.KeySet{}
		if _, err := keys.Generate(start); err != nil {
			t.Fatal(err)
		}
		verify := func(events int) auditchain.Report {
			t.Helper()
			r, err := auditchain.VerifyStore(ctx, s, keys, org, 0, 0)
			if err != nil || !r.OK || r.Events != events {
				t.Fatalf("verify = %+v (break %+v), %v; want OK over %d events", r, r.Break, err, events)
			}
			return r
		}
		verify(5)
		now := start.Add(30 * 24 * time.Hour)
		clock := func() time.Time { return now }
		p := audit.NewPurges(audit.PurgesConfig{Store: s, Keys: keys, TTL: time.Hour, Now: clock})
		ada, grace := person(org, "ada", toolplane.RolePlatformAdmin), person(org, "grace", toolplane.RolePlatformAdmin)
		auditor := person(org, "linus", toolplane.RoleAuditor)
		cutoff := start.Add(2*24*time.Hour + time.Minute) // events a, b and c

		if _, err := p.Propose(ctx, cutoff, auditor); !errors.Is(err, audit.ErrNotPlatformAdmin) {
			t.Fatalf("Propose by an auditor = %v; want ErrNotPlatformAdmin", err)
		}
		if _, err := p.Propose(ctx, now.Add(time.Minute), ada); !errors.Is(err, audit.ErrPurgeTooRecent) {
			t.Fatalf("Propose of the future = %v; want ErrPurgeTooRecent", err)
		}
		pr, err := p.Propose(ctx, cutoff, ada)
		if err != nil {
			t.Fatal(err)
		}
		verify(6) // the proposal is an event of the chain
		for _, c := range []struct {
			name string
			by   *toolplane.Credential
			want error
		}{
			{"by its proposer", ada, audit.ErrOwnProposal},
			{"by an auditor", auditor, audit.ErrNotPlatformAdmin},
			{"of another organization", person("org-other", "grace", toolplane.RolePlatformAdmin), toolplane.ErrNotFound},
		} {
			if _, err := p.Confirm(ctx, pr.ID, c.by); !errors.Is(err, c.want) {
				t.Errorf("Confirm %s = %v; want %v", c.name, err, c.want)
			}
		}
		res, err := p.Confirm(ctx, pr.ID, grace)
		if err != nil {
			t.Fatalf("Confirm by another admin = %v", err)
		}
		if len(res.Drops) != 1 || res.Drops[0].From != 1 || res.Drops[0].Through != 3 || res.Purge.ConfirmedBy != "grace" {
			t.Fatalf("Confirm = %+v; want events 1..3 dropped, confirmed by grace", res)
		}
		if res.Purge.DoneAt.IsZero() || res.Purge.StatusAt(now) != toolplane.PurgeDone {
			t.Fatalf("Confirm = %+v; want the purge done", res.Purge)
		}
		for _, by := range []*toolplane.Credential{person(org, "joan", toolplane.RolePlatformAdmin), grace} {
			if _, err := p.Confirm(ctx, pr.ID, by); !errors.Is(err, audit.ErrPurgeDone) || !errors.Is(err, audit.ErrPurgeConfirmed) {
				t.Fatalf("a second Confirm = %v; want ErrPurgeDone, an ErrPurgeConfirmed", err)
			}
		}
		if _, err := p.Resume(ctx, pr.ID, grace); !errors.Is(err, audit.ErrPurgeDone) {
			t.Fatalf("Resume of a done purge = %v; want ErrPurgeDone", err)
		}
		r := verify(6) // d, e, the proposal, the confirmation, the drop and the completion
		if r.Anchor != 3 {
			t.Fatalf("verify after the purge = %+v; want anchored on the checkpoint at 3", r)
		}
		evs, err := s.AuditChain(ctx, org, 0, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		proposal, confirmed, drop, completed := evs[2], evs[3], evs[4], evs[5]
		if proposal.Kind != toolplane.AuditRetention || proposal.Outcome != "proposed" || proposal.PrincipalID != "ada" || proposal.Subject != pr.ID {
			t.Fatalf("the proposal's event = %+v", proposal)
		}
		if confirmed.Kind != toolplane.AuditRetention || confirmed.Outcome != "confirmed" || confirmed.PrincipalID != "grace" || confirmed.Subject != pr.ID {
			t.Fatalf("the confirmation's event = %+v", confirmed)
		}
		if drop.Kind != toolplane.AuditRetention || drop.Outcome != "dropped" || drop.PrincipalID != "grace" || drop.ApprovalID != pr.ID || drop.Subject != "events 1-3" {
			t.Fatalf("the drop's event = %+v", drop)
		}
		if completed.Outcome != "completed" || completed.PrincipalID != "grace" || completed.ApprovalID != pr.ID || completed.ApproverID != "grace" ||
			!strings.Contains(completed.Reason, "events 1 to 3 dropped") {
			t.Fatalf("the completion's event = %+v", completed)
		}

		// A proposal not confirmed in time expires.
		late, err := p.Propose(ctx, cutoff, grace)
		if err != nil {
			t.Fatal(err)
		}
		now = now.Add(2 * time.Hour)
		if _, err := p.Confirm(ctx, late.ID, ada); !errors.Is(err, audit.ErrPurgeExpired) {
			t.Fatalf("Confirm after expiry = %v; want ErrPurgeExpired", err)
		}
		// Confirmed with nothing old enough: recorded all the same.
		empty, err := p.Propose(ctx, cutoff, grace)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := p.Confirm(ctx, empty.ID, ada); err != nil || len(res.Drops) != 0 {
			t.Fatalf("Confirm with nothing to drop = %+v, %v", res, err)
		}
		evs, _ = s.AuditChain(ctx, org, 0, 0, 20)
		if last, conf := evs[len(evs)-1], evs[len(evs)-2]; conf.Outcome != "confirmed" || conf.PrincipalID != "ada" || conf.Subject != empty.ID ||
			last.Outcome != "completed" || last.PrincipalID != "ada" || last.Subject != empty.ID || !strings.Contains(last.Reason, "no event that old") {
			t.Fatalf("the last events = %+v, %+v; want ada's confirmation and completion", conf, last)
		}
		verify(len(evs))
		list, err := p.List(ctx, 10, ada)
		if err != nil || len(list) != 3 {
			t.Fatalf("List = %+v, %v; want 3 proposals", list, err)
		}
		for _, l := range list {
			want := map[string]toolplane.AuditPurgeStatus{pr.ID: toolplane.PurgeDone, late.ID: toolplane.PurgeExpired, empty.ID: toolplane.PurgeDone}[l.ID]
			if got := l.StatusAt(now); got != want {
				t.Errorf("purge %s is %s; want %s", l.ID, got, want)
			}
		}
		if _, err := p.Resume(ctx, late.ID, ada); !errors.Is(err, audit.ErrPurgeNotConfirmed) {
			t.Fatalf("Resume of an unconfirmed purge = %v; want ErrPurgeNotConfirmed", err)
		}
	})
}

// TestSinksListedAndDropped: an auditor lists the registered sinks with
// their lag; only the operator (a platform admin of the default
// organization) drops one, which is an audit event; an organization's
// platform admin is refused; an unknown sink is not found.
func TestSinksListedAndDropped(t *testing.T) {
	t.Parallel()
	eachPurgeStore(t, func(t *testing.T, s purgeStore) {
		ctx := context.Background()
		org := "org-sinks"
		if err := s.RegisterAuditSink(ctx, "files", time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendAudit(ctx, &toolplane.AuditEvent{ID: "ev-1", OrganizationID: org, Tool: "email.send", Outcome: "ok", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		k := audit.NewSinks(s, nil)
		auditor, theirAdmin := person(org, "linus", toolplane.RoleAuditor), person(org, "mallory", toolplane.RolePlatformAdmin)
		admin := person(catalog.DefaultOrganization, "ada", toolplane.RolePlatformAdmin)
		list, err := k.List(ctx, auditor)
		if err != nil || len(list) != 1 || list[0].Name != "files" || list[0].Pending != 1 {
			t.Fatalf("List = %+v, %v; want files with one event waiting", list, err)
		}
		for _, by := range []*toolplane.Credential{auditor, theirAdmin, person(catalog.DefaultOrganization, "linus", toolplane.RoleAuditor)} {
			if err := k.Drop(ctx, "files", by); !errors.Is(err, audit.ErrNotOperator) || !errors.Is(err, toolplane.ErrForbidden) {
				t.Fatalf("Drop by %s of %s = %v; want ErrNotOperator", by.Subject, by.OrganizationID, err)
			}
		}
		if list, err := k.List(ctx, auditor); err != nil || len(list) != 1 || list[0].Pending != 1 {
			t.Fatalf("List after refused drops = %+v, %v", list, err)
		}
		if err := k.Drop(ctx, "nats", admin); !errors.Is(err, toolplane.ErrNotFound) {
			t.Fatalf("Drop of an unknown sink = %v; want ErrNotFound", err)
		}
		if err := k.Drop(ctx, "files", admin); err != nil {
			t.Fatal(err)
		}
		if list, err := k.List(ctx, auditor); err != nil || len(list) != 0 {
			t.Fatalf("List after the drop = %+v, %v", list, err)
		}
		// The operator's drop discards every organization's waiting
		// events for the sink (the trail keeps them), recorded in the
		// operator's trail.
		evs, err := s.AuditChain(ctx, catalog.DefaultOrganization, 0, 0, 10)
		if err != nil || len(evs) == 0 || evs[len(evs)-1].Outcome != "sink_dropped" || evs[len(evs)-1].Subject != "files" || evs[len(evs)-1].PrincipalID != "ada" {
			t.Fatalf("chain = %+v, %v; want the drop recorded", evs, err)
		}
		if evs, err := s.AuditChain(ctx, org, 0, 0, 10); err != nil || len(evs) != 1 {
			t.Fatalf("the organization's chain = %+v, %v; want its one event, kept", evs, err)
		}
	})
}
