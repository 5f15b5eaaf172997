package toolplane

import (
	"context"
	"time"
)

// AsyncStatus is where an asynchronous call is in its life.
type AsyncStatus string

// The states of an asynchronous call. Queued and running are live; the
// others are terminal, and a terminal call never changes state again.
const (
	// AsyncQueued: accepted, and waiting for a worker (or for a person's
	// approval, when ApprovalID is set).
	AsyncQueued AsyncStatus = "queued"
	// AsyncRunning: a worker has taken it through the invoker.
	AsyncRunning AsyncStatus = "running"
	// AsyncSucceeded: the tool answered; Result holds its bounded answer.
	AsyncSucceeded AsyncStatus = "succeeded"
	// AsyncFailed: the call ended with a refusal or a failure the caller
	// reads in Result (denied, rejected, invalid_input, a tool's own
	// failure, ...).
	AsyncFailed AsyncStatus = "failed"
	// AsyncUncertain: the effect may or may not have happened; the call's
	// journal claim is held for reconciliation, as a synchronous call's.
	AsyncUncertain AsyncStatus = "uncertain"
	// AsyncCancelled: the caller cancelled it before it ended.
	AsyncCancelled AsyncStatus = "cancelled"
)

// Terminal reports whether s is an end state.
func (s AsyncStatus) Terminal() bool {
	switch s {
	case AsyncSucceeded, AsyncFailed, AsyncUncertain, AsyncCancelled:
		return true
	}
	return false
}

// AsyncLive are the states a call is still moving in.
var AsyncLive = []AsyncStatus{AsyncQueued, AsyncRunning}

// CallbackState is where the delivery of an asynchronous call's result to
// its callback URL stands.
type CallbackState string

// The callback states.
const (
	// CallbackNone: the call names no callback URL.
	CallbackNone CallbackState = ""
	// CallbackPending: the result is due (or being retried) at the URL.
	CallbackPending CallbackState = "pending"
	// CallbackDelivered: the receiver acknowledged it (a 2xx answer).
	CallbackDelivered CallbackState = "delivered"
	// CallbackExpired: every attempt failed until the delivery's time ran
	// out; the result stays readable by its status URL.
	CallbackExpired CallbackState = "expired"
)

// AsyncCall is one call accepted to run later, outside the request that
// made it: its record is the durable truth of where it stands (a worker's
// job is only the means of moving it), and the call itself runs through
// the one invoker like every other, under the invocation stored here.
type AsyncCall struct {
	OrganizationID string
	// ID is the invocation id the caller polls, "inv_…".
	ID string
	// Tool is the platform name of the tool called.
	Tool string
	// Key scopes the call's once-only submission: two submissions of one
	// tool with one key are one call. Empty for a read made without an
	// idempotency key (each such submission is a call of its own).
	Key string
	// AgentID is the agent that submitted it: the agent that may read and
	// cancel it, beside the organization's administrators. UserID is the
	// person it was made for, if any: a token the agent holds for another
	// person does not read it.
	AgentID string
	UserID  string
	// Arguments are the caller's arguments, as sent.
	Arguments []byte
	// Invocation is the encoded invocation the call runs under (see
	// approval.EncodeInvocation): never its credential, which the invoker
	// reads again when the call runs.
	Invocation []byte
	Status     AsyncStatus
	// Result is the rendered, bounded answer once terminal; Code its
	// error code when it failed (empty on success).
	Result []byte
	Code   string
	// ApprovalID is the approval the call waits for (or waited for).
	ApprovalID string
	// Runner is the node instance that last took the call (running): a
	// worker finding it running on a node that still heartbeats leaves it
	// to that node.
	Runner string
	// CancelRequested is set when a caller asked to cancel a running call:
	// its worker ends the handler's context, and the call ends cancelled
	// unless it finished first.
	CancelRequested bool
	// CallbackURL, when set, is where the result is posted, signed, once
	// the call ends.
	CallbackURL      string
	CallbackState    CallbackState
	CallbackAttempts int
	// CallbackError is why the last failed delivery attempt failed, in
	// words that carry no part of the URL but its host (see
	// async.Reason): a receiver may hold a token in its query. Empty
	// before any failure and once delivered. CallbackNextAt is when a
	// callback still pending is tried again, zero when unknown or not.
	CallbackError  string
	CallbackNextAt time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// StartedAt is when a worker first took it; EndedAt when it reached a
	// terminal state. Zero until then.
	StartedAt time.Time
	EndedAt   time.Time
}

