package providerjob_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/journal"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/providerjob"
	"github.com/toolplane/toolplane/ratelimit"
)

// usageRows answers how many usage rows the organization's submit tool
// has.
func (h *harness) usageRows(t *testing.T, org string) int {
	t.Helper()
	st, err := h.store.ToolUsage(context.Background(), org, "enrich.submit", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return st.Calls
}

// submitted submits a job for a fresh organization and answers it, with
// the organization and its invocation.
func (h *harness) submitted(t *testing.T, refs ...string) (providerjob.Submitted, string, *toolplane.Invocation) {
	t.Helper()
	org := newOrg()
	inv := call(org, "run-1")
	out, r := h.submit(t, inv, refs...)
	if !r.OK {
		t.Fatalf("submit = %+v", r.Error)
	}
	return out, org, inv
}

// A replayed submit returns the same provider job and makes no second
// vendor call: not when the journal replays the stored answer, not once
// the journal row is gone (the reservation answers), and not after the
// vendor's answer was lost (the reservation waits for the callback).
func TestReplayedSubmitMakesNoSecondVendorCall(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		first, org, inv := h.submitted(t, "c1", "c2")
		if !first.Confirmed || first.State != "running" || h.vendor.posts.Load() != 1 {
			t.Fatalf("first submit = %+v, %d vendor calls; want one confirmed", first, h.vendor.posts.Load())
		}
		again, r := h.submit(t, inv, "c1", "c2")
		if !r.OK || !r.Meta.Replayed || again.JobID != first.JobID {
			t.Errorf("replay = %+v (replayed %v); want the same job, replayed", again, r.Meta.Replayed)
		}
		// The journal row expires; the reservation still answers.
		cls, _, err := h.store.ListClaims(ctx, org, toolplane.ClaimCompleted, "", 10)
		if err != nil || len(cls) != 1 {
			t.Fatalf("claims = %v, %v", cls, err)
		}
		if ok, err := h.store.DeleteClaim(ctx, org, cls[0].Tool, cls[0].Key, cls[0].Version); !ok || err != nil {
			t.Fatalf("DeleteClaim = %v, %v", ok, err)
		}
		late, r := h.submit(t, inv, "c1", "c2")
		if !r.OK || late.JobID != first.JobID {
			t.Errorf("submit after the journal row expired = %+v, %+v; want job %s", late, r.Error, first.JobID)
		}
		if n := h.vendor.posts.Load(); n != 1 {
			t.Errorf("vendor called %d times, want once", n)
		}
		h.vendor.mu.Lock()
		hook := h.vendor.hooks[0]
		h.vendor.mu.Unlock()
		if want := h.hooks.URL + "/v1/webhooks/enrich/" + first.JobID; hook != want {
			t.Errorf("callback URL = %q, want %q", hook, want)
		}

		// A caller's own idempotency key: the same job from another run.
		keyed := call(org, "run-k1")
		keyed.IdempotencyKey = "enrich-batch-42"
		k1, r := h.submit(t, keyed, "k1")
		keyed2 := call(org, "run-k2")
		keyed2.IdempotencyKey = "enrich-batch-42"
		k2, r2 := h.submit(t, keyed2, "k1")
		if !r.OK || !r2.OK || k1.JobID != k2.JobID || k1.JobID == first.JobID {
			t.Errorf("keyed submits = %+v, %+v; want one job of their own", k1, k2)
		}
		if n := h.vendor.posts.Load(); n != 2 {
			t.Errorf("vendor called %d times, want 2 (one per job)", n)
		}

		// A lost answer: the vendor took the batch and its answer failed.
		h.vendor.refuse.Store(true)
		inv2 := call(org, "run-2")
		_, r = h.submit(t, inv2, "c9")
		if r.OK || r.Error.Code != toolplane.CodeRetryableUpstream {
			t.Fatalf("submit with a lost answer = %+v, want retryable_upstream", r)
		}
		h.vendor.refuse.Store(false)
		retried, r := h.submit(t, inv2, "c9")
		if !r.OK || retried.Confirmed {
			t.Fatalf("retry = %+v, %+v; want the reserved job, unconfirmed", retried, r.Error)
		}
		if n := h.vendor.posts.Load(); n != 3 {
			t.Errorf("vendor called %d times, want 3 (one per job)", n)
		}
		// The callback recovers the reservation: its signed batch name
		// binds the vendor's id.
		body := batchBody("v-3", retried.JobID, "FINISHED", 1, `[{"ref":"c9","email":"a@b.example"}]`)
		if code := h.deliver(t, enrich, retried.JobID, body, sha1Signed(enrichKey, body)); code != http.StatusOK {
			t.Fatalf("callback = %d", code)
		}
		if j := h.settled(t, org, retried.JobID); j.ProviderJobID != "v-3" || j.State != toolplane.JobCompleted {
			t.Errorf("recovered job = %+v", j)
		}
	})
}

