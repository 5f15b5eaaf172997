package authz_test

import (
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// A grant, deny or bundle change whose audit event cannot be stored does
// not happen: each answers an error, the grants, denies and bundles stay
// as they were (and so does the revision every node compares), the change
// log and the trail hold only what happened, and no watcher is told.
func TestChangesStandOnlyWithTheirEvents(t *testing.T) {
	t.Parallel()
	store, db := sqlitetest.NewDB(t)
	svc := authz.New(authz.Config{Store: store})
	ctx := t.Context()
	told := 0
	svc.OnChange(func() { told++ })
	g := &toolplane.Grant{AgentID: "bot", Pattern: "crm.*"}
	d := &toolplane.Deny{AgentID: "bot", Pattern: "crm.delete_*", Reason: "incident"}
	if err := svc.AddGrant(ctx, g, admin); err != nil {
		t.Fatal(err)
	}
	if err := svc.AddDeny(ctx, d, admin); err != nil {
		t.Fatal(err)
	}
	rev, err := store.AuthzRevision(ctx, "org-1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, `CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events
		WHEN NEW.organization_id = 'org-1' BEGIN SELECT RAISE(ABORT, 'the trail is unwritable'); END`)
	if err != nil {
		t.Fatal(err)
	}

	changes := []struct {
		name   string
		change func() error
	}{
		{"a grant", func() error { return svc.AddGrant(ctx, &toolplane.Grant{AgentID: "bot", Pattern: "payments.*"}, admin) }},
		{"a revocation", func() error { return svc.RevokeGrant(ctx, g.ID, admin) }},
		{"a deny", func() error {
			return svc.AddDeny(ctx, &toolplane.Deny{AgentID: toolplane.EveryAgent, Pattern: "*", Reason: "incident"}, admin)
		}},
		{"a deny lifted", func() error { return svc.LiftDeny(ctx, d.ID, admin) }},
		{"a bundle", func() error {
			return svc.PutBundle(ctx, &toolplane.Bundle{Name: "crm", Refs: []string{"crm.lookup@^1.0.0"}}, admin)
		}},
	}
	for _, c := range changes {
		if err := c.change(); err == nil {
			t.Errorf("%s with an unwritable trail answered no error", c.name)
		}
	}
	grants, err := svc.Grants(ctx, "", true, admin)
	if err != nil || len(grants) != 1 || grants[0].ID != g.ID || !grants[0].RevokedAt.IsZero() {
		t.Errorf("grants = %+v, %v; want %s alone, standing", grants, err, g.ID)
	}
	if denies, err := svc.Denies(ctx, admin); err != nil || len(denies) != 1 || denies[0].ID != d.ID {
		t.Errorf("denies = %+v, %v; want %s alone", denies, err, d.ID)
	}
	if bundles, err := svc.Bundles(ctx, admin); err != nil || len(bundles) != 0 {
		t.Errorf("bundles = %+v, %v; want none", bundles, err)
	}
	if now, err := store.AuthzRevision(ctx, "org-1"); err != nil || now != rev {
		t.Errorf("revision = %d, %v; want %d", now, err, rev)
	}
	if log, _, err := store.ListChanges(ctx, "org-1", "", "", "", 10); err != nil || len(log) != 2 {
		t.Errorf("change log = %+v, %v; want the grant and the deny", log, err)
	}
	if evs, _, err := store.ListAudit(ctx, "org-1", toolplane.AuditFilter{}, "", 10); err != nil || len(evs) != 2 {
		t.Errorf("trail = %+v, %v; want the grant's and the deny's events", evs, err)
	}
	if told != 2 {
		t.Errorf("watchers told %d times; want 2, once a change stored", told)
	}
}
