package httperr

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/toolplane/toolplane"
)

// Code is an error code an HTTP answer names in its envelope. A client
// branches on it, so a code, once answered, never changes meaning; where
// a door code means what a stable toolplane.Code means it is spelt the
// same (denied, not_found, conflict, unavailable, internal_error).
type Code string

// The door codes. Each has its status in the table (see Status); docs/
// errors.md says what each means to a client.
const (
	// InvalidRequest: the request is malformed or not acceptable as it
	// stands; field_path names the field at fault when there is one.
	InvalidRequest Code = "invalid_request"
	// Incompatible: a publish whose version bump is below what its
	// changes need.
	Incompatible Code = "incompatible"
	// Unauthenticated: no credential, or one that is not valid.
	Unauthenticated Code = "unauthenticated"
	// Denied: the caller's credential does not allow the operation.
	Denied = Code(toolplane.CodeDenied)
	// NotFound: no such route or row (in the caller's organization).
	NotFound = Code(toolplane.CodeNotFound)
	// MethodNotAllowed: the route exists, not with this method.
	MethodNotAllowed Code = "method_not_allowed"
	// Conflict: the row exists already or changed meanwhile.
	Conflict = Code(toolplane.CodeConflict)
	// InvalidTransition: the row's lifecycle state does not allow the
	// operation.
	InvalidTransition Code = "invalid_transition"
	// InFlight: an identical call holds the key; call again later.
	InFlight Code = "in_flight"
	// TooLarge: the request body is past the bound.
	TooLarge Code = "too_large"
	// RateLimited: over a rate budget; call again after the reset.
	RateLimited Code = "rate_limited"
	// Internal: the platform failed; the answer names no internals and
	// the fault is logged.
	Internal = Code(toolplane.CodeInternalError)
	// Unavailable: a dependency (the database, the credentials) cannot
	// answer right now.
	Unavailable = Code(toolplane.CodeUnavailable)
)

// table is the one place a door code gets its HTTP status. Where codes
// share a status, the first one listed is the status's own code: the
// code an answer of that status gets when no handler named one (see
// CodeFor).
var table = []struct {
	code   Code
	status int
}{
	{InvalidRequest, http.StatusBadRequest},
	{Incompatible, http.StatusBadRequest},
	{Unauthenticated, http.StatusUnauthorized},
	{Denied, http.StatusForbidden},
	{NotFound, http.StatusNotFound},
	{MethodNotAllowed, http.StatusMethodNotAllowed},
	{Conflict, http.StatusConflict},
	{InvalidTransition, http.StatusConflict},
	{InFlight, http.StatusConflict},
	{TooLarge, http.StatusRequestEntityTooLarge},
	{RateLimited, http.StatusTooManyRequests},
	{Internal, http.StatusInternalServerError},
	{Unavailable, http.StatusServiceUnavailable},
}

// Codes answers every door code, in the table's order.
func Codes() []Code {
	out := make([]Code, len(table))
	for i, e := range table {
		out[i] = e.code
	}
	return out
}

// Status answers the HTTP status of c. A code the table lacks is a
// handler's bug, answered as the platform's: 500.
func (c Code) Status() int {
	for _, e := range table {
		if e.code == c {
			return e.status
		}
	}
	return http.StatusInternalServerError
}

// CodeFor answers the code of an answer of status that no handler named
// (http.Error's, the mux's 405): the status's own code from the table,
// internal_error for any other 5xx, and the status's name otherwise.
func CodeFor(status int) Code {
	for _, e := range table {
		if e.status == status {
			return e.code
		}
	}
	if status >= 500 {
		return Internal
	}
	return Code(strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_"))
}

// Problem is what an error answer says: its code, and the message and
// field its envelope carries.
type Problem struct {
	Code    Code
	Message string
	Field   string
}

// Classify answers the problem a service's or a store's error is answered
// with, by its kind in toolplane's vocabulary: ErrUnauthenticated, a
// *DeniedError (in its service's words, Why), ErrForbidden, a
// *TooLongError (at its field), ErrBadCursor (at cursor), ErrInvalid,
// ErrTransition (invalid_transition, a conflict with its own code),
// ErrConflict, ErrNotFound, checked in that order, so an error of two
// kinds is answered as the first. ok is false for an error of no kind: a
// platform fault (a database outage, a bug), which the caller logs and
// answers 500 (see Fail), never as a refusal the client would take for its
// own mistake.
func Classify(err error) (p Problem, ok bool) {
	var (
		denied  *toolplane.DeniedError
		tooLong *toolplane.TooLongError
	)
	switch {
	case err == nil:
		return Problem{}, false
	case errors.Is(err, toolplane.ErrUnauthenticated):
		return Problem{Code: Unauthenticated, Message: err.Error()}, true
	case errors.As(err, &denied):
		// A service's refusal is shown in its words, whatever wrapped it.
		return Problem{Code: Denied, Message: denied.Why}, true
	case errors.Is(err, toolplane.ErrForbidden):
		return Problem{Code: Denied, Message: err.Error()}, true
	case errors.As(err, &tooLong):
		return Problem{Code: InvalidRequest, Message: tooLong.Error(), Field: tooLong.Field}, true
	case errors.Is(err, toolplane.ErrBadCursor):
		// The decoder's detail says nothing the caller can act on.
		return Problem{Code: InvalidRequest, Message: "the cursor is not valid", Field: "cursor"}, true
	case errors.Is(err, toolplane.ErrInvalid):
		return Problem{Code: InvalidRequest, Message: err.Error()}, true
	case errors.Is(err, toolplane.ErrTransition):
		return Problem{Code: InvalidTransition, Message: err.Error()}, true
	case errors.Is(err, toolplane.ErrConflict):
		return Problem{Code: Conflict, Message: err.Error()}, true
	case errors.Is(err, toolplane.ErrNotFound):
		return Problem{Code: NotFound, Message: err.Error()}, true
	}
	return Problem{}, false
}

// faultMessage is what a platform fault answers: nothing of its cause.
const faultMessage = "the operation could not be completed"

// Fail answers r with the problem err is (see Classify). An error of no
// kind is the platform's fault: it is logged to log with the request's
// method and path, and answered 500 internal_error with a message that
// names none of its internals.
func Fail(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	p, ok := Classify(err)
	if !ok {
		if log == nil {
			log = slog.Default()
		}
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		p = Problem{Code: Internal, Message: faultMessage}
	}
	Send(w, r, p.Code, p.Message, p.Field)
}

// Send answers r with code's status (from the table) and the error
// envelope.
func Send(w http.ResponseWriter, r *http.Request, code Code, msg, field string) {
	WriteJSON(w, code.Status(), Problem{Code: code, Message: msg, Field: field}.Envelope(RequestID(r)))
}

// Envelope answers the error envelope that says p, for the request whose
// id is requestID (see RequestID): what Send writes, for an answer that
// carries several (a batch's, one per call, under the one request's id).
func (p Problem) Envelope(requestID string) Body {
	return Body{Detail{Code: string(p.Code), Message: p.Message, FieldPath: p.Field, Retryable: Retryable(p.Code.Status()), RequestID: requestID}}
}
