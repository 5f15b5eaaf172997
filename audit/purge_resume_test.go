package audit_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/auditchain"
)

// resumeFixture is an organization with five events a day apart from
// start, a signing key, and a purge service on a clock the test moves.
type resumeFixture struct {
	s     purgeStore
	org   string
	keys  *auditchain.KeySet
	now   time.Time
	p     *audit.Purges
	start time.Time
}

func newResumeFixture(t *testing.T, s purgeStore, org string) *resumeFixture {
	t.Helper()
	f := &resumeFixture{s: s, org: org, keys: &auditchain.KeySet{}, start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := range 5 {
		e := &toolplane.AuditEvent{ID: org + "-ev-" + string(rune('a'+i)), OrganizationID: org, Tool: "email.send", Outcome: "ok",
			CreatedAt: f.start.Add(time.Duration(i) * 24 * time.Hour)}
		if err := s.AppendAudit(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.keys.Generate(f.start); err != nil {
		t.Fatal(err)
	}
	f.now = f.start.Add(30 * 24 * time.Hour)
	f.p = audit.NewPurges(audit.PurgesConfig{Store: s, Keys: f.keys, TTL: time.Hour, ResumeAfter: 10 * time.Minute,
		Now: func() time.Time { return f.now }})
	return f
}

// cutoff is a time after the first three events and before the others.
func (f *resumeFixture) cutoff() time.Time { return f.start.Add(2*24*time.Hour + time.Minute) }

// outcomes answers how many events of each retention outcome the chain
// holds, and checks it verifies.
func (f *resumeFixture) outcomes(t *testing.T) map[string]int {
	t.Helper()
	ctx := context.Background()
	r, err := auditchain.VerifyStore(ctx, f.s, f.keys, f.org, 0, 0)
	if err != nil || !r.OK {
		t.Fatalf("verify = %+v (break %+v), %v", r, r.Break, err)
	}
	evs, err := f.s.AuditChain(ctx, f.org, 0, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range evs {
		if e.Kind == toolplane.AuditRetention {
			n[e.Outcome]++
		}
	}
	return n
}

// wantDroppedOnce checks the first three events were dropped once: the
// first stored event is the fourth, one checkpoint (at 3) was written,
// and the chain holds one drop, one confirmation and one completion.
func (f *resumeFixture) wantDroppedOnce(t *testing.T) map[string]int {
	t.Helper()
	ctx := context.Background()
	if _, first, err := f.s.AuditHead(ctx, f.org); err != nil || first != 4 {
		t.Fatalf("the first stored event is %d, %v; want 4", first, err)
	}
	cps, err := f.s.AuditCheckpoints(ctx, f.org, 0, 0)
	if err != nil || len(cps) != 1 || cps[0].Seq != 3 {
		t.Fatalf("checkpoints = %+v, %v; want one, at 3", cps, err)
	}
	n := f.outcomes(t)
	if n["dropped"] != 1 || n["confirmed"] != 1 || n["completed"] != 1 {
		t.Fatalf("retention events = %v; want one confirmation, one drop and one completion", n)
	}
	return n
}

// TestAPurgeWhoseDropFailedIsResumed: a confirmation whose drop the
// database refuses is recorded (the purge is confirmed, not done) and
// answers that the drop did not finish; confirming it again is refused
// as unfinished; resuming it while the fault lasts fails and changes
// nothing; once the fault is gone, any platform admin of the
// organization (its proposer too) resumes it: the range is dropped once,
// under one checkpoint, with one drop event and one completion event, and
// the purge is done. Resuming a done purge, or another organization's,
// or without the role, is refused.
func TestAPurgeWhoseDropFailedIsResumed(t *testing.T) {
	t.Parallel()
	eachFaultyPurgeStore(t, func(t *testing.T, s purgeStore, fault func(bool)) {
		ctx := context.Background()
		f := newResumeFixture(t, s, "org-resume")
		ada, grace := person(f.org, "ada", toolplane.RolePlatformAdmin), person(f.org, "grace", toolplane.RolePlatformAdmin)
		pr, err := f.p.Propose(ctx, f.cutoff(), ada)
		if err != nil {
			t.Fatal(err)
		}
		fault(true)
		res, err := f.p.Confirm(ctx, pr.ID, grace)
		if !errors.Is(err, audit.ErrDropNotFinished) || len(res.Drops) != 0 {
			t.Fatalf("Confirm with the drop refused = %+v, %v; want an error saying the drop did not finish", res, err)
		}
		got, err := s.GetAuditPurge(ctx, f.org, pr.ID)
		if err != nil || got.ConfirmedBy != "grace" || got.StatusAt(f.now) != toolplane.PurgeConfirmed {
			t.Fatalf("the purge after the failed drop = %+v, %v; want confirmed by grace, not done", got, err)
		}
		if _, first, _ := s.AuditHead(ctx, f.org); first != 1 {
			t.Fatalf("the failed drop deleted events: the first stored is %d", first)
		}
		if n := f.outcomes(t); n["confirmed"] != 1 || n["dropped"] != 0 || n["completed"] != 0 {
			t.Fatalf("retention events after the failed drop = %v; want the confirmation only", n)
		}
		for _, by := range []*toolplane.Credential{grace, person(f.org, "joan", toolplane.RolePlatformAdmin)} {
			if _, err := f.p.Confirm(ctx, pr.ID, by); !errors.Is(err, audit.ErrPurgeUnfinished) {
				t.Fatalf("Confirm of a confirmed, unfinished purge by %s = %v; want ErrPurgeUnfinished", by.Subject, err)
			}
		}
		if _, err := f.p.Resume(ctx, pr.ID, ada); !errors.Is(err, audit.ErrDropNotFinished) {
			t.Fatalf("Resume while the database still refuses the drop = %v; want ErrDropNotFinished", err)
		}
		if n := f.outcomes(t); n["dropped"] != 0 || n["completed"] != 0 {
			t.Fatalf("retention events after a failed resume = %v", n)
		}

		fault(false)
		for _, c := range []struct {
			name string
			by   *toolplane.Credential
			want error
		}{
			{"by an auditor", person(f.org, "linus", toolplane.RoleAuditor), audit.ErrNotPlatformAdmin},
			{"of another organization", person("org-other", "grace", toolplane.RolePlatformAdmin), toolplane.ErrNotFound},
		} {
			if _, err := f.p.Resume(ctx, pr.ID, c.by); !errors.Is(err, c.want) {
				t.Fatalf("Resume %s = %v; want %v", c.name, err, c.want)
			}
		}
		f.now = f.now.Add(time.Minute)
		res, err = f.p.Resume(ctx, pr.ID, ada)
		if err != nil {
			t.Fatalf("Resume by the proposer = %v", err)
		}
		if len(res.Drops) != 1 || res.Drops[0].From != 1 || res.Drops[0].Through != 3 || res.Purge.StatusAt(f.now) != toolplane.PurgeDone {
			t.Fatalf("Resume = %+v; want events 1..3 dropped and the purge done", res)
		}
		f.wantDroppedOnce(t)
		evs, _ := s.AuditChain(ctx, f.org, 0, 0, 100)
		for _, e := range evs {
			if e.Outcome == "dropped" && (e.PrincipalID != "ada" || e.ApproverID != "grace" || e.ApprovalID != pr.ID) {
				t.Fatalf("the drop's event = %+v; want done by ada, under grace's confirmation of the purge", e)
			}
		}
		if _, err := f.p.Resume(ctx, pr.ID, grace); !errors.Is(err, audit.ErrPurgeDone) {
			t.Fatalf("Resume of a done purge = %v; want ErrPurgeDone", err)
		}
		f.now = f.now.Add(time.Hour)
		if done, err := f.p.FinishConfirmed(ctx); err != nil || len(done) != 0 {
			t.Fatalf("the purge job after the resume = %+v, %v; want nothing to finish", done, err)
		}
		f.wantDroppedOnce(t)
	})
}

// TestThePurgeJobFinishesAPurgeStoppedAfterItsConfirmation: a node that
// stopped once the confirmation was stored (the store's confirmation,
// with its event, and nothing after) leaves the purge confirmed; the
// purge job leaves it to its confirmer for ResumeAfter, then finishes
// it. A pass whose drop the database refuses reports it and changes
// nothing; the next pass drops the range once and completes the purge,
// recorded as the retention policy's under the two admins' purge; later
// passes find nothing.
func TestThePurgeJobFinishesAPurgeStoppedAfterItsConfirmation(t *testing.T) {
	t.Parallel()
	eachFaultyPurgeStore(t, func(t *testing.T, s purgeStore, fault func(bool)) {
		ctx := context.Background()
		f := newResumeFixture(t, s, "org-stopped")
		ada := person(f.org, "ada", toolplane.RolePlatformAdmin)
		pr, err := f.p.Propose(ctx, f.cutoff(), ada)
		if err != nil {
			t.Fatal(err)
		}
		// What Confirm stores before it drops, and the node stops.
		ev := toolplane.ControlEvent(person(f.org, "grace", toolplane.RolePlatformAdmin), toolplane.AuditRetention, "confirmed", pr.ID, f.now)
		if ok, err := s.ConfirmAuditPurge(ctx, f.org, pr.ID, "grace", f.now, ev); err != nil || !ok {
			t.Fatalf("ConfirmAuditPurge = %v, %v", ok, err)
		}
		// Another organization's purge, not confirmed: the job leaves it.
		other := newResumeFixture(t, s, "org-stopped-other")
		waiting, err := other.p.Propose(ctx, other.cutoff(), person(other.org, "ada", toolplane.RolePlatformAdmin))
		if err != nil {
			t.Fatal(err)
		}

		f.now = f.now.Add(5 * time.Minute)
		if done, err := f.p.FinishConfirmed(ctx); err != nil || len(done) != 0 {
			t.Fatalf("the job within ResumeAfter of the confirmation = %+v, %v; want it left to its confirmer", done, err)
		}
		f.now = f.now.Add(10 * time.Minute)
		fault(true)
		if done, err := f.p.FinishConfirmed(ctx); err == nil || !strings.Contains(err.Error(), pr.ID) || len(done) != 0 {
			t.Fatalf("the job with the drop refused = %+v, %v; want an error naming the purge", done, err)
		}
		if got, _ := s.GetAuditPurge(ctx, f.org, pr.ID); got.StatusAt(f.now) != toolplane.PurgeConfirmed {
			t.Fatalf("the purge after a failed pass = %+v; want confirmed, not done", got)
		}
		fault(false)
		done, err := f.p.FinishConfirmed(ctx)
		if err != nil || len(done) != 1 || done[0].Purge.ID != pr.ID || len(done[0].Drops) != 1 || done[0].Drops[0].Through != 3 {
			t.Fatalf("the job = %+v, %v; want the purge finished, events 1..3 dropped", done, err)
		}
		f.wantDroppedOnce(t)
		evs, _ := s.AuditChain(ctx, f.org, 0, 0, 100)
		last := evs[len(evs)-1]
		if last.Outcome != "completed" || last.PrincipalID != auditchain.RetentionPrincipal || last.ApprovalID != pr.ID || last.ApproverID != "grace" {
			t.Fatalf("the completion's event = %+v; want the retention policy's, under grace's confirmation", last)
		}
		for range 2 {
			if done, err := f.p.FinishConfirmed(ctx); err != nil || len(done) != 0 {
				t.Fatalf("a later pass = %+v, %v; want nothing to finish", done, err)
			}
		}
		f.wantDroppedOnce(t)
		if got, err := s.GetAuditPurge(ctx, other.org, waiting.ID); err != nil || got.StatusAt(f.now) != toolplane.PurgeProposed {
			t.Fatalf("the other organization's proposal = %+v, %v; want it still proposed", got, err)
		}
		if _, first, _ := s.AuditHead(ctx, other.org); first != 1 {
			t.Fatalf("the job dropped the other organization's events: its first stored is %d", first)
		}
	})
}

// overlappingStore is one node's view of the store while another node's
// pass runs beside it: its first read of the range to drop returns only
// once the other node's has read it too, so both set out to drop the
// same range.
type overlappingStore struct {
	purgeStore
	read *sync.WaitGroup
	once sync.Once
}

func (s *overlappingStore) AuditExpired(ctx context.Context, org string, before time.Time) (int64, int64, error) {
	first, through, err := s.purgeStore.AuditExpired(ctx, org, before)
	s.once.Do(func() {
		s.read.Done()
		s.read.Wait()
	})
	return first, through, err
}

// TestThePurgeJobOnTwoNodesAtOnceDropsOnce: a purge whose confirmer
// stopped, finished by two nodes' purge jobs at once (each read the range
// before either dropped it), is finished: its range dropped once, under
// one checkpoint, with one drop event and one completion event, and
// neither pass fails.
func TestThePurgeJobOnTwoNodesAtOnceDropsOnce(t *testing.T) {
	t.Parallel()
	eachPurgeStore(t, func(t *testing.T, s purgeStore) {
		ctx := context.Background()
		f := newResumeFixture(t, s, "org-twice")
		pr, err := f.p.Propose(ctx, f.cutoff(), person(f.org, "ada", toolplane.RolePlatformAdmin))
		if err != nil {
			t.Fatal(err)
		}
		ev := toolplane.ControlEvent(person(f.org, "grace", toolplane.RolePlatformAdmin), toolplane.AuditRetention, "confirmed", pr.ID, f.now)
		if ok, err := s.ConfirmAuditPurge(ctx, f.org, pr.ID, "grace", f.now, ev); err != nil || !ok {
			t.Fatalf("ConfirmAuditPurge = %v, %v", ok, err)
		}
		f.now = f.now.Add(15 * time.Minute)
		read := &sync.WaitGroup{}
		read.Add(2)
		var wg sync.WaitGroup
		dropped := make([]int, 2)
		for i := range 2 {
			node := audit.NewPurges(audit.PurgesConfig{Store: &overlappingStore{purgeStore: s, read: read}, Keys: f.keys,
				TTL: time.Hour, ResumeAfter: 10 * time.Minute, Now: func() time.Time { return f.now }})
			wg.Go(func() {
				done, err := node.FinishConfirmed(ctx)
				if err != nil || len(done) != 1 || done[0].Purge.DoneAt.IsZero() {
					t.Errorf("node %d's pass = %+v, %v; want the purge done", i+1, done, err)
					return
				}
				for _, d := range done[0].Drops {
					dropped[i] += d.Deleted
				}
			})
		}
		wg.Wait()
		if dropped[0]+dropped[1] != 3 {
			t.Fatalf("the passes answer %v rows deleted; want 3 in all", dropped)
		}
		f.wantDroppedOnce(t)
		if got, err := s.GetAuditPurge(ctx, f.org, pr.ID); err != nil || got.StatusAt(f.now) != toolplane.PurgeDone {
			t.Fatalf("the purge = %+v, %v; want done", got, err)
		}
	})
}