// Two deliveries of one callback produce one state transition and one
// usage row, whether they come one after another or at once.
func TestTwoDeliveriesOneTransitionOneUsageRow(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, h *harness) {
		for _, concurrent := range []bool{false, true} {
			job, org, _ := h.submitted(t, "a", "b")
			body := batchBody(vendorID(t, h, org, job.JobID), job.JobID, "FINISHED", 3, `[{"ref":"a"},{"ref":"b"}]`)
			var wg sync.WaitGroup
			for range 2 {
				deliver := func() {
					if code := h.deliver(t, enrich, job.JobID, body, sha1Signed(enrichKey, body)); code != http.StatusOK {
						t.Errorf("delivery = %d", code)
					}
				}
				if concurrent {
					wg.Go(deliver)
				} else {
					deliver()
				}
			}
			wg.Wait()
			j := h.settled(t, org, job.JobID)
			if j.UsageID != providerjob.UsageID(j.ID) || j.CostCents != 30 {
				t.Errorf("settled job = %+v", j)
			}
			h.sweepSettles(t)
			if n := h.audited(t, org, "provider_job_completed"); n != 1 {
				t.Errorf("concurrent=%v: %d transitions, want 1", concurrent, n)
			}
			if n := h.usageRows(t, org); n != 1 {
				t.Errorf("concurrent=%v: %d usage rows, want 1", concurrent, n)
			}
			if c := h.cost(t, org, "run-1"); c != 30 {
				t.Errorf("concurrent=%v: run tree cost %d, want 30", concurrent, c)
			}
		}
		if h.drops(enrich, providerjob.DropDuplicate) != 2 || h.drops(enrich, providerjob.DropStaleState) != 0 {
			t.Errorf("second deliveries counted %d duplicate, %d stale; want 2, 0",
				h.drops(enrich, providerjob.DropDuplicate), h.drops(enrich, providerjob.DropStaleState))
		}
	})
}

// sweepSettles runs the settlement sweep's work once, as the periodic job
// does, and waits for what it enqueued.
func (h *harness) sweepSettles(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	js, err := h.svc.Unsettled(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if err := h.runner.EnqueueSettlement(ctx, j.OrganizationID, j.ID); err != nil {
			t.Fatal(err)
		}
		h.settled(t, j.OrganizationID, j.ID)
	}
}

// vendorID answers the vendor id bound to the job at submission.
func vendorID(t *testing.T, h *harness, org, id string) string {
	t.Helper()
	v := h.job(t, org, id).ProviderJobID
	if v == "" {
		t.Fatalf("job %s unconfirmed", id)
	}
	return v
}

