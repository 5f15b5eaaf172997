// Package providerjob governs work a vendor finishes after the call that
// submitted it returned (an enrichment batch, a payment that settles
// later): the job record is the durable truth, a verified vendor callback
// moves it, and its cost is settled from it once.
//
// Four parts, one row each job:
//
//   - a submit tool's handler calls Service.Submit: the job is reserved
//     (its id derived from the call, so a replay finds it) before the one
//     vendor call, the vendor's id is bound from the answer, and the
//     tool's claim completes with the job id. There is no automatic retry
//     of the vendor call: a lost answer leaves the reservation for the
//     callback, and a replay answers the same job without calling again;
//   - the webhook route (Receiver) verifies a vendor's delivery, reads the
//     job the path names (the tenant comes from the row, never the body),
//     binds and moves it conditionally, and for an ending takes the
//     webhook.<provider> claim of the delivery and asks for settlement;
//   - settlement (Service.Settle, run as durable background work) writes
//     the one usage row, with an id derived from the job's, and stamps it
//     on the job where none is stamped, in one transaction;
//   - a collect tool's handler calls Service.Collect: a read of one
//     organization's job that calls no vendor and writes nothing.
//
// Service.Wait is the wait on a job: it reads the row before it starts
// waiting and again at its timeout, so a callback that lands before the
// wait begins still ends it.
package providerjob

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
)

// DefaultTTL is how long a job may run before the sweep expires it, when
// its submission names no deadline.
const DefaultTTL = 24 * time.Hour

// MaxRefs bounds the references one submission names.
const MaxRefs = 1000

// maxRef bounds one reference.
const maxRef = 256

// Config is what a Service works with.
type Config struct {
	Store toolplane.ProviderJobStore
	// PublicURL is the deployment's public base URL: a vendor is given
	// PublicURL/v1/webhooks/{provider}/{job_id} to call back.
	PublicURL string
	// Poll is how often a wait reads the job when no callback on this
	// node tells it first (another node's does not); default 1s.
	Poll   time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// Service is the provider jobs' operations, shared by the submit and
// collect handlers, the webhook route and the settlement work.
type Service struct {
	cfg Config
	mu  sync.Mutex
	// waiting are the waits on each job on this node, woken when this
	// node stores a change of the job.
	waiting map[string][]chan struct{}
}

// New answers a service on cfg.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("providerjob: a store is required")
	}
	if cfg.PublicURL != "" {
		if _, err := url.Parse(cfg.PublicURL); err != nil {
			return nil, fmt.Errorf("providerjob: public URL: %w", err)
		}
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg, waiting: map[string][]chan struct{}{}}, nil
}

// JobID answers the id of the job the call (organization, tool, key)
// submits: derived, not random, so a replay of the call (after its journal
// row expired, or after a worker lost the answer) finds the job it
// reserved. The parts are length-prefixed, so no two calls share an id.
func JobID(org, tool, key string) string {
	h := sha256.New()
	for _, p := range []string{org, tool, key} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return "pj_" + hex.EncodeToString(h.Sum(nil)[:20])
}

// UsageID answers the id of the usage row a job's settlement writes: one
// per job, whoever settles it and however often.
func UsageID(jobID string) string { return "use_" + jobID }

// CallbackURL answers the URL a vendor calls back for job.
func (s *Service) CallbackURL(job *toolplane.ProviderJob) string {
	return strings.TrimRight(s.cfg.PublicURL, "/") + "/v1/webhooks/" + url.PathEscape(job.Provider) + "/" + url.PathEscape(job.ID)
}

// Submission is what a submit tool asks of Submit.
type Submission struct {
	// Provider names the vendor's adapter (the webhook route's path
	// segment).
	Provider string
	// Refs are the submission's items' references, in order, unique.
	Refs []string
	// TTL is how long the job may run before it expires; DefaultTTL when
	// zero.
	TTL time.Duration
}

// Send is the one vendor call of a submission: it is given the reserved
// job and the URL the vendor must call back, and answers the vendor's own
// id for the job ("" when its answer names none, or when it was lost). It
// is called once per job, never again for a replay.
type Send func(ctx context.Context, job *toolplane.ProviderJob, callbackURL string) (providerJobID string, err error)

// Submitted is what a submit tool answers: the job's id is the value a
// workflow correlates on.
type Submitted struct {
	JobID    string `json:"job_id"`
	Provider string `json:"provider"`
	State    string `json:"state"`
	// Confirmed is true once the vendor's id for the job is known.
	Confirmed bool `json:"confirmed"`
}

