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
)

// Codes lists every stable code in a fixed order, for documentation and for
// tests that must cover each one.
var Codes = []Code{
	CodeDenied, CodeRejected, CodeInvalidInput, CodeToolUnavailable,
	CodeToolChanged, CodeNotFound, CodeInvalidOutput, CodeUnavailable,
	CodeRetryableUpstream, CodeConflict, CodeTimeout, CodeUncertain,
	CodeBatchTooLarge, CodeBudgetExhausted, CodeConnectionRequired,
	CodeConnectionExpired, CodeConnectionRevoked, CodeConnectionAmbiguous,
	CodeInternalError,
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
	case CodeInvalidInput, CodeRetryableUpstream, CodeUnavailable, CodeTimeout, CodeBatchTooLarge:
		return true
	}
	return false
}