// A callback that reports an earlier state than the stored one changes
// nothing; neither does a second ending after the first (out of order).
func TestEarlierStateChangesNothing(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, h *harness) {
		job, org, _ := h.submitted(t, "a")
		vid := vendorID(t, h, org, job.JobID)
		done := batchBody(vid, job.JobID, "FINISHED", 2, `[{"ref":"a","email":"x@y.example"}]`)
		if code := h.deliver(t, enrich, job.JobID, done, sha1Signed(enrichKey, done)); code != http.StatusOK {
			t.Fatalf("ending = %d", code)
		}
		before := h.settled(t, org, job.JobID)
		for _, status := range []string{"IN_PROGRESS", "CANCELED", "CREDITS_INSUFFICIENT"} {
			late := batchBody(vid, job.JobID, status, 9, `[]`)
			if code := h.deliver(t, enrich, job.JobID, late, sha1Signed(enrichKey, late)); code != http.StatusOK {
				t.Errorf("%s = %d, want an ACK", status, code)
			}
		}
		after := h.job(t, org, job.JobID)
		if after.State != toolplane.JobCompleted || string(after.Result) != string(before.Result) || after.CostCents != 20 ||
			!after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Errorf("job after late deliveries = %+v, want it as it was: %+v", after, before)
		}
		if n := h.audited(t, org, "provider_job_running"); n != 0 {
			t.Errorf("%d progress transitions stored after the ending", n)
		}
		if h.drops(enrich, providerjob.DropNotTerminal) != 1 || h.drops(enrich, providerjob.DropStaleState) != 2 {
			t.Errorf("drops: not_terminal %d, stale_state %d; want 1, 2",
				h.drops(enrich, providerjob.DropNotTerminal), h.drops(enrich, providerjob.DropStaleState))
		}
		if n := h.usageRows(t, org); n != 1 {
			t.Errorf("%d usage rows, want 1", n)
		}
	})
}

// A callback for an unknown provider job id counts a drop reason and
// answers an ACK; an unknown provider answers 404.
func TestUnknownJobCountsDropAndAcks(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, h *harness) {
		body := batchBody("v-404", "pj_missing", "FINISHED", 1, `[]`)
		if code := h.deliver(t, enrich, "pj_missing", body, sha1Signed(enrichKey, body)); code != http.StatusOK {
			t.Errorf("unknown job = %d, want 200", code)
		}
		if n := h.drops(enrich, providerjob.DropUnknownJob); n != 1 {
			t.Errorf("unknown_job counted %d times, want 1", n)
		}
		if code := h.deliver(t, "nobody", "pj_missing", body, sha1Signed(enrichKey, body)); code != http.StatusNotFound {
			t.Errorf("unknown provider = %d, want 404", code)
		}
	})
}

// A callback whose signature fails changes no state: forged, unsigned,
// tampered, stale and replayed-late deliveries are refused with 401
// before the job is read; an oversized one with 413.
func TestFailedSignatureChangesNothing(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, h *harness) {
		job, org, _ := h.submitted(t, "a")
		vid := vendorID(t, h, org, job.JobID)
		body := batchBody(vid, job.JobID, "FINISHED", 5, `[]`)
		tampered := []byte(strings.Replace(string(body), `"credits":5`, `"credits":0`, 1))
		pay := paymentEvent("evt_1", vid, job.JobID, "succeeded", 100)
		for _, tt := range []struct {
			name     string
			provider string
			body     []byte
			sign     func(http.Header)
			want     int
		}{
			{"forged", enrich, body, sha1Signed("not-the-key", body), http.StatusUnauthorized},
			{"unsigned", enrich, body, nil, http.StatusUnauthorized},
			{"tampered", enrich, tampered, sha1Signed(enrichKey, body), http.StatusUnauthorized},
			{"stale", payments, pay, stamped(paymentsKey, time.Now().Add(-time.Hour), pay), http.StatusUnauthorized},
			{"from the future", payments, pay, stamped(paymentsKey, time.Now().Add(time.Hour), pay), http.StatusUnauthorized},
			{"timestamped forged", payments, pay, stamped("not-the-key", time.Now(), pay), http.StatusUnauthorized},
			{"oversized", enrich, oversized(vid, job.JobID), sha1Signed(enrichKey, oversized(vid, job.JobID)), http.StatusRequestEntityTooLarge},
		} {
			if code := h.deliver(t, tt.provider, job.JobID, tt.body, tt.sign); code != tt.want {
				t.Errorf("%s = %d, want %d", tt.name, code, tt.want)
			}
		}
		j := h.job(t, org, job.JobID)
		if j.State != toolplane.JobSubmitted || j.CostCents != 0 {
			t.Errorf("job after refused deliveries = %s cost %d, want submitted, 0", j.State, j.CostCents)
		}
		if n := h.drops(enrich, providerjob.DropBadSignature) + h.drops(payments, providerjob.DropBadSignature); n != 6 {
			t.Errorf("bad_signature counted %d, want 6", n)
		}
		cls, _, _ := h.store.ListClaims(context.Background(), org, toolplane.ClaimCompleted, "", 10)
		if len(cls) != 1 { // the submit's own
			t.Errorf("claims after refused deliveries: %d, want the submit's alone", len(cls))
		}
	})
}

