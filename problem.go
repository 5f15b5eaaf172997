package toolplane

// Problem is one thing wrong with a definition, found by a check when the
// definition is loaded or published: the field it concerns, what is wrong,
// and what to change. The registry's checks and each runtime's own checks
// of the bindings it runs answer the same Problem, so what publishing
// refuses reads alike whichever check found it.
type Problem struct {
	// Tool names the definition, when the check knows it: the registry
	// sets it; a runtime, which checks one definition, leaves it empty.
	Tool string `json:"tool"`
	// Field is the definition field at fault (binding.http.url).
	Field string `json:"field"`
	// Message says what is wrong; Fix says what to change.
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// String answers the problem on one line: the tool when it is named, the
// field, the message and the fix.
func (p Problem) String() string {
	s := p.Field + ": " + p.Message + "; fix: " + p.Fix
	if p.Tool != "" {
		s = p.Tool + ": " + s
	}
	return s
}
