package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// VendorCeilingStore is what RunVendorCeilings needs of a backend: a
// store and its vendor ceilings.
type VendorCeilingStore interface {
	toolplane.Store
	toolplane.VendorCeilingStore
}

// The vendor ceilings contract, beyond toolplane.VendorCeilingStore's
// comments:
//
//   - One row per organization and provider; no read, update, delete or
//     list reaches another organization's.
//   - Lanes and their shapes are kept as JSON keeps them: an empty list is
//     no list.
//   - Every write and its change record are stored together or not at
//     all: a stale write, or one whose change ID is taken, stores neither.
//   - Concurrent updates from one Version: exactly one succeeds.
var vendorCeilingCases = []struct {
	name string
	run  func(t *testing.T, s VendorCeilingStore)
}{
	{"RoundTrip", testVendorCeilingRoundTrip},
	{"CompareAndSet", testVendorCeilingCompareAndSet},
	{"Recorded", testVendorCeilingRecorded},
	{"ConcurrentUpdate", testVendorCeilingConcurrentUpdate},
	{"Isolation", testVendorCeilingIsolation},
}

// RunVendorCeilings runs the vendor ceiling checks as subtests of t, named
// VendorCeilings/Check, each on a store newStore answers.
func RunVendorCeilings(t *testing.T, newStore func(t *testing.T) VendorCeilingStore) {
	t.Helper()
	t.Run("VendorCeilings", func(t *testing.T) {
		t.Parallel()
		for _, c := range vendorCeilingCases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, newStore(t))
			})
		}
	})
}

func newVendorCeiling(org, provider string) *toolplane.VendorCeiling {
	call := func(p string, n int64) toolplane.RunShape {
		return toolplane.RunShape{Kind: toolplane.ShapeCall, Provider: p, Fanout: n}
	}
	return &toolplane.VendorCeiling{OrganizationID: org, Provider: provider, AccountLimit: 100, Note: "plan: growth",
		Lanes: []toolplane.Lane{
			{Name: "interactive", ActiveRuns: 20, Shape: toolplane.RunShape{Kind: toolplane.ShapeParallel,
				Parts: []toolplane.RunShape{call(provider, 3), {Kind: toolplane.ShapeSequence, Parts: []toolplane.RunShape{call(provider, 0), call("other", 9)}}}}},
			{Name: "batch", ActiveRuns: 5, Shape: call(provider, 4)},
		},
		UpdatedBy: "ada@example.com", UpdatedAt: at(time.Minute), Version: 1}
}

func ceilingChange(org, kind string, d time.Duration) *toolplane.Change {
	return &toolplane.Change{ID: "chg-" + newOrg(), OrganizationID: org, Kind: kind, Subject: "vendor:exa",
		Actor: "ada@example.com", Detail: []byte(`{"provider":"exa"}`), CreatedAt: at(d)}
}

func wantCeiling(t *testing.T, s VendorCeilingStore, want *toolplane.VendorCeiling) {
	t.Helper()
	got, err := s.GetVendorCeiling(t.Context(), want.OrganizationID, want.Provider)
	if err != nil {
		t.Fatalf("GetVendorCeiling: %v", err)
	}
	if d := diff(*got, *want); d != "" {
		t.Fatalf("GetVendorCeiling: %s", d)
	}
}

func testVendorCeilingRoundTrip(t *testing.T, s VendorCeilingStore) {
	ctx, org := t.Context(), newOrg()
	if _, err := s.GetVendorCeiling(ctx, org, "exa"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetVendorCeiling before insert = %v, want ErrNotFound", err)
	}
	if got, err := s.ListVendorCeilings(ctx, org); err != nil || len(got) != 0 {
		t.Fatalf("ListVendorCeilings before insert = %v, %v; want none", got, err)
	}
	want := newVendorCeiling(org, "exa")
	if err := s.InsertVendorCeiling(ctx, want, ceilingChange(org, "vendor_ceiling.set", 0)); err != nil {
		t.Fatal(err)
	}
	wantCeiling(t, s, want)
	again := newVendorCeiling(org, "exa")
	if err := s.InsertVendorCeiling(ctx, again, ceilingChange(org, "vendor_ceiling.set", 0)); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("a second InsertVendorCeiling = %v, want ErrExists", err)
	}
	// No lanes: the account limit alone, recorded before the lanes are.
	bare := &toolplane.VendorCeiling{OrganizationID: org, Provider: "apollo", AccountLimit: 7, UpdatedBy: "ada@example.com", UpdatedAt: at(time.Hour), Version: 1}
	if err := s.InsertVendorCeiling(ctx, bare, ceilingChange(org, "vendor_ceiling.set", 0)); err != nil {
		t.Fatal(err)
	}
	wantCeiling(t, s, bare)
	got, err := s.ListVendorCeilings(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Provider != "apollo" || got[1].Provider != "exa" {
		t.Fatalf("ListVendorCeilings = %+v, want apollo then exa", got)
	}
	if d := diff(got[1], *want); d != "" {
		t.Fatalf("ListVendorCeilings: %s", d)
	}
}

