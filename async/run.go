package async

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/egress"
	"github.com/toolplane/toolplane/invoke"
)

// Again is how a run asks to be tried again later without counting as a
// failed attempt: the call waits for a person's approval, or for an
// identical call another worker holds.
type Again struct{ After time.Duration }

func (a *Again) Error() string { return fmt.Sprintf("run again in %s", a.After) }

// approvalPoll is how often a call waiting for a person's approval looks
// at it again.
const (
	approvalPoll    = 2 * time.Second
	maxApprovalPoll = 15 * time.Second
)

// Run moves call id of org on: a live call is taken (running) and run
// through the invoker under its stored invocation, and its answer stored
// as its terminal state, once. It answers nil when the call needs nothing
// more (ended, by this run or before), an *Again when it waits (for an
// approval, or a call in flight elsewhere), and a platform fault
// otherwise, which the worker retries; last says this is the worker's
// last attempt, after which a fault ends the call failed rather than
// leave it running forever.
//
// A worker that died mid-call is replaced by another running the same
// call again: the journal answers a write that completed from its
// record, and holds one whose outcome is unknown as uncertain, so the
// effect happens at most once.
func (s *Service) Run(ctx context.Context, org, id string, last bool) error {
	c, err := s.store.GetAsyncCall(ctx, org, id)
	if errors.Is(err, toolplane.ErrNotFound) {
		return nil // removed by retention: nothing to run
	}
	if err != nil {
		return err
	}
	if c.Status.Terminal() {
		return nil
	}
	if c.Status == toolplane.AsyncRunning {
		if busy, err := s.runningElsewhere(ctx, c); err != nil {
			return err
		} else if busy {
			return &Again{After: runnerPoll}
		}
	}
	if c.CancelRequested {
		// Asked while it was being decided (it went back to wait for an
		// approval): it is not started again.
		return s.move(ctx, c, toolplane.AsyncMove{To: toolplane.AsyncCancelled})
	}
	inv, err := approval.DecodeInvocation(c.Invocation)
	if err != nil {
		return s.end(ctx, c, failed(fmt.Sprintf("the stored call could not be read: %v", err)))
	}
	if c.ApprovalID != "" {
		if again, res, err := s.approvalState(ctx, c); err != nil || again != nil || res != nil {
			if res != nil {
				return s.end(ctx, c, *res)
			}
			if again != nil {
				return again
			}
			return err
		}
		inv.AuthorizedBy = c.ApprovalID
	}
	moved, err := s.store.MoveAsyncCall(ctx, org, id, toolplane.AsyncLive, toolplane.AsyncMove{To: toolplane.AsyncRunning, Runner: s.cfg.Node, At: s.cfg.Now()})
	if err != nil {
		return err
	}
	if !moved {
		return nil // cancelled (or ended) since it was read
	}

	// asked ends when a cancel is asked for: on this node by Cancel, on
	// another by the watch of the record. It stops the handler, not the
	// call's own steps (its journal and audit writes).
	asked, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := [2]string{org, id}
	s.mu.Lock()
	s.running[k] = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, k)
		s.mu.Unlock()
	}()
	watch, unwatch := context.WithCancel(ctx)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		s.watchCancel(watch, org, id, cancel)
	}()
	// What the handler emits while it runs is stored as the call's
	// stream, which its readers follow (Events).
	run := invoke.Streamed(invoke.Cancellable(ctx, asked), sink{s: s, org: org, id: id})
	res, err := s.iv.InvokeStored(run, c.Tool, c.Arguments, inv)
	unwatch()
	<-watching
	wasCancelled := asked.Err() != nil

	var ar *invoke.ApprovalRequired
	switch {
	case errors.As(err, &ar) && wasCancelled:
		return s.move(ctx, c, toolplane.AsyncMove{To: toolplane.AsyncCancelled})
	case errors.As(err, &ar):
		// Waiting for a person: queued again, with the approval named.
		if _, merr := s.store.MoveAsyncCall(ctx, org, id, []toolplane.AsyncStatus{toolplane.AsyncRunning},
			toolplane.AsyncMove{To: toolplane.AsyncQueued, ApprovalID: ar.ID, At: s.cfg.Now()}); merr != nil {
			return merr
		}
		return &Again{After: approvalPoll}
	case errors.Is(err, invoke.ErrInFlight):
		var ife *invoke.InFlightError
		wait := time.Second
		if errors.As(err, &ife) {
			wait = ife.RetryAfter()
		}
		return s.requeue(ctx, c, &Again{After: wait})
	case err != nil && wasCancelled:
		return s.move(ctx, c, toolplane.AsyncMove{To: toolplane.AsyncCancelled})
	case err != nil:
		var tooLong *toolplane.TooLongError
		var needsRun *invoke.RunRequiredError
		if errors.As(err, &tooLong) || errors.As(err, &needsRun) {
			return s.end(ctx, c, toolplane.Fail(toolplane.CodeInvalidInput, err.Error()))
		}
		if last {
			s.cfg.Log.ErrorContext(ctx, "asynchronous call given up", "call", id, "err", err)
			return s.end(ctx, c, failed("the platform could not run this call; it has been reported"))
		}
		return s.requeue(ctx, c, err)
	}
	if wasCancelled && !res.OK && res.Error != nil && res.Error.Code != toolplane.CodeUncertain {
		// The handler stopped because it was told to: the call is
		// cancelled, not failed. One that finished anyway keeps its
		// answer, and one whose effect may have happened stays uncertain.
		return s.move(ctx, c, toolplane.AsyncMove{To: toolplane.AsyncCancelled})
	}
	return s.end(ctx, c, res)
}