// oversized answers a signed-able body past the route's bound.
func oversized(vid, jobID string) []byte {
	return batchBody(vid, jobID, "FINISHED", 1, `["`+strings.Repeat("x", providerjob.MaxBody)+`"]`)
}

// paymentEvent answers the timestamped vendor's event.
func paymentEvent(id, vendorID, jobID, status string, cents int64) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "type": "job.updated", "data": map[string]any{"object": map[string]any{
		"id": vendorID, "status": status, "metadata": map[string]string{"toolplane_job_id": jobID},
		"cost": map[string]int64{"cents": cents, "units": 1}, "result": map[string]string{"receipt": "r-1"}}}})
	return b
}

// The cost settles once when the run was cancelled before the callback
// arrived: the run's time ran out (its next call answers
// deadline_exceeded, nothing claimed), and the
// vendor's cost still lands on its run tree, once.
func TestCostSettlesOnceAfterCancelledRun(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, h *harness) {
		job, org, inv := h.submitted(t, "a")
		ended := *inv
		ended.Deadline = time.Now().Add(-time.Second)
		if _, r := h.submit(t, &ended, "z"); r.OK || r.Error.Code != toolplane.CodeDeadlineExceeded {
			t.Fatalf("a call of the ended run = %+v, want deadline_exceeded", r)
		}
		body := batchBody(vendorID(t, h, org, job.JobID), job.JobID, "CANCELED", 4, `[{"ref":"a","email":"p@q.example"}]`)
		for range 2 {
			if code := h.deliver(t, enrich, job.JobID, body, sha1Signed(enrichKey, body)); code != http.StatusOK {
				t.Fatalf("callback = %d", code)
			}
		}
		j := h.settled(t, org, job.JobID)
		h.sweepSettles(t)
		if j.State != toolplane.JobCancelled {
			t.Errorf("state = %s, want cancelled", j.State)
		}
		if c := h.cost(t, org, "run-1"); c != 40 {
			t.Errorf("run tree cost = %d, want 40", c)
		}
		if n := h.usageRows(t, org); n != 1 {
			t.Errorf("%d usage rows, want 1", n)
		}
		if n := h.audited(t, org, "provider_job_settled"); n != 1 {
			t.Errorf("%d settlement events, want 1", n)
		}
	})
}

