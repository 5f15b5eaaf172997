// Package async runs tool calls longer than the request that makes them.
// A call accepted as asynchronous is stored (toolplane.AsyncCall) and
// answered at once with its id; a background worker later runs it
// through the one invoker, under the invocation stored with it, where it
// is decided, claimed, executed, metered and audited as every other call
// is. The record is the truth of where a call stands: the worker's job
// only moves it, and a job lost with its node is handed out again by a
// sweep, while the journal keeps the call's effect to at most once.
//
// Moves are compare-and-set on the record's state, so a cancel racing
// completion ends in exactly one terminal state. A caller reads a call by
// its id, waiting for it if it likes: the wait registers before it reads
// the record, and reads it again at its end, so a call that ends while the
// wait is being set up still ends the wait. A call that names a callback
// URL has its result posted there, signed, until the receiver
// acknowledges it or the delivery's attempts run out.
package async

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/egress"
	"github.com/toolplane/toolplane/invoke"
)

// ErrCallback: a callback URL the platform will not post to. It is a
// toolplane.ErrInvalid: the request that named it is malformed.
var ErrCallback = toolplane.Refine(toolplane.ErrInvalid, "callback_url not allowed")

// Scheduler hands an accepted call, and a due callback, to durable
// background work. Each must not block long: it enqueues and returns. A
// hand-off that fails is not lost: the sweep (Service.Stale) finds the
// call again.
type Scheduler interface {
	// Accepted enqueues the run of c.
	Accepted(ctx context.Context, c *toolplane.AsyncCall) error
	// Ended enqueues the delivery of c's result to its callback URL.
	Ended(ctx context.Context, c *toolplane.AsyncCall) error
}

// Signer signs a callback's body for its organization: the headers a
// receiver verifies it by (webhook.Secrets).
type Signer interface {
	Headers(ctx context.Context, org, delivery string, body []byte, now time.Time) (http.Header, error)
}

// Config wires a Service.
type Config struct {
	Store   toolplane.Store
	Invoker *invoke.Invoker
	// Signer signs callbacks; without one a call naming a callback URL is
	// refused (nothing could prove the result came from here).
	Signer Signer
	// AllowCIDRs are the address ranges a callback may reach beyond
	// public addresses (an internal receiver), as for notification
	// channels; Resolver, when set, resolves callback hosts (tests).
	AllowCIDRs []string
	Resolver   egress.Resolver
	// CallbackTimeout bounds one delivery attempt; default 10s.
	CallbackTimeout time.Duration
	// Poll is how often a wait, and a running call's worker watching for a
	// cancel made on another node, read the record; default 250ms.
	Poll time.Duration
	// MaxWait bounds how long one read of a call may wait; default 60s.
	MaxWait time.Duration
	// Node is this node's instance id, recorded as the runner of the calls
	// it takes; NodeDeadAfter, when set, is how long a node may go
	// without a heartbeat before it is known dead. With both, a worker
	// that finds a call running on a node that still heartbeats leaves it
	// to that node rather than run it a second time (River takes back a
	// job that runs longer than its rescue horizon, and an asynchronous
	// tool's call may run for hours); without them it takes the call.
	Node          string
	NodeDeadAfter time.Duration
	Log           *slog.Logger
	Now           func() time.Time
}

// Service accepts, runs, cancels and reports asynchronous calls.
type Service struct {
	cfg    Config
	store  toolplane.Store
	iv     *invoke.Invoker
	dest   *egress.Policy
	client *http.Client
	sched  Scheduler

	mu sync.Mutex
	// waiters are the local reads waiting for a call to end, by call.
	waiters map[[2]string][]chan struct{}
	// running are the cancel functions of the calls this node runs now.
	running map[[2]string]context.CancelFunc
	// readers are the local readers of calls' streams (see listen).
	readers map[[2]string]map[chan struct{}]struct{}
}

