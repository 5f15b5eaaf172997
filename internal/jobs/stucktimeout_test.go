package jobs_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolplane/toolplane/internal/jobs"
)

// TestSweepJudgesAStuckJobByItsOwnTimeout: the sweep takes back a job
// still running on a live node as River's rescuer would, past its
// worker's own timeout and the margin, not past one horizon for every
// kind. Two minutes in, an audit retention pass (30 minutes) is left
// running, where a second worker would run it twice at once; an approved
// call's execution (one minute) is taken back. A kind with no timeout (an
// asynchronous call's run, which may take hours) is never judged stuck,
// nor a kind this node has no worker for.
func TestSweepJudgesAStuckJobByItsOwnTimeout(t *testing.T) {
	for name, database := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var effects atomic.Int64
			n := startNode(t, database, time.Hour, &effects, func(o *jobs.Options) {
				o.DeadAfter, o.SweepEvery = 2*time.Second, 200*time.Millisecond
			})
			live, err := jobs.Register(ctx, n.store, "node-live", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			beat, stop := context.WithCancel(ctx)
			t.Cleanup(stop)
			go jobs.Heartbeat(beat, n.store, live, 100*time.Millisecond, nil, slog.New(slog.DiscardHandler))
			exec := riverExecutor(t, database)
			at := time.Now().Add(-2 * time.Minute)
			jobsOf := []struct {
				kind, queue string
				args        string
				takenBack   bool
			}{
				{"toolplane_audit_retention", "default", `{}`, false},
				{"toolplane_execute_approved", "default", `{"org":"org-1","approval_id":"apr_none"}`, true},
			}
			ids := make([]int64, len(jobsOf))
			for i, j := range jobsOf {
				row, err := exec.JobInsertFull(ctx, &riverdriver.JobInsertFullParams{
					Attempt: 1, AttemptedAt: &at, AttemptedBy: []string{live.ID}, EncodedArgs: []byte(j.args),
					Kind: j.kind, MaxAttempts: 5, Priority: 1, Queue: j.queue, State: rivertype.JobStateRunning, Metadata: []byte(`{}`),
				})
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = row.ID
			}
			if after, judged := jobs.StuckAfter(n.runner, "toolplane_audit_retention"); !judged || after != 30*time.Minute {
				t.Errorf("an audit retention pass is judged stuck after %v (%v), want its own 30 min", after, judged)
			}
			for _, kind := range []string{"toolplane_async_run", "no_such_kind"} {
				if after, judged := jobs.StuckAfter(n.runner, kind); judged {
					t.Errorf("%s is judged stuck after %v, want never on a live node", kind, after)
				}
			}
			n.start(t)
			time.Sleep(2 * time.Second) // ten sweeps
			for i, j := range jobsOf {
				row, err := exec.JobGetByID(ctx, &riverdriver.JobGetByIDParams{ID: ids[i]})
				if err != nil {
					t.Fatal(err)
				}
				if running := row.State == rivertype.JobStateRunning; running == j.takenBack {
					t.Errorf("%s, running 2 min on a live node: %s after the sweeps (errors %v), want taken back %v", j.kind, row.State, row.Errors, j.takenBack)
				}
			}
		})
	}
}
