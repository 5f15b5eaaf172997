package apikey_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// refuseAudit makes db refuse every audit event of org, as a trail that
// cannot be written would.
func refuseAudit(t *testing.T, db *sql.DB, org string) {
	t.Helper()
	_, err := db.ExecContext(t.Context(), `CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events
		WHEN NEW.organization_id = '`+org+`' BEGIN SELECT RAISE(ABORT, 'the trail is unwritable'); END`)
	if err != nil {
		t.Fatal(err)
	}
}

// A key change whose audit event cannot be stored does not happen:
// creating answers an error and stores no key (so no secret is shown),
// and changing its listing or revoking it answers an error and leaves the
// key as it was; the trail
// holds only the changes that happened.
func TestKeyChangesStandOnlyWithTheirEvents(t *testing.T) {
	t.Parallel()
	s, db := sqlitetest.NewDB(t)
	keys := apikey.NewKeys(apikey.KeysConfig{Store: s, Cache: apikey.NewCache(16, time.Minute)})
	ctx := t.Context()
	_, kept, err := keys.Create(ctx, apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "bot"}, admin)
	if err != nil {
		t.Fatal(err)
	}
	refuseAudit(t, db, admin.OrganizationID)

	if key, cred, err := keys.Create(ctx, apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "bot-2"}, admin); err == nil || key != "" || cred != nil {
		t.Fatalf("Create with an unwritable trail = %q, %+v, %v; want an error and no key", key, cred, err)
	}
	if list, _, err := keys.List(ctx, "", 10, admin); err != nil || len(list) != 1 || list[0].ID != kept.ID {
		t.Fatalf("keys = %+v, %v; want only %s", list, err, kept.ID)
	}
	if _, err := keys.SetListing(ctx, kept.ID, toolplane.ListingMeta, 0, admin); err == nil {
		t.Fatal("SetListing with an unwritable trail answered no error")
	}
	if got, err := s.GetCredential(ctx, kept.ID); err != nil || got.Listing != "" || got.Version != kept.Version {
		t.Fatalf("the key after a listing change not audited = %+v, %v; want it as it was", got, err)
	}
	if _, err := keys.Revoke(ctx, kept.ID, admin); err == nil {
		t.Fatal("Revoke with an unwritable trail answered no error")
	}
	if got, err := s.GetCredential(ctx, kept.ID); err != nil || !got.RevokedAt.IsZero() || got.Version != kept.Version {
		t.Fatalf("the key after a revocation not audited = %+v, %v; want it as it was", got, err)
	}
	evs, _, err := s.ListAudit(ctx, admin.OrganizationID, toolplane.AuditFilter{}, "", 10)
	if err != nil || len(evs) != 1 || evs[0].Outcome != "created" || evs[0].Subject != kept.ID {
		t.Fatalf("trail = %+v, %v; want the one creation", evs, err)
	}
}