// New answers a service; Store and Invoker are required.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Invoker == nil {
		return nil, errors.New("async: a store and an invoker are required")
	}
	if cfg.CallbackTimeout <= 0 {
		cfg.CallbackTimeout = 10 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 60 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	opts := []egress.Option{egress.AnyHost()}
	if cfg.Resolver != nil {
		opts = append(opts, egress.WithResolver(cfg.Resolver))
	}
	dest, err := egress.Compile(toolplane.EgressRules{AllowCIDRs: cfg.AllowCIDRs}, opts...)
	if err != nil {
		return nil, fmt.Errorf("async: the ranges callbacks may reach: %w", err)
	}
	client := &http.Client{
		Timeout:   cfg.CallbackTimeout,
		Transport: &http.Transport{DialContext: dest.DialContext, Proxy: nil, ResponseHeaderTimeout: cfg.CallbackTimeout},
		// A redirect would send the result where the caller did not name.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Service{cfg: cfg, store: cfg.Store, iv: cfg.Invoker, dest: dest, client: client,
		waiters: map[[2]string][]chan struct{}{}, running: map[[2]string]context.CancelFunc{}}, nil
}

// UseScheduler sets the background work the service hands calls to. It is
// set once, before the first call: the worker is built over this service.
func (s *Service) UseScheduler(sch Scheduler) { s.sched = sch }

// Request is a call to accept as asynchronous.
type Request struct {
	Tool      string
	Arguments json.RawMessage
	// Invocation is the call's, as its door made it (with the verified
	// credential); it is stored without the credential.
	Invocation *toolplane.Invocation
	// CallbackURL, when set, receives the result, signed.
	CallbackURL string
}

// Submission is the answer to a Submit.
type Submission struct {
	// Call is the call accepted, or the one accepted before for the same
	// key and arguments (Existing).
	Call     *toolplane.AsyncCall
	Existing bool
	// Ran is set when the call was not accepted because it would be
	// refused: it ran now instead, and Result and Err are its answer, as
	// a synchronous call's.
	Ran    bool
	Result toolplane.Result
	Err    error
}

// Submit accepts r as an asynchronous call: the checks that need nothing
// recorded run now (invoke.Admit), a call bound to be refused runs now
// instead (its refusal audited like any other), and a call already
// accepted under the same key and arguments answers that call, so a
// client retrying a lost answer never starts a second one. An error is the
// caller's malformed request (invalid callback, identifier too long, a
// write without a run or key) or a platform fault.
func (s *Service) Submit(ctx context.Context, r Request) (*Submission, error) {
	if err := s.checkCallback(ctx, r.CallbackURL); err != nil {
		return nil, err
	}
	inv := r.Invocation
	adm, refused, err := s.iv.Admit(ctx, r.Tool, r.Arguments, inv)
	if err != nil {
		return nil, err
	}
	if refused {
		res, err := s.iv.InvokeJSON(ctx, r.Tool, r.Arguments, inv)
		return &Submission{Ran: true, Result: res, Err: err}, nil
	}
	if adm.Key != "" {
		if c, err := s.store.FindAsyncCall(ctx, inv.OrganizationID, r.Tool, adm.Key); err == nil {
			return &Submission{Call: c, Existing: true}, nil
		} else if !errors.Is(err, toolplane.ErrNotFound) {
			return nil, fmt.Errorf("%w: %v", invoke.ErrFault, err)
		}
	}
	stored := *inv
	// The credential is read again when the call runs; the door it came
	// by stays its source, so a rule on the door (context.source) decides
	// the call run later as it would have decided it now.
	stored.Credential = nil
	enc, err := approval.EncodeInvocation(&stored)
	if err != nil {
		return nil, fmt.Errorf("%w: encode the invocation: %v", invoke.ErrFault, err)
	}
	now := s.cfg.Now()
	args := r.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	c := &toolplane.AsyncCall{OrganizationID: inv.OrganizationID, ID: toolplane.NewID("inv_"), Tool: r.Tool, Key: adm.Key,
		AgentID: inv.AgentID, UserID: inv.UserID, Arguments: args, Invocation: enc, Status: toolplane.AsyncQueued,
		CallbackURL: r.CallbackURL, CreatedAt: now, UpdatedAt: now}
	if err := s.store.InsertAsyncCall(ctx, c); errors.Is(err, toolplane.ErrExists) && adm.Key != "" {
		// A concurrent submission of the same call stored it first.
		existing, ferr := s.store.FindAsyncCall(ctx, inv.OrganizationID, r.Tool, adm.Key)
		if ferr != nil {
			return nil, fmt.Errorf("%w: %v", invoke.ErrFault, ferr)
		}
		return &Submission{Call: existing, Existing: true}, nil
	} else if err != nil {
		return nil, fmt.Errorf("%w: %v", invoke.ErrFault, err)
	}
	if s.sched != nil {
		if err := s.sched.Accepted(ctx, c); err != nil {
			// Stored: the sweep hands it out if this hand-off was lost.
			s.cfg.Log.ErrorContext(ctx, "could not hand the asynchronous call to a worker; the sweep will", "call", c.ID, "err", err)
		}
	}
	return &Submission{Call: c}, nil
}

