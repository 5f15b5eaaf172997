package storetest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

var invalidArgumentCases = []suiteCase{
	{"Limit", testInvalidLimit},
	{"Cursor", testInvalidCursor},
	{"SessionID", testInvalidSessionID},
}

// lister is one list method with its other arguments fixed.
type lister struct {
	name string
	list func(t *testing.T, s toolplane.Store, org, after string, limit int) error
}

var listers = []lister{
	{"ListClaims", func(t *testing.T, s toolplane.Store, org, after string, limit int) error {
		_, _, err := s.ListClaims(t.Context(), org, toolplane.ClaimProcessing, after, limit)
		return err
	}},
	{"ListApprovals", func(t *testing.T, s toolplane.Store, org, after string, limit int) error {
		_, _, err := s.ListApprovals(t.Context(), org, toolplane.ApprovalPending, after, limit)
		return err
	}},
	{"ListApprovalsNewest", func(t *testing.T, s toolplane.Store, org, after string, limit int) error {
		_, _, err := s.ListApprovalsNewest(t.Context(), org, toolplane.ApprovalPending, []string{""}, after, limit)
		return err
	}},
	{"ListAudit", func(t *testing.T, s toolplane.Store, org, after string, limit int) error {
		_, _, err := s.ListAudit(t.Context(), org, toolplane.AuditFilter{}, after, limit)
		return err
	}},
	{"ListCredentials", func(t *testing.T, s toolplane.Store, org, after string, limit int) error {
		_, _, err := s.ListCredentials(t.Context(), org, after, limit)
		return err
	}},
	{"ListChanges", func(t *testing.T, s toolplane.Store, org, after string, limit int) error {
		_, _, err := s.ListChanges(t.Context(), org, "", "", after, limit)
		return err
	}},
	{"ListConnections", func(t *testing.T, s toolplane.Store, org, after string, limit int) error {
		_, _, err := s.ListConnections(t.Context(), org, toolplane.ConnectionFilter{}, after, limit)
		return err
	}},
	{"ListAllConnections", func(t *testing.T, s toolplane.Store, _, after string, limit int) error {
		_, _, err := s.ListAllConnections(t.Context(), after, limit)
		return err
	}},
}

func testInvalidLimit(t *testing.T, s toolplane.Store) {
	org := newOrg()
	// A row in each list, so a store that only validates when it has rows
	// to answer fails too.
	insertClaim(t, s, fullClaim(org, "crm.read", "k", base))
	insertApproval(t, s, fullApproval(org, "apr-1", "run-1", "k", base))
	appendAudit(t, s, fullEvent(org, "ev-1", base))
	insertConnection(t, s, fullConnection(org, "con-1", base))

	tests := []struct {
		limit   int
		wantErr bool
	}{
		{math.MinInt, true},
		{-1, true},
		{0, true},
		{1, false},
		{maxLimit, false},
		{maxLimit + 1, true},
		{math.MaxInt, true},
	}
	for _, l := range listers {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s limit %d", l.name, tt.limit), func(t *testing.T) {
				err := l.list(t, s, org, "", tt.limit)
				if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, toolplane.ErrInvalid)) {
					t.Errorf("%s(limit %d) err = %v, want toolplane.ErrInvalid: %v", l.name, tt.limit, err, tt.wantErr)
				}
			})
		}
	}
}

func testInvalidCursor(t *testing.T, s toolplane.Store) {
	org := newOrg()
	insertClaim(t, s, fullClaim(org, "crm.read", "k", base))
	insertApproval(t, s, fullApproval(org, "apr-1", "run-1", "k", base))
	appendAudit(t, s, fullEvent(org, "ev-1", base))
	insertConnection(t, s, fullConnection(org, "con-1", base))

	cursors := []struct{ name, cursor string }{
		{"not base64", "!!not a cursor!!"},
		{"base64 of nonsense", base64.RawURLEncoding.EncodeToString([]byte("nonsense"))},
		{"base64 of an empty object", base64.StdEncoding.EncodeToString([]byte("{}"))},
		{"whitespace", " "},
	}
	for _, l := range listers {
		for _, c := range cursors {
			t.Run(l.name+" "+c.name, func(t *testing.T) {
				// A door answers the caller's 400 only for this error; any
				// other is the store's failure.
				if err := l.list(t, s, org, c.cursor, 10); !errors.Is(err, toolplane.ErrBadCursor) {
					t.Errorf("%s(after %q) err = %v, want toolplane.ErrBadCursor", l.name, c.cursor, err)
				}
			})
		}
	}
}

// testInvalidSessionID: a session ID comes from the client's Mcp-Session-Id
// header and may hold bytes no stored ID holds (invalid UTF-8, NUL); every
// session method answers such an ID as it answers an unknown one, never a
// store error a door would count as the store's failure.
func testInvalidSessionID(t *testing.T, s toolplane.Store) {
	org := newOrg()
	insertSession(t, s, fullSession(org, "abc", base))
	for _, id := range []string{"abc\xff", "abc\x00", "\xc3\x28"} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			if _, err := s.GetSession(t.Context(), org, id); !errors.Is(err, toolplane.ErrNotFound) {
				t.Errorf("GetSession = %v, want ErrNotFound", err)
			}
			if err := s.TouchSession(t.Context(), org, id, base.Add(time.Hour)); !errors.Is(err, toolplane.ErrNotFound) {
				t.Errorf("TouchSession = %v, want ErrNotFound", err)
			}
			if err := s.SetSessionContracts(t.Context(), org, id, map[string]string{"crm.read": "1.0.0"}); !errors.Is(err, toolplane.ErrNotFound) {
				t.Errorf("SetSessionContracts = %v, want ErrNotFound", err)
			}
			if deleted, err := s.DeleteSession(t.Context(), org, id); err != nil || deleted {
				t.Errorf("DeleteSession = %v, %v; want false, nil", deleted, err)
			}
		})
	}
	// The valid session beside them is untouched.
	if _, err := s.GetSession(t.Context(), org, "abc"); err != nil {
		t.Errorf("GetSession(abc) = %v", err)
	}
}
