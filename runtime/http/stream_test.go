package httpruntime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/invoke"
)

// collected keeps the chunks a streamed call hands its sink, in order.
// The stores' sinks are tested against real stores in package async;
// this one lets the test read what the runtime passed through.
type collected struct {
	mu     sync.Mutex
	chunks []toolplane.StreamChunk
}

func (c *collected) Chunk(_ context.Context, ch *toolplane.StreamChunk) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch.Seq = int64(len(c.chunks)) + 1
	c.chunks = append(c.chunks, *ch)
	return nil
}

// A streamed call of a downstream that answers in pieces (server-sent
// events, or chunked lines) passes each piece through as a chunk as it
// arrives: its JSON decoded, text kept, the call's secret and any
// credential redacted, labelled untrusted. The call's answer is what it
// is without a stream, and a call that is not streamed does not ask the
// downstream for a stream.
func TestAStreamingDownstreamIsPassedThrough(t *testing.T) {
	t.Parallel()
	const leaked = "Authorization: Bearer abcdef0123456789abcdef"
	for _, tt := range []struct {
		name, media string
		body        func(auth string) []string
		want        []string
	}{
		{"server-sent events", "text/event-stream", func(auth string) []string {
			return []string{
				": a comment\n\n",
				"event: row\nid: 1\ndata: {\"row\":1}\n\n",
				"data: {\"row\":2,\"echo\":\"" + strings.TrimPrefix(auth, "Bearer ") + "\"}\r\n\r\n",
				"data: line one\ndata: " + leaked + "\n\n",
				"data: unfinished",
			}
		}, []string{`{"row":1}`, `{"echo":"[redacted]","row":2}`, `"line one\nAuthorization: Bearer [redacted]"`}},
		{"chunked lines", "application/x-ndjson", func(auth string) []string {
			return []string{"{\"row\":1}\n", "{\"row\":2,\"echo\":\"" + strings.TrimPrefix(auth, "Bearer ") + "\"}\n\n", "plain " + leaked}
		}, []string{`{"row":1}`, `{"echo":"[redacted]","row":2}`, `"plain Authorization: Bearer [redacted]"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var accepts sync.Map
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				accepts.Store(r.URL.Query().Get("n"), r.Header.Get("Accept"))
				w.Header().Set("Content-Type", tt.media)
				for _, piece := range tt.body(r.Header.Get("Authorization")) {
					_, _ = io.WriteString(w, piece)
					w.(http.Flusher).Flush() // chunked: no length
				}
			}))
			t.Cleanup(srv.Close)
			d := httpDef("feed.tail", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: srv.URL + "/tail",
				Query: map[string]string{"n": "{note}"}}, func(d *toolplane.Definition) {
				d.OutputSchema = json.RawMessage(`true`)
			})
			e := newEnv(t, d)
			sink := &collected{}
			streamed, err := e.iv.Invoke(invoke.Streamed(context.Background(), sink), d.Name, map[string]any{"note": "streamed"}, inv(d.Name))
			if err != nil {
				t.Fatal(err)
			}
			plain := e.call(t, d.Name, map[string]any{"note": "plain"})
			if !streamed.OK || !reflect.DeepEqual(streamed.Data, plain.Data) || streamed.Meta != plain.Meta {
				t.Fatalf("the streamed call answered %+v, the plain one %+v", streamed, plain)
			}
			var got []string
			for _, ch := range sink.chunks {
				if strings.Contains(string(ch.Data), token) || strings.Contains(string(ch.Data), "abcdef0123456789") {
					t.Errorf("chunk %d holds a secret: %s", ch.Seq, ch.Data)
				}
				if !ch.Untrusted || ch.Cut {
					t.Errorf("chunk %d: untrusted %v cut %v", ch.Seq, ch.Untrusted, ch.Cut)
				}
				got = append(got, string(ch.Data))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("chunks %v, want %v", got, tt.want)
			}
			if a, _ := accepts.Load("streamed"); !strings.Contains(fmt.Sprint(a), "text/event-stream") {
				t.Errorf("a streamed call asked for %v", a)
			}
			if a, _ := accepts.Load("plain"); a != "application/json" {
				t.Errorf("a plain call asked for %v", a)
			}
		})
	}
}

// A downstream whose answer does not stream (it has a length) passes
// nothing through, even when the call is streamed.
func TestAWholeAnswerIsNotPassedThrough(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"rows":[1,2]}`)
	}))
	t.Cleanup(srv.Close)
	d := httpDef("feed.whole", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: srv.URL + "/whole"})
	e := newEnv(t, d)
	sink := &collected{}
	r, err := e.iv.Invoke(invoke.Streamed(context.Background(), sink), d.Name, map[string]any{}, inv(d.Name))
	if err != nil || !r.OK {
		t.Fatalf("%+v, %v", r, err)
	}
	if len(sink.chunks) != 0 {
		t.Fatalf("a whole answer streamed %d chunks", len(sink.chunks))
	}
}
