package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// doWith is fixture.do with request headers.
func (f *fixture) doWith(t *testing.T, path, key, body string, h map[string]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

func TestInvokeDeadlineAndHops(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const search = "/v1/tools/demo.search_tickets/invoke"
	const note = "/v1/tools/demo.add_note/invoke"
	tests := []struct {
		name   string
		path   string
		body   string
		header string
		status int
		code   string // the error's code ("" for an answer that ran)
		field  string
	}{
		{"ten years in the header", search, `{"arguments":{"query":"x"}}`, "315360000", 200, "", ""},
		{"ten years in the body", search, `{"arguments":{"query":"x"},"timeout_ms":315360000000}`, "", 200, "", ""},
		{"a second", search, `{"arguments":{"query":"x"}}`, "1.5", 200, "", ""},
		{"a millisecond in the header", note, `{"arguments":{"ticket_id":"t-1001","text":"a"},"run_id":"run-h"}`, "0.001", 200, "deadline_exceeded", ""},
		{"a millisecond in the body", note, `{"arguments":{"ticket_id":"t-1001","text":"a"},"run_id":"run-b","timeout_ms":1}`, "", 200, "deadline_exceeded", ""},
		{"the tighter of the two", search, `{"arguments":{"query":"x"},"timeout_ms":60000}`, "0.001", 200, "deadline_exceeded", ""},
		{"a header that is not seconds", search, `{"arguments":{"query":"x"}}`, "soon", 400, "invalid_request", "Request-Timeout"},
		{"a negative header", search, `{"arguments":{"query":"x"}}`, "-1", 400, "invalid_request", "Request-Timeout"},
		{"a zero body timeout", search, `{"arguments":{"query":"x"},"timeout_ms":0}`, "", 400, "invalid_request", "timeout_ms"},
		{"a body timeout that is not a number", search, `{"arguments":{"query":"x"},"timeout_ms":"1"}`, "", 400, "invalid_request", ""},
		{"no hop left", search, `{"arguments":{"query":"x"},"remaining_hops":-1}`, "", 200, "max_hops_exceeded", ""},
		{"hops forged upward", search, `{"arguments":{"query":"x"},"remaining_hops":100000}`, "", 200, "", ""},
		{"a batch's header that is not seconds", "/v1/invoke:batch", `{"calls":[{"tool":"demo.search_tickets","arguments":{"query":"x"}}]}`, "soon", 400, "invalid_request", "Request-Timeout"},
		{"a batch call's own timeout", "/v1/invoke:batch", `{"calls":[{"tool":"demo.search_tickets","arguments":{"query":"x"},"timeout_ms":-5}]}`, "", 400, "invalid_request", "calls[0].timeout_ms"},
	}
	for _, tt := range tests {
		h := map[string]string{}
		if tt.header != "" {
			h["Request-Timeout"] = tt.header
		}
		status, body := f.doWith(t, tt.path, f.agent, tt.body, h)
		e, _ := body["error"].(map[string]any)
		code, _ := e["code"].(string)
		field, _ := e["field_path"].(string)
		if status != tt.status || code != tt.code || (tt.field != "" && field != tt.field) {
			t.Errorf("%s: %d %v; want %d %q at %q", tt.name, status, body, tt.status, tt.code, tt.field)
		}
	}
}

func TestAuditEventServesItsParent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ev := &toolplane.AuditEvent{ID: "aud_child", OrganizationID: "org-1", Tool: "demo.search_tickets", Source: toolplane.SourceREST,
		Outcome: "ok", ParentID: "aud_parent", CreatedAt: time.Now()}
	if err := f.store.AppendAudit(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	status, body := f.do(t, "GET", "/v1/audit/events/aud_child", f.auditor, "")
	if status != 200 || !strings.Contains(toJSON(body), `"parent_id":"aud_parent"`) {
		t.Fatalf("%d %v", status, body)
	}
}
