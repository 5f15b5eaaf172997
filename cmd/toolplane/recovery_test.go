package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// restCall calls a tool over REST and answers the status, the Retry-After
// header and the body.
func restCall(t *testing.T, s *server, tool, body string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.base+"/v1/tools/"+tool+"/invoke", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.agent)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), b
}

// A key whose holder's node stopped heartbeating is answered, on both
// doors, with what is true: the node stopped answering at its last
// heartbeat, and the call will be decided when the node counts as dead,
// which is long before the claim's lease ends; and then it is decided.
func TestSilentHolderIsToldOnBothDoorsAndDecidedBeforeItsLease(t *testing.T) {
	t.Parallel()
	s := start(t, "--node-dead-after", "6s", "--sweep-every", "1h")
	ctx := context.Background()
	restBody := `{"arguments":{"ticket_id":"t-1001","text":"recovery"},"idempotency_key":"recovery-rest"}`
	if status, _, raw := restCall(t, s, "demo.add_note", restBody); status != http.StatusOK {
		t.Fatalf("first REST call: %d %s", status, raw)
	}
	cs := mustConnect(t, s, s.agent)
	mcpArgs := map[string]any{"ticket_id": "t-1001", "text": "recovery over mcp"}
	if r, res := callTool(t, cs, "demo_add_note", mcpArgs); r.IsError || !res.ok() {
		t.Fatalf("first MCP call: %s", textOf(r))
	}

	// Both calls are now held by a node that last heartbeated 4s ago: its
	// process was killed after dispatch, and their leases run a minute on.
	store := sqlitetest.Open(t, filepath.Join(s.dir, "toolplane.db"))
	silent := time.Now().Add(-4 * time.Second).Truncate(time.Second)
	if err := store.InsertNode(ctx, &toolplane.Node{ID: "ghost@1", Name: "ghost", StartedAt: silent, HeartbeatAt: silent}); err != nil {
		t.Fatal(err)
	}
	held, _, err := store.ListClaims(ctx, "default", toolplane.ClaimCompleted, "", 10)
	if err != nil || len(held) != 2 {
		t.Fatalf("claims = %d, %v; want the two calls'", len(held), err)
	}
	for i := range held {
		c := held[i]
		c.Status, c.Result, c.Dispatched, c.Attempts = toolplane.ClaimProcessing, nil, true, 1
		c.Owner, c.Node, c.LeaseUntil = "ghost@1/1/1", "ghost@1", time.Now().Add(time.Minute)
		if ok, err := store.UpdateClaim(ctx, &c); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	decidedBy := silent.Add(6 * time.Second).UTC().Format(time.RFC3339)

	status, retry, raw := restCall(t, s, "demo.add_note", restBody)
	var rest struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(raw, &rest)
	if status != http.StatusConflict || rest.Error.Code != "in_flight" ||
		!strings.Contains(rest.Error.Message, "stopped answering at "+silent.UTC().Format(time.RFC3339)) ||
		!strings.Contains(rest.Error.Message, decidedBy) {
		t.Fatalf("REST on a silent holder: %d %s; want 409 in_flight saying when it stopped and when it is decided (%s)", status, raw, decidedBy)
	}
	if n, err := strconv.Atoi(retry); err != nil || n < 1 || n > 3 {
		t.Fatalf("Retry-After = %q; want the seconds until %s", retry, decidedBy)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo_add_note", Arguments: mcpArgs})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError || !strings.Contains(textOf(r), "stopped answering") || !strings.Contains(textOf(r), decidedBy) {
		t.Fatalf("MCP on a silent holder: %s", textOf(r))
	}
	if n, ok := r.Meta["toolplane/retry_after_seconds"].(float64); !ok || n < 1 || n > 3 {
		t.Fatalf("MCP retry_after_seconds = %v", r.Meta["toolplane/retry_after_seconds"])
	}

	// Once the node counts as dead, the calls are uncertain: they were
	// dispatched, so they may have acted. The lease has most of a minute
	// left.
	time.Sleep(time.Until(silent.Add(6*time.Second)) + 200*time.Millisecond)
	status, _, raw = restCall(t, s, "demo.add_note", restBody)
	if res := decode[result](t, raw); status != http.StatusOK || res.code() != "uncertain" {
		t.Fatalf("REST once the node is dead: %d %s; want uncertain", status, raw)
	}
	if _, res := callTool(t, cs, "demo_add_note", mcpArgs); res.code() != "uncertain" {
		t.Fatalf("MCP once the node is dead: %+v; want uncertain", res)
	}
	evs, _, err := store.ListAudit(ctx, "default", toolplane.AuditFilter{Outcome: "uncertain"}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	// Each call is decided once, with its audit event: by the caller that
	// found its holder dead, or by the lease sweep, which also runs each
	// time a node becomes River's leader (a loaded machine can hand the
	// leadership over within the test).
	decided := map[string]int{}
	for _, e := range evs {
		if e.Source == toolplane.SourceTakeover || e.Source == toolplane.SourceSweep {
			decided[e.Key]++
		}
	}
	if len(decided) != 2 || decided[held[0].Key] != 1 || decided[held[1].Key] != 1 {
		t.Fatalf("decided = %v of %+v; want one event per call, by a takeover or the sweep", decided, evs)
	}
}

// A node that restarts under its name decides its earlier instance's
// claims before it serves, without waiting for a heartbeat timeout: a
// claim that never reached its handler is released (its caller's retry
// runs it), one that did is uncertain; each with its audit event.
func TestRestartedNodeDecidesItsEarlierClaimsAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "toolplane.db")
	store := sqlitetest.Open(t, path)
	ctx := context.Background()
	now := time.Now()
	// The earlier instance heartbeated just now: only the restart tells
	// that it is gone.
	if err := store.InsertNode(ctx, &toolplane.Node{ID: "node-a@1", Name: "node-a", StartedAt: now.Add(-time.Hour), HeartbeatAt: now}); err != nil {
		t.Fatal(err)
	}
	plant := func(key string, dispatched bool) {
		c := &toolplane.Claim{OrganizationID: "default", Tool: "demo.add_note", Key: key, RequestHash: "h-" + key,
			Status: toolplane.ClaimProcessing, Owner: "node-a@1/1/1", Node: "node-a@1", LeaseUntil: now.Add(time.Hour),
			Dispatched: dispatched, RunID: "run-1", CreatedAt: now, UpdatedAt: now}
		if dispatched {
			c.Attempts = 1
		}
		if ok, err := store.InsertClaim(ctx, c); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	plant("never-dispatched", false)
	plant("dispatched", true)

	start(t, "--node", "node-a", "--database", path, "--sweep-every", "1h")

	if _, err := store.GetClaim(ctx, "default", "demo.add_note", "never-dispatched"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("the never-dispatched claim: %v; want released at start", err)
	}
	if c, err := store.GetClaim(ctx, "default", "demo.add_note", "dispatched"); err != nil || c.Status != toolplane.ClaimUncertain {
		t.Errorf("the dispatched claim: %+v, %v; want uncertain at start", c, err)
	}
	evs, _, err := store.ListAudit(ctx, "default", toolplane.AuditFilter{}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range evs {
		if e.Source == toolplane.SourceSweep {
			got[e.Key] = e.Outcome
		}
	}
	if got["never-dispatched"] != "released" || got["dispatched"] != "uncertain" || len(got) != 2 {
		t.Errorf("sweep events at start = %v", got)
	}
}
