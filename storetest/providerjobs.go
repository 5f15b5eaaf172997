package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// ProviderJobStore is a store with the provider jobs' storage.
type ProviderJobStore interface {
	toolplane.Store
	toolplane.ProviderJobStore
}

// providerJobCases are the checks RunProviderJobs runs.
var providerJobCases = []struct {
	name string
	run  func(t *testing.T, s ProviderJobStore)
}{
	{"ReserveOnce", testReserveOnce},
	{"ConcurrentReserve", testConcurrentReserve},
	{"Isolation", testProviderJobIsolation},
	{"BindOnce", testBindOnce},
	{"Transitions", testJobTransitions},
	{"Results", testJobResults},
	{"SettleOnce", testSettleOnce},
	{"ConcurrentSettle", testConcurrentSettle},
	{"Overdue", testOverdueJobs},
}

// RunProviderJobs runs the provider job checks as subtests of t, each on a
// store newStore answers (see Run).
func RunProviderJobs(t *testing.T, newStore func(t *testing.T) ProviderJobStore) {
	t.Helper()
	var checks []check
	for _, c := range providerJobCases {
		checks = append(checks, check{c.name, func(t *testing.T) { c.run(t, newStore(t)) }})
	}
	runChecks(t, "ProviderJobs", checks)
}

// newJob answers a reserved job of org under an id no other check uses.
func newJob(org string) *toolplane.ProviderJob {
	return &toolplane.ProviderJob{
		ID: toolplane.NewID("pj_"), OrganizationID: org, RootRunID: "root-1", RunID: "run-1",
		Tool: "enrich.submit", Key: "k\x00\xff1", StepPath: "agent", Provider: "enrich",
		Refs: []string{"b", "a", "c"}, State: toolplane.JobSubmitted,
		CreatedAt: at(0), UpdatedAt: at(0), ExpiresAt: at(time.Hour),
	}
}

func reserve(t *testing.T, s ProviderJobStore, j *toolplane.ProviderJob) *toolplane.ProviderJob {
	t.Helper()
	got, ok, err := s.ReserveProviderJob(t.Context(), j)
	if err != nil || !ok {
		t.Fatalf("ReserveProviderJob(%s) = %v, %v; want stored", j.ID, ok, err)
	}
	return got
}

func getJob(t *testing.T, s ProviderJobStore, org, id string) *toolplane.ProviderJob {
	t.Helper()
	j, err := s.GetProviderJob(t.Context(), org, id)
	if err != nil {
		t.Fatalf("GetProviderJob(%s) = %v", id, err)
	}
	return j
}

// testReserveOnce: a second reservation of the same id stores nothing and
// answers the first; the stored row is the one reserved, refs in order and
// the key byte for byte; the id in another organization is refused.
func testReserveOnce(t *testing.T, s ProviderJobStore) {
	org := newOrg()
	j := newJob(org)
	got := reserve(t, s, j)
	if d := diff(*got, *j); d != "" {
		t.Errorf("reserved job: %s", d)
	}
	again := *j
	again.Refs, again.RunID = []string{"x"}, "run-2"
	got, ok, err := s.ReserveProviderJob(t.Context(), &again)
	if err != nil || ok {
		t.Fatalf("second ReserveProviderJob = %v, %v; want not stored", ok, err)
	}
	if d := diff(*got, *j); d != "" {
		t.Errorf("second reservation answered another job: %s", d)
	}
	other := *j
	other.OrganizationID = newOrg()
	if _, _, err := s.ReserveProviderJob(t.Context(), &other); !errors.Is(err, toolplane.ErrExists) {
		t.Errorf("the id in another organization = %v, want ErrExists", err)
	}
	if _, err := s.GetProviderJob(t.Context(), other.OrganizationID, j.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("the other organization reads %v, want ErrNotFound", err)
	}
}

// testConcurrentReserve: of many concurrent reservations of one job, one
// stores it: the one caller that may call the vendor.
func testConcurrentReserve(t *testing.T, s ProviderJobStore) {
	j := newJob(newOrg())
	var won atomic.Int64
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			c := *j
			got, ok, err := s.ReserveProviderJob(t.Context(), &c)
			if err != nil {
				t.Errorf("ReserveProviderJob = %v", err)
				return
			}
			if got.ID != j.ID {
				t.Errorf("answered job %s, want %s", got.ID, j.ID)
			}
			if ok {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Errorf("%d reservations stored the job, want 1", won.Load())
	}
}

