// Package storetest is the one conformance suite every toolplane.Store
// backend passes. The suite is the storage contract: what the invocation
// path may rely on of a store is what it checks, so one backend (SQLite
// embedded, PostgreSQL scaled out) can replace another without the journal,
// the approvals or the meter noticing.
//
// A backend runs the suite from one of its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) toolplane.Store {
//			db := openTestDatabase(t) // fresh and migrated; closed by t.Cleanup
//			return mystore.New(db)
//		})
//	}
//
// Run calls newStore once per subtest, from that subtest, and runs the
// subtests in parallel, so newStore must be safe to call concurrently and
// should register its cleanup with t.Cleanup. Parallel subtests run after
// the calling test function has returned: a resource shared by all of them
// (a server, a pool) must be released with t.Cleanup, never defer, or it is
// gone before the first subtest starts. Every subtest writes under
// organization ids of its own, and the catalogue's subtests also under tool
// names and owners of their own (ListEveryToolVersion reads across
// organizations), so a backend whose stores share one database passes as
// well as one that makes a fresh database each time.
//
// The subtests are named Group/Check (Claims/ConcurrentInsert,
// Isolation/Approvals, ...), so one check runs alone with
// go test -run 'TestConformance/Claims/ConcurrentInsert'.
//
// Two more suites need more of a backend than a toolplane.Store:
// RunMaintenance holds it to jobs.Maintenance (the background sweeps'
// cross-organization reads and deletes), and RunMigrations to its schema
// history (fresh, repeated and concurrent migration, and the data each
// rewriting migration keeps).
//
// The contract the suite holds every backend to, beyond what the interface
// comments say:
//
//   - Times are kept to the microsecond, finer precision truncated (as a
//     PostgreSQL timestamptz keeps them), and answered in UTC. A zero time
//     answers as the zero time.
//   - A nil and an empty byte slice are the same value: a backend may answer
//     either for both. So are a nil and an empty string list (a
//     credential's Roles and Tools).
//   - A claim or approval Key is kept byte for byte: canonical.Key says a
//     key's parts may hold any byte, NUL and invalid UTF-8 included.
//   - Insert keeps the Version it is given. A successful UpdateClaim,
//     UpdateApproval or UpdateCredential stores Version+1 and sets the
//     argument's Version to it; an unsuccessful one changes neither the row
//     nor the argument.
//   - UpdateClaim and UpdateApproval write every field except the row's
//     identity (organization and tool and key, or organization and ID) and
//     CreatedAt: list order and cursors are built on CreatedAt, so it never
//     moves.
//   - Identities are scoped to an organization: the same claim key or row ID
//     in two organizations is two rows. Credentials are the one exception:
//     a credential's ID is unique across organizations, because
//     GetCredential finds a key by its ID before the organization is known.
//     Every other credential method is still scoped to an organization, and
//     every subtest mints credential IDs of its own, as it does
//     organization ids. An OAuth state is the same: found by its ID alone,
//     which TakeOAuthState's caller holds before the organization is known.
//     A browser session is found by its token hash alone, for the same
//     reason (a cookie names no organization); the hash is unique across
//     organizations, the session ID only within one.
//   - Connections: UpdateConnection writes every field but the identity,
//     Provider, Kind, UserID, Owner and CreatedAt, and a stored revocation
//     (the revoked state and its RevokedAt) stays. A name is unique among
//     the organization's connections that are not revoked. Every
//     connection write and its change record are stored together or not at
//     all; a stale update stores neither. Config and Scope are kept as
//     JSON keeps them, so an empty list in them is no list.
//   - A control-plane write of the Audited form (a credential inserted or
//     updated, a grant, deny or bundle changed, a policy version inserted)
//     stores its row, its change record (when it takes one) and its audit
//     event, chained like any other, together or not at all: a duplicate
//     ID of any of them answers ErrExists and stores none, an event the
//     chain refuses answers an error and stores none (RunAuditRefused),
//     and a write that does not apply stores neither record nor event.
//   - InsertApproval, InsertUsage and AppendAudit refuse a second row with the
//     same ID in the organization with ErrExists, so a retried write never
//     counts twice. InsertCredential refuses a second credential with the
//     same ID in any organization.
//   - One call (organization, tool and key) has at most one pending
//     approval: InsertApproval refuses a second one with ErrExists, and
//     FileApproval answers the one pending instead of storing, so
//     concurrent filings of one call all answer the same approval.
//   - UpdateCredential writes Roles, Tools, Label, ExpiresAt and RevokedAt
//     only, and keeps a stored RevokedAt; TouchCredential moves LastUsedAt
//     forward only and never changes Version (see toolplane.CredentialStore).
//   - Role and tool names are kept byte for byte, or refused with an error
//     (a name PostgreSQL text cannot hold: NUL, invalid UTF-8); never
//     rewritten.
//   - UpdateClaim, UpdateApproval, UpdateCredential and DeleteClaim of a row
//     that is not there (or belongs to another organization) answer false
//     or ErrNotFound, and never touch another organization's row. A stale
//     Version answers false with a nil error. TouchCredential of such a row
//     answers ErrNotFound.
//   - Lists order by CreatedAt, ties broken by the identity compared
//     bytewise (tool, then key, for claims; ID otherwise), as PostgreSQL's
//     COLLATE "C" does. ListClaims, ListApprovals, ListCredentials and
//     ListConnections are oldest first; ListAudit and FindApprovals newest
//     first. ListAllConnections, across organizations, orders by ID, then
//     organization.
//   - Cursors are the cursor package's encoding, opaque to callers, and
//     validated: a malformed, altered or another list's cursor is an error
//     that errors.Is reports as toolplane.ErrBadCursor (cursor.ErrMalformed
//     is one), on every list. The next cursor is empty exactly when no row
//     followed the page, and paging by cursor neither skips nor repeats a
//     row while rows are written between pages.
//   - A limit outside 1..1000 is a toolplane.ErrInvalid, never a panic or a
//     silent clamp.
package storetest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// maxLimit is the largest page a list method must accept.
const maxLimit = 1000

