package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// The sessions contract, beyond toolplane.SessionStore's comments:
//
//   - A session's Contracts and Client are kept as given; an empty map and
//     a nil one, an empty and a nil Client, are the same value.
//   - ExpiresAt only moves forward (TouchSession), so a node that touches a
//     session late never shortens the time another node gave it.
//   - DeleteExpiredSessions crosses organizations. The suite's own sessions
//     expire in 2025 or later; its sweep case writes sessions expiring in
//     1990 and sweeps before 1991, so a sweep never reaches another
//     subtest's rows when stores share a database.
var sessionCases = []suiteCase{
	{"RoundTrip", testSessionRoundTrip},
	{"InsertDuplicate", testSessionInsertDuplicate},
	{"Touch", testSessionTouch},
	{"Contracts", testSessionContracts},
	{"Delete", testSessionDelete},
	{"DeleteExpired", testSessionDeleteExpired},
}

// fullSession answers a session of org with every field set.
func fullSession(org, id string, created time.Time) *toolplane.Session {
	return &toolplane.Session{
		ID: id, OrganizationID: org, CredentialID: "tpk_" + id, Door: "github",
		ProtocolVersion: "2025-06-18", Client: []byte(`{"capabilities":{"elicitation":{"url":{}}}}`),
		RunID:     "mcp:tpk_" + id + ":" + id,
		Contracts: map[string]string{"payments.refund_order": "sha256:1", "demo.add_note": "sha256:2"},
		CreatedAt: created.Add(123 * time.Nanosecond), ExpiresAt: created.Add(30*time.Minute + 456*time.Nanosecond),
	}
}

func insertSession(t *testing.T, s toolplane.Store, sess *toolplane.Session) {
	t.Helper()
	if err := s.InsertSession(t.Context(), sess); err != nil {
		t.Fatalf("InsertSession(%s) = %v", sess.ID, err)
	}
}

// wantSession fails t unless the stored session is want.
func wantSession(t *testing.T, s toolplane.Store, want *toolplane.Session) {
	t.Helper()
	got, err := s.GetSession(t.Context(), want.OrganizationID, want.ID)
	if err != nil {
		t.Fatalf("GetSession(%s) = %v", want.ID, err)
	}
	if len(want.Contracts) == 0 && len(got.Contracts) == 0 {
		got.Contracts = want.Contracts
	}
	if d := diff(*got, *want); d != "" {
		t.Errorf("GetSession(%s): %s", want.ID, d)
	}
}

// wantNoSession fails t unless org holds no session id.
func wantNoSession(t *testing.T, s toolplane.Store, org, id string) {
	t.Helper()
	if got, err := s.GetSession(t.Context(), org, id); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetSession(%s, %s) = %+v, %v; want ErrNotFound", org, id, got, err)
	}
}

func testSessionRoundTrip(t *testing.T, s toolplane.Store) {
	org := newOrg()
	bare := &toolplane.Session{ID: "bare", OrganizationID: org, CredentialID: "jwt:iss:agent", ProtocolVersion: "2025-03-26",
		RunID: "mcp:bare", CreatedAt: base, ExpiresAt: at(time.Minute)}
	tests := []struct {
		name string
		sess *toolplane.Session
	}{
		{"every field set", fullSession(org, "full", base)},
		{"no contracts, client or door", bare},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			insertSession(t, s, tt.sess)
			wantSession(t, s, tt.sess)
		})
	}
	wantNoSession(t, s, org, "missing")
}

func testSessionInsertDuplicate(t *testing.T, s toolplane.Store) {
	org, other := newOrg(), newOrg()
	first := fullSession(org, "s1", base)
	insertSession(t, s, first)
	dup := fullSession(org, "s1", at(time.Hour))
	dup.CredentialID = "tpk_mallory"
	if err := s.InsertSession(t.Context(), dup); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("second InsertSession = %v, want ErrExists", err)
	}
	wantSession(t, s, first)
	// The same id in another organization is another session.
	second := fullSession(other, "s1", at(time.Hour))
	insertSession(t, s, second)
	wantSession(t, s, first)
	wantSession(t, s, second)
}