// testProviderJobIsolation: one organization never reads, binds, moves,
// settles or stores a result on another's job; the lookup by id alone (the
// webhook route's) answers the job with its own organization.
func testProviderJobIsolation(t *testing.T, s ProviderJobStore) {
	ctx := t.Context()
	org, other := newOrg(), newOrg()
	j := reserve(t, s, newJob(org))
	if _, err := s.GetProviderJob(ctx, other, j.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetProviderJob from another organization = %v, want ErrNotFound", err)
	}
	if got, err := s.LookupProviderJob(ctx, j.ID); err != nil || got.OrganizationID != org {
		t.Errorf("LookupProviderJob = %v, %v; want the job of %s", got, err, org)
	}
	if _, err := s.LookupProviderJob(ctx, "pj_missing"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("LookupProviderJob(missing) = %v, want ErrNotFound", err)
	}
	if ok, err := s.BindProviderJob(ctx, other, j.ID, "v-1", at(time.Second)); ok || !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("BindProviderJob from another organization = %v, %v; want ErrNotFound", ok, err)
	}
	done := &toolplane.ProviderJobUpdate{State: toolplane.JobCompleted, CostCents: 5}
	if ok, err := s.TransitionProviderJob(ctx, other, j.ID, done, at(time.Second), nil); ok || err != nil {
		t.Errorf("TransitionProviderJob from another organization = %v, %v; want false", ok, err)
	}
	if err := s.PutProviderJobResult(ctx, &toolplane.ProviderJobResult{OrganizationID: other, JobID: j.ID, Digest: "d", Body: []byte("{}")}); err == nil {
		t.Error("another organization stored a result on the job")
	}
	if ok, err := s.TransitionProviderJob(ctx, org, j.ID, done, at(time.Second), nil); !ok || err != nil {
		t.Fatalf("TransitionProviderJob = %v, %v", ok, err)
	}
	u := jobUsage(other, j)
	if ok, err := s.SettleProviderJob(ctx, j.ID, u, nil); ok || err != nil {
		t.Errorf("SettleProviderJob from another organization = %v, %v; want false", ok, err)
	}
	if unsettled, err := s.UnsettledProviderJobs(ctx, other, 10); err != nil || len(unsettled) != 0 {
		t.Errorf("UnsettledProviderJobs of another organization = %v, %v; want none", unsettled, err)
	}
	if getJob(t, s, org, j.ID).UsageID != "" {
		t.Error("another organization's settlement stamped the job")
	}
}

// testBindOnce: the vendor's id is bound once and never changed; another
// job of the same provider cannot take the same vendor id.
func testBindOnce(t *testing.T, s ProviderJobStore) {
	ctx := t.Context()
	org := newOrg()
	j := reserve(t, s, newJob(org))
	vendor := "v-" + org
	for i, tt := range []struct {
		id   string
		want bool
	}{{vendor, true}, {vendor, true}, {"v-other", false}} {
		if ok, err := s.BindProviderJob(ctx, org, j.ID, tt.id, at(time.Second)); ok != tt.want || err != nil {
			t.Errorf("bind %d (%s) = %v, %v; want %v, nil", i, tt.id, ok, err, tt.want)
		}
	}
	if got := getJob(t, s, org, j.ID).ProviderJobID; got != vendor {
		t.Errorf("ProviderJobID = %q, want %q", got, vendor)
	}
	k := reserve(t, s, newJob(org))
	if _, err := s.BindProviderJob(ctx, org, k.ID, vendor, at(time.Second)); !errors.Is(err, toolplane.ErrExists) {
		t.Errorf("a second job bound to the same vendor id: %v, want ErrExists", err)
	}
	other := newJob(org)
	other.Provider = "another"
	other = reserve(t, s, other)
	if ok, err := s.BindProviderJob(ctx, org, other.ID, vendor, at(time.Second)); !ok || err != nil {
		t.Errorf("another provider's job with the same vendor id = %v, %v; want bound", ok, err)
	}
}