// writers is how many goroutines race in the concurrency tests: more than
// a pool usually holds, so they contend for connections and for the rows.
const writers = 64

// suiteCase is one named check, run against a store of its own.
type suiteCase struct {
	name string
	run  func(t *testing.T, s toolplane.Store)
}

// Run runs the conformance suite as subtests of t. newStore answers a
// migrated store for the subtest it is given (see the package doc).
func Run(t *testing.T, newStore func(t *testing.T) toolplane.Store) {
	t.Helper()
	groups := []struct {
		name  string
		cases []suiteCase
	}{
		{"Claims", claimCases},
		{"Approvals", approvalCases},
		{"Usage", usageCases},
		{"Spend", spendCases},
		{"Audit", auditCases},
		{"AuditCompliance", complianceCases},
		{"Isolation", isolationCases},
		{"Credentials", credentialCases},
		{"InvalidArguments", invalidArgumentCases},
		{"Cursors", cursorCases},
		{"Catalog", catalogCases},
		{"Grants", grantCases},
		{"Denies", denyCases},
		{"Bundles", bundleCases},
		{"Changes", changeCases},
		{"ControlAudit", controlAuditCases},
		{"Sessions", sessionCases},
		{"BrowserSessions", browserSessionCases},
		{"Nodes", nodeCases},
		{"UpstreamSettings", upstreamSettingCases},
		{"Connections", connectionCases},
		{"PolicyBundles", policyBundleCases},
		{"AsyncCalls", asyncCallCases},
		{"Streams", streamCases},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, newStore(t))
				})
			}
		})
	}
}

// base is an arbitrary instant with nanoseconds a microsecond store must
// drop and a zone it must not keep.
var base = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("UTC+5", 5*60*60))

// at answers base moved by d.
func at(d time.Duration) time.Time { return base.Add(d) }

// newOrg answers an organization id no other subtest uses.
func newOrg() string { return "org-" + rand.Text() }

// stored answers t as a conforming store keeps it.
func stored(t time.Time) time.Time { return t.Truncate(time.Microsecond) }

