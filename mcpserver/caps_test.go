package mcpserver

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// open sends a POST without a session (which opens one) with key and
// answers the status, the session id and the body.
func (f *fastFixture) open(t *testing.T, key, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// Sessions are capped per key and per node; a refusal says which cap and
// how to free a session, and a session ended (DELETE) frees its place. A
// request without a session that is not an initialize holds none (the SDK
// closes what it made for it), and is not refused.
func TestSessionsAreCappedPerKeyAndPerNode(t *testing.T) {
	t.Parallel()
	f := newFastFixture(t, 0)
	f.s.MaxSessionsPerKey, f.s.MaxSessions = 2, 3

	var sids []string
	for range 2 {
		status, sid, got := f.open(t, f.keyA, initialize)
		if status != http.StatusOK || sid == "" {
			t.Fatalf("session %d of key A: %d %s", len(sids)+1, status, got)
		}
		sids = append(sids, sid)
	}
	if status, _, got := f.open(t, f.keyA, `{"jsonrpc":"2.0","id":5,"method":"ping"}`); status != http.StatusOK {
		t.Fatalf("a ping without a session at the cap: %d %s", status, got)
	}
	status, sid, got := f.open(t, f.keyA, strings.Replace(initialize, `"id":1`, `"id":"third"`, 1))
	if status != http.StatusTooManyRequests || sid != "" || !strings.Contains(got, `"id":"third"`) || !strings.Contains(got, `"code":-32000`) ||
		!strings.Contains(got, "holds 2 MCP sessions") || !strings.Contains(got, "DELETE") {
		t.Fatalf("a third session of key A: %d %q %s", status, sid, got)
	}
	// An initialize inside a batch opens a session as well (on protocol
	// versions that take batches), so it is held to the same cap.
	batch := "[" + strings.Replace(initialize, "2025-06-18", "2025-03-26", 1) + "]"
	if status, sid, got := f.open(t, f.keyA, batch); status != http.StatusTooManyRequests || sid != "" || !strings.Contains(got, "holds 2 MCP sessions") {
		t.Fatalf("a batched initialize past key A's cap: %d %q %s", status, sid, got)
	}
	// Key B may open one: the node's cap is 3.
	if status, _, got := f.open(t, f.keyB, initialize); status != http.StatusOK {
		t.Fatalf("key B's first session: %d %s", status, got)
	}
	if status, _, got := f.open(t, f.keyB, initialize); status != http.StatusServiceUnavailable || !strings.Contains(got, "holds 3 MCP sessions") {
		t.Fatalf("a session past the node's cap: %d %s", status, got)
	}
	// A's sessions still answer calls (on the fast path) while at the cap.
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"crm_lookup","arguments":{"id":"c-1"}}}`
	if status, got := f.post(t, f.keyA, sids[0], "2025-06-18", call); status != http.StatusOK || !strings.Contains(got, "Ada") {
		t.Fatalf("a call on a session at the cap: %d %s", status, got)
	}
	// Ending one frees its place.
	req, _ := http.NewRequest(http.MethodDelete, f.url, nil)
	req.Header.Set("Authorization", "Bearer "+f.keyA)
	req.Header.Set("Mcp-Session-Id", sids[0])
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	if status, _, got := f.open(t, f.keyA, initialize); status != http.StatusOK {
		t.Fatalf("a session after one was ended: %d %s", status, got)
	}
	if n := f.s.sdkCalls.Load(); n != 0 {
		t.Errorf("the SDK dispatched %d calls; the fast path should have", n)
	}
}

// A session that idles out on the fast path's timer frees its place too,
// and concurrent openings never pass the cap together.
func TestSessionCapHoldsUnderConcurrencyAndFreesOnIdle(t *testing.T) {
	t.Parallel()
	// The idle time outlasts the twelve openings even on a loaded machine:
	// a session that idled out meanwhile would rightly free its place.
	f := newFastFixture(t, 3*time.Second)
	f.s.MaxSessionsPerKey = 3
	statuses := make(chan int, 12)
	for range 12 {
		go func() {
			status, _, _ := f.open(t, f.keyA, initialize)
			statuses <- status
		}()
	}
	opened := 0
	for range 12 {
		if <-statuses == http.StatusOK {
			opened++
		}
	}
	if opened != 3 {
		t.Fatalf("%d sessions opened at once under a cap of 3", opened)
	}
	// A client's session used through the fast path keeps its place.
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.url,
			HTTPClient: &http.Client{Transport: withKey{f.keyA, http.DefaultTransport}}}, nil)
		if err == nil {
			cs.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle sessions never freed their places: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