// Submit reserves the call's job, makes the one vendor call when this
// call reserved it, and binds the vendor's id from its answer. A job
// reserved already (a replay, a concurrent twin, an earlier attempt whose
// answer was lost) is answered as it is, without a vendor call. An error
// from send is answered as it is, for the handler's classification, and
// leaves the reservation: its callback can still complete it, and a
// replay never sends it again.
func (s *Service) Submit(ctx context.Context, call handler.Call, sub Submission, send Send) (*Submitted, error) {
	inv := call.Invocation
	if inv == nil || inv.OrganizationID == "" {
		return nil, errors.New("submit: the call has no invocation")
	}
	if call.Key == "" {
		return nil, errors.New("submit: the call has no idempotency key (a submit tool must be a write)")
	}
	if err := checkRefs(sub.Refs); err != nil {
		return nil, err
	}
	if sub.Provider == "" {
		return nil, errors.New("submit: no provider")
	}
	ttl := sub.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	now := s.cfg.Now()
	job := &toolplane.ProviderJob{
		ID: JobID(inv.OrganizationID, call.Tool, call.Key), OrganizationID: inv.OrganizationID,
		RootRunID: inv.EffectiveRootRunID(), RunID: inv.RunID, Tool: call.Tool, Key: call.Key, StepPath: inv.StepPath,
		Provider: sub.Provider, Refs: sub.Refs, State: toolplane.JobSubmitted,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(ttl),
	}
	got, reserved, err := s.cfg.Store.ReserveProviderJob(ctx, job)
	if err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	if !reserved {
		if got.Provider != sub.Provider || got.Tool != call.Tool {
			return nil, fmt.Errorf("submit: job %s was reserved for %s by %s", got.ID, got.Provider, got.Tool)
		}
		return submitted(got), nil
	}
	vendorID, err := send(ctx, got, s.CallbackURL(got))
	if err != nil {
		return nil, err
	}
	if vendorID != "" {
		// The answer may come after the callback bound the id; a
		// different one is a vendor's contradiction, and a fault.
		ok, err := s.cfg.Store.BindProviderJob(context.WithoutCancel(ctx), got.OrganizationID, got.ID, vendorID, s.cfg.Now())
		if err != nil {
			return nil, fmt.Errorf("submit: bind the vendor's id: %w", err)
		}
		if !ok {
			return nil, fmt.Errorf("submit: job %s is bound to another vendor id than its submission answered", got.ID)
		}
		got.ProviderJobID = vendorID
	}
	return submitted(got), nil
}

func submitted(j *toolplane.ProviderJob) *Submitted {
	return &Submitted{JobID: j.ID, Provider: j.Provider, State: string(collectState(j.State)), Confirmed: j.ProviderJobID != ""}
}

// checkRefs refuses references a result could not be matched to by
// reference alone: empty, too long, repeated, or too many.
func checkRefs(refs []string) error {
	if len(refs) > MaxRefs {
		return &handler.Invalid{Message: fmt.Sprintf("at most %d items may be submitted at once", MaxRefs)}
	}
	seen := make(map[string]bool, len(refs))
	for i, r := range refs {
		if r == "" || len(r) > maxRef {
			return &handler.Invalid{Message: fmt.Sprintf("a reference must be 1 to %d bytes", maxRef), FieldPath: fmt.Sprintf("/refs/%d", i)}
		}
		if seen[r] {
			return &handler.Invalid{Message: "references must be unique: " + r, FieldPath: fmt.Sprintf("/refs/%d", i)}
		}
		seen[r] = true
	}
	return nil
}

// collectState is the state a collect answers: submitted and running are
// one (the work is not finished either way); every ending is its own, so
// a workflow that retries a failure does not retry a cancelled job.
func collectState(s toolplane.ProviderJobState) toolplane.ProviderJobState {
	if s == toolplane.JobSubmitted {
		return toolplane.JobRunning
	}
	return s
}

// Collected is what a collect tool answers of a job.
type Collected struct {
	JobID     string   `json:"job_id"`
	Provider  string   `json:"provider"`
	State     string   `json:"state"`
	Confirmed bool     `json:"confirmed"`
	Refs      []string `json:"refs,omitempty"`
	// Result is the vendor's result (any JSON value), once the job ended
	// (partial success of a failed or cancelled job included); absent
	// while it runs.
	Result any `json:"result,omitempty"`
	// Settled is true once the job's cost is counted.
	Settled bool `json:"settled"`
}

