package httpapi_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// The trail is searched by person and time range, and one event is read
// in full, by an auditor of its organization only: another
// organization's is not found, as one that does not exist.
func TestAuditEventsBySearchAndByID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	when := time.Date(2026, 7, 1, 8, 0, 0, 0, time.UTC)
	for _, ev := range []*toolplane.AuditEvent{
		{ID: "aud_ada", OrganizationID: "org-1", UserID: "ada", Tool: "demo.refund_order", Outcome: "ok", Source: toolplane.SourceREST, CreatedAt: when},
		{ID: "aud_bob", OrganizationID: "org-1", UserID: "bob", Tool: "demo.refund_order", Outcome: "ok", Source: toolplane.SourceREST, CreatedAt: when.Add(time.Hour)},
		{ID: "aud_theirs", OrganizationID: "org-2", UserID: "ada", Tool: "demo.refund_order", Outcome: "ok", Source: toolplane.SourceREST, CreatedAt: when},
	} {
		if err := f.store.AppendAudit(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	theirs := mintIn(t, f.store, "org-2", toolplane.CredentialPerson, "eve", []string{"auditor"}, nil, false)
	tests := []struct {
		name, path, key string
		status          int
		want            []string // the events listed, or the one read
	}{
		{"by user", "/v1/audit/events?user_id=ada", f.auditor, 200, []string{"aud_ada"}},
		{"since", "/v1/audit/events?since=" + url.QueryEscape(when.Add(time.Minute).Format(time.RFC3339)), f.auditor, 200, []string{"aud_bob"}},
		{"until", "/v1/audit/events?until=" + url.QueryEscape(when.Add(time.Minute).Format(time.RFC3339)), f.auditor, 200, []string{"aud_ada"}},
		{"a time that is not one", "/v1/audit/events?since=yesterday", f.auditor, 400, nil},
		{"one event", "/v1/audit/events/aud_ada", f.auditor, 200, []string{"aud_ada"}},
		{"another organization's event", "/v1/audit/events/aud_ada", theirs, 404, nil},
		{"no such event", "/v1/audit/events/aud_none", f.auditor, 404, nil},
		{"an approver", "/v1/audit/events/aud_ada", f.person, 403, nil},
		{"an agent", "/v1/audit/events/aud_ada", f.agent, 403, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, body := f.do(t, "GET", tt.path, tt.key, "")
			if status != tt.status {
				t.Fatalf("%d %v, want %d", status, body, tt.status)
			}
			if status != 200 {
				return
			}
			var got []string
			if items, ok := body["items"].([]any); ok {
				for _, it := range items {
					got = append(got, it.(map[string]any)["id"].(string))
				}
			} else {
				got = []string{body["id"].(string)}
				if body["organization_id"] != "org-1" || body["user_id"] != "ada" {
					t.Errorf("the event in full: %v", body)
				}
			}
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
