package audit

import (
	"context"
	"errors"
	"testing"

	"github.com/toolplane/toolplane"
)

// unread is a Reader no read may reach.
type unread struct{ t *testing.T }

func (u unread) ListAudit(context.Context, string, toolplane.AuditFilter, string, int) ([]toolplane.AuditEvent, string, error) {
	u.t.Error("the store was read")
	return nil, "", nil
}

func (u unread) GetAudit(context.Context, string, string) (*toolplane.AuditEvent, error) {
	u.t.Error("the store was read")
	return nil, toolplane.ErrNotFound
}

// The trail itself refuses a filter past its bounds, whatever the store
// would make of it: a store is never asked to read more outcomes than
// MaxOutcomes, nor an event id past its bound.
func TestTrailRefusesBeforeTheStoreIsRead(t *testing.T) {
	t.Parallel()
	trail := NewTrail(unread{t})
	by := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "p", Roles: []string{toolplane.RoleAuditor}}
	outcomes := make([]string, MaxOutcomes+1)
	for i := range outcomes {
		outcomes[i] = "ok"
	}
	if _, _, err := trail.List(context.Background(), toolplane.AuditFilter{Outcomes: outcomes}, "", 10, by); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("List of %d outcomes = %v, want ErrInvalid", len(outcomes), err)
	}
	if _, err := trail.Get(context.Background(), string(make([]byte, toolplane.MaxRefLen+1)), by); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("Get of an overlong id = %v, want ErrInvalid", err)
	}
}