// requeue moves a running call this worker let go of (a fault it retries,
// an identical call in flight elsewhere) back to queued, with no runner,
// so that whichever worker tries next takes it rather than wait for this
// node; and answers why, the worker's error.
func (s *Service) requeue(ctx context.Context, c *toolplane.AsyncCall, why error) error {
	if _, err := s.store.MoveAsyncCall(context.WithoutCancel(ctx), c.OrganizationID, c.ID, []toolplane.AsyncStatus{toolplane.AsyncRunning},
		toolplane.AsyncMove{To: toolplane.AsyncQueued, At: s.cfg.Now()}); err != nil {
		return errors.Join(why, err)
	}
	return why
}

// runnerPoll is how often a worker looks again at a call another live
// worker runs.
const runnerPoll = 5 * time.Second

// runningElsewhere reports whether c, running, is being run by another
// worker now: one on this node (River put the job back while its first run
// went on), or one on a node that still heartbeats. A call whose runner is
// dead, unknown or this node's finished attempt is taken over: the journal
// keeps its effect to at most once.
func (s *Service) runningElsewhere(ctx context.Context, c *toolplane.AsyncCall) (bool, error) {
	s.mu.Lock()
	_, here := s.running[[2]string{c.OrganizationID, c.ID}]
	s.mu.Unlock()
	if here {
		return true, nil
	}
	if c.Runner == "" || c.Runner == s.cfg.Node || s.cfg.NodeDeadAfter <= 0 {
		return false, nil
	}
	n, err := s.store.GetNode(ctx, c.Runner)
	if errors.Is(err, toolplane.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !n.Dead(s.cfg.Now(), s.cfg.NodeDeadAfter), nil
}

// watchCancel calls cancel when a cancel of the call is asked for on
// another node (this node's Cancel calls it itself), reading the record
// every Config.Poll until ctx ends.
func (s *Service) watchCancel(ctx context.Context, org, id string, cancel context.CancelFunc) {
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if c, err := s.store.GetAsyncCall(ctx, org, id); err == nil && c.CancelRequested {
				cancel()
				return
			}
		}
	}
}

// approvalState answers what a call waiting for approval c.ApprovalID
// does now: wait again (pending, or escalated to another approval), end
// with res (the approval expired and its default denied), or run (all
// nil: approved or rejected, which the invoker answers under
// authorized_by).
func (s *Service) approvalState(ctx context.Context, c *toolplane.AsyncCall) (*Again, *toolplane.Result, error) {
	svc := s.iv.Approvals()
	if svc == nil {
		return nil, nil, nil
	}
	a, err := svc.Find(ctx, c.OrganizationID, c.ApprovalID)
	if errors.Is(err, toolplane.ErrNotFound) {
		return nil, nil, nil // decided live, again
	}
	if err != nil {
		return nil, nil, err
	}
	switch a.Status {
	case toolplane.ApprovalPending:
		// Looked at often while a person is likely answering, then less:
		// a tenth of the time waited so far, from 2 to 15 seconds.
		waited := s.cfg.Now().Sub(c.UpdatedAt)
		return &Again{After: min(max(waited/10, approvalPoll), maxApprovalPoll)}, nil, nil
	case toolplane.ApprovalExpired:
		next, err := s.iv.Escalation(ctx, a)
		if err != nil {
			return nil, nil, err
		}
		if next != "" {
			if _, err := s.store.MoveAsyncCall(ctx, c.OrganizationID, c.ID, toolplane.AsyncLive,
				toolplane.AsyncMove{To: toolplane.AsyncQueued, ApprovalID: next, At: s.cfg.Now()}); err != nil {
				return nil, nil, err
			}
			return &Again{After: approvalPoll}, nil, nil
		}
		r := toolplane.Fail(toolplane.CodeRejected, "the approval for this call expired before anyone answered it, so it was denied; do not retry it without asking the user")
		return nil, &r, nil
	}
	return nil, nil, nil
}

