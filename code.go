package toolplane

// Code is a stable error code. Models and agent runtimes branch on it, so a
// code, once published, never changes meaning.
type Code string

// The stable codes. Their meaning is documented in docs/errors.md.
const (
	CodeDenied              Code = "denied"
	CodeRejected            Code = "rejected"
	CodeInvalidInput        Code = "invalid_input"
	CodeToolUnavailable     Code = "tool_unavailable"
	CodeToolChanged         Code = "tool_changed"
	CodeNotFound            Code = "not_found"
	CodeInvalidOutput       Code = "invalid_output"
	CodeUnavailable         Code = "unavailable"
	CodeRetryableUpstream   Code = "retryable_upstream"
	CodeConflict            Code = "conflict"
	CodeTimeout             Code = "timeout"
	CodeUncertain           Code = "uncertain"
	CodeBatchTooLarge       Code = "batch_too_large"
	CodeBudgetExhausted     Code = "budget_exhausted"
	CodeConnectionRequired  Code = "connection_required"
	CodeConnectionExpired   Code = "connection_expired"
	CodeConnectionRevoked   Code = "connection_revoked"
	CodeConnectionAmbiguous Code = "connection_ambiguous"
	CodeInternalError       Code = "internal_error"
	// CodeDeadlineExceeded: the time the caller (or the call that made
	// this one) left was too short for the call to be sent; nothing was
	// claimed or sent.
	CodeDeadlineExceeded Code = "deadline_exceeded"
	// CodeMaxHopsExceeded: the call was made by a tool call that had no
	// tool-to-tool hops left; a chain of calls calling calls is cut here.
	CodeMaxHopsExceeded Code = "max_hops_exceeded"
	// CodeRateLimited: a rate or an in-flight cap of the tool, the agent,
	// the organization or the downstream refused the call before it was
	// sent; Error.RetryAfter says when to try again.
	CodeRateLimited Code = "rate_limited"
)

// Codes lists every stable code in a fixed order, for documentation and for
// tests that must cover each one.
var Codes = []Code{
	CodeDenied, CodeRejected, CodeInvalidInput, CodeToolUnavailable,
	CodeToolChanged, CodeNotFound, CodeInvalidOutput, CodeUnavailable,
	CodeRetryableUpstream, CodeConflict, CodeTimeout, CodeUncertain,
	CodeBatchTooLarge, CodeBudgetExhausted, CodeConnectionRequired,
	CodeConnectionExpired, CodeConnectionRevoked, CodeConnectionAmbiguous,
	CodeInternalError, CodeDeadlineExceeded, CodeMaxHopsExceeded, CodeRateLimited,
}

// Valid reports whether c is one of the stable codes.
func (c Code) Valid() bool {
	for _, k := range Codes {
		if c == k {
			return true
		}
	}
	return false
}

// Retryable reports whether a caller may repeat the same call and expect a
// different outcome without changing anything first. invalid_input is
// retryable because the model is expected to correct its arguments and call
// again; a denial or a rejection is not, because repeating it only repeats
// the refusal.
func (c Code) Retryable() bool {
	switch c {
	case CodeInvalidInput, CodeRetryableUpstream, CodeUnavailable, CodeTimeout, CodeBatchTooLarge, CodeRateLimited:
		return true
	}
	return false
}
