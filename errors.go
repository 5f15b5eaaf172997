package toolplane

import "errors"

// The error vocabulary. Every service and every store answers a refusal
// with an error that errors.Is reports as one of these kinds, so a door
// (REST, MCP, the console, the CLI) maps a refusal to its answer by kind,
// without knowing which package refused or matching any text. A package
// with a more precise error keeps it only as a refinement of one of these
// (see Refine), so it is answered as its kind wherever nobody knows it.
// Store adapters translate their database's errors into these at their
// edge. Anything that is none of these kinds is a platform fault: a door logs it
// and answers a server error, never a refusal the caller would take for
// its own mistake.
var (
	// ErrInvalid: the request is not acceptable as it stands (a field
	// missing or malformed, a value out of range); the error says why,
	// and sending it again unchanged fails again.
	ErrInvalid = errors.New("invalid")
	// ErrForbidden: the caller's credential does not allow the operation.
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound: no row with that identity in that organization.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the operation collides with the row's present state:
	// it already exists, it changed meanwhile, or its state does not
	// allow the operation.
	ErrConflict = errors.New("conflict")
	// ErrBadCursor: a list's cursor is not one that list answered. It is
	// the caller's mistake, told apart from a store that cannot answer.
	ErrBadCursor = errors.New("cursor not valid")
	// ErrExists: a row with that identity already exists. It is a
	// conflict.
	ErrExists = Refine(ErrConflict, "already exists")
	// ErrTransition: the row's lifecycle state does not allow the
	// operation (a version retired before it was deprecated). It is a
	// conflict, told apart because sending the request again does not
	// help until someone changes the state; a door answers it with its
	// own code.
	ErrTransition = Refine(ErrConflict, "transition not allowed")
	// ErrUnauthenticated: a presented credential (an API key, a token) is
	// not valid. Every authenticator wraps it, whatever the reason, so a
	// door answers 401 the same way and a prober learns nothing.
	ErrUnauthenticated = errors.New("not authenticated")
)

// Refine answers a new sentinel error whose message is text and which
// errors.Is reports both as itself and as kind: a package's more precise
// error (a lifecycle transition refused, a malformed cursor) that a door
// still answers as its kind. The message is text alone, so a refinement
// reads as it did before it had a kind.
func Refine(kind error, text string) error {
	return &refined{kind: kind, text: text}
}

// refined is an error of Refine.
type refined struct {
	kind error
	text string
}

func (e *refined) Error() string { return e.text }

// Unwrap answers the kind the error refines.
func (e *refined) Unwrap() error { return e.kind }
