package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// The browser sessions contract, beyond toolplane.BrowserSessionStore's
// comments:
//
//   - A session is found by its token hash alone, across organizations;
//     the hash is unique across the deployment, the ID within the
//     organization.
//   - IdleUntil only moves forward and never past ExpiresAt.
//   - DeleteExpiredBrowserSessions crosses organizations. The suite's own
//     sessions end in 2025 or later; its sweep case writes sessions
//     ending in 1990 and sweeps before 1991, so a sweep never reaches
//     another subtest's rows when stores share a database.
var browserSessionCases = []suiteCase{
	{"RoundTrip", testBrowserSessionRoundTrip},
	{"InsertDuplicate", testBrowserSessionInsertDuplicate},
	{"Touch", testBrowserSessionTouch},
	{"Delete", testBrowserSessionDelete},
	{"DeleteOfPerson", testBrowserSessionDeleteOf},
	{"DeleteExpired", testBrowserSessionDeleteExpired},
}

// tokenHash answers a hash no other subtest's session holds.
func tokenHash(org, id string) string {
	sum := sha256.Sum256([]byte(org + "\x00" + id))
	return hex.EncodeToString(sum[:])
}

// fullBrowserSession answers a session of org with every field set.
func fullBrowserSession(org, id string, created time.Time) *toolplane.BrowserSession {
	return &toolplane.BrowserSession{
		ID: id, OrganizationID: org, TokenHash: tokenHash(org, id), Subject: "ada@example.com",
		Method: toolplane.SignInOIDC, CredentialID: "oidc:https://idp.example:ada@example.com",
		Roles:     []string{"approver", "group:finance"},
		CreatedAt: created.Add(123 * time.Nanosecond), IdleUntil: created.Add(30*time.Minute + 456*time.Nanosecond),
		ExpiresAt: created.Add(12 * time.Hour),
	}
}

func insertBrowserSession(t *testing.T, s toolplane.Store, b *toolplane.BrowserSession) {
	t.Helper()
	if err := s.InsertBrowserSession(t.Context(), b); err != nil {
		t.Fatalf("InsertBrowserSession(%s) = %v", b.ID, err)
	}
}

// wantBrowserSession fails t unless the session stored under want's token
// hash is want.
func wantBrowserSession(t *testing.T, s toolplane.Store, want *toolplane.BrowserSession) {
	t.Helper()
	got, err := s.FindBrowserSession(t.Context(), want.TokenHash)
	if err != nil {
		t.Fatalf("FindBrowserSession(%s) = %v", want.ID, err)
	}
	if d := diff(*got, *want); d != "" {
		t.Errorf("FindBrowserSession(%s): %s", want.ID, d)
	}
}

// wantNoBrowserSession fails t unless no session holds hash.
func wantNoBrowserSession(t *testing.T, s toolplane.Store, hash string) {
	t.Helper()
	if got, err := s.FindBrowserSession(t.Context(), hash); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("FindBrowserSession(%s) = %+v, %v; want ErrNotFound", hash, got, err)
	}
}

func testBrowserSessionRoundTrip(t *testing.T, s toolplane.Store) {
	org := newOrg()
	key := &toolplane.BrowserSession{ID: "key", OrganizationID: org, TokenHash: tokenHash(org, "key"), Subject: "bob",
		Method: toolplane.SignInAPIKey, CredentialID: "tpk_" + org, CreatedAt: base, IdleUntil: at(time.Minute), ExpiresAt: at(time.Hour)}
	for _, b := range []*toolplane.BrowserSession{fullBrowserSession(org, "full", base), key} {
		insertBrowserSession(t, s, b)
		wantBrowserSession(t, s, b)
	}
	wantNoBrowserSession(t, s, tokenHash(org, "never"))
	wantNoBrowserSession(t, s, "")
}

func testBrowserSessionInsertDuplicate(t *testing.T, s toolplane.Store) {
	orgA, orgB := newOrg(), newOrg()
	first := fullBrowserSession(orgA, "one", base)
	insertBrowserSession(t, s, first)

	sameID := fullBrowserSession(orgA, "one", at(time.Hour))
	sameID.TokenHash = tokenHash(orgA, "other")
	sameHash := fullBrowserSession(orgB, "two", at(time.Hour))
	sameHash.TokenHash = first.TokenHash
	for name, b := range map[string]*toolplane.BrowserSession{"same ID": sameID, "same token hash in another organization": sameHash} {
		if err := s.InsertBrowserSession(t.Context(), b); !errors.Is(err, toolplane.ErrExists) {
			t.Errorf("InsertBrowserSession(%s) = %v, want ErrExists", name, err)
		}
	}
	wantBrowserSession(t, s, first)
	wantNoBrowserSession(t, s, sameID.TokenHash)

	// The ID is the organization's: another may hold it.
	elsewhere := fullBrowserSession(orgB, "one", base)
	insertBrowserSession(t, s, elsewhere)
	wantBrowserSession(t, s, elsewhere)
	wantBrowserSession(t, s, first)
}

