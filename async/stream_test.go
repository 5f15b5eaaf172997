package async_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/async"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
)

// feedIn asks the feed tools for N rows, each carrying Note and Pad bytes
// of padding; with Hold, the handler waits after half of them until the
// rig's gate opens.
type feedIn struct {
	N    int    `json:"n"`
	Note string `json:"note,omitempty"`
	Pad  int    `json:"pad,omitempty"`
	Hold bool   `json:"hold,omitempty"`
}

type feedOut struct {
	Rows int `json:"rows"`
}

// feedRig is a service over a real store whose tools stream: feed.rows,
// the platform's own, and feed.web, whose answers come from the open
// world. Calls are handed to a worker at once (runNow).
type feedRig struct {
	store toolplane.Store
	iv    *invoke.Invoker
	svc   *async.Service
	gate  chan struct{}
	// refused counts the chunks a handler was told were not taken.
	refused atomic.Int64
}

// runNow is a scheduler that runs each accepted call on a goroutine of
// its own, as a worker would.
type runNow struct{ svc func() *async.Service }

func (r runNow) Accepted(_ context.Context, c *toolplane.AsyncCall) error {
	go func() { _ = r.svc().Run(context.Background(), c.OrganizationID, c.ID, true) }()
	return nil
}

func (runNow) Ended(context.Context, *toolplane.AsyncCall) error { return nil }