// end stores res as the call's terminal state (see move).
func (s *Service) end(ctx context.Context, c *toolplane.AsyncCall, res toolplane.Result) error {
	m := toolplane.AsyncMove{To: toolplane.AsyncSucceeded, Result: boundary.Render(res)}
	switch {
	case res.OK:
	case res.Error != nil && res.Error.Code == toolplane.CodeUncertain:
		m.To, m.Code = toolplane.AsyncUncertain, string(toolplane.CodeUncertain)
	default:
		m.To = toolplane.AsyncFailed
		if res.Error != nil {
			m.Code = string(res.Error.Code)
		}
	}
	return s.move(ctx, c, m)
}

// move stores m, a terminal state (a cancelled call's has no result),
// once: a call cancelled or ended meanwhile keeps the state it reached
// first.
func (s *Service) move(ctx context.Context, c *toolplane.AsyncCall, m toolplane.AsyncMove) error {
	m.At = s.cfg.Now()
	moved, err := s.store.MoveAsyncCall(context.WithoutCancel(ctx), c.OrganizationID, c.ID, toolplane.AsyncLive, m)
	if err != nil {
		return err
	}
	if moved {
		s.ended(context.WithoutCancel(ctx), c.OrganizationID, c.ID)
	}
	return nil
}

// failed answers the failure of a call the platform could not run.
func failed(msg string) toolplane.Result {
	r := toolplane.Fail(toolplane.CodeInternalError, msg)
	r.Stop = toolplane.StopFault
	return r
}

// Callback is the body posted to a call's callback URL: what its status
// URL answers once it ended.
type Callback struct {
	ID        string                `json:"id"`
	Tool      string                `json:"tool"`
	Status    toolplane.AsyncStatus `json:"status"`
	Result    json.RawMessage       `json:"result,omitempty"`
	CreatedAt time.Time             `json:"created_at"`
	EndedAt   time.Time             `json:"ended_at"`
}

// maxCallbackAnswer bounds what is read of a receiver's answer.
const maxCallbackAnswer = 64 << 10

// Attempt is one attempt at delivering a callback, as the worker counts
// it.
type Attempt struct {
	// N counts from 1.
	N int
	// Last is the worker's last attempt: a failure ends the delivery.
	Last bool
	// Retry is how long after a failure the worker tries again, when it
	// knows (zero: it does not).
	Retry time.Duration
}

