package server

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/cedar"
)

// An approved call made in the background is decided on the same caller
// as the call that asked: a rule reading the agent key's roles reads them
// on the resume too. Here the organization's rules let only agents that
// act for users add notes, and send every note to a person; the person
// approves, and the approved note is written by the resume, never denied
// for a key without roles.
func TestApprovedCallIsDecidedOnTheCallersRoles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := &e2e{log: &syncbuf.Buffer{}, seen: &traffic{}, ran: make(chan error, 1), conns: map[string]string{}}
	e.cfg = Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db"), DataDir: dir, Demo: true,
		PolicyEngines: []policy.Engine{cedar.Engine{}}}
	s, err := New(context.Background(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.s, e.base = s, "http://"+s.Addr()
	ctx, stop := context.WithCancel(context.Background())
	e.stop = stop
	go func() { e.ran <- s.Run(ctx) }()
	t.Cleanup(func() { e.shutdown(t) })
	e.admin = readCreds(t, dir)["TOOLPLANE_ADMIN_KEY"]

	rules := `@id("delegating-agents-note")
permit (principal, action == Action::"call", resource == Tool::"demo.add_note")
when { principal.roles.contains("act_for_users") };

@id("notes-need-a-person")
@reason("a person reads every note first")
@approval("editors")
forbid (principal, action, resource == Tool::"demo.add_note");
`
	tests := `tests:
  - name: a delegating agent's note waits for a person
    request:
      principal: {agent: demo-agent, key: k, roles: [act_for_users], attributes: {}}
      tool: {name: demo.add_note, version: 1.0.0, effect: write, destructive: false, read_only: false, tags: [], classification: "", owner: demo}
      arguments: {ticket_id: t-1, text: hi}
      facts: {}
      context: {time: 2026-03-03T10:15:00Z, hour: 10, weekday: 2, run_cost_cents: 0, source: rest}
    expect: require_approval
    rule: notes-need-a-person
`
	body, _ := json.Marshal(map[string]any{"files": map[string]string{"notes.cedar": rules, "tests.yaml": tests}})
	e.must(t, "POST", "/v1/policy/bundles", e.admin, string(body), http.StatusCreated)
	agent := e.mintKey(t, e.admin, `{"kind":"agent","subject":"demo-agent","roles":["act_for_users"]}`)
	editor := e.mintKey(t, e.admin, `{"kind":"person","subject":"eda","roles":["approver","group:editors"]}`)

	args := map[string]any{"ticket_id": "t-1001", "text": "checked by a person"}
	r := e.call(t, agent, "demo.add_note", args, "run-roles", "")
	var filed struct {
		Approval struct {
			ID string `json:"id"`
		} `json:"approval"`
	}
	if json.Unmarshal([]byte(r.raw), &filed); r.status != http.StatusAccepted || filed.Approval.ID == "" {
		t.Fatalf("the note did not wait for a person: %d %s", r.status, r.raw)
	}
	e.must(t, "POST", "/v1/approvals/"+filed.Approval.ID+"/approve", editor, `{"reason":"fine"}`, http.StatusOK)

	// The resume's audit event says how the approved call ended.
	deadline := time.Now().Add(30 * time.Second)
	for {
		page := e.must(t, "GET", "/v1/audit/events?limit=20", e.admin, "", http.StatusOK)
		items, _ := page["items"].([]any)
		var outcome any
		for _, it := range items {
			if ev, _ := it.(map[string]any); ev["approval_id"] == filed.Approval.ID && ev["source"] == "resume" {
				outcome = ev["outcome"]
			}
		}
		if outcome != nil {
			if outcome != "ok" {
				t.Fatalf("the approved note's resume ended %v: %v", outcome, items)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no resume of approval %s: %v", filed.Approval.ID, items)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
