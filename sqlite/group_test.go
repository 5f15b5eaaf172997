package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// queued waits until n writes wait in the store's queue (the leader among
// them, held at the write lock the test holds).
func queued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s.groups.mu.Lock()
		got := len(s.groups.queue)
		s.groups.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// insertClaims stores n processing claims of the organization "org",
// keyed k0, k1, ...
func insertClaims(t *testing.T, s *Store, n int, now time.Time) []*toolplane.Claim {
	t.Helper()
	claims := make([]*toolplane.Claim, n)
	for i := range claims {
		claims[i] = testClaim("org", fmt.Sprint("k", i), now)
		if ok, err := s.InsertClaim(t.Context(), claims[i]); !ok || err != nil {
			t.Fatalf("InsertClaim = %v, %v", ok, err)
		}
	}
	return claims
}

// TestGroupKeepsEachWriteAtomic: writes that queue while another commits
// run as one group, and still each is all or nothing: a completion whose
// audit event cannot be stored stores neither the event nor the claim's
// change, and the others of its group are stored whole.
func TestGroupKeepsEachWriteAtomic(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const n = 8
	claims := insertClaims(t, s, n, now)
	event := func(id string) *toolplane.AuditEvent {
		return &toolplane.AuditEvent{ID: id, OrganizationID: "org", Tool: "crm.update", Source: toolplane.SourceREST, Outcome: "ok", CreatedAt: now}
	}
	if err := s.AppendAudit(ctx, event("ev-taken")); err != nil {
		t.Fatal(err)
	}

	if err := s.lockWrite(ctx); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n)
	oks := make([]bool, n)
	var wg sync.WaitGroup
	for i, c := range claims {
		wg.Go(func() {
			next := *c
			next.Status, next.Result, next.Owner, next.UpdatedAt = toolplane.ClaimCompleted, []byte(`{"ok":true}`), "", now.Add(time.Second)
			id := fmt.Sprint("ev-", i)
			if i%2 == 1 {
				id = "ev-taken" // a duplicate: this write must store nothing
			}
			oks[i], errs[i] = s.UpdateClaimAudited(ctx, &next, event(id))
			*c = next
		})
		queued(t, s, i+1) // in order, so the group runs them in order
	}
	s.unlockWrite()
	wg.Wait()

	for i, c := range claims {
		stored, err := s.GetClaim(ctx, "org", c.Tool, c.Key)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			if !errors.Is(errs[i], toolplane.ErrExists) || oks[i] {
				t.Errorf("write %d with a taken event ID = %v, %v; want ErrExists", i, oks[i], errs[i])
			}
			if stored.Status != toolplane.ClaimProcessing || stored.Version != 7 || c.Version != 7 {
				t.Errorf("write %d failed but stored %s version %d (caller's %d); want processing, 7", i, stored.Status, stored.Version, c.Version)
			}
			continue
		}
		if errs[i] != nil || !oks[i] {
			t.Errorf("write %d = %v, %v; want stored", i, oks[i], errs[i])
		}
		if stored.Status != toolplane.ClaimCompleted || stored.Version != 8 || c.Version != 8 {
			t.Errorf("write %d stored %s version %d (caller's %d); want completed, 8", i, stored.Status, stored.Version, c.Version)
		}
	}
	evs, _, err := s.ListAudit(ctx, "org", toolplane.AuditFilter{}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1+n/2 {
		t.Errorf("%d audit events stored, want %d (the taken one and the stored writes')", len(evs), 1+n/2)
	}
}