// testJobTransitions: a job moves only forward, each move conditional on
// the state it leaves; a terminal job stays terminal (the vendor's own
// ending outranks an expiry); an earlier state changes nothing; a move
// stores its audit event, a refused one none.
func testJobTransitions(t *testing.T, s ProviderJobStore) {
	ctx := t.Context()
	org := newOrg()
	j := reserve(t, s, newJob(org))
	steps := []struct {
		to   toolplane.ProviderJobState
		want bool
	}{
		{toolplane.JobRunning, true},
		{toolplane.JobRunning, false},
		{toolplane.JobSubmitted, false},
		{toolplane.JobExpired, true},
		{toolplane.JobRunning, false},
		{toolplane.JobCompleted, true},
		{toolplane.JobFailed, false},
		{toolplane.JobCompleted, false},
		{toolplane.JobExpired, false},
		{toolplane.JobRunning, false},
	}
	var events []string
	for i, st := range steps {
		u := &toolplane.ProviderJobUpdate{State: st.to, CostCents: int64(i), Units: 2, Result: []byte(fmt.Sprintf(`{"step":%d}`, i))}
		ev := &toolplane.AuditEvent{ID: toolplane.NewID("aud_"), OrganizationID: org, Tool: j.Tool, Source: toolplane.SourceWebhook,
			Outcome: "provider_job_" + string(st.to), CreatedAt: at(time.Duration(i+1) * time.Second)}
		ok, err := s.TransitionProviderJob(ctx, org, j.ID, u, at(time.Duration(i+1)*time.Second), ev)
		if ok != st.want || err != nil {
			t.Errorf("step %d to %s = %v, %v; want %v", i, st.to, ok, err, st.want)
		}
		if ok {
			events = append(events, ev.ID)
		}
	}
	got := getJob(t, s, org, j.ID)
	if got.State != toolplane.JobCompleted || got.CostCents != 5 || string(got.Result) != `{"step":5}` {
		t.Errorf("job = %s cost %d result %s; want completed at step 5", got.State, got.CostCents, got.Result)
	}
	if !got.TerminalAt.Equal(stored(at(6 * time.Second))) {
		t.Errorf("TerminalAt = %v, want the completion's", got.TerminalAt)
	}
	trail, _, err := s.ListAudit(ctx, org, toolplane.AuditFilter{}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range trail {
		ids = append(ids, e.ID)
	}
	slices.Sort(ids)
	slices.Sort(events)
	if !slices.Equal(ids, events) {
		t.Errorf("audit events %v, want those of the moves %v", ids, events)
	}
	if _, err := s.TransitionProviderJob(ctx, org, j.ID, &toolplane.ProviderJobUpdate{State: "done"}, at(time.Minute), nil); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("an unknown state = %v, want ErrInvalid", err)
	}
}