// checkCallback refuses a callback URL that is not absolute https (or
// http to a loopback receiver, for local development), carries
// credentials, or names a host egress refuses (an address that is not
// public and not in the operator's allowed ranges, or a name resolving to
// one). Every delivery resolves and checks the host again when it dials.
func (s *Service) checkCallback(ctx context.Context, raw string) error {
	if raw == "" {
		return nil
	}
	if s.cfg.Signer == nil {
		return fmt.Errorf("%w: this deployment cannot sign callbacks; poll the status URL instead", ErrCallback)
	}
	if len(raw) > 2048 {
		return fmt.Errorf("%w: longer than 2048 bytes", ErrCallback)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%w: not an absolute URL", ErrCallback)
	}
	if u.User != nil {
		return fmt.Errorf("%w: a callback URL carries no credentials", ErrCallback)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && egress.LoopbackHost(u.Hostname()):
	default:
		return fmt.Errorf("%w: the scheme must be https", ErrCallback)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var re *egress.RefusedError
	if err := s.dest.CheckName(cctx, u.Hostname()); errors.As(err, &re) {
		return fmt.Errorf("%w: %s (an operator admits an internal receiver with toolplane serve --notify-allow-cidr)", ErrCallback, re.Error())
	}
	return nil
}

// Get answers call id of org for who, as it stands. A call who may not
// read is not found, as one that does not exist.
func (s *Service) Get(ctx context.Context, org, id string, who *toolplane.Credential) (*toolplane.AsyncCall, error) {
	c, err := s.store.GetAsyncCall(ctx, org, id)
	if err != nil {
		return nil, err
	}
	if !mayRead(who, c) {
		return nil, fmt.Errorf("async call %s: %w", id, toolplane.ErrNotFound)
	}
	return c, nil
}

// mayRead reports whether who may read c: the agent that submitted it,
// and the people who run agents, administer the platform or audit it; a
// token acting for a person reads only the calls made for that person.
func mayRead(who *toolplane.Credential, c *toolplane.AsyncCall) bool {
	if who == nil || who.OrganizationID != c.OrganizationID {
		return false
	}
	if who.ActsFor != "" && who.ActsFor != c.UserID {
		// A token the agent holds for one person never reads what it did
		// for another.
		return false
	}
	if who.Subject == c.AgentID {
		return true
	}
	return who.HasAnyRole(toolplane.RoleAgentOperator, toolplane.RolePlatformAdmin, toolplane.RoleAuditor)
}

// mayCancel reports whether who may cancel c: the agent that submitted
// it, and the people who run agents or administer the platform.
func mayCancel(who *toolplane.Credential, c *toolplane.AsyncCall) bool {
	if !mayRead(who, c) {
		return false
	}
	return who.Subject == c.AgentID || who.HasAnyRole(toolplane.RoleAgentOperator, toolplane.RolePlatformAdmin)
}

// Wait answers call id of org for who once it has ended, or as it stands
// when wait (at most Config.MaxWait) runs out or ctx ends first. It
// registers before it reads, and reads once more at its end, so a call
// that ends while the wait is set up is never missed; calls ending on
// other nodes are seen by reading the record every Config.Poll.
func (s *Service) Wait(ctx context.Context, org, id string, who *toolplane.Credential, wait time.Duration) (*toolplane.AsyncCall, error) {
	wait = min(wait, s.cfg.MaxWait)
	if wait <= 0 {
		return s.Get(ctx, org, id, who)
	}
	ended, done := s.register(org, id)
	defer done()
	c, err := s.Get(ctx, org, id, who)
	if err != nil || c.Status.Terminal() {
		return c, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ended:
			return s.Get(ctx, org, id, who)
		case <-tick.C:
			c, err = s.Get(ctx, org, id, who)
			if err != nil || c.Status.Terminal() {
				return c, err
			}
		case <-timer.C:
			return s.Get(ctx, org, id, who)
		case <-ctx.Done():
			// The caller left: its answer is no longer read.
			return c, nil
		}
	}
}

