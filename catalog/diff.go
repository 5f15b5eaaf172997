package catalog

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/compat"
)

// Comparison is the compatibility report between two definitions of a
// tool, as the people who read the catalogue are shown it.
type Comparison struct {
	compat.Report
	// Refused says why the compatibility gate would refuse the second
	// definition as published after the first (a bump below its
	// changes); "" when it would not.
	Refused string
}

// Compare answers the compatibility report between two definitions, a
// tool author's aid, to the people who read the catalogue (MayRead). A
// pair that cannot be compared (not two versions of one tool) is a
// toolplane.ErrInvalid.
func Compare(from, to *toolplane.Definition, by *toolplane.Credential) (*Comparison, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	rep, err := compat.Classify(from, to)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", toolplane.ErrInvalid, err)
	}
	c := &Comparison{Report: rep}
	if err := compat.Gate(from, to, rep); err != nil {
		c.Refused = err.Error()
	}
	return c, nil
}

// Diff answers the compatibility report between two published versions
// of a tool of the caller's organization, from one to the other, to the
// people who read the catalogue; a version that does not exist is
// toolplane.ErrNotFound.
func (s *Service) Diff(ctx context.Context, name, from, to string, by *toolplane.Credential) (*Comparison, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	defs := make([]*toolplane.Definition, 2)
	for i, version := range []string{from, to} {
		v, err := s.Get(ctx, name, version, by)
		if err != nil {
			return nil, err
		}
		var d toolplane.Definition
		if err := json.Unmarshal(v.Definition, &d); err != nil {
			// The catalogue stored it: a definition it cannot read back is
			// the platform's fault.
			return nil, fmt.Errorf("%s %s: stored definition: %w", name, version, err)
		}
		defs[i] = &d
	}
	return Compare(defs[0], defs[1], by)
}