// Repeated collection answers the same result and writes no second usage
// row; a collect of another organization's job answers not_found.
func TestRepeatedCollectionWritesNoUsageRow(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, h *harness) {
		job, org, inv := h.submitted(t, "a", "b")
		running, r := h.collect(t, inv, job.JobID)
		if !r.OK || running.State != "running" || running.Result != nil {
			t.Errorf("collect of a running job = %+v, %+v", running, r.Error)
		}
		// A failed batch keeps its partial success.
		body := batchBody(vendorID(t, h, org, job.JobID), job.JobID, "CREDITS_INSUFFICIENT", 1, `[{"ref":"a","email":"a@b.example"}]`)
		if code := h.deliver(t, enrich, job.JobID, body, sha1Signed(enrichKey, body)); code != http.StatusOK {
			t.Fatalf("callback = %d", code)
		}
		h.settled(t, org, job.JobID)
		var first []byte
		for i := range 3 {
			got, r := h.collect(t, inv, job.JobID)
			if !r.OK || got.State != "failed" || !got.Settled {
				t.Fatalf("collect %d = %+v, %+v", i, got, r.Error)
			}
			b, _ := json.Marshal(got)
			if first == nil {
				first = b
			} else if string(b) != string(first) {
				t.Errorf("collect %d = %s, want %s", i, b, first)
			}
			if res, _ := json.Marshal(got.Result); !strings.Contains(string(res), "a@b.example") {
				t.Errorf("partial result lost: %s", got.Result)
			}
		}
		if n := h.usageRows(t, org); n != 1 {
			t.Errorf("%d usage rows, want 1", n)
		}
		if _, r := h.collect(t, call(newOrg(), "run-1"), job.JobID); r.OK || r.Error.Code != toolplane.CodeNotFound {
			t.Errorf("another organization's collect = %+v, want not_found", r)
		}
	})
}

// A callback for job A naming job B changes nothing: the batch name the
// vendor signed names another job, or the vendor id is another job's.
func TestCallbackNamingAnotherJobChangesNothing(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, h *harness) {
		a, org, _ := h.submitted(t, "a")
		b, _ := h.submit(t, call(org, "run-2"), "b")
		va, vb := vendorID(t, h, org, a.JobID), vendorID(t, h, org, b.JobID)
		for _, body := range [][]byte{
			batchBody(va, b.JobID, "FINISHED", 7, `[]`), // A's vendor id, B's name
			batchBody(vb, a.JobID, "FINISHED", 7, `[]`), // B's vendor id, A's name
			batchBody(vb, b.JobID, "FINISHED", 7, `[]`), // all B's, at A's path
		} {
			if code := h.deliver(t, enrich, a.JobID, body, sha1Signed(enrichKey, body)); code != http.StatusOK {
				t.Errorf("mismatched delivery = %d, want an ACK", code)
			}
		}
		if n := h.drops(enrich, providerjob.DropJobMismatch); n != 3 {
			t.Errorf("job_mismatch counted %d, want 3", n)
		}
		for _, id := range []string{a.JobID, b.JobID} {
			if j := h.job(t, org, id); j.State != toolplane.JobSubmitted {
				t.Errorf("job %s = %s, want submitted", id, j.State)
			}
		}
		// A delivery under another provider's path is no delivery for the
		// job either.
		pay := paymentEvent("evt_x", va, a.JobID, "succeeded", 100)
		if code := h.deliver(t, payments, a.JobID, pay, stamped(paymentsKey, time.Now(), pay)); code != http.StatusOK {
			t.Errorf("another provider's delivery = %d", code)
		}
		if j := h.job(t, org, a.JobID); j.State != toolplane.JobSubmitted {
			t.Errorf("job A = %s after another provider's delivery", j.State)
		}
	})
}

