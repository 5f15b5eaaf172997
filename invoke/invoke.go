// Package invoke is the one path every tool call takes, whichever door it
// came in by (REST, MCP, SDK, a resume after approval, a background worker).
// The order is fixed:
//
//	open the span (arguments redacted); a call made from a handler's
//	   context is that call's child (its caller, its remaining time, one
//	   hop fewer, its audit event naming the parent)
//	-> no hop left (max_hops_exceeded): refused before anything is read
//	-> a fresh call from a door: its principal, from the credential the
//	   door verified (Config.Principals: the grants and the key of now)
//	-> resolve the tool (at the range the principal's grant pins); a write
//	   without a run or key, or a metered call without a run, answers
//	   *RunRequiredError; a frozen contract that changed answers tool_changed
//	-> validate with bounded coercion (invalid_input), batch limit (batch_too_large)
//	-> write or send: derive the key once, read the journal
//	     completed -> the stored result, replayed; processing -> ErrInFlight;
//	     conflict -> conflict; uncertain -> uncertain
//	-> less time left than the floor (the tool's timeout cut to the
//	   caller's deadline): deadline_exceeded
//	-> an authorized_by that covers the call: approved skips only the
//	   approval step, rejected answers rejected; one that does not cover the
//	   call is ignored and the call is decided live
//	-> policy facts, then the policy: deny -> denied; require_approval ->
//	   a prior rejection of this call answers rejected, otherwise the
//	   approval is filed and ApprovalRequired returned
//	-> a metered tool passes accrual against the run tree (budget_exhausted)
//	-> less time left than the floor after deciding: deadline_exceeded
//	-> write or send: claim the key (the claim decides again)
//	-> run the handler under min(timeout, deadline), marked dispatched first;
//	   a transient failure is attempted again inside that time where a
//	   second attempt cannot be a second effect (retry.go), under the
//	   same claim and key
//	-> classify the ending, validate the output (invalid_output), redact,
//	   bound, label -> complete, release or hold the claim
//	-> usage row, audit event, close the span.
//
// A refusal and every tool outcome is a toolplane.Result. A Go error is
// returned only for a platform fault (wrapping ErrFault), for a live
// in-flight claim on the call's own key (ErrInFlight), for an approval
// required (*ApprovalRequired), and for the caller's malformed request (an
// identifier past its bound, *toolplane.TooLongError; a missing run or
// key, *RunRequiredError).
package invoke

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/journal"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/resilience"
)

// ErrInFlight: another worker holds a live claim on this call's key. The
// caller retries later; the model reads nothing for it. The error a call
// answers is an *InFlightError, which says more.
var ErrInFlight = errors.New("call in flight: another worker holds its claim")

// Repeated reports whether an invocation's answer (res, err) is that of a
// repeat: the journal already held the call's key, completed, uncertain
// or in flight, and no tool ran for it. A client retrying after a crash or
// a lost answer gets such answers; the doors charge them to the key's
// retry budget rather than its request budget (apikey.Gate.Repeated), so
// recovering never costs a client its rate.
func Repeated(res toolplane.Result, err error) bool {
	if err != nil {
		return errors.Is(err, ErrInFlight)
	}
	return res.Meta.Repeat
}

// InFlightError is the answer to a call whose key another worker holds: it
// says whether that worker's node still answers and when the claim will be
// decided at the latest, so a caller waits as long as it must and no
// longer. It wraps ErrInFlight.
type InFlightError struct {
	Tool, Key string
	// SilentSince, when not zero, is the last heartbeat of the holder's
	// node: the node stopped answering and is presumed dead.
	SilentSince time.Time
	// DecidedBy is when the claim will be decided at the latest: released
	// if the call never reached its handler, otherwise run again (a tool
	// safe to replay) or held as an uncertain action.
	DecidedBy time.Time
	// Now is when the answer was made.
	Now time.Time
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Tool, e.Key, ErrInFlight)
}

