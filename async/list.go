package async

import (
	"context"
	"fmt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/invoke"
)

// List answers a page of the calls of org who may read, in creation
// order, after the call id after ("" from the first), at most limit: an
// agent's own calls, or every call of the organization for the people
// who read any of them (agent operators, administrators, auditors), so
// that a call who may read is listed for them, and no other.
func (s *Service) List(ctx context.Context, org string, who *toolplane.Credential, after string, limit int) ([]toolplane.AsyncCall, error) {
	if who == nil || who.OrganizationID != org {
		return nil, nil
	}
	agent := who.Subject
	if who.HasAnyRole(toolplane.RoleAgentOperator, toolplane.RolePlatformAdmin, toolplane.RoleAuditor) {
		agent = ""
	} else if agent == "" {
		// A credential without a subject has no calls of its own.
		return nil, nil
	}
	if who.ActsFor == "" {
		cs, err := s.store.ListAsyncCalls(ctx, org, agent, after, limit)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", invoke.ErrFault, err)
		}
		return cs, nil
	}
	// A token acting for a person lists only the calls made for them:
	// pages of the agent's calls are read until limit of theirs are found
	// or the calls run out.
	var out []toolplane.AsyncCall
	for len(out) < limit {
		cs, err := s.store.ListAsyncCalls(ctx, org, agent, after, limit)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", invoke.ErrFault, err)
		}
		for i := range cs {
			if mayRead(who, &cs[i]) && len(out) < limit {
				out = append(out, cs[i])
			}
		}
		if len(cs) < limit {
			break
		}
		after = cs[len(cs)-1].ID
	}
	return out, nil
}
