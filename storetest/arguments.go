package storetest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/cursor"
)

var invalidArgumentCases = []suiteCase{
	{"Limit", testInvalidLimit},
	{"Cursor", testInvalidCursor},
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
}

func testInvalidLimit(t *testing.T, s toolplane.Store) {
	org := newOrg()
	// A row in each list, so a store that only validates when it has rows
	// to answer fails too.
	insertClaim(t, s, fullClaim(org, "crm.read", "k", base))
	insertApproval(t, s, fullApproval(org, "apr-1", "run-1", "k", base))
	appendAudit(t, s, fullEvent(org, "ev-1", base))

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
				if (err != nil) != tt.wantErr {
					t.Errorf("%s(limit %d) err = %v, want error: %v", l.name, tt.limit, err, tt.wantErr)
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
				if err := l.list(t, s, org, c.cursor, 10); !errors.Is(err, cursor.ErrMalformed) {
					t.Errorf("%s(after %q) err = %v, want cursor.ErrMalformed", l.name, c.cursor, err)
				}
			})
		}
	}
}