// A callback that lands before the wait registers still ends the wait,
// and the run does not park; a wait that began first ends when the
// callback lands.
func TestCallbackBeforeWaitStillEndsIt(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		job, org, _ := h.submitted(t, "a")
		vid := vendorID(t, h, org, job.JobID)
		body := batchBody(vid, job.JobID, "FINISHED", 1, `[]`)
		if code := h.deliver(t, enrich, job.JobID, body, sha1Signed(enrichKey, body)); code != http.StatusOK {
			t.Fatal(code)
		}
		start := time.Now()
		j, err := h.svc.Wait(ctx, org, job.JobID, time.Minute)
		if err != nil || j.State != toolplane.JobCompleted || time.Since(start) > 5*time.Second {
			t.Errorf("wait after the callback = %v, %v after %v; want completed at once", j, err, time.Since(start))
		}

		second, _ := h.submit(t, call(org, "run-3"), "b")
		done := make(chan *toolplane.ProviderJob, 1)
		go func() {
			j, _ := h.svc.Wait(ctx, org, second.JobID, time.Minute)
			done <- j
		}()
		time.Sleep(50 * time.Millisecond)
		body = batchBody(vendorID(t, h, org, second.JobID), second.JobID, "FINISHED", 1, `[]`)
		if code := h.deliver(t, enrich, second.JobID, body, sha1Signed(enrichKey, body)); code != http.StatusOK {
			t.Fatal(code)
		}
		select {
		case j := <-done:
			if j == nil || j.State != toolplane.JobCompleted {
				t.Errorf("wait ended with %+v", j)
			}
		case <-time.After(10 * time.Second):
			t.Error("the wait did not end on the callback")
		}
	})
}

// A vendor that never calls back: the sweep expires the job, which ends
// every wait on it; the vendor's own ending, arriving later, still
// outranks the expiry and is settled once.
func TestVendorThatNeverCallsBackExpires(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		job, org, _ := h.submitted(t, "a")
		overdue, err := h.svc.Overdue(ctx, time.Now().Add(providerjob.DefaultTTL+time.Minute), 100)
		if err != nil {
			t.Fatal(err)
		}
		var j *toolplane.ProviderJob
		for i := range overdue {
			if overdue[i].ID == job.JobID {
				j = &overdue[i]
			}
		}
		if j == nil {
			t.Fatal("the job is not overdue past its deadline")
		}
		if ok, err := h.svc.Expire(ctx, j); !ok || err != nil {
			t.Fatalf("Expire = %v, %v", ok, err)
		}
		if got, err := h.svc.Wait(ctx, org, job.JobID, time.Minute); err != nil || got.State != toolplane.JobExpired {
			t.Errorf("wait on an expired job = %v, %v", got, err)
		}
		if n := h.audited(t, org, "provider_job_expired"); n != 1 {
			t.Errorf("%d expiry events, want 1", n)
		}
		if unsettled, _ := h.svc.UnsettledOf(ctx, org, 10); len(unsettled) != 0 {
			t.Errorf("an expired job with no reported cost is listed unsettled: %v", unsettled)
		}
		body := batchBody(vendorID(t, h, org, job.JobID), job.JobID, "FINISHED", 2, `[]`)
		if code := h.deliver(t, enrich, job.JobID, body, sha1Signed(enrichKey, body)); code != http.StatusOK {
			t.Fatal(code)
		}
		if got := h.settled(t, org, job.JobID); got.State != toolplane.JobCompleted || got.CostCents != 20 {
			t.Errorf("late ending = %+v", got)
		}
	})
}

// A meter failure raises and the settlement is retried; meanwhile the
// ended, unsettled job is visible.
func TestMeterFailureRetriesSettlement(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		job, org, _ := h.submitted(t, "a")
		h.settleFails.Store(1)
		if _, err := h.svc.Settle(ctx, org, job.JobID); err != nil {
			t.Fatalf("settling a running job = %v", err)
		}
		body := batchBody(vendorID(t, h, org, job.JobID), job.JobID, "FINISHED", 2, `[]`)
		if code := h.deliver(t, enrich, job.JobID, body, sha1Signed(enrichKey, body)); code != http.StatusOK {
			t.Fatal(code)
		}
		// The first attempt fails; River retries about a second later.
		deadline := time.Now().Add(5 * time.Second)
		for h.settleFails.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if unsettled, err := h.svc.UnsettledOf(ctx, org, 10); err != nil || len(unsettled) != 1 {
			t.Errorf("unsettled after a meter failure = %v, %v; want the job", unsettled, err)
		}
		if j := h.settled(t, org, job.JobID); j.UsageID == "" {
			t.Error("not settled")
		}
		if n := h.usageRows(t, org); n != 1 {
			t.Errorf("%d usage rows, want 1", n)
		}
	})
}

