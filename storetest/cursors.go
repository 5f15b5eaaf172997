package storetest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/cursor"
)

// cursorCases hold every paged list to the one cursor encoding: a cursor
// is a position in one list, and anything else offered as one is refused
// with cursor.ErrMalformed, the only error a door answers as the caller's
// mistake rather than the store's failure.
var cursorCases = []suiteCase{
	{"RefusedByAnotherList", testCursorRefusedByAnotherList},
	{"Tampered", testCursorTampered},
	{"KeyPartHoldsAnyByte", testCursorKeyPartHoldsAnyByte},
}

// pagedList is one paged list with its other arguments fixed, answering
// only the next cursor.
type pagedList struct {
	name string
	next func(t *testing.T, s toolplane.Store, org, after string) (string, error)
}

// pagedLists are every list a door pages through.
var pagedLists = []pagedList{
	{"ListClaims", func(t *testing.T, s toolplane.Store, org, after string) (string, error) {
		_, next, err := s.ListClaims(t.Context(), org, toolplane.ClaimProcessing, after, 1)
		return next, err
	}},
	{"ListApprovals", func(t *testing.T, s toolplane.Store, org, after string) (string, error) {
		_, next, err := s.ListApprovals(t.Context(), org, toolplane.ApprovalPending, after, 1)
		return next, err
	}},
	{"ListApprovalsNewest", func(t *testing.T, s toolplane.Store, org, after string) (string, error) {
		_, next, err := s.ListApprovalsNewest(t.Context(), org, toolplane.ApprovalPending, []string{"", "finance-leads"}, after, 1)
		return next, err
	}},
	{"ListAudit", func(t *testing.T, s toolplane.Store, org, after string) (string, error) {
		_, next, err := s.ListAudit(t.Context(), org, toolplane.AuditFilter{}, after, 1)
		return next, err
	}},
	{"ListCredentials", func(t *testing.T, s toolplane.Store, org, after string) (string, error) {
		_, next, err := s.ListCredentials(t.Context(), org, after, 1)
		return next, err
	}},
	{"ListChanges", func(t *testing.T, s toolplane.Store, org, after string) (string, error) {
		_, next, err := s.ListChanges(t.Context(), org, "", "", after, 1)
		return next, err
	}},
	{"ListToolVersions", func(t *testing.T, s toolplane.Store, org, after string) (string, error) {
		_, next, err := s.ListToolVersions(t.Context(), org, toolplane.VersionFilter{}, after, 1)
		return next, err
	}},
	{"ListEveryToolVersion", func(t *testing.T, s toolplane.Store, _, after string) (string, error) {
		_, next, err := s.ListEveryToolVersion(t.Context(), toolplane.VersionFilter{}, after, 1)
		return next, err
	}},
	{"ListConnections", func(t *testing.T, s toolplane.Store, org, after string) (string, error) {
		_, next, err := s.ListConnections(t.Context(), org, toolplane.ConnectionFilter{}, after, 1)
		return next, err
	}},
	{"ListAllConnections", func(t *testing.T, s toolplane.Store, _, after string) (string, error) {
		_, next, err := s.ListAllConnections(t.Context(), after, 1)
		return next, err
	}},
}

// seedEveryList writes two rows into each paged list of org, so a page of
// one row has a next cursor, and answers each list's first next cursor.
func seedEveryList(t *testing.T, s toolplane.Store, org string) map[string]string {
	t.Helper()
	p, owner := newToolPrefix(), newOwner()
	for i, id := range []string{"a", "b"} {
		created := at(0)
		insertClaim(t, s, fullClaim(org, "crm.write", "k-"+id, created))
		insertApproval(t, s, fullApproval(org, "apr-"+id, "run-1", "k-"+id, created))
		appendAudit(t, s, fullEvent(org, "ev-"+id, created))
		insertCredential(t, s, fullCredential(org, credentialID(org, id), created))
		appendChange(t, s, fullChange(org, "ch-"+id, created))
		insertVersion(t, s, fullVersion(org, p+".tool", fmt.Sprintf("1.%d.0", i), owner, created))
		insertConnection(t, s, fullConnection(org, "con-"+id, created))
	}
	first := make(map[string]string, len(pagedLists))
	for _, l := range pagedLists {
		next, err := l.next(t, s, org, "")
		if err != nil || next == "" {
			t.Fatalf("%s(limit 1) = next %q, %v; want a next cursor", l.name, next, err)
		}
		first[l.name] = next
	}
	return first
}

// testCursorRefusedByAnotherList: a cursor is a position in the list that
// answered it; another list offered it refuses it as malformed rather than
// reading it as a position of its own.
func testCursorRefusedByAnotherList(t *testing.T, s toolplane.Store) {
	org := newOrg()
	first := seedEveryList(t, s, org)
	for _, from := range pagedLists {
		for _, to := range pagedLists {
			if from.name == to.name {
				continue
			}
			if _, err := to.next(t, s, org, first[from.name]); !errors.Is(err, cursor.ErrMalformed) {
				t.Errorf("%s(cursor of %s) err = %v, want cursor.ErrMalformed", to.name, from.name, err)
			}
		}
		// The cursor itself is good where it came from.
		if _, err := from.next(t, s, org, first[from.name]); err != nil {
			t.Errorf("%s(its own cursor) = %v", from.name, err)
		}
	}
}

// testCursorTampered: a cursor changed by its holder (cut short, lengthened,
// another format) is refused as malformed, never read as some position.
func testCursorTampered(t *testing.T, s toolplane.Store) {
	org := newOrg()
	first := seedEveryList(t, s, org)
	reencode := func(c string, change func([]byte) []byte) string {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil {
			t.Fatalf("a store's cursor %q is not base64url: %v", c, err)
		}
		return base64.RawURLEncoding.EncodeToString(change(b))
	}
	tampers := []struct {
		name   string
		tamper func(c string) string
	}{
		{"cut by a byte", func(c string) string { return reencode(c, func(b []byte) []byte { return b[:len(b)-1] }) }},
		{"a trailing byte", func(c string) string { return reencode(c, func(b []byte) []byte { return append(b, 'x') }) }},
		{"another format", func(c string) string {
			return reencode(c, func(b []byte) []byte { b[0]++; return b })
		}},
		{"only the header", func(c string) string { return reencode(c, func(b []byte) []byte { return b[:2] }) }},
		{"padded", func(c string) string { return c + "==" }},
		{"trailing space", func(c string) string { return c + " " }},
	}
	for _, l := range pagedLists {
		for _, tt := range tampers {
			bad := tt.tamper(first[l.name])
			if _, err := l.next(t, s, org, bad); !errors.Is(err, cursor.ErrMalformed) {
				t.Errorf("%s(cursor %s: %q) err = %v, want cursor.ErrMalformed", l.name, tt.name, bad, err)
			}
		}
	}
}

// testCursorKeyPartHoldsAnyByte: a claim key may hold any byte
// (canonical.Key), so a cursor positioned after such a key is a good one.
func testCursorKeyPartHoldsAnyByte(t *testing.T, s toolplane.Store) {
	org := newOrg()
	insertClaim(t, s, fullClaim(org, "crm.write", "k", base))
	c := cursor.Encode(cursor.Claims, 0, "tool", "\x00\xff")
	if _, _, err := s.ListClaims(t.Context(), org, toolplane.ClaimProcessing, c, 10); err != nil {
		t.Errorf("ListClaims(after a key with any byte) err = %v", err)
	}
}