// Collect reads the calling organization's job of provider: an unknown
// job and another organization's answer not_found alike. It calls no
// vendor and writes nothing, so collecting again is free.
func (s *Service) Collect(ctx context.Context, call handler.Call, provider, jobID string) (*Collected, error) {
	inv := call.Invocation
	if inv == nil || inv.OrganizationID == "" {
		return nil, errors.New("collect: the call has no invocation")
	}
	j, err := s.cfg.Store.GetProviderJob(ctx, inv.OrganizationID, jobID)
	if errors.Is(err, toolplane.ErrNotFound) || err == nil && j.Provider != provider {
		return nil, &handler.NotFound{Message: "no " + provider + " job " + jobID + " in this organization"}
	}
	if err != nil {
		return nil, fmt.Errorf("collect: %w", err)
	}
	out := &Collected{JobID: j.ID, Provider: j.Provider, State: string(collectState(j.State)), Confirmed: j.ProviderJobID != "",
		Refs: j.Refs, Settled: j.UsageID != ""}
	if j.State.Terminal() {
		raw, err := s.Result(ctx, j)
		if err != nil {
			return nil, fmt.Errorf("collect: %w", err)
		}
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &out.Result); err != nil {
				return nil, fmt.Errorf("collect: result of job %s: %w", j.ID, err)
			}
		}
	}
	return out, nil
}

// Result answers the job's result, read from where it is stored: a
// result stored apart that is missing is a storage fault, never an empty
// success.
func (s *Service) Result(ctx context.Context, j *toolplane.ProviderJob) (json.RawMessage, error) {
	if j.ResultDigest == "" {
		return j.Result, nil
	}
	r, err := s.cfg.Store.GetProviderJobResult(ctx, j.OrganizationID, j.ID, j.ResultDigest)
	if err != nil {
		return nil, fmt.Errorf("result of job %s: %w", j.ID, err)
	}
	return r.Body, nil
}

// Settle counts the cost of the organization's job once: one usage row,
// id derived from the job's, stamped on the job where none is, with its
// audit event, in one transaction, whoever settles it and however often.
// A job its vendor has not ended, or one settled already, changes
// nothing. An error (the meter's) is answered for the caller to retry;
// the job stays unsettled, and listed so, meanwhile.
//
// The run that submitted the job is not consulted: it may have ended,
// been cancelled or timed out waiting, and the money is spent all the
// same, so the row names the job's run tree.
func (s *Service) Settle(ctx context.Context, org, jobID string) (bool, error) {
	j, err := s.cfg.Store.GetProviderJob(ctx, org, jobID)
	if err != nil {
		return false, fmt.Errorf("settle: %w", err)
	}
	if !j.State.Reported() || j.UsageID != "" {
		return false, nil
	}
	now := s.cfg.Now()
	u := &toolplane.Usage{ID: UsageID(j.ID), OrganizationID: j.OrganizationID, RunID: j.RunID, RootRunID: j.RootRunID,
		Tool: j.Tool, CostCents: j.CostCents, Units: j.Units, CreatedAt: now}
	ev := jobEvent(j, "provider_job_settled", toolplane.SourceWorker, now)
	// What the meter charged for the job, on the event that records it.
	ev.CostCents = j.CostCents
	ok, err := s.cfg.Store.SettleProviderJob(ctx, j.ID, u, ev)
	if err != nil {
		return false, fmt.Errorf("settle: %w", err)
	}
	return ok, nil
}

// Expire ends a job its vendor never reported on by its deadline, with its
// audit event, and wakes its waits. A job that moved meanwhile is left.
func (s *Service) Expire(ctx context.Context, j *toolplane.ProviderJob) (bool, error) {
	now := s.cfg.Now()
	ev := jobEvent(j, "provider_job_"+string(toolplane.JobExpired), toolplane.SourceSweep, now)
	ok, err := s.cfg.Store.TransitionProviderJob(ctx, j.OrganizationID, j.ID, &toolplane.ProviderJobUpdate{State: toolplane.JobExpired}, now, ev)
	if err != nil {
		return false, fmt.Errorf("expire job %s: %w", j.ID, err)
	}
	if ok {
		s.wake(j.ID)
	}
	return ok, nil
}

