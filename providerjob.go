package toolplane

import (
	"context"
	"time"
)

// ProviderJobState is where a provider job stands. A job moves forward
// only: submitted → running → a terminal state, each move conditional on
// the state it leaves (see ProviderJobState.From), so a delivery that
// arrives late or twice changes nothing.
type ProviderJobState string

// The provider job states.
const (
	// JobSubmitted: the job is reserved and its submission was sent, or
	// is being sent; the vendor has not said it is working on it.
	JobSubmitted ProviderJobState = "submitted"
	// JobRunning: the vendor reported progress.
	JobRunning ProviderJobState = "running"
	// JobCompleted, JobFailed and JobCancelled are the vendor's own
	// endings, and what its cost is settled from.
	JobCompleted ProviderJobState = "completed"
	JobFailed    ProviderJobState = "failed"
	JobCancelled ProviderJobState = "cancelled"
	// JobExpired is the platform's ending for a job the vendor never
	// reported on by its deadline: it ends every wait on the job. The
	// vendor's own ending still outranks it (a report that arrives after
	// the deadline is recorded, and its cost settled), because the money
	// was spent whether or not anyone still waited.
	JobExpired ProviderJobState = "expired"
)

// rank orders the states: a job moves only to a state of a higher rank.
func (s ProviderJobState) rank() int {
	switch s {
	case JobSubmitted:
		return 0
	case JobRunning:
		return 1
	case JobExpired:
		return 2
	case JobCompleted, JobFailed, JobCancelled:
		return 3
	}
	return -1
}

// Valid reports whether s is one of the states.
func (s ProviderJobState) Valid() bool { return s.rank() >= 0 }

// Terminal reports whether the job's work is over: a wait on it ends.
func (s ProviderJobState) Terminal() bool { return s.rank() >= 2 }

// Reported reports whether s is an ending the vendor reported, the endings
// whose cost is settled.
func (s ProviderJobState) Reported() bool { return s.rank() == 3 }

// From answers the states a job may move to s from: every state of a
// lower rank. A vendor's ending never replaces another (the first one
// stored stays), and nothing moves a job back.
func (s ProviderJobState) From() []ProviderJobState {
	var out []ProviderJobState
	for _, f := range []ProviderJobState{JobSubmitted, JobRunning, JobExpired} {
		if f.rank() >= 0 && f.rank() < s.rank() {
			out = append(out, f)
		}
	}
	return out
}

// ReportedJobStates are the states whose cost is settled.
var ReportedJobStates = []ProviderJobState{JobCompleted, JobFailed, JobCancelled}

// MaxInlineJobResult bounds the result a provider job row holds itself; a
// larger one is stored apart, by digest (ProviderJobResult).
const MaxInlineJobResult = 32 << 10

// ProviderJob is one unit of work a vendor finishes after the call that
// submitted it returned, and the durable truth about it: a callback
// records its outcome here before anything is told, and the cost is
// settled from it once.
type ProviderJob struct {
	// ID is the platform's job id, minted (derived from the submitting
	// call) before the vendor is called: the correlation key, and the last
	// segment of the callback URL the vendor is given.
	ID             string
	OrganizationID string
	// RootRunID is the run tree the cost belongs to; RunID the run that
	// submitted.
	RootRunID string
	RunID     string
	// Tool and Key name the submitting call: its tool and idempotency
	// key. StepPath is its workflow node.
	Tool     string
	Key      string
	StepPath string
	// Provider names the vendor adapter; ProviderJobID is the vendor's own
	// id, empty until the submit answer or a verified callback binds it,
	// and never changed once bound. (Provider, ProviderJobID) is unique.
	Provider      string
	ProviderJobID string
	// Refs are the ordered, unique references of the items the submission
	// named, so a result is matched to what was asked by reference alone.
	Refs  []string
	State ProviderJobState
	// Result is the vendor's result (JSON) when it fits in
	// MaxInlineJobResult; otherwise ResultDigest names the
	// ProviderJobResult that holds it, and Result is empty.
	Result       []byte
	ResultDigest string
	// CostCents and Units are what the vendor reported the job cost.
	CostCents int64
	Units     int64
	// UsageID is the one usage row the settlement wrote; empty until then.
	UsageID   string
	CreatedAt time.Time
	UpdatedAt time.Time
	// TerminalAt is when the job reached a terminal state; zero before.
	TerminalAt time.Time
	// ExpiresAt is the job's deadline: a job still unfinished then is
	// expired by the sweep. Zero means none.
	ExpiresAt time.Time
}