// A result past the row's bound is stored apart by digest, the ending
// stored with its reference; a collect reads the whole of it.
func TestLargeResultStoredApart(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, h *harness) {
		job, org, _ := h.submitted(t, "a")
		data := `[{"ref":"a","note":"` + strings.Repeat("n", toolplane.MaxInlineJobResult) + `"}]`
		body := batchBody(vendorID(t, h, org, job.JobID), job.JobID, "FINISHED", 1, data)
		if code := h.deliver(t, enrich, job.JobID, body, sha1Signed(enrichKey, body)); code != http.StatusOK {
			t.Fatal(code)
		}
		j := h.settled(t, org, job.JobID)
		if j.ResultDigest == "" || len(j.Result) != 0 {
			t.Errorf("large result kept inline: digest %q, %d bytes", j.ResultDigest, len(j.Result))
		}
		got, err := h.svc.Result(context.Background(), j)
		if err != nil || string(got) != data {
			t.Errorf("stored result = %d bytes, %v; want %d", len(got), err, len(data))
		}
	})
}

// The timestamped vendor: a progress event moves the job and is not
// settled; the ending is; the same event again is a duplicate.
func TestTimestampedVendor(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		org := newOrg()
		job, err := h.svc.Submit(ctx, submitCall(org), providerjob.Submission{Provider: payments},
			func(context.Context, *toolplane.ProviderJob, string) (string, error) { return "pi_1" + org, nil })
		if err != nil {
			t.Fatal(err)
		}
		progress := paymentEvent("evt_p", "pi_1"+org, job.JobID, "processing", 0)
		if code := h.deliver(t, payments, job.JobID, progress, stamped(paymentsKey, time.Now(), progress)); code != http.StatusOK {
			t.Fatal(code)
		}
		if j := h.job(t, org, job.JobID); j.State != toolplane.JobRunning {
			t.Errorf("after progress: %s", j.State)
		}
		done := paymentEvent("evt_d", "pi_1"+org, job.JobID, "succeeded", 125)
		for range 2 {
			if code := h.deliver(t, payments, job.JobID, done, stamped(paymentsKey, time.Now(), done)); code != http.StatusOK {
				t.Fatal(code)
			}
		}
		if j := h.settled(t, org, job.JobID); j.CostCents != 125 {
			t.Errorf("settled %d, want 125", j.CostCents)
		}
		if h.drops(payments, providerjob.DropDuplicate) != 1 {
			t.Errorf("the replayed event was not a duplicate")
		}
	})
}

// Deliveries are rate limited by client address before their signature is
// checked: past the budget the route answers 429 and reads nothing.
func TestWebhookRateLimitedByAddress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be, err := backend.Open(ctx, filepath.Join(t.TempDir(), "toolplane.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	svc, err := providerjob.New(providerjob.Config{Store: be.Store})
	if err != nil {
		t.Fatal(err)
	}
	var limited atomic.Int64
	mux := http.NewServeMux()
	mux.Handle(providerjob.Route, &providerjob.Receiver{Jobs: svc, Journal: journal.New(be.Store, time.Now), Limiter: ratelimit.New(2, time.Minute),
		Adapters: map[string]providerjob.Adapter{enrich: &providerjob.BodySigned{Name: enrich, Secret: enrichKey}},
		Dropped: func(_, reason string) {
			if reason == providerjob.DropRateLimited {
				limited.Add(1)
			}
		}})
	body := batchBody("v-1", "pj_missing", "FINISHED", 1, `[]`)
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		req := httptest.NewRequest(http.MethodPost, "/v1/webhooks/enrich/pj_missing", bytes.NewReader(body))
		req.RemoteAddr = "192.0.2.7:4000"
		sha1Signed(enrichKey, body)(req.Header)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("delivery %d = %d, want %d", i, rec.Code, want)
		}
		if want == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/webhooks/enrich/pj_missing", bytes.NewReader(body))
	req.RemoteAddr = "198.51.100.9:4000"
	sha1Signed(enrichKey, body)(req.Header)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("another address = %d, want 200", rec.Code)
	}
	if limited.Load() != 1 {
		t.Errorf("rate_limited counted %d, want 1", limited.Load())
	}
}

