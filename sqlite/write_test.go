package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// walPages answers how many pages the WAL holds and how many of them a
// checkpoint has copied into the database file, without checkpointing.
// While a writer commits, the look can answer busy (and -1 for both); it
// is taken again until it is not.
func walPages(t *testing.T, s *Store) (wal, copied int) {
	t.Helper()
	for {
		var busy int
		if err := s.db.QueryRowContext(t.Context(), `PRAGMA wal_checkpoint(NOOP)`).Scan(&busy, &wal, &copied); err != nil {
			t.Fatal(err)
		}
		if busy == 0 {
			return wal, copied
		}
		select {
		case <-t.Context().Done():
			t.Fatal("the WAL stayed busy until the test ended")
		case <-time.After(time.Millisecond):
		}
	}
}

func testClaim(org, key string, now time.Time) *toolplane.Claim {
	return &toolplane.Claim{
		OrganizationID: org, Tool: "crm.update", Key: key, RequestHash: "sha256:" + key,
		Status: toolplane.ClaimProcessing, Owner: "node/1/1", LeaseUntil: now.Add(time.Minute),
		RunID: "run-1", StepPath: "agent", Arguments: []byte(`{"to":"p1"}`),
		Version: 7, CreatedAt: now, UpdatedAt: now,
	}
}

// TestDispatchMarkWritesOnePage keeps the dispatch mark (a processing claim
// staying processing under its lease) off the indexes: it is written before
// every handler runs, and each index page it wrote was one more page
// appended to the WAL, and copied back by a checkpoint, per write call.
func TestDispatchMarkWritesOnePage(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := testClaim("org", "k", now)
	if ok, err := s.InsertClaim(ctx, c); !ok || err != nil {
		t.Fatalf("InsertClaim = %v, %v", ok, err)
	}
	before, _ := walPages(t, s)
	c.Dispatched, c.Attempts, c.UpdatedAt = true, 1, now.Add(time.Millisecond)
	if ok, err := s.UpdateClaim(ctx, c); !ok || err != nil {
		t.Fatalf("UpdateClaim(dispatch) = %v, %v", ok, err)
	}
	if after, _ := walPages(t, s); after-before != 1 {
		t.Errorf("the dispatch mark wrote %d pages, want 1 (the row's)", after-before)
	}

	// The sweep still finds it once its lease ends, and completing it moves
	// it from the lease index to the retention one.
	expired, err := s.ExpiredClaims(ctx, now.Add(time.Hour), 10)
	if err != nil || len(expired) != 1 || !expired[0].Dispatched {
		t.Fatalf("ExpiredClaims = %+v, %v; want the dispatched claim", expired, err)
	}
	c.Status, c.LeaseUntil, c.Owner, c.UpdatedAt = toolplane.ClaimCompleted, time.Time{}, "", now.Add(time.Second)
	if ok, err := s.UpdateClaim(ctx, c); !ok || err != nil {
		t.Fatalf("UpdateClaim(complete) = %v, %v", ok, err)
	}
	if expired, err := s.ExpiredClaims(ctx, now.Add(time.Hour), 10); err != nil || len(expired) != 0 {
		t.Fatalf("ExpiredClaims after completion = %+v, %v; want none", expired, err)
	}
	if n, err := s.DeleteCompletedClaims(ctx, now.Add(time.Hour), 10); n != 1 || err != nil {
		t.Fatalf("DeleteCompletedClaims = %d, %v; want 1", n, err)
	}
}