func newFeedRig(t testing.TB, s toolplane.Store, lim invoke.StreamLimits) *feedRig {
	t.Helper()
	r := &feedRig{store: s, gate: make(chan struct{})}
	feed := func(ctx context.Context, _ handler.Call, in feedIn) (feedOut, error) {
		for i := 1; i <= in.N; i++ {
			chunk := map[string]any{"row": i}
			if in.Note != "" {
				chunk["note"] = in.Note
			}
			if in.Pad > 0 {
				chunk["pad"] = strings.Repeat("x", in.Pad)
			}
			if err := handler.Emit(ctx, chunk); err != nil {
				r.refused.Add(1)
			}
			if in.Hold && i == in.N/2 {
				select {
				case <-r.gate:
				case <-ctx.Done():
					return feedOut{}, ctx.Err()
				}
			}
		}
		return feedOut{Rows: in.N}, nil
	}
	handlers := handler.NewRegistry()
	var defs []toolplane.Definition
	for _, name := range []string{"feed.rows", "feed.web"} {
		d, err := handler.Define[feedIn, feedOut](toolplane.Definition{
			Name: name, Version: "1.0.0", Description: "A tool of the streaming tests.",
			Kind: toolplane.KindInternal, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}},
			Effect: toolplane.EffectRead, Annotations: toolplane.Annotations{OpenWorld: name == "feed.web"},
		})
		if err != nil {
			t.Fatal(err)
		}
		defs = append(defs, d)
		b, err := handler.Bind(name, feed, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := handlers.Register(b); err != nil {
			t.Fatal(err)
		}
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: bindings{handlers}})
	if err != nil {
		t.Fatal(err)
	}
	r.iv, err = invoke.New(invoke.Config{Registry: reg, Handlers: handlers, Store: s, Policy: policy.Grants{}, Stream: lim})
	if err != nil {
		t.Fatal(err)
	}
	r.svc, err = async.New(async.Config{Store: s, Invoker: r.iv, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.svc.UseScheduler(runNow{svc: func() *async.Service { return r.svc }})
	return r
}

// other answers a second service over the same store and invoker:
// another node, which no chunk stored on the first wakes.
func (r *feedRig) other(t testing.TB) *async.Service {
	t.Helper()
	svc, err := async.New(async.Config{Store: r.store, Invoker: r.iv, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// feedAgent is the credential of the agent calling the feed tools in org.
func feedAgent(org, subject string) *toolplane.Credential {
	return &toolplane.Credential{ID: "key-" + subject, OrganizationID: org, Subject: subject, Kind: toolplane.CredentialAgent,
		Tools: []string{"feed.rows", "feed.web"}}
}

// start submits a call of tool with in, as org's agent-1.
func (r *feedRig) start(t testing.TB, tool, org string, in feedIn) *toolplane.AsyncCall {
	t.Helper()
	cred := feedAgent(org, "agent-1")
	args, _ := json.Marshal(in)
	sub, err := r.svc.Submit(context.Background(), async.Request{Tool: tool, Arguments: args, Invocation: &toolplane.Invocation{
		OrganizationID: org, RunID: "run-1", StepPath: "agent", AgentID: cred.Subject, CredentialID: cred.ID,
		Credential: cred, Principal: toolplane.Principal{ID: cred.Subject}, Source: toolplane.SourceREST}})
	if err != nil {
		t.Fatal(err)
	}
	if sub.Ran {
		t.Fatalf("the call ran now: %+v, %v", sub.Result, sub.Err)
	}
	return sub.Call
}

// read follows call's stream from after until it ended, as a client of
// the events route does, and answers the chunks and the ended call.
func (r *feedRig) read(t testing.TB, svc *async.Service, c *toolplane.AsyncCall, after int64) ([]toolplane.StreamChunk, *toolplane.AsyncCall) {
	t.Helper()
	var got []toolplane.StreamChunk
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		cur, chunks, err := svc.Events(context.Background(), c.OrganizationID, c.ID, feedAgent(c.OrganizationID, "agent-1"), after, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range chunks {
			got = append(got, ch)
			after = ch.Seq
		}
		if len(chunks) == 0 && cur.Status.Terminal() {
			return got, cur
		}
	}
	t.Fatalf("the stream of %s did not end", c.ID)
	return nil, nil
}

// rows answers the row numbers the chunks carry, and checks each chunk
// is numbered one past the one before it.
func rows(t testing.TB, chunks []toolplane.StreamChunk, from int64) []int {
	t.Helper()
	var out []int
	for i, ch := range chunks {
		if ch.Seq != from+int64(i)+1 {
			t.Fatalf("chunk %d numbered %d, want %d", i, ch.Seq, from+int64(i)+1)
		}
		if ch.Cut {
			continue
		}
		var v struct{ Row int }
		if err := json.Unmarshal(ch.Data, &v); err != nil {
			t.Fatalf("chunk %d: %s: %v", ch.Seq, ch.Data, err)
		}
		out = append(out, v.Row)
	}
	return out
}

// A streamed call's chunks are read in order, each once, by a reader that
// stops half way and resumes after the last it read, on another node
// (which learns of new chunks from the store alone); the call's answer is
// the one it gives without a stream.
func TestAStreamResumesWithoutLossOrDuplication(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newFeedRig(t, s, invoke.StreamLimits{})
		c := r.start(t, "feed.rows", "org", feedIn{N: 10, Hold: true})
		cred := feedAgent("org", "agent-1")
		var first []toolplane.StreamChunk
		for len(first) < 5 {
			_, chunks, err := r.svc.Events(t.Context(), "org", c.ID, cred, int64(len(first)), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			first = append(first, chunks...)
		}
		if got := rows(t, first, 0); fmt.Sprint(got) != "[1 2 3 4 5]" {
			t.Fatalf("before the hold: %v", got)
		}
		// The reader left after chunk 3; it resumes there on another node.
		close(r.gate)
		rest, ended := r.read(t, r.other(t), c, 3)
		if got := rows(t, rest, 3); fmt.Sprint(got) != "[4 5 6 7 8 9 10]" {
			t.Fatalf("resumed after 3: %v", got)
		}
		if ended.Status != toolplane.AsyncSucceeded || !strings.Contains(string(ended.Result), `"rows":10`) {
			t.Fatalf("the call ended %s with %s", ended.Status, ended.Result)
		}
		if again, _ := r.read(t, r.svc, c, 10); len(again) != 0 {
			t.Fatalf("after the last chunk: %d more", len(again))
		}
	})
}

// Every chunk passes the result boundary a final answer passes: a
// credential in it is redacted, and one from the open world is labelled
// untrusted; the platform's own tool's is not.
func TestAChunkIsRedactedAndLabelled(t *testing.T) {
	t.Parallel()
	const secret = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newFeedRig(t, s, invoke.StreamLimits{})
		for tool, untrusted := range map[string]bool{"feed.rows": false, "feed.web": true} {
			c := r.start(t, tool, "org", feedIn{N: 2, Note: "Authorization: Bearer " + secret})
			chunks, ended := r.read(t, r.svc, c, 0)
			if len(chunks) != 2 || ended.Status != toolplane.AsyncSucceeded {
				t.Fatalf("%s: %d chunks, ended %s", tool, len(chunks), ended.Status)
			}
			for _, ch := range chunks {
				if strings.Contains(string(ch.Data), secret) || !strings.Contains(string(ch.Data), boundary.Redacted) {
					t.Errorf("%s: a chunk kept the credential: %s", tool, ch.Data)
				}
				if ch.Untrusted != untrusted {
					t.Errorf("%s: chunk %d untrusted = %v, want %v", tool, ch.Seq, ch.Untrusted, untrusted)
				}
			}
		}
	})
}

// One chunk is bounded as an answer is; the stream as a whole is bounded
// in chunks and in bytes, and the chunk that would pass a bound is
// replaced by the cut marker, after which nothing is streamed. The call's
// answer stands either way.
func TestAStreamIsBoundedPerChunkAndInTotal(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newFeedRig(t, s, invoke.StreamLimits{ChunkBytes: 256, TotalBytes: 1000, Chunks: 5})
		cases := []struct {
			name   string
			in     feedIn
			chunks int // stored, the cut included
			reason string
		}{
			{"within", feedIn{N: 4}, 4, ""},
			{"too many", feedIn{N: 9}, 6, "too_many_chunks"},
			{"too large in all", feedIn{N: 5, Pad: 200}, 5, "too_large"},
		}
		for _, tc := range cases {
			c := r.start(t, "feed.rows", "org", tc.in)
			chunks, ended := r.read(t, r.svc, c, 0)
			if len(chunks) != tc.chunks {
				t.Fatalf("%s: %d chunks, want %d", tc.name, len(chunks), tc.chunks)
			}
			total := 0
			for i, ch := range chunks {
				if len(ch.Data) > 256 {
					t.Errorf("%s: chunk %d is %d bytes, past the chunk bound", tc.name, ch.Seq, len(ch.Data))
				}
				if !ch.Cut {
					total += len(ch.Data)
				}
				if ch.Cut != (tc.reason != "" && i == len(chunks)-1) {
					t.Errorf("%s: chunk %d cut = %v", tc.name, ch.Seq, ch.Cut)
				}
			}
			if total > 1000 {
				t.Errorf("%s: %d bytes streamed, past the total", tc.name, total)
			}
			if tc.reason != "" && !strings.Contains(string(chunks[len(chunks)-1].Data), tc.reason) {
				t.Errorf("%s: the cut says %s, want %s", tc.name, chunks[len(chunks)-1].Data, tc.reason)
			}
			if ended.Status != toolplane.AsyncSucceeded || !strings.Contains(string(ended.Result), fmt.Sprintf(`"rows":%d`, tc.in.N)) {
				t.Errorf("%s: the call ended %s with %s", tc.name, ended.Status, ended.Result)
			}
		}
		// A chunk larger than its bound is kept, bounded.
		c := r.start(t, "feed.rows", "org", feedIn{N: 1, Pad: 2000})
		chunks, _ := r.read(t, r.svc, c, 0)
		if len(chunks) != 1 || !chunks[0].Truncated || len(chunks[0].Data) > 256 {
			t.Fatalf("an oversized chunk: %+v", chunks)
		}
	})
}

