package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolplane/toolplane"
)

// MaxBulkReview bounds the versions one bulk decision covers, so one
// request holds the store for a bounded time; a larger set is decided in
// several requests.
const MaxBulkReview = 500

// Ref names one version of a tool.
type Ref struct {
	Name    string
	Version string
}

// Selection is the versions a bulk review decides: those listed, or
// every version in review that one person published (PublishedBy) or
// that needs one connection (Connection: the provider a definition
// declares with `connection:`, or the connection a remote tool is bound
// to: the tools a new connection brought), or both filters at once.
// Listed versions and filters are not mixed.
type Selection struct {
	Versions    []Ref
	PublishedBy string
	Connection  string
}

// Decision is one version's outcome in a bulk review: the version in its
// new state, or the error that refused it (each as Review would answer
// for that version alone).
type Decision struct {
	Ref
	// Result is the version as decided, nil when it was refused.
	Result *toolplane.ToolVersion
	Err    error
}

// ReviewMany decides every version sel names, approving or rejecting it
// with one note, as Review decides one: each version is decided on its
// own, checked on its own (a version the caller published is refused to
// that caller, one not in review is refused) and recorded on its own in
// the change log, and a refusal of one does not stop the others. The
// registry is refreshed once, after every decision. The error is for
// the request as a whole (the caller's role, the note, a selection that
// is empty, mixed or too large, the store); each version's refusal is in
// its Decision.
func (s *Service) ReviewMany(ctx context.Context, sel Selection, approve bool, note string, by *toolplane.Credential) ([]Decision, error) {
	kind, decide, err := s.reviewer(approve, note, by)
	if err != nil {
		return nil, err
	}
	refs, err := s.selected(ctx, sel, by)
	if err != nil {
		return nil, err
	}
	out := make([]Decision, len(refs))
	refresh := false
	for i, ref := range refs {
		v, shown, err := s.apply(ctx, ref.Name, ref.Version, kind, note, by, decide(ref.Name, ref.Version))
		out[i] = Decision{Ref: ref, Result: v, Err: err}
		refresh = refresh || shown
	}
	if refresh {
		if err := s.Refresh(ctx); err != nil {
			return out, err
		}
	}
	return out, nil
}

// selected answers the versions sel names, each once, in the order given
// (listed) or published (filtered).
func (s *Service) selected(ctx context.Context, sel Selection, by *toolplane.Credential) ([]Ref, error) {
	filtered := sel.PublishedBy != "" || sel.Connection != ""
	switch {
	case len(sel.Versions) > 0 && filtered:
		return nil, fmt.Errorf("%w: name versions or a filter (published_by, connection), not both", toolplane.ErrInvalid)
	case len(sel.Versions) > MaxBulkReview:
		return nil, fmt.Errorf("%w: versions: %d named; at most %d are decided at once", toolplane.ErrInvalid, len(sel.Versions), MaxBulkReview)
	case len(sel.Versions) > 0:
		seen := make(map[Ref]bool, len(sel.Versions))
		out := make([]Ref, 0, len(sel.Versions))
		for _, r := range sel.Versions {
			if err := errors.Join(toolplane.CheckLen("name", r.Name, toolplane.MaxNameLen), toolplane.CheckLen("version", r.Version, toolplane.MaxRefLen)); err != nil {
				return nil, fmt.Errorf("%w: %w", toolplane.ErrInvalid, err)
			}
			if r.Name == "" || r.Version == "" {
				return nil, fmt.Errorf("%w: versions: each names a tool and a version", toolplane.ErrInvalid)
			}
			if !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
		return out, nil
	case !filtered:
		return nil, fmt.Errorf("%w: name the versions to decide, or a filter (published_by, connection)", toolplane.ErrInvalid)
	}
	if err := errors.Join(toolplane.CheckLen("published_by", sel.PublishedBy, toolplane.MaxRefLen),
		toolplane.CheckLen("connection", sel.Connection, toolplane.MaxRefLen)); err != nil {
		return nil, fmt.Errorf("%w: %w", toolplane.ErrInvalid, err)
	}
	rows, err := collect(func(after string) ([]toolplane.ToolVersion, string, error) {
		return s.store.ListToolVersions(ctx, orgOf(by), toolplane.VersionFilter{States: []toolplane.VersionState{toolplane.StateInReview}}, after, 500)
	})
	if err != nil {
		return nil, fmt.Errorf("versions in review: %w", err)
	}
	var out []Ref
	for _, v := range rows {
		if sel.PublishedBy != "" && v.PublishedBy != sel.PublishedBy {
			continue
		}
		if sel.Connection != "" {
			var d toolplane.Definition
			if json.Unmarshal(v.Definition, &d) != nil || !binds(&d, sel.Connection) {
				continue
			}
		}
		out = append(out, Ref{Name: v.Name, Version: v.Version})
	}
	if len(out) > MaxBulkReview {
		return nil, fmt.Errorf("%w: %d versions in review match; at most %d are decided at once: narrow the filter or name the versions", toolplane.ErrInvalid, len(out), MaxBulkReview)
	}
	return out, nil
}

// binds reports whether d needs connection: the provider it declares, or
// the connection its remote binding names.
func binds(d *toolplane.Definition, connection string) bool {
	if d.Connection == connection {
		return true
	}
	return d.Binding.Remote != nil && d.Binding.Remote.ConnectionID == connection
}
