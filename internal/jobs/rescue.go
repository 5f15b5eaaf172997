package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolplane/toolplane"
)

// How long each job may run. River cancels a job's context at its
// worker's timeout, and its rescuer takes back a job still running
// RescueStuckJobsAfter after it started (see rescueAfter): a job whose
// process died is otherwise running forever in River's eyes, and the
// sweeps cannot enqueue it again, since a job is unique while it runs.
const (
	// jobTimeout bounds the sweeps, the expiry of an approval, retention
	// and sunset: a few bounded reads and writes each. A sweep stopped
	// short goes on at its next period.
	jobTimeout = 30 * time.Second
	// executeTimeout bounds the execution of an approved call and the
	// replay of a lost one: the tool's handler (30 s unless its
	// definition says otherwise) and the journal, policy and audit writes
	// around it. A handler that outlives it keeps running under its own
	// timeout; a second run of the job meanwhile finds its claim in
	// flight and waits, so the effect still happens once.
	executeTimeout = time.Minute
	// rescueMargin is what a job may overrun its timeout before River
	// counts it stuck: the time to record its ending.
	rescueMargin = 15 * time.Second
)

// rescueAfter answers River's RescueStuckJobsAfter for opt: the largest
// timeout any worker declares, plus the margin.
func rescueAfter(opt Options) time.Duration {
	return max(jobTimeout, executeTimeout, opt.NotifyTimeout) + rescueMargin
}

// lostReason is the error a job taken back from a dead node records;
// stuckReason a job running past its timeout and the margin on a node
// not known dead.
const (
	lostReason  = "the node running this job stopped (no heartbeat); job taken back by toolplane's lease sweep"
	stuckReason = "the job ran past its timeout and margin; taken back by toolplane's lease sweep"
)

// rescueLost puts back the jobs running on node instances known dead:
// their process was killed or lost its database, so River would keep them
// running until its rescuer's horizon. River names the client that took
// a job in attempted_by, and a node's River client is named by its
// instance id (Options.Node), the one it heartbeats under. A job is
// rescued only while it is still the attempt read (state running, started
// when it was read), so a job another sweep put back and a live node took
// since is left alone.
//
// A job running past RescueStuckJobsAfter on any other node (a worker
// hung past its timeout, a River client no node registered) is taken
// back too, as River's rescuer would: the rescuer runs only on River's
// leader while its client runs, and a resting client (rest.go) runs none.
//
// A rescued job runs again at once, on any node, as a retry would: an
// execution goes through the journal, so its effect still happens once; a
// notification may be delivered twice (the one the dead node was sending
// may have reached its receiver), with the same X-Toolplane-Delivery.
func (w *work) rescueLost(ctx context.Context, now time.Time) error {
	if w.exec == nil {
		return nil
	}
	// River's times are the wall clock's, whatever clock the sweep
	// judges heartbeats by.
	at := time.Now()
	dead := map[string]bool{}
	// The queues of the jobs made available again: River tells no
	// producer of a direct update, and a queue's poll is only a fallback
	// (see wakeups.go), so they are woken here.
	var woken []string
	defer func() {
		if len(woken) > 0 {
			w.rest.wake()
		}
		if err := w.wake.now(ctx, woken); err != nil {
			w.opt.Logger.WarnContext(ctx, "queues of rescued jobs not woken; their poll finds the jobs", "err", err)
		}
	}()
	for after := int64(0); ; {
		running, err := w.exec.JobGetStuck(ctx, &riverdriver.JobGetStuckParams{AfterID: after, Max: sweepBatch, StuckHorizon: at})
		if err != nil {
			return fmt.Errorf("running jobs: %w", err)
		}
		for _, job := range running {
			after = job.ID
			if len(job.AttemptedBy) == 0 || job.AttemptedAt == nil {
				continue
			}
			node := job.AttemptedBy[len(job.AttemptedBy)-1]
			gone, ok := dead[node]
			if !ok {
				if gone, err = w.nodeGone(ctx, node, now); err != nil {
					return err
				}
				dead[node] = gone
			}
			after, judged := w.stuckAfter(job.Kind)
			stuck := judged && job.AttemptedAt.Before(at.Add(-after))
			if gone || stuck {
				reason := lostReason
				if !gone {
					reason = stuckReason
				}
				if err := w.rescueJob(ctx, job, node, reason, at); err != nil {
					return err
				}
				if !slices.Contains(woken, job.Queue) {
					woken = append(woken, job.Queue)
				}
			}
		}
		if len(running) < sweepBatch {
			return nil
		}
	}
}

