package door

import (
	"context"
	"fmt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/registry"
)

// Search answers the tools cred may call that best match q: the same
// tools Shown answers, and nothing else is a candidate, so a search never
// tells a caller of a tool it may not call (not by a match, a count or a
// score). Without a Discovery index there is no search.
func (d *Door) Search(ctx context.Context, cred *toolplane.Credential, tenant string, q discovery.Query) (*discovery.Results, error) {
	if d.Discovery == nil {
		return nil, fmt.Errorf("%w: this deployment keeps no search index", toolplane.ErrNotFound)
	}
	shown, err := d.Shown(ctx, cred, tenant)
	if err != nil {
		return nil, err
	}
	return d.Discovery.Search(ctx, cred.OrganizationID, shown, q)
}

// Dependencies answers the dependency graph around the tool cred may call
// named name (see discovery.Graph), walked only through tools cred may
// call; toolplane.ErrNotFound when cred may not call it (or it does not
// exist: the two answer alike).
func (d *Door) Dependencies(ctx context.Context, cred *toolplane.Credential, tenant, name string) (*discovery.Graph, error) {
	shown, err := d.Shown(ctx, cred, tenant)
	if err != nil {
		return nil, err
	}
	var root *registry.Tool
	for _, t := range shown {
		if t.Def.Name == name || t.Model == name {
			root = t
			break
		}
	}
	if root == nil {
		return nil, fmt.Errorf("%w: no tool %q you may call", toolplane.ErrNotFound, toolplane.Clip(name))
	}
	return discovery.Dependencies(root, shown), nil
}