// TestGroupCommitsOnce: dispatch marks queued together are one commit, so
// their claims' shared page is appended to the WAL once, not once each.
func TestGroupCommitsOnce(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const n = 8
	claims := insertClaims(t, s, n, now)
	before, _ := walPages(t, s)
	if err := s.lockWrite(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, c := range claims {
		wg.Go(func() {
			c.Dispatched, c.Attempts, c.UpdatedAt = true, 1, now.Add(time.Millisecond)
			if ok, err := s.UpdateClaim(ctx, c); !ok || err != nil {
				t.Errorf("UpdateClaim(dispatch) = %v, %v", ok, err)
			}
		})
		queued(t, s, i+1)
	}
	s.unlockWrite()
	wg.Wait()
	if after, _ := walPages(t, s); after-before != 1 {
		t.Errorf("%d dispatch marks queued together appended %d pages, want 1 (their claims' page, once)", n, after-before)
	}
	for _, c := range claims {
		stored, err := s.GetClaim(ctx, "org", c.Tool, c.Key)
		if err != nil || !stored.Dispatched || stored.Version != c.Version {
			t.Errorf("claim %s after its dispatch mark: %+v, %v", c.Key, stored, err)
		}
	}
}

// TestQueuedWriteLeavesWithItsContext: a write whose context ends while it
// waits in the queue answers the context's error and stores nothing, and
// the writes around it are stored.
func TestQueuedWriteLeavesWithItsContext(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := s.lockWrite(ctx); err != nil {
		t.Fatal(err)
	}
	insert := func(ctx context.Context, key string) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := s.InsertClaim(ctx, testClaim("org", key, now))
			done <- err
		}()
		return done
	}
	first := insert(ctx, "first")
	queued(t, s, 1)
	gone, cancel := context.WithCancel(ctx)
	left := insert(gone, "left")
	queued(t, s, 2)
	last := insert(ctx, "last")
	queued(t, s, 3)
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("the write whose context ended = %v, want context.Canceled", err)
	}
	s.unlockWrite()
	for _, done := range []chan error{first, last} {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	for key, want := range map[string]error{"first": nil, "left": toolplane.ErrNotFound, "last": nil} {
		if _, err := s.GetClaim(ctx, "org", "crm.update", key); !errors.Is(err, want) && err != want {
			t.Errorf("GetClaim(%s) = %v, want %v", key, err, want)
		}
	}
}

// TestPanickingWriteEndsItsGroup: a write that panics answers an error and
// stores nothing, the writes grouped with it are stored, and the store
// goes on taking writes (its leader handed the lead on).
func TestPanickingWriteEndsItsGroup(t *testing.T) {
	t.Parallel()
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprint("grouped=", grouped), func(t *testing.T) {
			t.Parallel()
			s := newTestStore(t)
			ctx := t.Context()
			now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			// The panicking write copies this row before it panics, so
			// that a row of its is there to be rolled back, alone or
			// grouped.
			if ok, err := s.InsertClaim(ctx, testClaim("org", "seed", now)); !ok || err != nil {
				t.Fatalf("InsertClaim = %v, %v", ok, err)
			}
			if err := s.lockWrite(ctx); err != nil {
				t.Fatal(err)
			}
			insert := func(key string) chan error {
				done := make(chan error, 1)
				go func() {
					_, err := s.InsertClaim(ctx, testClaim("org", key, now))
					done <- err
				}()
				return done
			}
			var before chan error
			if grouped {
				before = insert("before")
				queued(t, s, 1)
			}
			panicked := make(chan error, 1)
			go func() {
				panicked <- s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, `INSERT INTO claims (`+claimColumns+`)
						SELECT 'org', tool, 'panicked', request_hash, status, result, owner, lease_until, dispatched,
							attempts, run_id, step_path, arguments, reason, reconciled_by, note, version, created_at,
							updated_at, invocation, node FROM claims WHERE key = 'seed'`); err != nil {
						return err
					}
					panic("a bug")
				})
			}()
			if grouped {
				queued(t, s, 2)
			} else {
				queued(t, s, 1)
			}
			s.unlockWrite()
			if err := <-panicked; err == nil {
				t.Error("a write that panicked answered no error")
			}
			if grouped {
				if err := <-before; err != nil {
					t.Errorf("the write grouped with it = %v", err)
				}
			}
			if err := <-insert("after"); err != nil {
				t.Errorf("a write after it = %v", err)
			}
			if _, err := s.GetClaim(ctx, "org", "crm.update", "panicked"); !errors.Is(err, toolplane.ErrNotFound) {
				t.Errorf("the panicked write's row: %v, want none", err)
			}
		})
	}
}