// stuckAfter answers how long a job of kind may run on a live node before
// the sweep takes it back, as River's rescuer judges it: past
// RescueStuckJobsAfter (rescueAfter) and past its worker's own timeout
// (the client's, jobTimeout, for a worker that sets none), so a 30-minute
// retention pass is not taken back at 75 s and run twice at once. A
// worker with no timeout (negative: an asynchronous tool's run, which
// may take hours) is never judged stuck (judged false); a dead node's
// jobs are taken back all the same. Nor is a kind no worker here
// registered (another node's, configured with more services): this node
// cannot know its timeout, and the nodes that run it judge it.
func (w *work) stuckAfter(kind string) (after time.Duration, judged bool) {
	t, ok := w.timeouts[kind]
	switch {
	case !ok, t < 0:
		return 0, false
	case t == 0:
		t = jobTimeout
	}
	return max(rescueAfter(w.opt), t), true
}

// nodeGone reports whether the node instance id is known dead
// (toolplane.Node.Dead): retired by a restart under its name, or silent
// for Options.DeadAfter or longer. This node is never gone to itself, and
// an id no node registered (a River client of another program, or a node
// retention removed long ago) is not known dead: River's rescuer decides
// its jobs.
func (w *work) nodeGone(ctx context.Context, id string, now time.Time) (bool, error) {
	if id == w.opt.Node {
		return false, nil
	}
	n, err := w.deps.Store.GetNode(ctx, id)
	if errors.Is(err, toolplane.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("node of a running job: %w", err)
	}
	return n.Dead(now, w.opt.DeadAfter), nil
}

// rescueJob makes job, running on node (dead, or stuck past its
// timeout), available again now, recording reason. A job that has used
// its attempts still gets this one run, so the worker's own last-attempt
// handling applies (an execution given up is audited, a notification
// dead-lettered and its secondary tried); a job killed past its attempts
// (one that may be what kills its nodes) is discarded.
func (w *work) rescueJob(ctx context.Context, job *rivertype.JobRow, node, reason string, now time.Time) error {
	state, finalized := rivertype.JobStateAvailable, (*time.Time)(nil)
	if job.Attempt > job.MaxAttempts {
		state, finalized = rivertype.JobStateDiscarded, &now
	}
	attemptErr, err := json.Marshal(rivertype.AttemptError{At: now, Attempt: max(job.Attempt, 0), Error: reason + ": " + node})
	if err != nil {
		return fmt.Errorf("rescue job %d: %w", job.ID, err)
	}
	// The horizon just after the attempt read: a later attempt of the
	// same job (taken back and started again since) is not touched.
	if _, err := w.exec.JobRescueMany(ctx, &riverdriver.JobRescueManyParams{
		ID: []int64{job.ID}, Error: [][]byte{attemptErr}, FinalizedAt: []*time.Time{finalized},
		ScheduledAt: []time.Time{now}, State: []string{string(state)}, StuckHorizon: job.AttemptedAt.Add(time.Millisecond),
	}); err != nil {
		return fmt.Errorf("rescue job %d (%s) of node %s: %w", job.ID, job.Kind, node, err)
	}
	w.opt.Logger.WarnContext(ctx, "job taken back", "job", job.ID, "kind", job.Kind, "node", node,
		"attempt", job.Attempt, "state", state, "reason", reason)
	return nil
}