// TestCheckpointsInBackground: once enough pages wait in the WAL, a commit
// starts a checkpoint that copies them into the database file from a
// goroutine of its own, well before a commit would checkpoint in line.
func TestCheckpointsInBackground(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := 0; ; i++ {
		insertPage(t, s, now, i)
		if wal, _ := walPages(t, s); wal >= checkpointPages+checkpointLookEvery*8 {
			break
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, copied := walPages(t, s); copied > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no background checkpoint copied the WAL")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCheckpointStartsTheWALAgain: writes go on while a checkpoint copies
// the WAL, and still the WAL starts again from its beginning after it, so
// it does not grow under a load that never pauses.
func TestCheckpointStartsTheWALAgain(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// A write must land while the checkpoint runs; on a machine too busy
	// to schedule the writer then, the whole round is tried again.
	for round := range 5 {
		for i := range 200 {
			insertPage(t, s, now, round*1000+i)
		}
		// Those inserts may have started a background checkpoint, which
		// would hold SQLite's checkpoint lock against the one under test:
		// wait for it to end, and keep another from starting.
		for !s.checkpointing.CompareAndSwap(false, true) {
			time.Sleep(time.Millisecond)
		}
		var written atomic.Int64
		stop, stopped := make(chan struct{}), make(chan struct{})
		started := make(chan struct{})
		go func() {
			defer close(stopped)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				c := testClaim("org", fmt.Sprintf("during-%d-%d", round, n), now)
				if ok, err := s.InsertClaim(ctx, c); !ok || err != nil {
					t.Errorf("InsertClaim during the checkpoint = %v, %v", ok, err)
					return
				}
				if written.Add(1) == 1 {
					close(started)
				}
			}
		}()
		<-started
		before, _ := walPages(t, s)
		from := written.Load()
		s.checkpoint()
		during := written.Load() - from
		close(stop)
		<-stopped
		if during == 0 {
			continue
		}
		insertPage(t, s, now, -1-round)
		if after, _ := walPages(t, s); after >= before {
			t.Errorf("the WAL held %d pages before the checkpoint and %d after it and the next commit; want it started again", before, after)
		}
		return
	}
	t.Fatal("in five rounds no write ran while the checkpoint did")
}

// insertPage inserts claim i with arguments of about a page.
func insertPage(t *testing.T, s *Store, now time.Time, i int) {
	t.Helper()
	c := testClaim("org", strings.Repeat("k", 64)+strconv.Itoa(i), now)
	c.Arguments = []byte(strings.Repeat("x", 3000))
	if ok, err := s.InsertClaim(t.Context(), c); !ok || err != nil {
		t.Fatalf("InsertClaim = %v, %v", ok, err)
	}
}

// TestWriteWaitsForContext: a write queued behind another gives up when its
// context ends, as it did when it waited at SQLite's lock.
func TestWriteWaitsForContext(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	if err := s.lockWrite(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	c := testClaim("org", "k", time.Now())
	if _, err := s.InsertClaim(ctx, c); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("InsertClaim behind another write = %v, want context.DeadlineExceeded", err)
	}
	s.unlockWrite()
	if ok, err := s.InsertClaim(t.Context(), c); !ok || err != nil {
		t.Errorf("InsertClaim once the write ended = %v, %v", ok, err)
	}
}

// TestClaimAndCompletionPages holds the pages a write call's claim and
// completion append to the WAL on a small store, where each table and
// index is one page: the claim writes the row, its key and the two
// indexes of claims in flight (by lease, by node); the completion the
// row, its leaving those two and its entry in the retention index. Neither
// touches claims_by_status, which holds uncertain claims alone: an entry
// added by the claim and removed by the completion was two pages a call
// that nothing read (migration 0050).
func TestClaimAndCompletionPages(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := testClaim("org", "k", now)
	c.Node = "node-1"
	before, _ := walPages(t, s)
	if ok, err := s.InsertClaim(ctx, c); !ok || err != nil {
		t.Fatalf("InsertClaim = %v, %v", ok, err)
	}
	after, _ := walPages(t, s)
	if got := after - before; got != 4 {
		t.Errorf("the claim wrote %d pages, want 4 (the row, its key, by lease, by node)", got)
	}
	before = after
	c.Status, c.Owner, c.Result, c.Arguments, c.UpdatedAt = toolplane.ClaimCompleted, "", []byte(`{"ok":true}`), nil, now.Add(time.Second)
	if ok, err := s.UpdateClaim(ctx, c); !ok || err != nil {
		t.Fatalf("UpdateClaim(complete) = %v, %v", ok, err)
	}
	after, _ = walPages(t, s)
	if got := after - before; got != 4 {
		t.Errorf("the completion wrote %d pages, want 4 (the row, out of by lease and by node, into by update)", got)
	}

	// An uncertain claim is still listed and counted by its organization.
	u := testClaim("org", "u", now)
	if ok, err := s.InsertClaim(ctx, u); !ok || err != nil {
		t.Fatalf("InsertClaim = %v, %v", ok, err)
	}
	u.Status, u.UpdatedAt = toolplane.ClaimUncertain, now.Add(time.Second)
	if ok, err := s.UpdateClaim(ctx, u); !ok || err != nil {
		t.Fatalf("UpdateClaim(uncertain) = %v, %v", ok, err)
	}
	if got, _, err := s.ListClaims(ctx, "org", toolplane.ClaimUncertain, "", 10); err != nil || len(got) != 1 || got[0].Key != "u" {
		t.Errorf("ListClaims(uncertain) = %+v, %v; want the one uncertain claim", got, err)
	}
	if n, err := s.CountOrgClaims(ctx, "org", toolplane.ClaimUncertain, 10); n != 1 || err != nil {
		t.Errorf("CountOrgClaims(uncertain) = %d, %v; want 1", n, err)
	}
}