// Deliver makes attempt a at posting call id's result to its callback
// URL, signed, and records it delivered on a 2xx answer. A failed attempt
// is recorded on the call, where its status URL reads it (the attempts,
// why the last failed, when the next is due), and logged at Warn, once;
// its error (a *DeliveryError) tells the worker to try again later. An
// attempt the node cut (ctx cancelled) records nothing. On
// the last attempt the callback is recorded expired instead (the result
// stays readable by its status URL). Neither the record nor the log shows
// more of the URL than its host.
func (s *Service) Deliver(ctx context.Context, org, id string, a Attempt) error {
	c, err := s.store.GetAsyncCall(ctx, org, id)
	if errors.Is(err, toolplane.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if c.CallbackState != toolplane.CallbackPending || !c.Status.Terminal() {
		return nil
	}
	err = s.post(ctx, c)
	if err == nil {
		// Delivered: the error of the attempts before is history, and
		// cleared; the attempts stay counted.
		return s.store.RecordCallback(ctx, org, id, toolplane.CallbackRecord{State: toolplane.CallbackDelivered, Attempts: a.N, At: s.cfg.Now()})
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		// The node cut the attempt (River stopping it), not the receiver:
		// nothing is recorded, and the cause (River's stop, which hands
		// the attempt back to run again) is answered instead of err, whose
		// text quotes the URL. A deadline is the receiver's slowness, and
		// recorded as a failed attempt below.
		return context.Cause(ctx)
	}
	de := deliveryError(c.CallbackURL, err)
	now := s.cfg.Now()
	r := toolplane.CallbackRecord{State: toolplane.CallbackPending, Attempts: a.N, LastError: de.Reason, At: now}
	attrs := []any{"organization", org, "call", id, "attempt", a.N, "host", de.Host, "reason", de.Reason}
	switch {
	case a.Last:
		r.State = toolplane.CallbackExpired
		s.cfg.Log.WarnContext(ctx, "callback given up", attrs...)
	default:
		if a.Retry > 0 {
			r.NextAt = now.Add(a.Retry)
			attrs = append(attrs, "next_attempt_at", r.NextAt)
		}
		s.cfg.Log.WarnContext(ctx, "callback attempt failed", attrs...)
	}
	if rerr := s.store.RecordCallback(context.WithoutCancel(ctx), org, id, r); rerr != nil {
		if a.Last {
			return rerr
		}
		return errors.Join(de, rerr)
	}
	if a.Last {
		return nil
	}
	// The worker keeps this error with the job (River's errors of the
	// job's row) and tries again.
	return de
}

// DeliveryError is a failed delivery attempt, told without the callback
// URL, which may carry a receiver's token in its query or credentials:
// the host it was posted to, and why it failed in words chosen by the
// failure's kind, never the text of an error that may quote the URL.
type DeliveryError struct {
	Host   string
	Reason string
	err    error
}

func (e *DeliveryError) Error() string { return "callback to " + e.Host + ": " + e.Reason }

// Unwrap answers the failure, for errors.Is and errors.As; its text is
// never shown.
func (e *DeliveryError) Unwrap() error { return e.err }

// deliveryError answers err, a failed post to raw, as a DeliveryError.
func deliveryError(raw string, err error) *DeliveryError {
	host := "(a callback URL)"
	if u, perr := url.Parse(raw); perr == nil && u.Host != "" {
		host = u.Host
	}
	return &DeliveryError{Host: host, Reason: Reason(err), err: err}
}

// Reason answers why a delivery attempt failed, from err's kind alone: a
// net/http error's text may quote the URL, its query included.
func Reason(err error) string {
	var (
		status  *statusError
		refused *egress.RefusedError
		dns     *net.DNSError
		cert    *tls.CertificateVerificationError
		alert   tls.AlertError
		record  tls.RecordHeaderError
		netErr  net.Error
	)
	switch {
	case errors.As(err, &status):
		return fmt.Sprintf("HTTP status %d", status.code)
	case errors.Is(err, errNoSigner):
		return "this deployment cannot sign callbacks"
	case errors.Is(err, errSign):
		return "the callback could not be signed"
	case errors.As(err, &refused):
		return "the address is not one callbacks may reach"
	case errors.As(err, &dns) && dns.IsNotFound:
		return "DNS failure: no such host"
	case errors.As(err, &dns) && dns.IsTimeout:
		return "DNS failure: timeout"
	case errors.As(err, &dns):
		return "DNS failure"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &cert):
		return "TLS failure: certificate not trusted"
	case errors.As(err, &alert), errors.As(err, &record):
		return "TLS failure"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before an answer"
	}
	return "connection failed"
}

// statusError is a receiver's answer that is not 2xx.
type statusError struct{ code int }

func (e *statusError) Error() string {
	return fmt.Sprintf("the receiver answered HTTP status %d", e.code)
}

// The platform's own failures to post a callback.
var (
	errNoSigner = errors.New("no signer is configured")
	errSign     = errors.New("sign")
)

// post sends c's callback once. The delivery id is the call's id, the
// same on every attempt: a receiver that acted on an attempt whose answer
// was lost refuses the next as a replay (and acknowledges it), while one
// that failed to act forgets it (webhook.Verifier) and takes the next.
func (s *Service) post(ctx context.Context, c *toolplane.AsyncCall) error {
	if s.cfg.Signer == nil {
		return errNoSigner
	}
	body, err := json.Marshal(Callback{ID: c.ID, Tool: c.Tool, Status: c.Status, Result: c.Result, CreatedAt: c.CreatedAt, EndedAt: c.EndedAt})
	if err != nil {
		return err
	}
	h, err := s.cfg.Signer.Headers(ctx, c.OrganizationID, c.ID, body, s.cfg.Now())
	if err != nil {
		return fmt.Errorf("%w: %w", errSign, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.CallbackURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolplane-callback")
	resp, err := s.client.Do(req)
	if err != nil {
		// Its text quotes the URL: Deliver shows it by its kind alone.
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxCallbackAnswer))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &statusError{code: resp.StatusCode}
	}
	return nil
}

// ShownURL answers raw without its query, fragment or credentials: how a
// callback URL is shown and logged, since a receiver may put a token in
// its query.
func ShownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a callback URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
