package async_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/async"
)

// An asynchronous call keeps its caller's deadline: a worker that would
// start it after the deadline refuses it (deadline_exceeded, no effect),
// and one submitted with too little time is refused now.
func TestAnAsyncCallKeepsItsDeadline(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newRig(t, s, async.Config{})
		submit := func(key string, left time.Duration) *async.Submission {
			in := inv("org-1", "run-1", key)
			in.Deadline = time.Now().Add(left)
			sub, err := r.svc.Submit(t.Context(), async.Request{Tool: "crm.add_note", Arguments: json.RawMessage(`{"text":"hello"}`), Invocation: in})
			if err != nil {
				t.Fatal(err)
			}
			return sub
		}
		now := submit("note-now", time.Millisecond)
		if !now.Ran || now.Result.OK || now.Result.Error.Code != toolplane.CodeDeadlineExceeded {
			t.Fatalf("a millisecond: %+v", now)
		}
		late := submit("note-late", 400*time.Millisecond)
		if late.Ran {
			t.Fatalf("accepted with time left: %+v", late)
		}
		time.Sleep(500 * time.Millisecond) // past the deadline
		if err := r.svc.Run(t.Context(), "org-1", late.Call.ID, false); err != nil {
			t.Fatal(err)
		}
		got := r.get(t, "org-1", late.Call.ID)
		var res toolplane.Result
		if err := json.Unmarshal(got.Result, &res); err != nil || res.OK || res.Error.Code != toolplane.CodeDeadlineExceeded || !got.Status.Terminal() {
			t.Fatalf("run after the deadline: %+v, result %s (%v)", got, got.Result, err)
		}
		if r.effects.Load() != 0 {
			t.Fatalf("effects = %d, want none", r.effects.Load())
		}
	})
}
