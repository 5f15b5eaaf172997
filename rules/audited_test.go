package rules_test

import (
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/internal/policytoy"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/rules"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// A publish, a disable or a rollback whose audit event cannot be stored
// puts no version in force: each answers an error, and the latest version,
// the change log and the trail stay as they were.
func TestVersionsStandOnlyWithTheirEvents(t *testing.T) {
	t.Parallel()
	store, db := sqlitetest.NewDB(t)
	grants := authz.New(authz.Config{Store: store})
	svc := rules.New(rules.Config{Store: store, Grants: authz.Policy{Service: grants}, Engines: []policy.Engine{policytoy.Toy{}}})
	ctx := t.Context()
	files := map[string]string{
		"all.toy":        `[{"id": "reads", "effect": "permit", "tool": "*.get_*"}]`,
		"all.tests.json": `[{"name": "reads pass", "expect": "allow", "rule": "reads", "request": {"tool": {"name": "crm.get_contact"}}}]`,
	}
	if _, err := svc.Publish(ctx, files, rules.PublishOptions{Note: "first"}, admin); err != nil {
		t.Fatal(err)
	}
	_, err := db.ExecContext(ctx, `CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events
		WHEN NEW.organization_id = '`+org+`' BEGIN SELECT RAISE(ABORT, 'the trail is unwritable'); END`)
	if err != nil {
		t.Fatal(err)
	}
	changes := []struct {
		name   string
		change func() (*toolplane.PolicyBundle, error)
	}{
		{"a publish", func() (*toolplane.PolicyBundle, error) {
			return svc.Publish(ctx, files, rules.PublishOptions{Note: "again"}, admin)
		}},
		{"a disable", func() (*toolplane.PolicyBundle, error) { return svc.Disable(ctx, "break glass", admin) }},
		{"a rollback", func() (*toolplane.PolicyBundle, error) { return svc.Rollback(ctx, 1, "", admin) }},
	}
	for _, c := range changes {
		if b, err := c.change(); err == nil || b != nil {
			t.Errorf("%s with an unwritable trail = %+v, %v; want an error", c.name, b, err)
		}
	}
	if v, err := store.PolicyBundleVersion(ctx, org); err != nil || v != 1 {
		t.Errorf("latest version = %d, %v; want 1", v, err)
	}
	if log, _, err := store.ListChanges(ctx, org, "", "", "", 10); err != nil || len(log) != 1 {
		t.Errorf("change log = %+v, %v; want the first publish", log, err)
	}
	if evs, _, err := store.ListAudit(ctx, org, toolplane.AuditFilter{}, "", 10); err != nil || len(evs) != 1 || evs[0].PolicyBundle != 1 {
		t.Errorf("trail = %+v, %v; want the first publish's event", evs, err)
	}
}
