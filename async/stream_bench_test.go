package async_test

import (
	"context"
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