func testVendorCeilingCompareAndSet(t *testing.T, s VendorCeilingStore) {
	ctx, org := t.Context(), newOrg()
	stored := newVendorCeiling(org, "exa")
	if err := s.InsertVendorCeiling(ctx, stored, ceilingChange(org, "vendor_ceiling.set", 0)); err != nil {
		t.Fatal(err)
	}
	next := *stored
	next.AccountLimit, next.Lanes, next.Note, next.UpdatedBy, next.UpdatedAt = 250, stored.Lanes[1:], "", "bob@example.com", at(time.Hour)
	if ok, err := s.UpdateVendorCeiling(ctx, &next, ceilingChange(org, "vendor_ceiling.set", time.Hour)); !ok || err != nil {
		t.Fatalf("UpdateVendorCeiling = %v, %v", ok, err)
	}
	if next.Version != 2 {
		t.Fatalf("after an update Version = %d, want 2", next.Version)
	}
	wantCeiling(t, s, &next)
	stale := *stored // at version 1
	stale.AccountLimit = 1
	if ok, err := s.UpdateVendorCeiling(ctx, &stale, ceilingChange(org, "vendor_ceiling.set", 2*time.Hour)); ok || err != nil {
		t.Fatalf("a stale UpdateVendorCeiling = %v, %v; want false, nil", ok, err)
	}
	if stale.Version != 1 {
		t.Fatalf("a stale update moved the argument's Version to %d", stale.Version)
	}
	missing := *newVendorCeiling(org, "nobody")
	if ok, err := s.UpdateVendorCeiling(ctx, &missing, ceilingChange(org, "vendor_ceiling.set", 2*time.Hour)); ok || err != nil {
		t.Fatalf("UpdateVendorCeiling of none = %v, %v; want false, nil", ok, err)
	}
	wantCeiling(t, s, &next)
	if ok, err := s.DeleteVendorCeiling(ctx, org, "exa", 1, ceilingChange(org, "vendor_ceiling.delete", 3*time.Hour)); ok || err != nil {
		t.Fatalf("a stale DeleteVendorCeiling = %v, %v; want false, nil", ok, err)
	}
	wantCeiling(t, s, &next)
	if ok, err := s.DeleteVendorCeiling(ctx, org, "exa", 2, ceilingChange(org, "vendor_ceiling.delete", 3*time.Hour)); !ok || err != nil {
		t.Fatalf("DeleteVendorCeiling = %v, %v", ok, err)
	}
	if _, err := s.GetVendorCeiling(ctx, org, "exa"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetVendorCeiling after delete = %v, want ErrNotFound", err)
	}
	if ok, err := s.DeleteVendorCeiling(ctx, org, "exa", 2, ceilingChange(org, "vendor_ceiling.delete", 3*time.Hour)); ok || err != nil {
		t.Fatalf("DeleteVendorCeiling of none = %v, %v; want false, nil", ok, err)
	}
}

