package postgres

import (
	"context"
	"testing"

	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/storetest"
)

// TestControlAuditRefused: when PostgreSQL refuses to move an
// organization's chain head (a trigger on audit_heads, where every event
// takes its number), no audited control-plane write of it stores
// anything.
func TestControlAuditRefused(t *testing.T) {
	t.Parallel()
	pgtest.DSN(t)
	s := newTestStore(t)
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, `CREATE TABLE refused_organizations (organization_id TEXT PRIMARY KEY);
		CREATE FUNCTION refuse_chain() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF EXISTS (SELECT 1 FROM refused_organizations r WHERE r.organization_id = NEW.organization_id) THEN
				RAISE EXCEPTION 'the chain refuses organization %', NEW.organization_id;
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_chain BEFORE INSERT OR UPDATE ON audit_heads
			FOR EACH ROW EXECUTE FUNCTION refuse_chain();`)
	if err != nil {
		t.Fatal(err)
	}
	storetest.RunAuditRefused(t, s, func(t *testing.T, org string) {
		if _, err := s.pool.Exec(ctx, `INSERT INTO refused_organizations VALUES ($1)`, org); err != nil {
			t.Fatal(err)
		}
	})
}