// groupOf queues writes while the test holds the write lock, so that they
// run as one group, in order; it answers each write's answer once the
// group has run.
func groupOf(t *testing.T, s *Store, writes ...func() error) []error {
	t.Helper()
	if err := s.lockWrite(t.Context()); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Go(func() { errs[i] = w() })
		queued(t, s, i+1)
	}
	s.unlockWrite()
	wg.Wait()
	return errs
}

// TestGroupRolledBackWholeAnswersEveryWrite: a write whose failure makes
// SQLite roll back the whole transaction (here a trigger's RAISE(ROLLBACK),
// as a full disk would) takes the writes of its group with it: each
// answers an error, none is stored, and the store goes on taking writes.
func TestGroupRolledBackWholeAnswersEveryWrite(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE boom (x INTEGER);
		CREATE TRIGGER boom_rolls_back BEFORE INSERT ON boom BEGIN SELECT RAISE(ROLLBACK, 'boom'); END`); err != nil {
		t.Fatal(err)
	}
	insert := func(key string) func() error {
		return func() error {
			_, err := s.InsertClaim(ctx, testClaim("org", key, now))
			return err
		}
	}
	errs := groupOf(t, s, insert("before"), func() error {
		return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO boom (x) VALUES (1)`)
			return err
		})
	}, insert("after"))
	if errs[1] == nil {
		t.Error("the write rolled back whole answered no error")
	}
	for _, i := range []int{0, 2} {
		// Each says why: the failure that rolled the group back.
		var cause *modernc.Error
		if !errors.Is(errs[i], errGroupAborted) || !errors.As(errs[i], &cause) || cause.Code() != sqlite3.SQLITE_CONSTRAINT_TRIGGER {
			t.Errorf("write %d of the group = %v, want errGroupAborted with the trigger's error", i, errs[i])
		}
	}
	for _, key := range []string{"before", "after"} {
		if _, err := s.GetClaim(ctx, "org", "crm.update", key); !errors.Is(err, toolplane.ErrNotFound) {
			t.Errorf("GetClaim(%s) = %v, want ErrNotFound", key, err)
		}
	}
	if err := insert("later")(); err != nil {
		t.Errorf("a write after the group = %v", err)
	}
}

// TestWriteWhoseContextEndsBeforeTheSecondRun: a write that ran in its
// group's first run, rolled back because another write of the group
// failed, answers its context's error and stores nothing when that
// context ended before the group ran again; the rest are stored.
func TestWriteWhoseContextEndsBeforeTheSecondRun(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	gone, cancel := context.WithCancel(ctx)
	defer cancel()
	refused := errors.New("refused")
	errs := groupOf(t, s, func() error {
		_, err := s.InsertClaim(gone, testClaim("org", "gone", now))
		return err
	}, func() error {
		return s.write(ctx, func(context.Context, *sql.Tx) error {
			cancel() // after the first write ran
			return refused
		})
	}, func() error {
		_, err := s.InsertClaim(ctx, testClaim("org", "kept", now))
		return err
	})
	if !errors.Is(errs[0], context.Canceled) || !errors.Is(errs[1], refused) || errs[2] != nil {
		t.Errorf("the group answered %v; want context.Canceled, refused, nil", errs)
	}
	if _, err := s.GetClaim(ctx, "org", "crm.update", "gone"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("the write whose context ended: %v, want ErrNotFound", err)
	}
	if _, err := s.GetClaim(ctx, "org", "crm.update", "kept"); err != nil {
		t.Errorf("the write after the failing one: %v", err)
	}
}

// TestUnknownOAuthStateRunsItsGroupOnce: a callback's state that is not
// there (anyone can send one) is an answer, not a failed write, so the
// writes grouped with it run once.
func TestUnknownOAuthStateRunsItsGroupOnce(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	runs := 0
	errs := groupOf(t, s, func() error {
		return s.write(ctx, func(context.Context, *sql.Tx) error {
			runs++
			return nil
		})
	}, func() error {
		_, err := s.TakeOAuthState(ctx, "made-up", time.Now())
		return err
	})
	if errs[0] != nil || !errors.Is(errs[1], toolplane.ErrNotFound) {
		t.Errorf("the group answered %v; want nil, ErrNotFound", errs)
	}
	if runs != 1 {
		t.Errorf("the write grouped with the unknown state ran %d times, want 1", runs)
	}
}