// diff reports how got differs from want under the suite's contract, or ""
// when they agree. It walks every field by reflection, so a field added to a
// row type is compared without touching the suite.
func diff(got, want any) string {
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	if gv.Type() != wv.Type() {
		return fmt.Sprintf("type %s, want %s", gv.Type(), wv.Type())
	}
	var out []string
	// An event's place in its chain is the store's to assign, and a store
	// need not tell the caller of every write that records one (the chain
	// has cases of its own, see RunAuditChain): an event given without it
	// is compared without it.
	unchained := false
	if e, ok := want.(toolplane.AuditEvent); ok && e.Seq == 0 && e.Hash == nil {
		unchained = true
	}
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		if unchained && (name == "Seq" || name == "PrevHash" || name == "Hash") {
			continue
		}
		g, w := gv.Field(i).Interface(), wv.Field(i).Interface()
		switch w := w.(type) {
		case time.Time:
			g := g.(time.Time)
			if !g.Equal(stored(w)) {
				out = append(out, fmt.Sprintf("%s = %s, want %s", name, g.Format(time.RFC3339Nano), stored(w).UTC().Format(time.RFC3339Nano)))
			} else if !g.IsZero() && g.Location() != time.UTC {
				out = append(out, fmt.Sprintf("%s in %s, want UTC", name, g.Location()))
			}
		case []byte:
			if !bytes.Equal(g.([]byte), w) {
				out = append(out, fmt.Sprintf("%s = %q, want %q", name, g, w))
			}
		case []string:
			if !slices.Equal(g.([]string), w) {
				out = append(out, fmt.Sprintf("%s = %q, want %q", name, g, w))
			}
		case map[string]any:
			// An empty object reads back as none.
			if g := g.(map[string]any); (len(g) > 0 || len(w) > 0) && !reflect.DeepEqual(g, w) {
				out = append(out, fmt.Sprintf("%s = %v, want %v", name, g, w))
			}
		default:
			if gv.Field(i).Kind() == reflect.Struct {
				// A nested struct (a connection's config) is held to
				// the same contract, field by field.
				if d := diff(g, w); d != "" {
					out = append(out, name+": "+d)
				}
				continue
			}
			if !reflect.DeepEqual(g, w) {
				out = append(out, fmt.Sprintf("%s = %#v, want %#v", name, g, w))
			}
		}
	}
	return strings.Join(out, "; ")
}

// refused reports whether a conditional write answered "not written" in
// either of the forms the contract allows for a row that is not there.
func refused(ok bool, err error) bool {
	return !ok && (err == nil || errors.Is(err, toolplane.ErrNotFound))
}

// shuffled answers the indexes 0..n-1 (n below 7919) in an order unrelated
// to n, so rows are inserted out of list order and a backend that answers
// insertion order fails.
func shuffled(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = (i*7919 + 13) % n // 7919 is prime, so this is a permutation
	}
	return idx
}

// pageAll reads every page list answers, limit rows at a time, calling
// between (when set) after each page but the last, and fails t when a page
// breaks the paging contract: more rows than the limit, an empty page with
// a cursor, or no end.
func pageAll[T any](t *testing.T, what string, limit int, between func(), list func(after string) ([]T, string, error)) []T {
	t.Helper()
	var all []T
	after := ""
	for page := 0; ; page++ {
		if page > 100_000 {
			t.Fatalf("%s did not end after %d pages", what, page)
		}
		rows, next, err := list(after)
		if err != nil {
			t.Fatalf("%s(page %d) = %v", what, page, err)
		}
		if len(rows) > limit {
			t.Fatalf("%s(limit %d) answered %d rows", what, limit, len(rows))
		}
		all = append(all, rows...)
		if next == "" {
			return all
		}
		if len(rows) == 0 {
			t.Fatalf("%s answered an empty page with a next cursor", what)
		}
		after = next
		if between != nil {
			between()
		}
	}
}

// race prepares writers values of one contended row (prepare(i) is
// writer i's), then stores them all at once with attempt, and answers
// the one that won, failing the test unless exactly one did. attempt
// answers false for a loss the contract allows (a stale version, a row
// that exists) and an error for anything else, which is reported against
// op.
func race[T any](t *testing.T, op string, prepare func(i int) *T, attempt func(v *T) (bool, error)) *T {
	t.Helper()
	var wins atomic.Int64
	var winner atomic.Pointer[T]
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			v := prepare(i)
			<-start
			ok, err := attempt(v)
			switch {
			case err != nil:
				t.Errorf("%s(writer %d) = %v", op, i, err)
			case ok:
				wins.Add(1)
				winner.Store(v)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d of %d concurrent %s calls won, want exactly 1", n, writers, op)
	}
	return winner.Load()
}

// inserted reads an insert's answer for race: stored, or lost to a row
// that exists.
func inserted(err error) (bool, error) {
	if errors.Is(err, toolplane.ErrExists) {
		return false, nil
	}
	return err == nil, err
}