// testJobResults: a large result is stored once per digest (the first
// body stays) and read only with its organization.
func testJobResults(t *testing.T, s ProviderJobStore) {
	ctx := t.Context()
	org := newOrg()
	j := reserve(t, s, newJob(org))
	r := &toolplane.ProviderJobResult{OrganizationID: org, JobID: j.ID, Digest: "abc", Body: []byte(`{"big":true}`)}
	if err := s.PutProviderJobResult(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.PutProviderJobResult(ctx, &toolplane.ProviderJobResult{OrganizationID: org, JobID: j.ID, Digest: "abc", Body: []byte(`{}`)}); err != nil {
		t.Fatalf("second put = %v", err)
	}
	got, err := s.GetProviderJobResult(ctx, org, j.ID, "abc")
	if err != nil || string(got.Body) != `{"big":true}` {
		t.Errorf("GetProviderJobResult = %v, %v; want the first body", got, err)
	}
	if _, err := s.GetProviderJobResult(ctx, newOrg(), j.ID, "abc"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("another organization reads the result: %v", err)
	}
	if _, err := s.GetProviderJobResult(ctx, org, j.ID, "abd"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("another digest = %v, want ErrNotFound", err)
	}
}

// jobUsage answers the usage row j's settlement writes, as org.
func jobUsage(org string, j *toolplane.ProviderJob) *toolplane.Usage {
	return &toolplane.Usage{ID: "use_" + j.ID, OrganizationID: org, RunID: j.RunID, RootRunID: j.RootRunID,
		Tool: j.Tool, CostCents: 42, Units: 3, CreatedAt: at(time.Minute)}
}

// testSettleOnce: a job is settled only once its vendor ended it, and
// once: one usage row, the job stamped with it, and the unsettled lists
// name it until then.
func testSettleOnce(t *testing.T, s ProviderJobStore) {
	ctx := t.Context()
	org := newOrg()
	j := newJob(org)
	j.RootRunID = "root-" + org
	j = reserve(t, s, j)
	u := jobUsage(org, j)
	if ok, err := s.SettleProviderJob(ctx, j.ID, u, nil); ok || err != nil {
		t.Errorf("settling a running job = %v, %v; want false", ok, err)
	}
	wantCost(t, s, org, j.RootRunID, 0)
	if ok, _ := s.TransitionProviderJob(ctx, org, j.ID, &toolplane.ProviderJobUpdate{State: toolplane.JobCancelled, CostCents: 42}, at(time.Second), nil); !ok {
		t.Fatal("cancel did not apply")
	}
	unsettled, err := s.UnsettledProviderJobs(ctx, org, 10)
	if err != nil || len(unsettled) != 1 || unsettled[0].ID != j.ID {
		t.Errorf("UnsettledProviderJobs = %v, %v; want the job", unsettled, err)
	}
	all, err := s.AllUnsettledProviderJobs(ctx, maxLimit)
	if err != nil || !slices.ContainsFunc(all, func(x toolplane.ProviderJob) bool { return x.ID == j.ID }) {
		t.Errorf("AllUnsettledProviderJobs = %v; want the job among them", err)
	}
	ev := &toolplane.AuditEvent{ID: toolplane.NewID("aud_"), OrganizationID: org, Tool: j.Tool, Source: toolplane.SourceWorker, Outcome: "provider_job_settled", CreatedAt: at(time.Minute)}
	if ok, err := s.SettleProviderJob(ctx, j.ID, u, ev); !ok || err != nil {
		t.Fatalf("SettleProviderJob = %v, %v", ok, err)
	}
	if ok, err := s.SettleProviderJob(ctx, j.ID, u, ev); ok || err != nil {
		t.Errorf("second SettleProviderJob = %v, %v; want false", ok, err)
	}
	again := *u
	again.ID = "use_other"
	if ok, err := s.SettleProviderJob(ctx, j.ID, &again, nil); ok || err != nil {
		t.Errorf("a settlement under another usage id = %v, %v; want false", ok, err)
	}
	wantCost(t, s, org, j.RootRunID, 42)
	if got := getJob(t, s, org, j.ID).UsageID; got != u.ID {
		t.Errorf("UsageID = %q, want %q", got, u.ID)
	}
	if unsettled, err := s.UnsettledProviderJobs(ctx, org, 10); err != nil || len(unsettled) != 0 {
		t.Errorf("UnsettledProviderJobs after settlement = %v, %v; want none", unsettled, err)
	}
	if _, err := s.UnsettledProviderJobs(ctx, org, 0); err == nil {
		t.Error("a limit of 0 was accepted")
	}
}

// testConcurrentSettle: of many concurrent settlements of one job, one
// writes: one usage row.
func testConcurrentSettle(t *testing.T, s ProviderJobStore) {
	ctx := t.Context()
	org := newOrg()
	j := newJob(org)
	j.RootRunID = "root-" + org
	j = reserve(t, s, j)
	if ok, _ := s.TransitionProviderJob(ctx, org, j.ID, &toolplane.ProviderJobUpdate{State: toolplane.JobCompleted, CostCents: 42}, at(time.Second), nil); !ok {
		t.Fatal("completion did not apply")
	}
	var won atomic.Int64
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			ok, err := s.SettleProviderJob(ctx, j.ID, jobUsage(org, j), nil)
			if err != nil {
				t.Errorf("SettleProviderJob = %v", err)
			}
			if ok {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Errorf("%d settlements applied, want 1", won.Load())
	}
	wantCost(t, s, org, j.RootRunID, 42)
}

// testOverdueJobs: the expiry sweep's read answers unfinished jobs past
// their deadline, and no finished one nor one without a deadline.
func testOverdueJobs(t *testing.T, s ProviderJobStore) {
	ctx := t.Context()
	org := newOrg()
	late := reserve(t, s, newJob(org))
	done := reserve(t, s, newJob(org))
	if ok, _ := s.TransitionProviderJob(ctx, org, done.ID, &toolplane.ProviderJobUpdate{State: toolplane.JobFailed}, at(time.Second), nil); !ok {
		t.Fatal("failure did not apply")
	}
	open := newJob(org)
	open.ExpiresAt = time.Time{}
	reserve(t, s, open)
	far := newJob(org)
	far.ExpiresAt = at(48 * time.Hour)
	reserve(t, s, far)
	got, err := s.OverdueProviderJobs(ctx, at(2*time.Hour), maxLimit)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range got {
		if j.OrganizationID == org {
			ids = append(ids, j.ID)
		}
	}
	if !slices.Equal(ids, []string{late.ID}) {
		t.Errorf("OverdueProviderJobs = %v, want [%s]", ids, late.ID)
	}
}
