package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

var asyncCallCases = []suiteCase{
	{"InsertGetFind", testAsyncInsertGetFind},
	{"MovesOnlyFromTheStatesNamed", testAsyncMoves},
	{"CancelRacingCompletionEndsOnce", testAsyncCancelRace},
	{"CancelMarksOnlyARunningCall", testAsyncCancelRequest},
	{"CallbackRecorded", testAsyncCallback},
	{"StaleAndRetention", testAsyncStale},
	{"OrganizationsApart", testAsyncIsolation},
	{"ListedByAgentInIDOrder", testAsyncList},
}

// asyncCall answers a queued call of org's tool "crm.update" with key.
func asyncCall(org, id, key string) *toolplane.AsyncCall {
	return &toolplane.AsyncCall{OrganizationID: org, ID: id, Tool: "crm.update", Key: key, AgentID: "agent-1",
		Arguments: []byte(`{"id":1}`), Invocation: []byte(`{"RunID":"run-1"}`), Status: toolplane.AsyncQueued,
		CreatedAt: at(0), UpdatedAt: at(0)}
}

// testAsyncInsertGetFind: a call is stored as given (times to the
// microsecond, in UTC) and read back by id and by tool and key; a second
// call with the same id, or the same tool and key, is refused as existing;
// calls without a key never collide and are never found by key.
func testAsyncInsertGetFind(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	want := asyncCall("org", "inv_1", "k1")
	want.CallbackURL = "https://example.com/cb"
	if err := s.InsertAsyncCall(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetAsyncCall(ctx, "org", "inv_1")
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(*got, *want); d != "" {
		t.Errorf("stored call: %s", d)
	}
	found, err := s.FindAsyncCall(ctx, "org", "crm.update", "k1")
	if err != nil || found.ID != "inv_1" {
		t.Fatalf("find by key = %v, %v; want inv_1", found, err)
	}
	for _, dup := range []*toolplane.AsyncCall{asyncCall("org", "inv_1", "k2"), asyncCall("org", "inv_2", "k1")} {
		if err := s.InsertAsyncCall(ctx, dup); !errors.Is(err, toolplane.ErrExists) {
			t.Errorf("insert %s key %s: err = %v, want ErrExists", dup.ID, dup.Key, err)
		}
	}
	for _, id := range []string{"inv_3", "inv_4"} {
		if err := s.InsertAsyncCall(ctx, asyncCall("org", id, "")); err != nil {
			t.Errorf("a call without a key: %v", err)
		}
	}
	if _, err := s.FindAsyncCall(ctx, "org", "crm.update", ""); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("find by the empty key: %v, want ErrNotFound", err)
	}
	if _, err := s.GetAsyncCall(ctx, "org", "inv_9"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("get a missing call: %v, want ErrNotFound", err)
	}
}