// register adds a local waiter for the call's end and answers its channel
// and the function that removes it.
func (s *Service) register(org, id string) (<-chan struct{}, func()) {
	k := [2]string{org, id}
	ch := make(chan struct{})
	s.mu.Lock()
	s.waiters[k] = append(s.waiters[k], ch)
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		ws := s.waiters[k]
		for i, w := range ws {
			if w == ch {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(s.waiters, k)
		} else {
			s.waiters[k] = ws
		}
	}
}

// wake tells this node's waiters that the call ended.
func (s *Service) wake(org, id string) {
	s.mu.Lock()
	ws := s.waiters[[2]string{org, id}]
	delete(s.waiters, [2]string{org, id})
	s.mu.Unlock()
	for _, ch := range ws {
		close(ch)
	}
}

// Cancel asks for call id of org to be cancelled, for who: a queued call
// ends cancelled now; a running one is told to stop (its handler's
// context ends, on whichever node runs it) and ends cancelled unless it
// finishes first; an ended call is left as it ended. It answers the call
// as it stands after the request.
func (s *Service) Cancel(ctx context.Context, org, id string, who *toolplane.Credential) (*toolplane.AsyncCall, error) {
	c, err := s.store.GetAsyncCall(ctx, org, id)
	if err != nil {
		return nil, err
	}
	if !mayRead(who, c) {
		return nil, fmt.Errorf("async call %s: %w", id, toolplane.ErrNotFound)
	}
	if !mayCancel(who, c) {
		return nil, fmt.Errorf("%w: only the agent that made the call, an agent operator or a platform administrator cancels it", toolplane.ErrForbidden)
	}
	now := s.cfg.Now()
	moved, err := s.store.MoveAsyncCall(ctx, org, id, []toolplane.AsyncStatus{toolplane.AsyncQueued}, toolplane.AsyncMove{To: toolplane.AsyncCancelled, At: now})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", invoke.ErrFault, err)
	}
	for try := 0; !moved && try < 3; try++ {
		// Running: marked, and stopped where it runs. A call that went
		// back to queued meanwhile (it waits for an approval) is cancelled
		// as a queued one; one that ended stays as it ended.
		marked, err := s.store.RequestAsyncCancel(ctx, org, id, now)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", invoke.ErrFault, err)
		}
		if marked {
			s.mu.Lock()
			stop := s.running[[2]string{org, id}]
			s.mu.Unlock()
			if stop != nil {
				stop()
			}
			break
		}
		if moved, err = s.store.MoveAsyncCall(ctx, org, id, []toolplane.AsyncStatus{toolplane.AsyncQueued}, toolplane.AsyncMove{To: toolplane.AsyncCancelled, At: now}); err != nil {
			return nil, fmt.Errorf("%w: %v", invoke.ErrFault, err)
		}
		if !moved {
			break // ended
		}
	}
	if moved {
		s.ended(ctx, org, id)
	}
	return s.store.GetAsyncCall(ctx, org, id)
}

// ended wakes the call's waiters and hands its callback to a worker.
func (s *Service) ended(ctx context.Context, org, id string) {
	s.wake(org, id)
	s.poke(org, id)
	c, err := s.store.GetAsyncCall(ctx, org, id)
	if err != nil {
		s.cfg.Log.ErrorContext(ctx, "could not read an ended asynchronous call; the sweep will deliver its callback", "call", id, "err", err)
		return
	}
	if c.CallbackState == toolplane.CallbackPending && s.sched != nil {
		if err := s.sched.Ended(ctx, c); err != nil {
			s.cfg.Log.ErrorContext(ctx, "could not hand the callback to a worker; the sweep will", "call", id, "err", err)
		}
	}
}

// Stale answers the calls a sweep hands out again: live calls and due
// callbacks untouched since before (see toolplane.AsyncCallStore).
func (s *Service) Stale(ctx context.Context, before time.Time, limit int) ([]toolplane.AsyncCall, error) {
	return s.store.StaleAsyncCalls(ctx, before, limit)
}

// Reschedule hands c to a worker again, as the sweep does.
func (s *Service) Reschedule(ctx context.Context, c *toolplane.AsyncCall) error {
	if s.sched == nil {
		return nil
	}
	if c.Status.Terminal() {
		return s.sched.Ended(ctx, c)
	}
	return s.sched.Accepted(ctx, c)
}
