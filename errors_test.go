package toolplane

import (
	"errors"
	"fmt"
	"testing"
)

// Each kind of the vocabulary is told apart from the others by errors.Is,
// and a refinement is both itself and its kind, through any wrapping, with
// its own text as its message.
func TestErrorVocabulary(t *testing.T) {
	t.Parallel()
	kinds := []error{ErrInvalid, ErrForbidden, ErrNotFound, ErrConflict, ErrBadCursor, ErrUnauthenticated}
	for i, a := range kinds {
		for j, b := range kinds {
			if errors.Is(a, b) != (i == j) {
				t.Errorf("errors.Is(%v, %v) = %v", a, b, i != j)
			}
		}
	}
	transition := Refine(ErrConflict, "transition not allowed")
	wrapped := fmt.Errorf("retire x 1.0.0: %w", transition)
	if !errors.Is(wrapped, transition) || !errors.Is(wrapped, ErrConflict) || errors.Is(wrapped, ErrInvalid) {
		t.Errorf("a wrapped refinement is not exactly itself and its kind: %v", wrapped)
	}
	if transition.Error() != "transition not allowed" {
		t.Errorf("a refinement's message = %q", transition.Error())
	}
	if errors.Is(ErrConflict, transition) || errors.Is(Refine(ErrConflict, "transition not allowed"), transition) {
		t.Error("a kind, or another refinement with the same text, is taken for the refinement")
	}
	if !errors.Is(ErrExists, ErrConflict) || ErrExists.Error() != "already exists" {
		t.Errorf("ErrExists = %q, want a conflict reading \"already exists\"", ErrExists)
	}
	if !errors.Is(ErrTransition, ErrConflict) || errors.Is(ErrConflict, ErrTransition) || errors.Is(ErrExists, ErrTransition) || ErrTransition.Error() != "transition not allowed" {
		t.Errorf("ErrTransition = %q, want a conflict of its own reading \"transition not allowed\"", ErrTransition)
	}
	var tooLong *TooLongError
	err := fmt.Errorf("grant: %w", CheckLen("agent_id", "abcd", 3))
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &tooLong) || tooLong.Field != "agent_id" || errors.Is(err, ErrConflict) {
		t.Errorf("a too-long identifier = %v; want an ErrInvalid carrying its field", err)
	}
}