// Only who may read a call reads its stream: another agent of its
// organization, or anyone of another, is answered not found.
func TestAStreamIsItsCallersAlone(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newFeedRig(t, s, invoke.StreamLimits{})
		c := r.start(t, "feed.rows", "org", feedIn{N: 3})
		r.read(t, r.svc, c, 0)
		for _, who := range []*toolplane.Credential{feedAgent("org", "agent-2"), feedAgent("other", "agent-1")} {
			if _, chunks, err := r.svc.Events(t.Context(), who.OrganizationID, c.ID, who, 0, 0); !errors.Is(err, toolplane.ErrNotFound) || len(chunks) != 0 {
				t.Errorf("%s of %s read the stream: %d chunks, %v", who.Subject, who.OrganizationID, len(chunks), err)
			}
		}
		// Naming the call's organization does not help another's agent.
		stranger := feedAgent("other", "agent-1")
		if _, _, err := r.svc.Events(t.Context(), "org", c.ID, stranger, 0, 0); !errors.Is(err, toolplane.ErrNotFound) {
			t.Errorf("another organization's agent naming org: %v", err)
		}
	})
}

// A handler emitting in a call made in its request streams nothing and
// is not slowed: Emit is a no-op there.
func TestEmitWithoutAStreamIsANoOp(t *testing.T) {
	t.Parallel()
	if err := handler.Emit(context.Background(), map[string]any{"row": 1}); err != nil {
		t.Fatal(err)
	}
	if handler.Streaming(context.Background()) {
		t.Fatal("a context without a stream says it streams")
	}
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newFeedRig(t, s, invoke.StreamLimits{})
		cred := feedAgent("org", "agent-1")
		res, err := r.iv.InvokeJSON(t.Context(), "feed.rows", []byte(`{"n":3}`), &toolplane.Invocation{OrganizationID: "org", RunID: "run-1",
			StepPath: "agent", AgentID: cred.Subject, CredentialID: cred.ID, Credential: cred, Principal: toolplane.Principal{ID: cred.Subject}, Source: toolplane.SourceREST})
		if err != nil || !res.OK || r.refused.Load() != 0 {
			t.Fatalf("in its request: %+v, %v, %d refused", res, err, r.refused.Load())
		}
	})
}