// AsyncMove is one state change of an asynchronous call.
type AsyncMove struct {
	To AsyncStatus
	// Result and Code are stored with a terminal state.
	Result []byte
	Code   string
	// ApprovalID, when set, is stored: the approval the call waits for.
	ApprovalID string
	// Runner is stored with a move to running: the node instance taking
	// the call; a move back to queued clears it.
	Runner string
	At     time.Time
}

// CallbackRecord is where the delivery of a call's callback stands after
// one attempt: its state (pending after a failure the worker retries),
// the attempts made, why the last one failed (empty: it did not) and when
// the next is due (zero: none, or not known); every field is stored as
// given, so a delivery clears the error of the attempts before it.
type CallbackRecord struct {
	State     CallbackState
	Attempts  int
	LastError string
	NextAt    time.Time
	At        time.Time
}

// AsyncCallStore is the storage of asynchronous calls, scoped to one
// organization except where a method says otherwise.
type AsyncCallStore interface {
	// InsertAsyncCall stores c, or answers an error wrapping ErrExists
	// when its organization already has a call with its ID, or with its
	// tool and (non-empty) Key.
	InsertAsyncCall(ctx context.Context, c *AsyncCall) error
	// GetAsyncCall answers the call, or ErrNotFound.
	GetAsyncCall(ctx context.Context, org, id string) (*AsyncCall, error)
	// FindAsyncCall answers the call of tool with key, or ErrNotFound.
	FindAsyncCall(ctx context.Context, org, tool, key string) (*AsyncCall, error)
	// MoveAsyncCall moves the call to m.To if its state is one of from,
	// and reports whether it did: the compare-and-set that makes a cancel
	// racing completion end in exactly one terminal state. Moving to
	// running sets StartedAt once and Runner; to a terminal state sets EndedAt and,
	// when the call names a callback URL, its CallbackState pending.
	MoveAsyncCall(ctx context.Context, org, id string, from []AsyncStatus, m AsyncMove) (bool, error)
	// ListAsyncCalls answers org's calls, agent's alone when agent is not
	// empty, in id order (which is creation order) after the id after
	// ("" from the first), at most limit.
	ListAsyncCalls(ctx context.Context, org, agent, after string, limit int) ([]AsyncCall, error)
	// RequestAsyncCancel marks a running call's CancelRequested and
	// reports whether it did (false: the call is not running).
	RequestAsyncCancel(ctx context.Context, org, id string, at time.Time) (bool, error)
	// RecordCallback stores where the delivery of a call's callback
	// stands after an attempt (r), or answers ErrNotFound. Only a pending
	// callback moves (and an expired one to delivered: the receiver has
	// the result); a record on one delivered or expired changes nothing,
	// as an attempt that ends late (a rescued job's old run) must not
	// reopen or expire a delivery. The attempts stored never go back: a
	// job handed out again counts from 1.
	RecordCallback(ctx context.Context, org, id string, r CallbackRecord) error
	// StaleAsyncCalls answers, across organizations, live calls and
	// terminal calls with a pending callback last updated before before,
	// oldest first, at most limit: what a sweep hands to a worker again
	// when the hand-off made at their last change was lost.
	StaleAsyncCalls(ctx context.Context, before time.Time, limit int) ([]AsyncCall, error)
	// DeleteEndedAsyncCalls removes, across organizations, terminal calls
	// ended before before whose callback is not pending, at most limit,
	// with their streamed chunks (StreamStore), and answers how many.
	DeleteEndedAsyncCalls(ctx context.Context, before time.Time, limit int) (int, error)
}