// jobEvent answers the audit event of a job reaching outcome: named by
// the submitting call's tool, run, step and key, the job's id as its
// reason.
func jobEvent(j *toolplane.ProviderJob, outcome string, source toolplane.Source, now time.Time) *toolplane.AuditEvent {
	return &toolplane.AuditEvent{ID: toolplane.NewID("aud_"), OrganizationID: j.OrganizationID, RunID: j.RunID, StepPath: j.StepPath,
		Tool: j.Tool, Key: j.Key, Source: source, Outcome: outcome, Reason: "provider job " + j.ID, CreatedAt: now}
}

// Wait answers the organization's job once it is terminal, or as it is
// when timeout passes or ctx ends. It reads the job before it waits and
// again once registered, so a callback stored before the wait began ends
// it at once, and reads it again at the timeout, so one missed wake-up
// costs no more than the wait.
func (s *Service) Wait(ctx context.Context, org, jobID string, timeout time.Duration) (*toolplane.ProviderJob, error) {
	j, err := s.cfg.Store.GetProviderJob(ctx, org, jobID)
	if err != nil || j.State.Terminal() || timeout <= 0 {
		return j, err
	}
	woken := s.watch(jobID)
	defer s.unwatch(jobID, woken)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(s.cfg.Poll)
	defer poll.Stop()
	for {
		if j, err = s.cfg.Store.GetProviderJob(ctx, org, jobID); err != nil || j.State.Terminal() {
			return j, err
		}
		select {
		case <-woken:
		case <-poll.C:
		case <-deadline.C:
			return s.cfg.Store.GetProviderJob(ctx, org, jobID)
		case <-ctx.Done():
			return j, ctx.Err()
		}
	}
}

func (s *Service) watch(id string) chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.waiting[id] = append(s.waiting[id], ch)
	s.mu.Unlock()
	return ch
}

func (s *Service) unwatch(id string, ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.waiting[id]
	for i, c := range list {
		if c == ch {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(s.waiting, id)
	} else {
		s.waiting[id] = list
	}
}

// wake tells this node's waits on the job that it changed.
func (s *Service) wake(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.waiting[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Unsettled answers jobs their vendor ended whose cost is not counted,
// across organizations: the settlement sweep's read.
func (s *Service) Unsettled(ctx context.Context, limit int) ([]toolplane.ProviderJob, error) {
	return s.cfg.Store.AllUnsettledProviderJobs(ctx, limit)
}

// UnsettledOf answers the organization's jobs whose cost is spent and not
// yet counted: a person's view of what a meter outage left owed.
func (s *Service) UnsettledOf(ctx context.Context, org string, limit int) ([]toolplane.ProviderJob, error) {
	return s.cfg.Store.UnsettledProviderJobs(ctx, org, limit)
}

// Overdue answers unfinished jobs past their deadline at now, across
// organizations: the expiry sweep's read.
func (s *Service) Overdue(ctx context.Context, now time.Time, limit int) ([]toolplane.ProviderJob, error) {
	return s.cfg.Store.OverdueProviderJobs(ctx, now, limit)
}

// MayListUnsettled refuses a caller who may not read what the
// organization owes its vendors: it needs the approver or auditor role, as
// the uncertain actions do.
func MayListUnsettled(by *toolplane.Credential) error {
	if by == nil || !by.HasAnyRole(toolplane.RoleApprover, toolplane.RoleAuditor) {
		return toolplane.Refuse(by, toolplane.ErrForbidden, "listing unsettled provider jobs needs the approver or auditor role")
	}
	return nil
}

// ListUnsettled answers the caller's organization's jobs whose cost is
// spent and not yet counted, oldest ending first, for by, who may
// (MayListUnsettled).
func (s *Service) ListUnsettled(ctx context.Context, by *toolplane.Credential, limit int) ([]toolplane.ProviderJob, error) {
	if err := MayListUnsettled(by); err != nil {
		return nil, err
	}
	return s.cfg.Store.UnsettledProviderJobs(ctx, by.OrganizationID, limit)
}

// Watch answers the caller's organization's job for by, who may read the
// organization's provider jobs (the approver or auditor role, as
// MayListUnsettled), once it ended or when wait passes (Wait): the
// long-poll a person or an operator's tool follows a job by. Another
// organization's job is not found.
func (s *Service) Watch(ctx context.Context, by *toolplane.Credential, jobID string, wait time.Duration) (*toolplane.ProviderJob, error) {
	if err := MayListUnsettled(by); err != nil {
		return nil, err
	}
	return s.Wait(ctx, by.OrganizationID, jobID, wait)
}