// Two nodes on one PostgreSQL receive the same ending at once, many times
// over: one transition, one usage row, one settlement event.
func TestTwoNodesSettleOnce(t *testing.T) {
	t.Parallel()
	dsn, ok := pgtest.LookupDSN()
	if !ok {
		t.Skip("PostgreSQL not tested: set " + pgtest.DSNVariable)
	}
	database := pgtest.SchemaDSN(t, dsn)
	a, b := newHarness(t, database), newHarness(t, database)
	job, org, _ := a.submitted(t, "x")
	body := batchBody(vendorID(t, a, org, job.JobID), job.JobID, "FINISHED", 5, `[{"ref":"x"}]`)
	var wg sync.WaitGroup
	for i := range 8 {
		node := a
		if i%2 == 1 {
			node = b
		}
		wg.Go(func() {
			if code := node.deliver(t, enrich, job.JobID, body, sha1Signed(enrichKey, body)); code != http.StatusOK {
				t.Errorf("delivery = %d", code)
			}
		})
	}
	wg.Wait()
	a.settled(t, org, job.JobID)
	b.sweepSettles(t)
	if n := a.audited(t, org, "provider_job_completed"); n != 1 {
		t.Errorf("%d transitions, want 1", n)
	}
	if n := a.audited(t, org, "provider_job_settled"); n != 1 {
		t.Errorf("%d settlements, want 1", n)
	}
	if c := a.cost(t, org, "run-1"); c != 50 {
		t.Errorf("run tree cost %d, want 50", c)
	}
}

// The unsettled list is a person's with the approver or auditor role, and
// their organization's alone.
func TestListUnsettledNeedsItsRole(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		job, org, _ := h.submitted(t, "a")
		h.settleFails.Store(1 << 30) // the meter is down
		body := batchBody(vendorID(t, h, org, job.JobID), job.JobID, "FINISHED", 2, `[]`)
		if code := h.deliver(t, enrich, job.JobID, body, sha1Signed(enrichKey, body)); code != http.StatusOK {
			t.Fatal(code)
		}
		auditor := &toolplane.Credential{OrganizationID: org, Kind: toolplane.CredentialPerson, Roles: []string{toolplane.RoleAuditor}}
		got, err := h.svc.ListUnsettled(ctx, auditor, 10)
		if err != nil || len(got) != 1 || got[0].ID != job.JobID {
			t.Errorf("ListUnsettled = %v, %v; want the job", got, err)
		}
		other := *auditor
		other.OrganizationID = newOrg()
		if got, err := h.svc.ListUnsettled(ctx, &other, 10); err != nil || len(got) != 0 {
			t.Errorf("another organization's auditor = %v, %v; want none", got, err)
		}
		for _, c := range []*toolplane.Credential{
			{OrganizationID: org, Kind: toolplane.CredentialAgent, Roles: []string{toolplane.RoleAuditor}},
			{OrganizationID: org, Kind: toolplane.CredentialPerson},
		} {
			if _, err := h.svc.ListUnsettled(ctx, c, 10); !errors.Is(err, toolplane.ErrForbidden) {
				t.Errorf("%+v listed unsettled jobs: %v", c, err)
			}
		}
		h.settleFails.Store(0)
	})
}