// Unwrap answers ErrInFlight.
func (e *InFlightError) Unwrap() error { return ErrInFlight }

// RetryAfter is how long a caller should wait before calling again: until
// the claim is decided when its node stopped answering, a moment when it
// runs.
func (e *InFlightError) RetryAfter() time.Duration {
	if e.SilentSince.IsZero() {
		return time.Second
	}
	return max(time.Second, e.DecidedBy.Sub(e.Now))
}

// Message is what the caller (or model) reads.
func (e *InFlightError) Message() string {
	if e.SilentSince.IsZero() {
		return fmt.Sprintf("an identical call is running; try again shortly (it will be decided by %s at the latest)", e.DecidedBy.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("an identical call was started on a node that stopped answering at %s; it will be decided by %s (released if it never reached the tool, otherwise reported as uncertain); call again then with the same key",
		e.SilentSince.UTC().Format(time.RFC3339), e.DecidedBy.UTC().Format(time.RFC3339))
}

// ErrFault marks platform faults: the caller must stop, never answer the
// model with a confident result.
var ErrFault = errors.New("platform fault")

// ErrPrincipalUnavailable: the caller's principal (its grants, its key)
// could not be read, so the call was not decided. It comes wrapped with
// ErrFault; a door may tell its caller to retry later.
var ErrPrincipalUnavailable = errors.New("the caller's grants cannot be read")

// RunRequiredError refuses a call that lacks what its tool needs to be
// counted or made once: a write or send names its run or carries an
// idempotency key (so a retry is the same action), and a metered tool is
// called within a run (whose budget it is counted against). A call from a
// door (its invocation carries the caller's credential) gets it as the
// caller's malformed request, answered before the call is decided, which
// the door reports at Field; an in-process call site without a run is a
// wiring fault instead (an internal_error result, reported).
type RunRequiredError struct {
	Tool string
	// Metered is set when the tool is metered (and so needs a run, which
	// a key does not replace).
	Metered bool
	// Approval is set when the call waits for a person: its approval is
	// scoped by the run or the caller's key, so that asking again is the
	// same call, not a new approval (nor one approval covering every
	// later call).
	Approval bool
}

func (e *RunRequiredError) Error() string {
	if e.Metered {
		return "a metered tool is called within a run (run_id), whose budget it is counted against"
	}
	if e.Approval {
		return "a call that waits for a person's approval names its run (run_id) or carries an idempotency_key, so that asking again is the same call"
	}
	return "a write names its run (run_id) or carries an idempotency_key, so a retry is the same action"
}

// Field names the request field the caller adds to make the call.
func (e *RunRequiredError) Field() string { return "run_id" }

// ApprovalRequired is returned when the call waits for a person.
type ApprovalRequired struct {
	ID        string
	ExpiresAt time.Time
	// Preview is the line the person reads (empty when none).
	Preview string
	// Existing is set when the approval was filed before, for an identical
	// call (in this run, or by the same agent in another run): the call is
	// still waiting for it and nothing new was filed.
	Existing bool
	// Ignored, when set, says why the call's authorized_by did not
	// authorize it (see IgnoredAuthorization), so the caller learns why it
	// waits again instead of believing its approval was lost.
	Ignored string
}

func (e *ApprovalRequired) Error() string {
	return fmt.Sprintf("approval %s required (expires %s)", e.ID, e.ExpiresAt.Format(time.RFC3339))
}

// Reporter receives platform faults that an operator must see. The invoker
// reports each cause at most once per ReportEvery and logs every
// occurrence, so a fan out of calls meeting one wiring fault is one
// report, not hundreds.
type Reporter interface {
	Report(ctx context.Context, cause string, err error)
}

// Remotes answers the binding that calls a tool on a remote server. It is
// asked before anything else is decided about a call, so it is where the
// remote's presence is checked: an error wrapping toolplane.ErrNotFound
// means the server no longer publishes the tool (tool_unavailable); any
// other error means the server cannot be reached now (unavailable).
type Remotes interface {
	Binding(r *toolplane.RemoteBinding) (*handler.Binding, error)
}

// Runtimes builds the binding of a tool the platform runs itself: one
// whose definition binds an HTTP request (binding.http) or a SQL statement
// (binding.sql). An error means this deployment cannot run it
// (tool_unavailable); the definition passed the registry's checks.
type Runtimes interface {
	Binding(d *toolplane.Definition) (*handler.Binding, error)
}

// Broker releases the connection a call needs, with its secret, for one
// call the policy allowed. It chooses among the organization's
// connections of the tool's provider (the person's own, for a call made
// for a person), checks the connection's scope again (tool, agent,
// amounts) and answers a *toolplane.ConnectionError when none is usable.
// Any other error is a platform fault.
type Broker interface {
	Release(ctx context.Context, r Release) (*toolplane.Released, error)
}

// Refusals is a Broker that is told when the downstream refused the
// credential it released for a call (the handler answered
// handler.CredentialRefused): it may record that the connection needs a
// new consent, and answers the call's refusal, a connection_expired
// naming where the person connects again. Nil keeps the handler's
// ending.
type Refusals interface {
	Refused(ctx context.Context, r Release, c *toolplane.Connection) *toolplane.ConnectionError
}

// Renewals is a Broker that can renew the credential it released for a
// call once the downstream refused it (the handler answered
// handler.CredentialRefused, which says the downstream did nothing with
// the request): a token the provider ended early, or one a refresh would
// replace, need not cost the person a new consent. Renew answers the
// connection with a credential other than the refused one, for the
// handler to be called once more; nil and no error when it has none to
// offer (the connection's credential is not one it renews), so that the
// refusal stands; or a *toolplane.ConnectionError that is the call's
// answer (the provider refused the renewal, or cannot be reached).
type Renewals interface {
	Renew(ctx context.Context, r Release, refused *toolplane.Released) (*toolplane.Released, error)
}

// Release is what a broker is told of the call it releases a connection
// for.
type Release struct {
	Invocation *toolplane.Invocation
	Tool       *toolplane.Definition
	// Arguments are the validated, coerced arguments.
	Arguments any
}

// Config wires an Invoker.
type Config struct {
	Registry *registry.Registry
	Handlers *handler.Registry
	// Remotes runs tools bound to a remote server (binding.remote); nil
	// means this deployment has none, and such a tool is unavailable.
	Remotes Remotes
	// Runtimes runs tools bound to an HTTP request or a SQL statement;
	// nil means this deployment runs none, and such a tool is unavailable.
	Runtimes Runtimes
	// Broker releases the connection of a tool the platform runs itself;
	// without one, such a tool is unavailable.
	Broker Broker
	Store  toolplane.Store
	Policy policy.Policy
	// Facts resolve the policy facts tools declare, before each decision,
	// beside those the handlers registered (handler.WithFact); FactTimeout
	// bounds each fact (default policy.DefaultFactTimeout). A
	// fact that fails or runs past it answers internal_error, and nothing
	// runs.
	Facts       policy.Facts
	FactTimeout time.Duration
	Approvals   *approval.Service
	// Observer, when set, is told of every call's outcome, latency, stage
	// times and cost (the metrics).
	Observer Observer
	// DailyCeilings, when set, says whether an organization has a daily
	// spend ceiling (spend.Known): a metered call of one that has none
	// skips reading the day's counter. Without it the counter is read on
	// every metered call.
	DailyCeilings DailyCeilings
	// Principals, when set, answers the live principal of a call: a fresh
	// call from a door is decided on what its credential's grants allow
	// now, and a call run later from storage (an approved call, a replay)
	// on the grants of now, not of when it was made. Without it a fresh
	// call's principal is what its key's own tools name (a deployment
	// without grants), and a stored call keeps its stored principal.
	Principals Principals
	// Audit, when set, appends audit events off the hot path; without it
	// each call appends to Store itself.
	Audit *audit.Writer
	// Tracer opens the span of each call; nil records nothing.
	Tracer   trace.Tracer
	Logger   *slog.Logger
	Reporter Reporter
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Node names this process in lease owners, and is the node instance
	// each claim records as its holder (see NodeDeadAfter).
	Node string
	// LeaseMargin is added to a tool's timeout to form its claim lease, so
	// a live call never loses its lease; default DefaultLeaseMargin.
	LeaseMargin time.Duration
	// NodeDeadAfter, when set, is how long a node may go without a
	// heartbeat before it is known dead: a claim its node no longer
	// heartbeats for is decided then, not at the end of its lease, and a
	// caller waiting on one is told the node stopped answering. Node must
	// then name this node's registered instance (see jobs.Register).
	NodeDeadAfter time.Duration
	// Stream bounds what a streamed call (see Streamed) streams.
	Stream StreamLimits
	// Traffic, when set, is the node's circuit breakers, bulkheads and
	// load shedder, asked before each call is claimed or dispatched; nil
	// turns them off.
	Traffic *resilience.Traffic
	// MaxHops is the most tool-to-tool hops below a call from a door
	// (see toolplane.Invocation.Hops); zero is DefaultMaxHops, negative
	// none (no tool calls a tool). A caller asking for more gets this
	// many.
	MaxHops int
	// DeadlineFloor is the least time a call must have left, under its
	// caller's deadline, to be claimed and sent; a call with less is
	// refused with deadline_exceeded, nothing claimed. Zero is
	// DefaultDeadlineFloor.
	DeadlineFloor time.Duration
	// CallLimits, when set, limits the fresh calls from a door per agent
	// and per tool (see limits.go); a call past one is answered
	// rate_limited with its wait.
	CallLimits CallLimits
}

// DefaultLeaseMargin is the default LeaseMargin. A lease must outlast
// the call it covers: the handler's timeout, plus the journal writes and
// the answer's rendering after it, on a node that may be paused (a garbage
// collection, a stalled disk, a busy database) for several seconds. A
// lease lost by a live call makes its effect uncertain; a lease too long
// only delays the decision for a dead one, which node heartbeats now
// shorten. So the margin is generous.
const DefaultLeaseMargin = 30 * time.Second

// Invoker runs calls.
type Invoker struct {
	cfg     Config
	journal *journal.Journal
	tracer  trace.Tracer
	// untraced is set when no tracer was configured: the spans go to a
	// tracer that keeps nothing of them, their names included.
	untraced bool
	log      *slog.Logger
	now      func() time.Time
	reported sync.Map // tool and fault cause -> *faultTally
	settling sync.WaitGroup
	sched    Scheduler
	notice   Notice
	seq      uint64
	seqMu    sync.Mutex
}

// New answers an invoker. Registry, Handlers, Store and Policy are
// required.
func New(cfg Config) (*Invoker, error) {
	switch {
	case cfg.Registry == nil:
		return nil, errors.New("invoke: a registry is required")
	case cfg.Handlers == nil:
		return nil, errors.New("invoke: a handler registry is required")
	case cfg.Policy == nil:
		return nil, errors.New("invoke: a policy is required")
	}
	iv := &Invoker{cfg: cfg, tracer: cfg.Tracer, log: cfg.Logger, now: cfg.Now}
	if iv.tracer == nil {
		iv.tracer, iv.untraced = noop.NewTracerProvider().Tracer("toolplane"), true
	}
	if iv.log == nil {
		iv.log = slog.Default()
	}
	if iv.now == nil {
		iv.now = time.Now
	}
	if iv.cfg.LeaseMargin <= 0 {
		iv.cfg.LeaseMargin = DefaultLeaseMargin
	}
	if iv.cfg.Node == "" {
		iv.cfg.Node = "node"
	}
	switch {
	case iv.cfg.MaxHops == 0:
		iv.cfg.MaxHops = DefaultMaxHops
	case iv.cfg.MaxHops < 0:
		iv.cfg.MaxHops = 0
	}
	if iv.cfg.DeadlineFloor <= 0 {
		iv.cfg.DeadlineFloor = DefaultDeadlineFloor
	}
	if cfg.Store != nil {
		iv.journal = journal.New(cfg.Store, iv.now)
		if cfg.NodeDeadAfter > 0 {
			iv.journal.WatchNodes(cfg.Store, cfg.NodeDeadAfter)
		}
	}
	return iv, nil
}

// Wait blocks until every late settlement the invoker is waiting for has
// ended; a server calls it on shutdown, tests before they inspect.
func (iv *Invoker) Wait() { iv.settling.Wait() }

// owner answers a lease owner unique to this attempt.
func (iv *Invoker) owner() string {
	iv.seqMu.Lock()
	iv.seq++
	n := iv.seq
	iv.seqMu.Unlock()
	// One allocation, not fmt's several: every write call takes an owner.
	var buf [64]byte
	b := append(buf[:0], iv.cfg.Node...)
	b = strconv.AppendInt(append(b, '/'), iv.now().UnixNano(), 10)
	b = strconv.AppendUint(append(b, '/'), n, 10)
	return string(b)
}

// fault answers internal_error with stop fault for a wiring fault, logging
// every occurrence and reporting each cause once.
func (iv *Invoker) fault(ctx context.Context, cause, tool string) toolplane.Result {
	return iv.faultErr(ctx, cause, tool, nil)
}

// faultErr is fault for a cause that came with an error: the error is
// logged with the cause (one line per call) but is no part of what makes
// two faults the same, since it names what differs between calls (a row,
// a statement) while the cause names the wiring that failed.
func (iv *Invoker) faultErr(ctx context.Context, cause, tool string, err error) toolplane.Result {
	e := fmt.Errorf("%w: %s", ErrFault, cause)
	if err != nil {
		e = fmt.Errorf("%w: %s: %w", ErrFault, cause, err)
		iv.log.ErrorContext(ctx, "tool call wiring fault", "tool", tool, "cause", cause, "err", err)
	} else {
		iv.log.ErrorContext(ctx, "tool call wiring fault", "tool", tool, "cause", cause)
	}
	iv.report(ctx, tool+"\x00"+cause, cause, e)
	r := toolplane.Fail(toolplane.CodeInternalError, "the platform could not run this call because of a configuration fault; it has been reported, and retrying will not help")
	r.Stop = toolplane.StopFault
	return r
}

// ReportEvery is how often one cause of a fault is reported again while it
// lasts: a fan out of calls meeting one wiring fault is one report, and a
// fault that lasts a day is a report a period, each counting the calls it
// stands for, not one lost in the first minute.
const ReportEvery = time.Minute

// faultTally is what the invoker knows of one fault cause's reports.
type faultTally struct {
	mu     sync.Mutex
	at     time.Time // the last report
	silent int       // occurrences since it, not reported
}

// report tells the Reporter of err unless its cause (key) was reported
// less than ReportEvery ago; a report after a quiet period says how many
// occurrences it stands for.
func (iv *Invoker) report(ctx context.Context, key, cause string, err error) {
	v, _ := iv.reported.LoadOrStore(key, &faultTally{})
	t := v.(*faultTally)
	now := iv.now()
	t.mu.Lock()
	if !t.at.IsZero() && now.Sub(t.at) < ReportEvery {
		t.silent++
		t.mu.Unlock()
		return
	}
	silent := t.silent
	t.at, t.silent = now, 0
	t.mu.Unlock()
	if iv.cfg.Reporter == nil {
		return
	}
	if silent > 0 {
		err = fmt.Errorf("%w (and %d more occurrences since the last report)", err, silent)
	}
	iv.cfg.Reporter.Report(ctx, cause, err)
}

// Principals answers live principals. The invoker asks for every call:
// for a fresh call from a door (inv.Credential set, inv.Principal holding
// the one tool the call names) and for a call run later from storage (an
// approved call, a replay; inv.Principal as stored). The answer holds the
// tools of inv.Principal that the grants and the key allow now, never
// another.
type Principals interface {
	Principal(ctx context.Context, inv *toolplane.Invocation) (toolplane.Principal, error)
}

// Scheduler is the durable background work the invoker hands off: an
// approval's expiry, and the execution of an approved call.
type Scheduler interface {
	ApprovalFiled(ctx context.Context, a *toolplane.Approval) error
	ApprovalResolved(ctx context.Context, a *toolplane.Approval) error
}

// Notice is told of calls that went uncertain, so that the people who
// reconcile them hear of it. It must not block: it hands the news to
// durable work and returns.
type Notice interface {
	CallUncertain(ctx context.Context, c *toolplane.Claim)
}

// UseNotice sets who is told of uncertain calls; nil tells nobody. It is
// set once, before the first call.
func (iv *Invoker) UseNotice(n Notice) { iv.notice = n }

// UseScheduler sets the background work runner. It is set once, before the
// first call: the runner itself is built over this invoker.
func (iv *Invoker) UseScheduler(s Scheduler) { iv.sched = s }

// Replayable reports whether a claim of org's tool with attempts handler
// starts may be started again.
func (iv *Invoker) Replayable(org, tool string, attempts int) bool {
	t, ok := iv.cfg.Registry.Get(org, tool)
	return ok && t.Def.Replay != nil && attempts < t.Def.Replay.MaxAttempts
}

// Resolve records the answer of by, a person, to an approval of their
// organization (see approval.Service.Resolve, which decides whether by may
// answer it, with the tool-state recheck of CheckApproval) and hands an
// approved call to the scheduler to execute, without the model asking
// again. Without a scheduler the call executes on the model's next
// identical call, or through ExecuteApproved.
func (iv *Invoker) Resolve(ctx context.Context, id string, d approval.Decision, by *toolplane.Credential) (*toolplane.Approval, error) {
	if iv.cfg.Approvals == nil {
		return nil, fmt.Errorf("%w: no approval service is wired", ErrFault)
	}
	a, err := iv.cfg.Approvals.Resolve(ctx, id, d, by, iv.CheckApproval)
	if err != nil {
		return a, err
	}
	if a.Status == toolplane.ApprovalPending {
		return a, nil // approved by one of several: nothing runs yet
	}
	if iv.sched != nil {
		if err := iv.sched.ApprovalResolved(ctx, a); err != nil {
			// The answer is recorded; the periodic sweep schedules the
			// execution if this hand-off was lost.
			iv.log.ErrorContext(ctx, "could not schedule the approved call; the sweep will", "approval", a.ID, "err", err)
		}
	}
	return a, nil
}

// Approvals answers the approval service the invoker files approvals
// with, through which a door reads them (nil when none is wired).
func (iv *Invoker) Approvals() *approval.Service { return iv.cfg.Approvals }

// NextApprover answers, for an approval whose default on timeout is
// escalate, the group of the next level of its tool's approval chain and
// how long that approval waits; false when there is no next level (the
// approval then denies on expiry).
func (iv *Invoker) NextApprover(a *toolplane.Approval) (group string, ttl time.Duration, ok bool) {
	if a.DefaultOnTimeout != toolplane.OnTimeoutEscalate {
		return "", 0, false
	}
	t, found := iv.cfg.Registry.Get(a.OrganizationID, a.Tool)
	if !found || t.Def.Approval == nil || a.Level+1 >= len(t.Def.Approval.Chain) {
		return "", 0, false
	}
	return t.Def.Approval.Chain[a.Level+1], t.Def.Approval.TTL.Std(), true
}

// DailyCeilings answers whether an organization has a daily spend
// ceiling, as of a moment ago at most (see Config.DailyCeilings).
type DailyCeilings interface {
	HasCeiling(ctx context.Context, org string) (bool, error)
}
