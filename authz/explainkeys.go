package authz

import (
	"context"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// KeyLister lists an organization's credentials, as
// toolplane.CredentialStore does.
type KeyLister interface {
	ListCredentials(ctx context.Context, org, after string, limit int) ([]toolplane.Credential, string, error)
}

// AgentKey is a live key of an agent as an explanation names it: each
// narrows what the agent may call below its grants to Tools (or does not,
// when Tools is empty).
type AgentKey struct {
	ID    string   `json:"id"`
	Label string   `json:"label"`
	Tools []string `json:"tools"`
}

// ExplainKeys answers the live keys (neither revoked nor expired at now)
// of agent in the caller's organization, to whom Explain answers
// (MayExplain): "why can this key not call X" is answered beside the
// grants, by every door alike.
func ExplainKeys(ctx context.Context, keys KeyLister, agent string, now time.Time, by *toolplane.Credential) ([]AgentKey, error) {
	if err := MayExplain(by); err != nil {
		return nil, err
	}
	out := []AgentKey{}
	after := ""
	for {
		creds, next, err := keys.ListCredentials(ctx, by.OrganizationID, after, 500)
		if err != nil {
			return nil, fmt.Errorf("keys of %s: %w", agent, err)
		}
		for i := range creds {
			k := &creds[i]
			if k.Kind != toolplane.CredentialAgent || k.Subject != agent || !k.RevokedAt.IsZero() || (!k.ExpiresAt.IsZero() && !now.Before(k.ExpiresAt)) {
				continue
			}
			tools := k.Tools
			if tools == nil {
				tools = []string{}
			}
			out = append(out, AgentKey{ID: k.ID, Label: k.Label, Tools: tools})
		}
		if next == "" {
			return out, nil
		}
		after = next
	}
}
