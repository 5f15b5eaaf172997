package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// TestAuditReportsAndSubjectExport: the canned reports answer what they
// name, paged, over the auditor's organization only; the data-subject
// export streams every event about one person as JSON Lines (and none of
// another organization's); neither is anyone's but an auditor's.
func TestAuditReportsAndSubjectExport(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	when := time.Date(2026, 7, 1, 8, 0, 0, 0, time.UTC)
	add := func(org, id string, mod func(*toolplane.AuditEvent)) {
		ev := &toolplane.AuditEvent{ID: id, OrganizationID: org, Tool: "demo.refund_order", Outcome: "ok", Source: toolplane.SourceREST,
			UserID: "bob", CreatedAt: when}
		when = when.Add(time.Second)
		mod(ev)
		if err := f.store.AppendAudit(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, org := range []string{"org-1", "org-2"} {
		p := org + "-"
		add(org, p+"destr-ran", func(e *toolplane.AuditEvent) { e.Destructive = true })
		add(org, p+"destr-uncertain", func(e *toolplane.AuditEvent) { e.Destructive = true; e.Outcome = "uncertain" })
		add(org, p+"destr-denied", func(e *toolplane.AuditEvent) { e.Destructive = true; e.Outcome = "denied" })
		add(org, p+"destr-approved", func(e *toolplane.AuditEvent) {
			e.Destructive, e.ApprovalID, e.ApproverID = true, "apr-1", "jane"
		})
		add(org, p+"approval", func(e *toolplane.AuditEvent) {
			e.Kind, e.ApprovalID, e.ApproverID, e.Outcome, e.UserID = toolplane.AuditApproval, "apr-1", "jane", "approved", ""
		})
		add(org, p+"pii", func(e *toolplane.AuditEvent) { e.Classifications = []string{"pii"}; e.UserID = "ada" })
		add(org, p+"made-by-ada", func(e *toolplane.AuditEvent) { e.PrincipalID = "ada" })
		add(org, p+"plain", func(e *toolplane.AuditEvent) {})
	}
	ids := func(body map[string]any) []string {
		var out []string
		for _, it := range body["items"].([]any) {
			out = append(out, it.(map[string]any)["id"].(string))
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name, path string
		want       []string
	}{
		{"destructive without approval", "/v1/audit/reports/destructive-without-approval", []string{"org-1-destr-ran", "org-1-destr-uncertain"}},
		{"classification", "/v1/audit/reports/classification?class=pii", []string{"org-1-pii"}},
		{"approvals by", "/v1/audit/reports/approvals-by?person=jane", []string{"org-1-approval", "org-1-destr-approved"}},
		{"filtered list", "/v1/audit/events?destructive=true&approved=false&outcome=denied", []string{"org-1-destr-denied"}},
		{"by kind", "/v1/audit/events?kind=approval", []string{"org-1-approval"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, body := f.do(t, "GET", tt.path, f.auditor, "")
			if status != 200 || !slices.Equal(ids(body), tt.want) {
				t.Fatalf("%d %v, want %v", status, body, tt.want)
			}
		})
	}
	// A page of one, then the next: the cursor walks the report.
	status, body := f.do(t, "GET", "/v1/audit/reports/approvals-by?person=jane&limit=1", f.auditor, "")
	next, _ := body["next_cursor"].(string)
	if status != 200 || len(body["items"].([]any)) != 1 || next == "" {
		t.Fatalf("first page: %d %v", status, body)
	}
	if _, body = f.do(t, "GET", "/v1/audit/reports/approvals-by?person=jane&limit=1&cursor="+next, f.auditor, ""); len(body["items"].([]any)) != 1 || body["next_cursor"] != "" {
		t.Fatalf("second page: %v", body)
	}
	for _, bad := range []struct {
		path, key string
		status    int
	}{
		{"/v1/audit/reports/everything", f.auditor, 404},
		{"/v1/audit/reports/classification", f.auditor, 400},
		{"/v1/audit/reports/approvals-by?person=jane", f.person, 403},
		{"/v1/audit/events?destructive=maybe", f.auditor, 400},
		{"/v1/audit/subjects/ada/export", f.agent, 403},
		{"/v1/audit/exports", f.auditor, 403},
	} {
		if status, body := f.do(t, "GET", bad.path, bad.key, ""); status != bad.status {
			t.Errorf("%s: %d %v, want %d", bad.path, status, body, bad.status)
		}
	}

	// The subject export: the events about ada (acted for, made by),
	// one JSON object a line, of org-1 only.
	req, _ := http.NewRequest("GET", f.srv.URL+"/v1/audit/subjects/ada/export", nil)
	req.Header.Set("Authorization", "Bearer "+f.auditor)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("export: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev toolplane.AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("a line that is not an event: %q", sc.Text())
		}
		got = append(got, fmt.Sprintf("%s/%s", ev.OrganizationID, ev.ID))
	}
	slices.Sort(got)
	if want := []string{"org-1/org-1-made-by-ada", "org-1/org-1-pii"}; !slices.Equal(got, want) {
		t.Fatalf("export: %v, want %v", got, want)
	}
}
