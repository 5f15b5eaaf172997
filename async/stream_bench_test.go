package async_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
)

// BenchmarkStreamChunk measures what one streamed chunk costs: a
// handler's Emit of a small row, through the result boundary and the
// stream's bounds, to the chunk stored in the call's stream (one store
// write each, on each store), against the same Emit in a call without a
// stream. One call emits b.N chunks, so its own cost is spread over them.
func BenchmarkStreamChunk(b *testing.B) {
	b.Run("no-stream", func(b *testing.B) {
		ctx := context.Background()
		row := map[string]any{"row": 1, "note": "a row of a large query"}
		b.ReportAllocs()
		for b.Loop() {
			if err := handler.Emit(ctx, row); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("boundary", func(b *testing.B) {
		// The chunk shaped and bounded, handed to a sink that keeps
		// nothing: the invoker's share of a chunk's cost.
		r := newFeedRig(b, stores(b)["sqlite"], invoke.StreamLimits{Chunks: b.N + 1, TotalBytes: 1 << 40})
		cred := feedAgent("org", "agent-1")
		args := []byte(fmt.Sprintf(`{"n":%d,"note":"a row of a large query"}`, b.N))
		ctx := invoke.Streamed(context.Background(), discard{})
		b.ReportAllocs()
		b.ResetTimer()
		res, err := r.iv.InvokeJSON(ctx, "feed.rows", args, &toolplane.Invocation{OrganizationID: "org", RunID: "run-1", StepPath: "agent",
			AgentID: cred.Subject, CredentialID: cred.ID, Credential: cred, Principal: toolplane.Principal{ID: cred.Subject}, Source: toolplane.SourceREST})
		if err != nil || !res.OK {
			b.Fatalf("%+v, %v", res, err)
		}
	})
	for name, s := range stores(b) {
		b.Run(name, func(b *testing.B) {
			r := newFeedRig(b, s, invoke.StreamLimits{Chunks: b.N + 1, TotalBytes: 1 << 40})
			b.ReportAllocs()
			b.ResetTimer()
			c := r.start(b, "feed.rows", "org", feedIn{N: b.N, Note: "a row of a large query"})
			ended, err := r.svc.Wait(context.Background(), "org", c.ID, feedAgent("org", "agent-1"), time.Hour)
			if err != nil || ended.Status != toolplane.AsyncSucceeded {
				b.Fatalf("the call ended %v, %v", ended, err)
			}
			b.StopTimer()
			if got, _ := s.StreamChunks(context.Background(), "org", c.ID, int64(b.N-1), 10); len(got) != 1 {
				b.Fatalf("the last chunk was not stored: %v", got)
			}
		})
	}
}

// discard is a sink that keeps nothing.
type discard struct{}

func (discard) Chunk(context.Context, *toolplane.StreamChunk) error { return nil }
