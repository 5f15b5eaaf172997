package policy

import (
	"errors"
	"fmt"
	"strings"
)

// The open parts of a Request (the arguments, the facts, the agent's and
// the person's attributes) come from the caller, so they are bounded before
// any engine reads them: converting a value into an engine's own form is
// work done before any rule runs and before any deadline can stop it (a
// Cedar set costs time quadratic in its size when its members' hashes
// collide, and an array of 40,000 crafted numbers held a core for seconds).
// An engine counts what it converts, and a request past a bound is denied
// by RuleInputBound, never allowed and never a fault: the call is refused
// with the stable code denied and a reason naming the part and the bound.
const (
	// MaxInputValues bounds the values the rules read of one request's
	// open parts: every member, element and scalar counts one.
	MaxInputValues = 10000
	// MaxInputArray bounds the elements of one array a Cedar rule reads:
	// cedar-go builds a set in time quadratic in its size when its
	// members' hashes collide (a Long's hash is the number, a decimal's
	// its ten-thousandths, a set's the sum of its members'), so the
	// costliest request within the bounds is decided in milliseconds
	// (BenchmarkWorstWithinBounds). Rego's arrays cost no more than their
	// elements, and only MaxInputValues bounds them.
	MaxInputArray = 256
	// MaxInputText bounds the bytes of all the text the rules read.
	MaxInputText = 1 << 20
)

// RuleInputBound is the rule a denial names when the request's open parts
// hold more than the rules may read (see MaxInputValues).
const RuleInputBound = "toolplane.input_bound"

// InputBoundError is a request whose open parts hold more than the rules
// may read. Bound turns it into the denial the call gets.
type InputBoundError struct {
	// Path is where the bound was passed: "arguments.values", "facts".
	Path string
	// What says which bound, with the figures.
	What string
}

// maxPathText bounds the path a reason shows: member names are the
// caller's, and one may be long.
const maxPathText = 120

func (e *InputBoundError) Error() string {
	p := e.Path
	if len(p) > maxPathText {
		p = strings.ToValidUTF8(p[:maxPathText], "") + "…"
	}
	return fmt.Sprintf("%s %s", p, e.What)
}

// Within answers e with its path prefixed by the member or part the
// value it names lies in, as the error goes up from where it was found.
func (e *InputBoundError) Within(part string) *InputBoundError {
	if e.Path == "" {
		e.Path = part
	} else if strings.HasPrefix(e.Path, "[") {
		e.Path = part + e.Path
	} else {
		e.Path = part + "." + e.Path
	}
	return e
}

// Bound answers the decision of a request past a bound: a denial by
// RuleInputBound whose reason names the part and the bound, so the caller
// knows to send less rather than to retry.
func Bound(e *InputBoundError) Decision {
	return Decision{
		Effect: Deny,
		Rule:   RuleInputBound,
		Reason: fmt.Sprintf("the call is too large for the organization's rules to decide: %s; send less (fewer or shorter values)", e.Error()),
	}
}

// AsBound answers the decision of err when it is (or wraps) an
// *InputBoundError: engines decide such a request as Bound says.
func AsBound(err error) (Decision, bool) {
	var be *InputBoundError
	if errors.As(err, &be) {
		return Bound(be), true
	}
	return Decision{}, false
}

// InputBudget counts what an engine converts of one request against the
// bounds. The zero value is a full budget.
type InputBudget struct {
	// Array, when positive, bounds one array instead of MaxInputArray.
	Array int

	values int
	text   int
}

// Value takes one value from the budget.
func (b *InputBudget) Value() error {
	b.values++
	if b.values > MaxInputValues {
		return &InputBoundError{What: fmt.Sprintf("takes the request past the %d values the rules read", MaxInputValues)}
	}
	return nil
}

// List takes an array of n elements: it may hold at most MaxInputArray
// (or b.Array). Its elements are counted as they are converted.
func (b *InputBudget) List(n int) error {
	limit := MaxInputArray
	if b.Array > 0 {
		limit = b.Array
	}
	if n > limit {
		return &InputBoundError{What: fmt.Sprintf("holds %d elements; the rules read at most %d in one array", n, limit)}
	}
	return b.Value()
}

// Text takes a text of n bytes.
func (b *InputBudget) Text(n int) error {
	b.text += n
	if b.text > MaxInputText {
		return &InputBoundError{What: fmt.Sprintf("takes the request past the %d bytes of text the rules read", MaxInputText)}
	}
	return b.Value()
}

// Name takes the name of an object's member, n bytes: text, though not
// a value of its own.
func (b *InputBudget) Name(n int) error {
	b.text += n
	if b.text > MaxInputText {
		return &InputBoundError{What: fmt.Sprintf("takes the request past the %d bytes of text the rules read", MaxInputText)}
	}
	return nil
}

// Check counts a JSON value (as encoding/json decodes one, or with
// []string) and everything in it, for an engine that reads it whole.
func (b *InputBudget) Check(v any) error {
	switch v := v.(type) {
	case string:
		return b.Text(len(v))
	case []string:
		if err := b.List(len(v)); err != nil {
			return err
		}
		for i, s := range v {
			if err := b.Text(len(s)); err != nil {
				return err.(*InputBoundError).Within(fmt.Sprintf("[%d]", i))
			}
		}
		return nil
	case []any:
		if err := b.List(len(v)); err != nil {
			return err
		}
		for i, e := range v {
			if err := b.Check(e); err != nil {
				return err.(*InputBoundError).Within(fmt.Sprintf("[%d]", i))
			}
		}
		return nil
	case map[string]any:
		if err := b.Value(); err != nil {
			return err
		}
		for k, e := range v {
			// The member's name is text the rules read too.
			if err := b.Name(len(k)); err != nil {
				return err.(*InputBoundError).Within(k)
			}
			if err := b.Check(e); err != nil {
				return err.(*InputBoundError).Within(k)
			}
		}
		return nil
	}
	return b.Value()
}

// CheckOpenParts counts every open part of r whole: what an engine whose
// rules may read any member of them (Rego's) converts.
func (b *InputBudget) CheckOpenParts(r *Request) error {
	type part struct {
		name string
		v    map[string]any
	}
	parts := []part{{"arguments", r.Arguments}, {"facts", r.Facts}, {"principal.attributes", r.Principal.Attributes}}
	if r.User != nil {
		parts = append(parts, part{"user.attributes", r.User.Attributes})
	}
	for _, p := range parts {
		if p.v == nil {
			continue
		}
		if err := b.Check(p.v); err != nil {
			return err.(*InputBoundError).Within(p.name)
		}
	}
	return nil
}