// Every write is stored with its change record or not at all.
func testVendorCeilingRecorded(t *testing.T, s VendorCeilingStore) {
	ctx, org := t.Context(), newOrg()
	changes := func() []toolplane.Change {
		t.Helper()
		got, _, err := s.ListChanges(ctx, org, "", "", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := ceilingChange(org, "vendor_ceiling.set", 0)
	stored := newVendorCeiling(org, "exa")
	if err := s.InsertVendorCeiling(ctx, stored, first); err != nil {
		t.Fatal(err)
	}
	if got := changes(); len(got) != 1 || diff(got[0], *first) != "" {
		t.Fatalf("changes after an insert = %+v, want its record alone", got)
	}
	// A change ID taken: the write is undone.
	taken := *first
	taken.CreatedAt = at(time.Hour)
	other := newVendorCeiling(org, "apollo")
	if err := s.InsertVendorCeiling(ctx, other, &taken); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("an insert whose change ID is taken = %v, want ErrExists", err)
	}
	if _, err := s.GetVendorCeiling(ctx, org, "apollo"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("an insert whose change was refused was stored: %v", err)
	}
	next := *stored
	next.AccountLimit = 500
	if ok, err := s.UpdateVendorCeiling(ctx, &next, &taken); ok || !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("an update whose change ID is taken = %v, %v; want ErrExists", ok, err)
	}
	if ok, err := s.DeleteVendorCeiling(ctx, org, "exa", 1, &taken); ok || !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("a delete whose change ID is taken = %v, %v; want ErrExists", ok, err)
	}
	wantCeiling(t, s, stored)
	// A stale write records nothing.
	stale := *stored
	stale.Version = 9
	if ok, err := s.UpdateVendorCeiling(ctx, &stale, ceilingChange(org, "vendor_ceiling.set", time.Hour)); ok || err != nil {
		t.Fatalf("a stale update = %v, %v", ok, err)
	}
	if ok, err := s.DeleteVendorCeiling(ctx, org, "exa", 9, ceilingChange(org, "vendor_ceiling.delete", time.Hour)); ok || err != nil {
		t.Fatalf("a stale delete = %v, %v", ok, err)
	}
	if got := changes(); len(got) != 1 {
		t.Fatalf("after refused and stale writes %d changes, want 1", len(got))
	}
	if ok, err := s.UpdateVendorCeiling(ctx, &next, ceilingChange(org, "vendor_ceiling.set", 2*time.Hour)); !ok || err != nil {
		t.Fatalf("UpdateVendorCeiling = %v, %v", ok, err)
	}
	if ok, err := s.DeleteVendorCeiling(ctx, org, "exa", 2, ceilingChange(org, "vendor_ceiling.delete", 3*time.Hour)); !ok || err != nil {
		t.Fatalf("DeleteVendorCeiling = %v, %v", ok, err)
	}
	if got := changes(); len(got) != 3 || got[0].Kind != "vendor_ceiling.delete" {
		t.Fatalf("changes = %+v, want the delete newest of 3", got)
	}
}

func testVendorCeilingConcurrentUpdate(t *testing.T, s VendorCeilingStore) {
	ctx, org := t.Context(), newOrg()
	stored := newVendorCeiling(org, "exa")
	if err := s.InsertVendorCeiling(ctx, stored, ceilingChange(org, "vendor_ceiling.set", 0)); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var (
		wg   sync.WaitGroup
		wins atomic.Int32
	)
	for i := range n {
		wg.Go(func() {
			c := *stored
			c.AccountLimit = int64(200 + i)
			ok, err := s.UpdateVendorCeiling(ctx, &c, ceilingChange(org, "vendor_ceiling.set", time.Hour))
			if err != nil {
				t.Errorf("UpdateVendorCeiling: %v", err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if got := wins.Load(); got != 1 {
		t.Fatalf("%d of %d concurrent updates from one version succeeded, want 1", got, n)
	}
	got, err := s.GetVendorCeiling(ctx, org, "exa")
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 {
		t.Fatalf("Version = %d, want 2", got.Version)
	}
}

// One organization never reads, changes or removes another's ceiling.
func testVendorCeilingIsolation(t *testing.T, s VendorCeilingStore) {
	ctx, mine, theirs := t.Context(), newOrg(), newOrg()
	stored := newVendorCeiling(mine, "exa")
	if err := s.InsertVendorCeiling(ctx, stored, ceilingChange(mine, "vendor_ceiling.set", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetVendorCeiling(ctx, theirs, "exa"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("another organization's GetVendorCeiling = %v, want ErrNotFound", err)
	}
	if got, err := s.ListVendorCeilings(ctx, theirs); err != nil || len(got) != 0 {
		t.Fatalf("another organization's ListVendorCeilings = %+v, %v; want none", got, err)
	}
	forged := *stored
	forged.OrganizationID, forged.AccountLimit = theirs, 1
	if ok, err := s.UpdateVendorCeiling(ctx, &forged, ceilingChange(theirs, "vendor_ceiling.set", time.Hour)); ok || err != nil {
		t.Fatalf("another organization's UpdateVendorCeiling = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.DeleteVendorCeiling(ctx, theirs, "exa", 1, ceilingChange(theirs, "vendor_ceiling.delete", time.Hour)); ok || err != nil {
		t.Fatalf("another organization's DeleteVendorCeiling = %v, %v; want false, nil", ok, err)
	}
	// The other organization may hold its own ceiling of the same vendor.
	own := newVendorCeiling(theirs, "exa")
	own.AccountLimit = 3
	if err := s.InsertVendorCeiling(ctx, own, ceilingChange(theirs, "vendor_ceiling.set", time.Hour)); err != nil {
		t.Fatalf("another organization's own ceiling of the vendor: %v", err)
	}
	wantCeiling(t, s, stored)
	wantCeiling(t, s, own)
	if got, _, err := s.ListChanges(ctx, theirs, "", "", "", 10); err != nil || len(got) != 1 {
		t.Fatalf("the other organization's changes = %+v, %v; want its own insert alone", got, err)
	}
}