func testSessionTouch(t *testing.T, s toolplane.Store) {
	org := newOrg()
	sess := fullSession(org, "s1", base)
	insertSession(t, s, sess)
	later := sess.ExpiresAt.Add(time.Hour + 789*time.Nanosecond)
	if err := s.TouchSession(t.Context(), org, sess.ID, later); err != nil {
		t.Fatalf("TouchSession(later) = %v", err)
	}
	sess.ExpiresAt = later
	wantSession(t, s, sess)
	// An earlier time (a node that touches late) never moves it back.
	if err := s.TouchSession(t.Context(), org, sess.ID, base); err != nil {
		t.Fatalf("TouchSession(earlier) = %v", err)
	}
	wantSession(t, s, sess)
	if err := s.TouchSession(t.Context(), org, "missing", later); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("TouchSession(missing) = %v, want ErrNotFound", err)
	}
}

func testSessionContracts(t *testing.T, s toolplane.Store) {
	org := newOrg()
	sess := fullSession(org, "s1", base)
	insertSession(t, s, sess)
	for _, c := range []map[string]string{{"crm.find": "sha256:3"}, nil, {"a.b": "x", "c.d": "y"}} {
		if err := s.SetSessionContracts(t.Context(), org, sess.ID, c); err != nil {
			t.Fatalf("SetSessionContracts(%v) = %v", c, err)
		}
		sess.Contracts = c
		wantSession(t, s, sess)
	}
	if err := s.SetSessionContracts(t.Context(), org, "missing", nil); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("SetSessionContracts(missing) = %v, want ErrNotFound", err)
	}
}

func testSessionDelete(t *testing.T, s toolplane.Store) {
	org := newOrg()
	sess := fullSession(org, "s1", base)
	insertSession(t, s, sess)
	if ok, err := s.DeleteSession(t.Context(), org, sess.ID); !ok || err != nil {
		t.Fatalf("DeleteSession = %v, %v; want true", ok, err)
	}
	wantNoSession(t, s, org, sess.ID)
	if ok, err := s.DeleteSession(t.Context(), org, sess.ID); ok || err != nil {
		t.Errorf("second DeleteSession = %v, %v; want false, nil", ok, err)
	}
	if err := s.TouchSession(t.Context(), org, sess.ID, at(time.Hour)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("TouchSession of a deleted session = %v, want ErrNotFound", err)
	}
}

func testSessionDeleteExpired(t *testing.T, s toolplane.Store) {
	org := newOrg()
	old := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)
	var expired []*toolplane.Session
	for _, id := range []string{"e1", "e2", "e3"} {
		sess := fullSession(org, id, old)
		insertSession(t, s, sess)
		expired = append(expired, sess)
	}
	// Expires after the sweep's instant: kept.
	kept := fullSession(org, "kept", old)
	kept.ExpiresAt = time.Date(1992, 1, 1, 0, 0, 0, 0, time.UTC)
	insertSession(t, s, kept)
	sweep := time.Date(1991, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.DeleteExpiredSessions(t.Context(), sweep, 0); err == nil {
		t.Error("DeleteExpiredSessions(limit 0) = nil error")
	}
	for {
		n, err := s.DeleteExpiredSessions(t.Context(), sweep, 1)
		if err != nil {
			t.Fatalf("DeleteExpiredSessions = %v", err)
		}
		if n > 1 {
			t.Fatalf("DeleteExpiredSessions(limit 1) deleted %d", n)
		}
		if n == 0 {
			break
		}
	}
	for _, sess := range expired {
		wantNoSession(t, s, org, sess.ID)
	}
	wantSession(t, s, kept)
}

// testIsolationSessions: another organization neither reads, touches,
// changes nor deletes a session, though it presents the same id.
func testIsolationSessions(t *testing.T, s toolplane.Store) {
	a, b := newOrg(), newOrg()
	sess := fullSession(a, "shared-id", base)
	insertSession(t, s, sess)
	wantNoSession(t, s, b, sess.ID)
	if err := s.TouchSession(t.Context(), b, sess.ID, at(24*time.Hour)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("TouchSession as another organization = %v, want ErrNotFound", err)
	}
	if err := s.SetSessionContracts(t.Context(), b, sess.ID, map[string]string{"x.y": "z"}); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("SetSessionContracts as another organization = %v, want ErrNotFound", err)
	}
	if ok, err := s.DeleteSession(t.Context(), b, sess.ID); ok || err != nil {
		t.Errorf("DeleteSession as another organization = %v, %v; want false, nil", ok, err)
	}
	wantSession(t, s, sess)
}
