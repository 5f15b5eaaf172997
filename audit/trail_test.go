package audit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/cursor"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// The audit trail is read by auditors (platform_admin holds every role), in
// their own organization only; anyone else is refused in the words a door
// shows, before the store is read.
func TestTrailIsReadByAuditorsOfTheOrganization(t *testing.T) {
	t.Parallel()
	s := sqlitetest.New(t)
	ctx := context.Background()
	for i, org := range []string{"org-1", "org-1", "org-2"} {
		ev := &toolplane.AuditEvent{ID: "aud_" + string(rune('a'+i)), OrganizationID: org, RunID: "run-1", Tool: "payments.refund",
			Outcome: "ok", Source: toolplane.SourceREST, CreatedAt: base}
		if err := s.AppendAudit(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	trail := NewTrail(s)
	person := func(org string, roles ...string) *toolplane.Credential {
		return &toolplane.Credential{OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "p", Roles: roles}
	}
	tests := []struct {
		name string
		by   *toolplane.Credential
		// want is the number of events read; -1 for a refusal, whose
		// words are says.
		want int
		says string
	}{
		{"an auditor", person("org-1", toolplane.RoleAuditor), 2, ""},
		{"a platform_admin", person("org-1", toolplane.RolePlatformAdmin), 2, ""},
		{"an auditor of another organization", person("org-2", toolplane.RoleAuditor), 1, ""},
		{"an approver", person("org-1", toolplane.RoleApprover), -1, "the audit trail needs the auditor role"},
		{"a person without roles", person("org-1"), -1, "the audit trail needs the auditor role"},
		{"an agent's key", &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "bot", Roles: []string{toolplane.RoleAuditor}}, -1,
			"the audit trail needs the auditor role; this is an agent's key, and roles are carried by a person's key"},
		{"no credential", nil, -1, "the audit trail needs the auditor role"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			evs, _, err := trail.List(ctx, toolplane.AuditFilter{}, "", 10, tt.by)
			if tt.want < 0 {
				var denied *toolplane.DeniedError
				if !errors.As(err, &denied) || !errors.Is(err, ErrNotAuthorized) || !errors.Is(err, toolplane.ErrForbidden) || denied.Why != tt.says || evs != nil {
					t.Fatalf("List = %v, %v; want the refusal %q", evs, err, tt.says)
				}
				return
			}
			if err != nil || len(evs) != tt.want {
				t.Fatalf("List = %d events, %v; want %d", len(evs), err, tt.want)
			}
			for _, ev := range evs {
				if ev.OrganizationID != tt.by.OrganizationID {
					t.Fatalf("an event of %s read by a person of %s", ev.OrganizationID, tt.by.OrganizationID)
				}
			}
		})
	}
	if _, _, err := trail.List(ctx, toolplane.AuditFilter{}, "not a cursor", 10, person("org-1", toolplane.RoleAuditor)); !errors.Is(err, cursor.ErrMalformed) {
		// The door tells a bad cursor (400) from an outage (500) by it.
		t.Fatalf("a bad cursor = %v, want cursor.ErrMalformed through the trail", err)
	}
}

// One event is read by the same people as the trail, in their own
// organization only: another's is not found, as one that does not exist.
func TestTrailGetIsTheAuditorsOfTheOrganization(t *testing.T) {
	t.Parallel()
	s := sqlitetest.New(t)
	ctx := context.Background()
	ev := &toolplane.AuditEvent{ID: "aud_one", OrganizationID: "org-1", RunID: "run-1", Tool: "payments.refund",
		Outcome: "ok", Source: toolplane.SourceREST, CreatedAt: base}
	if err := s.AppendAudit(ctx, ev); err != nil {
		t.Fatal(err)
	}
	trail := NewTrail(s)
	person := func(org string, roles ...string) *toolplane.Credential {
		return &toolplane.Credential{OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "p", Roles: roles}
	}
	tests := []struct {
		name string
		id   string
		by   *toolplane.Credential
		want error // nil: the event is read
	}{
		{"an auditor", "aud_one", person("org-1", toolplane.RoleAuditor), nil},
		{"an auditor of another organization", "aud_one", person("org-2", toolplane.RoleAuditor), toolplane.ErrNotFound},
		{"no such event", "aud_none", person("org-1", toolplane.RoleAuditor), toolplane.ErrNotFound},
		{"an approver", "aud_one", person("org-1", toolplane.RoleApprover), ErrNotAuthorized},
		{"an id past its bound", string(make([]byte, toolplane.MaxRefLen+1)), person("org-1", toolplane.RoleAuditor), toolplane.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := trail.Get(ctx, tt.id, tt.by)
			if tt.want == nil {
				if err != nil || got.ID != ev.ID {
					t.Fatalf("Get = %v, %v; want %s", got, err, ev.ID)
				}
				return
			}
			if !errors.Is(err, tt.want) || got != nil {
				t.Fatalf("Get = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// A filter no store could read as asked is the caller's mistake, said
// before the store is asked.
func TestTrailRefusesAFilterNoStoreReads(t *testing.T) {
	t.Parallel()
	trail := NewTrail(sqlitetest.New(t))
	by := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "p", Roles: []string{toolplane.RoleAuditor}}
	tests := []struct {
		name string
		f    toolplane.AuditFilter
	}{
		{"a NUL byte", toolplane.AuditFilter{AgentID: "agent\x00"}},
		{"not UTF-8", toolplane.AuditFilter{UserID: "\xff"}},
		{"a long tool", toolplane.AuditFilter{Tool: string(make([]byte, toolplane.MaxNameLen+1))}},
		{"too many outcomes", toolplane.AuditFilter{Outcomes: make([]string, MaxOutcomes+1)}},
		{"a range ending before it starts", toolplane.AuditFilter{Since: base, Until: base.Add(-time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, _, err := trail.List(context.Background(), tt.f, "", 10, by); !errors.Is(err, toolplane.ErrInvalid) {
				t.Fatalf("List = %v, want ErrInvalid", err)
			}
		})
	}
}