func testBrowserSessionTouch(t *testing.T, s toolplane.Store) {
	org := newOrg()
	b := fullBrowserSession(org, "touched", base)
	insertBrowserSession(t, s, b)
	tests := []struct {
		name  string
		until time.Time
		want  time.Time
	}{
		{"forward", at(time.Hour), stored(at(time.Hour))},
		{"back is ignored", at(time.Minute), stored(at(time.Hour))},
		{"past the absolute end stops there", at(48 * time.Hour), stored(b.ExpiresAt)},
	}
	for _, tt := range tests {
		if err := s.TouchBrowserSession(t.Context(), org, b.ID, tt.until); err != nil {
			t.Fatalf("%s: TouchBrowserSession = %v", tt.name, err)
		}
		got, err := s.FindBrowserSession(t.Context(), b.TokenHash)
		if err != nil {
			t.Fatalf("%s: FindBrowserSession = %v", tt.name, err)
		}
		if !got.IdleUntil.Equal(tt.want) {
			t.Errorf("%s: IdleUntil = %v, want %v", tt.name, got.IdleUntil, tt.want)
		}
		if !got.ExpiresAt.Equal(stored(b.ExpiresAt)) {
			t.Errorf("%s: ExpiresAt = %v, want %v unchanged", tt.name, got.ExpiresAt, b.ExpiresAt)
		}
	}
	if err := s.TouchBrowserSession(t.Context(), org, "missing", at(time.Hour)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("TouchBrowserSession(missing) = %v, want ErrNotFound", err)
	}
}

func testBrowserSessionDelete(t *testing.T, s toolplane.Store) {
	org := newOrg()
	b, kept := fullBrowserSession(org, "gone", base), fullBrowserSession(org, "kept", base)
	insertBrowserSession(t, s, b)
	insertBrowserSession(t, s, kept)
	if ok, err := s.DeleteBrowserSession(t.Context(), org, b.ID); !ok || err != nil {
		t.Fatalf("DeleteBrowserSession = %v, %v; want true, nil", ok, err)
	}
	wantNoBrowserSession(t, s, b.TokenHash)
	if ok, err := s.DeleteBrowserSession(t.Context(), org, b.ID); ok || err != nil {
		t.Errorf("DeleteBrowserSession again = %v, %v; want false, nil", ok, err)
	}
	wantBrowserSession(t, s, kept)
}

func testBrowserSessionDeleteOf(t *testing.T, s toolplane.Store) {
	org := newOrg()
	mine1, mine2 := fullBrowserSession(org, "m1", base), fullBrowserSession(org, "m2", base)
	theirs := fullBrowserSession(org, "t1", base)
	theirs.Subject = "bob@example.com"
	for _, b := range []*toolplane.BrowserSession{mine1, mine2, theirs} {
		insertBrowserSession(t, s, b)
	}
	n, err := s.DeleteBrowserSessionsOf(t.Context(), org, mine1.Subject)
	if n != 2 || err != nil {
		t.Fatalf("DeleteBrowserSessionsOf = %d, %v; want 2, nil", n, err)
	}
	wantNoBrowserSession(t, s, mine1.TokenHash)
	wantNoBrowserSession(t, s, mine2.TokenHash)
	wantBrowserSession(t, s, theirs)
}

func testBrowserSessionDeleteExpired(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	old := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)
	orgA, orgB := newOrg(), newOrg()
	var ended []*toolplane.BrowserSession
	for i, org := range []string{orgA, orgB, orgA} {
		b := fullBrowserSession(org, "ended"+string(rune('a'+i)), old)
		b.IdleUntil, b.ExpiresAt = old.Add(time.Duration(i)*time.Minute), old.Add(time.Hour)
		insertBrowserSession(t, s, b)
		ended = append(ended, b)
	}
	live := fullBrowserSession(orgA, "live", base)
	insertBrowserSession(t, s, live)
	if _, err := s.DeleteExpiredBrowserSessions(ctx, old.Add(24*time.Hour), 0); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("DeleteExpiredBrowserSessions(limit 0) = %v, want ErrInvalid", err)
	}
	if n, err := s.DeleteExpiredBrowserSessions(ctx, old.Add(24*time.Hour), 2); n != 2 || err != nil {
		t.Fatalf("DeleteExpiredBrowserSessions(limit 2) = %d, %v; want 2, nil", n, err)
	}
	// The oldest ends go first.
	wantNoBrowserSession(t, s, ended[0].TokenHash)
	wantNoBrowserSession(t, s, ended[1].TokenHash)
	wantBrowserSession(t, s, ended[2])
	if n, err := s.DeleteExpiredBrowserSessions(ctx, old.Add(24*time.Hour), 10); n != 1 || err != nil {
		t.Fatalf("DeleteExpiredBrowserSessions again = %d, %v; want 1, nil", n, err)
	}
	wantBrowserSession(t, s, live)
}

func testIsolationBrowserSessions(t *testing.T, s toolplane.Store) {
	a, b := newOrg(), newOrg()
	sess := fullBrowserSession(a, "shared-id", base)
	insertBrowserSession(t, s, sess)
	if err := s.TouchBrowserSession(t.Context(), b, sess.ID, at(time.Hour)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("TouchBrowserSession as another organization = %v, want ErrNotFound", err)
	}
	if ok, err := s.DeleteBrowserSession(t.Context(), b, sess.ID); ok || err != nil {
		t.Errorf("DeleteBrowserSession as another organization = %v, %v; want false, nil", ok, err)
	}
	if n, err := s.DeleteBrowserSessionsOf(t.Context(), b, sess.Subject); n != 0 || err != nil {
		t.Errorf("DeleteBrowserSessionsOf as another organization = %d, %v; want 0, nil", n, err)
	}
	wantBrowserSession(t, s, sess)
}