// ProviderJobUpdate is one move of a job: its next state and, for an
// ending, what the vendor reported with it. The state, the result and the
// cost are stored together by one conditional write, so a competing
// delivery can never pair its cost with another's result.
type ProviderJobUpdate struct {
	State        ProviderJobState
	Result       []byte
	ResultDigest string
	CostCents    int64
	Units        int64
}

// ProviderJobResult is a job's result too large for its row, stored once
// under the SHA-256 digest of its body and read only with the job's
// organization.
type ProviderJobResult struct {
	OrganizationID string
	JobID          string
	Digest         string
	Body           []byte
}

// ProviderJobStore is the storage of provider jobs. Every method but
// LookupProviderJob and the two maintenance reads is scoped to one
// organization.
type ProviderJobStore interface {
	// ReserveProviderJob stores j unless a job with its ID exists, and
	// answers the stored job and whether this call stored it: only the
	// caller that stored it calls the vendor; every other answers the
	// same reserved job. A job of that ID in another organization is an
	// error wrapping ErrExists.
	ReserveProviderJob(ctx context.Context, j *ProviderJob) (*ProviderJob, bool, error)
	// GetProviderJob answers the organization's job, or ErrNotFound
	// (another organization's included).
	GetProviderJob(ctx context.Context, org, id string) (*ProviderJob, error)
	// LookupProviderJob answers the job with that ID whatever its
	// organization, or ErrNotFound. It is the webhook route's read, made
	// only after the delivery's signature was verified: the job, not the
	// body, says whose it is. IDs are unique across organizations.
	LookupProviderJob(ctx context.Context, id string) (*ProviderJob, error)
	// BindProviderJob sets the job's ProviderJobID where none is bound,
	// and reports whether the job is now bound to providerJobID (true
	// too when it already was). False means it is bound to another,
	// which never changes. Another job of the same provider bound to
	// providerJobID is an error wrapping ErrExists; no such job,
	// ErrNotFound.
	BindProviderJob(ctx context.Context, org, id, providerJobID string, at time.Time) (bool, error)
	// TransitionProviderJob moves the job to u.State where its state is
	// one of u.State.From(), storing u's result and cost with it, and e
	// (when not nil) in the same transaction; it reports whether it
	// moved. A terminal state sets TerminalAt.
	TransitionProviderJob(ctx context.Context, org, id string, u *ProviderJobUpdate, at time.Time, e *AuditEvent) (bool, error)
	// PutProviderJobResult stores r unless its job already holds a result
	// of that digest (bodies are immutable, so the first one stays). The
	// job must be r's organization's.
	PutProviderJobResult(ctx context.Context, r *ProviderJobResult) error
	// GetProviderJobResult answers the organization's stored result, or
	// ErrNotFound.
	GetProviderJobResult(ctx context.Context, org, jobID, digest string) (*ProviderJobResult, error)
	// SettleProviderJob settles the job's cost once: where its state is
	// one of ReportedJobStates and its UsageID is empty, it stores u (the
	// usage row, whose ID is derived from the job's) and stamps u.ID as
	// the job's UsageID, with e, all in one transaction, and reports
	// true. A job settled already (or not yet ended by its vendor)
	// changes nothing and answers false.
	SettleProviderJob(ctx context.Context, jobID string, u *Usage, e *AuditEvent) (bool, error)
	// UnsettledProviderJobs answers the organization's jobs ended by
	// their vendor and not settled, oldest ending first: costs spent and
	// not yet counted.
	UnsettledProviderJobs(ctx context.Context, org string, limit int) ([]ProviderJob, error)
	// AllUnsettledProviderJobs is UnsettledProviderJobs across
	// organizations, for the settlement sweep.
	AllUnsettledProviderJobs(ctx context.Context, limit int) ([]ProviderJob, error)
	// OverdueProviderJobs answers jobs across organizations not yet
	// terminal whose deadline is before now, soonest first, for the
	// expiry sweep.
	OverdueProviderJobs(ctx context.Context, now time.Time, limit int) ([]ProviderJob, error)
}