// testAsyncMoves: a move happens only from a state named; running sets
// StartedAt once; a terminal state sets EndedAt, the result and code, and
// a pending callback when the call names a URL; a terminal call moves no
// more. A move to running records its runner, the latest taker's.
func testAsyncMoves(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	c := asyncCall("org", "inv_1", "")
	c.CallbackURL = "https://example.com/cb"
	if err := s.InsertAsyncCall(ctx, c); err != nil {
		t.Fatal(err)
	}
	move := func(from []toolplane.AsyncStatus, m toolplane.AsyncMove, want bool) *toolplane.AsyncCall {
		t.Helper()
		ok, err := s.MoveAsyncCall(ctx, "org", "inv_1", from, m)
		if err != nil {
			t.Fatal(err)
		}
		if ok != want {
			t.Fatalf("move %v -> %s = %v, want %v", from, m.To, ok, want)
		}
		got, err := s.GetAsyncCall(ctx, "org", "inv_1")
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := move([]toolplane.AsyncStatus{toolplane.AsyncRunning}, toolplane.AsyncMove{To: toolplane.AsyncSucceeded, At: at(time.Second)}, false)
	if got.Status != toolplane.AsyncQueued || !got.EndedAt.IsZero() {
		t.Fatalf("a refused move changed the call: %+v", got)
	}
	got = move(toolplane.AsyncLive, toolplane.AsyncMove{To: toolplane.AsyncRunning, Runner: "node-a", At: at(time.Second)}, true)
	if got.Status != toolplane.AsyncRunning || !got.StartedAt.Equal(atMicros(time.Second)) || got.Runner != "node-a" {
		t.Fatalf("running: %+v", got)
	}
	// A worker taking a running call again (its first worker died) keeps
	// the first start.
	got = move(toolplane.AsyncLive, toolplane.AsyncMove{To: toolplane.AsyncRunning, Runner: "node-b", At: at(2 * time.Second), ApprovalID: "apr_1"}, true)
	if !got.StartedAt.Equal(atMicros(time.Second)) || got.ApprovalID != "apr_1" || !got.UpdatedAt.Equal(atMicros(2*time.Second)) || got.Runner != "node-b" {
		t.Fatalf("running again: %+v", got)
	}
	got = move(toolplane.AsyncLive, toolplane.AsyncMove{To: toolplane.AsyncFailed, Result: []byte(`{"ok":false}`), Code: "denied", At: at(3 * time.Second)}, true)
	if got.Status != toolplane.AsyncFailed || string(got.Result) != `{"ok":false}` || got.Code != "denied" ||
		!got.EndedAt.Equal(atMicros(3*time.Second)) || got.CallbackState != toolplane.CallbackPending {
		t.Fatalf("failed: %+v", got)
	}
	got = move([]toolplane.AsyncStatus{toolplane.AsyncRunning, toolplane.AsyncQueued}, toolplane.AsyncMove{To: toolplane.AsyncCancelled, At: at(4 * time.Second)}, false)
	if got.Status != toolplane.AsyncFailed || got.Code != "denied" {
		t.Fatalf("a terminal call moved: %+v", got)
	}
}

// testAsyncCancelRace: a cancel and a completion of one running call,
// racing, leave exactly one terminal state, whichever wins.
func testAsyncCancelRace(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	for i := range 8 {
		id := fmt.Sprint("inv_", i)
		if err := s.InsertAsyncCall(ctx, asyncCall("org", id, "")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MoveAsyncCall(ctx, "org", id, toolplane.AsyncLive, toolplane.AsyncMove{To: toolplane.AsyncRunning, At: at(0)}); err != nil {
			t.Fatal(err)
		}
		var (
			wg  sync.WaitGroup
			won [2]bool
		)
		for j, to := range []toolplane.AsyncStatus{toolplane.AsyncCancelled, toolplane.AsyncSucceeded} {
			wg.Go(func() {
				ok, err := s.MoveAsyncCall(ctx, "org", id, toolplane.AsyncLive, toolplane.AsyncMove{To: to, At: at(time.Second)})
				if err != nil {
					t.Error(err)
				}
				won[j] = ok
			})
		}
		wg.Wait()
		if won[0] == won[1] {
			t.Fatalf("%s: cancel won %v, completion won %v; want exactly one", id, won[0], won[1])
		}
		got, err := s.GetAsyncCall(ctx, "org", id)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]toolplane.AsyncStatus{true: toolplane.AsyncCancelled, false: toolplane.AsyncSucceeded}[won[0]]; got.Status != want {
			t.Fatalf("%s: status %s, want the winner's %s", id, got.Status, want)
		}
	}
}

// testAsyncCancelRequest: only a running call is marked for cancelling.
func testAsyncCancelRequest(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	if err := s.InsertAsyncCall(ctx, asyncCall("org", "inv_1", "")); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RequestAsyncCancel(ctx, "org", "inv_1", at(time.Second)); err != nil || ok {
		t.Fatalf("cancel of a queued call marked = %v, %v; want false", ok, err)
	}
	if _, err := s.MoveAsyncCall(ctx, "org", "inv_1", toolplane.AsyncLive, toolplane.AsyncMove{To: toolplane.AsyncRunning, At: at(0)}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.RequestAsyncCancel(ctx, "org", "inv_1", at(time.Second)); err != nil || !ok {
		t.Fatalf("cancel of a running call marked = %v, %v; want true", ok, err)
	}
	got, err := s.GetAsyncCall(ctx, "org", "inv_1")
	if err != nil || !got.CancelRequested {
		t.Fatalf("after the cancel request: %+v, %v", got, err)
	}
	if ok, err := s.RequestAsyncCancel(ctx, "other", "inv_1", at(time.Second)); err != nil || ok {
		t.Fatalf("another organization's cancel marked = %v, %v", ok, err)
	}
}

// testAsyncCallback: the callback's state, attempts, last error and next
// attempt are stored as recorded, a delivery clearing the error of the
// attempts before it; an unknown call is not found.
func testAsyncCallback(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	c := asyncCall("org", "inv_1", "")
	c.CallbackURL, c.CallbackState = "https://example.com/cb", toolplane.CallbackPending
	if err := s.InsertAsyncCall(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, r := range []toolplane.CallbackRecord{
		{State: toolplane.CallbackPending, Attempts: 1, LastError: "connection refused (example.com)", NextAt: at(time.Minute + 5*time.Second), At: at(time.Minute)},
		{State: toolplane.CallbackPending, Attempts: 2, LastError: "HTTP status 503 (example.com)", NextAt: at(2 * time.Minute), At: at(time.Minute + 5*time.Second)},
		{State: toolplane.CallbackDelivered, Attempts: 3, At: at(2 * time.Minute)},
	} {
		if err := s.RecordCallback(ctx, "org", "inv_1", r); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetAsyncCall(ctx, "org", "inv_1")
		if err != nil || got.CallbackState != r.State || got.CallbackAttempts != r.Attempts || got.CallbackError != r.LastError ||
			!got.CallbackNextAt.Equal(r.NextAt.Truncate(time.Microsecond)) || !got.UpdatedAt.Equal(r.At.Truncate(time.Microsecond)) {
			t.Fatalf("after recording %+v: %+v, %v", r, got, err)
		}
	}
	if err := s.RecordCallback(ctx, "other", "inv_1", toolplane.CallbackRecord{State: toolplane.CallbackExpired, Attempts: 1, At: at(0)}); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("another organization's record: %v, want ErrNotFound", err)
	}

	// An attempt that ends late (a rescued job's first run, still posting
	// when its second delivered) changes nothing once the callback is no
	// longer pending: a failure does not reopen a delivery (the sweep
	// would post the result again) nor expire it.
	for _, late := range []toolplane.CallbackRecord{
		{State: toolplane.CallbackPending, Attempts: 1, LastError: "HTTP status 503", NextAt: at(3 * time.Minute), At: at(3 * time.Minute)},
		{State: toolplane.CallbackExpired, Attempts: 15, LastError: "timeout", At: at(4 * time.Minute)},
	} {
		if err := s.RecordCallback(ctx, "org", "inv_1", late); err != nil {
			t.Fatalf("a late %s record: %v", late.State, err)
		}
		got, err := s.GetAsyncCall(ctx, "org", "inv_1")
		if err != nil || got.CallbackState != toolplane.CallbackDelivered || got.CallbackAttempts != 3 || got.CallbackError != "" {
			t.Fatalf("after a late %s record on a delivered callback: %+v, %v", late.State, got, err)
		}
	}
	// While pending, the attempts never go back (a job handed out again
	// counts from 1), and a delivery late after an expiry is recorded: the
	// receiver has the result.
	c = asyncCall("org", "inv_2", "")
	c.CallbackURL, c.CallbackState = "https://example.com/cb", toolplane.CallbackPending
	if err := s.InsertAsyncCall(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		r        toolplane.CallbackRecord
		state    toolplane.CallbackState
		attempts int
	}{
		{toolplane.CallbackRecord{State: toolplane.CallbackPending, Attempts: 4, LastError: "timeout", At: at(time.Minute)}, toolplane.CallbackPending, 4},
		{toolplane.CallbackRecord{State: toolplane.CallbackPending, Attempts: 1, LastError: "connection refused", At: at(2 * time.Minute)}, toolplane.CallbackPending, 4},
		{toolplane.CallbackRecord{State: toolplane.CallbackExpired, Attempts: 15, LastError: "timeout", At: at(3 * time.Minute)}, toolplane.CallbackExpired, 15},
		{toolplane.CallbackRecord{State: toolplane.CallbackDelivered, Attempts: 2, At: at(4 * time.Minute)}, toolplane.CallbackDelivered, 15},
	} {
		if err := s.RecordCallback(ctx, "org", "inv_2", step.r); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetAsyncCall(ctx, "org", "inv_2")
		if err != nil || got.CallbackState != step.state || got.CallbackAttempts != step.attempts {
			t.Fatalf("after recording %+v: state %s attempts %d (%v), want %s %d", step.r, got.CallbackState, got.CallbackAttempts, err, step.state, step.attempts)
		}
	}
}

// testAsyncStale: the sweep reads live calls and pending callbacks not
// touched since a time, across organizations, oldest first; retention
// removes ended calls whose callback is not pending, and nothing else.
func testAsyncStale(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	mk := func(org, id string, updated time.Duration, status toolplane.AsyncStatus, cb toolplane.CallbackState) {
		t.Helper()
		c := asyncCall(org, id, "")
		c.Status, c.UpdatedAt, c.CallbackState = status, at(updated), cb
		if status.Terminal() {
			c.EndedAt = at(updated)
		}
		if cb != toolplane.CallbackNone {
			c.CallbackURL = "https://example.com/cb"
		}
		if err := s.InsertAsyncCall(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	mk("b", "inv_q", 2*time.Second, toolplane.AsyncQueued, toolplane.CallbackNone)
	mk("a", "inv_r", time.Second, toolplane.AsyncRunning, toolplane.CallbackNone)
	mk("a", "inv_cb", 3*time.Second, toolplane.AsyncSucceeded, toolplane.CallbackPending)
	mk("a", "inv_done", 0, toolplane.AsyncSucceeded, toolplane.CallbackDelivered)
	mk("a", "inv_new", time.Hour, toolplane.AsyncQueued, toolplane.CallbackNone)
	got, err := s.StaleAsyncCalls(ctx, at(time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range got {
		ids = append(ids, c.ID)
	}
	if fmt.Sprint(ids) != "[inv_r inv_q inv_cb]" {
		t.Fatalf("stale calls %v, want [inv_r inv_q inv_cb]", ids)
	}
	if got, err := s.StaleAsyncCalls(ctx, at(time.Minute), 1); err != nil || len(got) != 1 {
		t.Fatalf("limit 1 answered %d, %v", len(got), err)
	}
	n, err := s.DeleteEndedAsyncCalls(ctx, at(time.Hour), 10)
	if err != nil || n != 1 {
		t.Fatalf("retention removed %d, %v; want 1 (the delivered one)", n, err)
	}
	if _, err := s.GetAsyncCall(ctx, "a", "inv_done"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("the ended call is still there: %v", err)
	}
	if _, err := s.GetAsyncCall(ctx, "a", "inv_cb"); err != nil {
		t.Fatalf("a call whose callback is pending was removed: %v", err)
	}
}

// testAsyncIsolation: an organization never reads, finds or moves
// another's call, even knowing its id and key.
func testAsyncIsolation(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	if err := s.InsertAsyncCall(ctx, asyncCall("a", "inv_1", "k")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetAsyncCall(ctx, "b", "inv_1"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("b read a's call: %v", err)
	}
	if _, err := s.FindAsyncCall(ctx, "b", "crm.update", "k"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("b found a's call: %v", err)
	}
	if ok, err := s.MoveAsyncCall(ctx, "b", "inv_1", toolplane.AsyncLive, toolplane.AsyncMove{To: toolplane.AsyncCancelled, At: at(0)}); err != nil || ok {
		t.Errorf("b moved a's call: %v, %v", ok, err)
	}
	// The same id and key in b are b's own.
	if err := s.InsertAsyncCall(ctx, asyncCall("b", "inv_1", "k")); err != nil {
		t.Errorf("b's own call of the same id and key: %v", err)
	}
}

// atMicros answers at(d) as a microsecond store keeps it.
func atMicros(d time.Duration) time.Time { return at(d).Truncate(time.Microsecond) }

// testAsyncList: an organization's calls are listed in id order, page by
// page after the last id read; naming an agent lists its calls alone;
// another organization's calls are never listed.
func testAsyncList(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	for i, agent := range []string{"agent-1", "agent-2", "agent-1", "agent-1"} {
		c := asyncCall("org", fmt.Sprintf("inv_%d", i), "")
		c.AgentID = agent
		if err := s.InsertAsyncCall(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.InsertAsyncCall(ctx, asyncCall("other", "inv_9", "")); err != nil {
		t.Fatal(err)
	}
	ids := func(cs []toolplane.AsyncCall, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, c := range cs {
			out += c.ID + " "
		}
		return out
	}
	for _, tc := range []struct {
		agent, after string
		limit        int
		want         string
	}{
		{"", "", 10, "inv_0 inv_1 inv_2 inv_3 "},
		{"", "", 2, "inv_0 inv_1 "},
		{"", "inv_1", 2, "inv_2 inv_3 "},
		{"agent-1", "", 10, "inv_0 inv_2 inv_3 "},
		{"agent-1", "inv_0", 1, "inv_2 "},
		{"agent-2", "inv_1", 10, ""},
		{"agent-3", "", 10, ""},
	} {
		if got := ids(s.ListAsyncCalls(ctx, "org", tc.agent, tc.after, tc.limit)); got != tc.want {
			t.Errorf("list (agent %q, after %q, limit %d) = %q, want %q", tc.agent, tc.after, tc.limit, got, tc.want)
		}
	}
	if got := ids(s.ListAsyncCalls(ctx, "other", "", "", 10)); got != "inv_9 " {
		t.Errorf("the other organization's list = %q", got)
	}
	if _, err := s.ListAsyncCalls(ctx, "org", "", "", 0); err == nil {
		t.Error("a list without a limit was answered")
	}
}
