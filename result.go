package toolplane

import (
	"strconv"
	"time"
)

// Result is what a call answers: the data a tool produced, or the refusal or
// failure a model can act on. Every refusal and every tool outcome is a
// Result; only platform faults travel as Go errors.
type Result struct {
	// OK is true when Data holds the tool's answer.
	OK bool `json:"ok"`
	// Data is the bounded, redacted answer in plain JSON form (map[string]any,
	// []any, string, json.Number, bool, nil). It is nil when OK is false.
	Data any `json:"data,omitempty"`
	// Error explains a refusal or a failure. It is nil when OK is true.
	Error *Error `json:"error,omitempty"`
	// Meta describes the transport form of Data.
	Meta Meta `json:"meta"`
	// Stop tells the calling run what it must do about this result. Only the
	// invoker sets it; the model never reads it, so it is not rendered.
	Stop Stop `json:"-"`
}

// Meta describes how Data relates to what the tool produced.
type Meta struct {
	// Count is the number of items Data holds after every bound, when Data is
	// a collection. It is nil for a scalar or an object answer.
	Count *int `json:"count,omitempty"`
	// Truncated is true when a bound (max_results or the byte bound) changed
	// the payload.
	Truncated bool `json:"truncated"`
	// Untrusted is true when Data, or Error's message, carries content from
	// outside the platform (a vendor, a remote MCP server, the open web). A
	// caller wraps such content in a labelled envelope and never treats it
	// as an instruction.
	Untrusted bool `json:"untrusted"`
	// Replayed is true when the result was read from the idempotency journal
	// rather than produced by executing the tool now.
	Replayed bool `json:"replayed,omitempty"`
	// Repeat is true when the call repeated one the journal already
	// answered (a stored result, or an action left uncertain): no tool ran
	// for it. It is the door's to read (see invoke.Repeated), never
	// rendered.
	Repeat bool `json:"-"`
	// UsageID names the usage row a metered call wrote.
	UsageID string `json:"usage_id,omitempty"`
	// DeprecationWarning is set when the called version is deprecated.
	DeprecationWarning string `json:"deprecation_warning,omitempty"`
}

// Stop is what the run does about a refusal the invoker made.
type Stop string

// The stops a result may carry.
const (
	StopNone            Stop = ""
	StopBudgetExhausted Stop = "budget_exhausted"
	StopFault           Stop = "fault"
)

// Error is the model-facing explanation of a refusal or a failure. Message is
// written for a model to act on: it says what was wrong and what to do.
type Error struct {
	Code      Code   `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	// FieldPath is the JSON pointer of the first offending argument, for
	// invalid_input. Violations lists every one.
	FieldPath string `json:"field_path,omitempty"`
	// Constraint is the schema keyword the first violation failed.
	Constraint string `json:"constraint,omitempty"`
	// SuggestedFix tells the model how to correct the first violation.
	SuggestedFix string `json:"suggested_fix,omitempty"`
	// Violations lists every validation failure in a stable order.
	Violations []Violation `json:"violations,omitempty"`
	// AuthorizationURL is where a person consents to the connection a
	// call needs, for connection_required and connection_expired.
	AuthorizationURL string `json:"authorization_url,omitempty"`
	// RetryAfter is how many seconds to wait before the same call can
	// succeed, when the platform knows (an open circuit breaker, a rate or
	// an in-flight cap); the REST door also sends it as Retry-After.
	RetryAfter int `json:"retry_after_seconds,omitempty"`
}

// FailAfter builds a failed Result with code and message that may succeed
// after wait (rounded up to whole seconds, at least one).
func FailAfter(code Code, message string, wait time.Duration) Result {
	r := Fail(code, message)
	// A wait comes from outside too (a downstream's Retry-After, carried
	// by a handler): bounded, so no answer tells a caller to wait days,
	// and no huge wait overflows into a short one.
	wait = min(wait, MaxRetryAfter)
	r.Error.RetryAfter = max(1, int((wait+time.Second-1)/time.Second))
	return r
}

// MaxRetryAfter bounds the wait a refusal's retry hint names.
const MaxRetryAfter = 24 * time.Hour

// Violation is one way an argument or an output failed its schema.
type Violation struct {
	FieldPath    string `json:"field_path"`
	Constraint   string `json:"constraint"`
	Message      string `json:"message"`
	SuggestedFix string `json:"suggested_fix,omitempty"`
}

// Fail builds a failed Result with code and message; Retryable follows the
// code.
func Fail(code Code, message string) Result {
	return Result{Error: &Error{Code: code, Message: message, Retryable: code.Retryable()}}
}

// Invalid builds the invalid_input Result for a non-empty list of violations.
// The first violation fills the top-level fields, so a caller that reads only
// one path still gets a usable correction.
func Invalid(vs []Violation) Result {
	e := &Error{Code: CodeInvalidInput, Retryable: true, Violations: vs}
	if len(vs) > 0 {
		first := vs[0]
		e.FieldPath, e.Constraint, e.SuggestedFix = first.FieldPath, first.Constraint, first.SuggestedFix
		e.Message = first.Message
		if len(vs) > 1 {
			e.Message += " (and " + strconv.Itoa(len(vs)-1) + " more; see violations)"
		}
	}
	return Result{Error: e}
}

// ResourceRef names a row a model may fetch by other means. It appears inside
// a Dropped marker, never on its own among real rows.
type ResourceRef struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}
