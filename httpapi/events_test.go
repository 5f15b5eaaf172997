package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/async"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/internal/fencetest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/registry"
)

// streamFixture serves feed.rows (the platform's) and feed.web (the open
// world's), which emit a chunk per row, {"row":i,"note":...}, the first
// half at once and the rest once the gate opens; calls are run by a
// worker of their own at once.
type streamFixture struct {
	srv                    *httptest.Server
	api                    *httpapi.Server
	gate                   chan struct{}
	agent, other, stranger string
}

// runAtOnce runs each accepted call on a goroutine, as a worker would.
type runAtOnce struct{ svc **async.Service }

func (r runAtOnce) Accepted(_ context.Context, c *toolplane.AsyncCall) error {
	go func() { _ = (*r.svc).Run(context.Background(), c.OrganizationID, c.ID, true) }()
	return nil
}

func (runAtOnce) Ended(context.Context, *toolplane.AsyncCall) error { return nil }

// streamStores answers a fresh store on SQLite and, when
// TOOLPLANE_TEST_POSTGRES is set, on PostgreSQL.
func streamStores(t *testing.T) map[string]toolplane.Store {
	t.Helper()
	dsns := map[string]string{"sqlite": filepath.Join(t.TempDir(), "toolplane.db")}
	if dsn, ok := pgtest.LookupDSN(); ok {
		dsns["postgres"] = pgtest.SchemaDSN(t, dsn)
	}
	out := map[string]toolplane.Store{}
	for name, dsn := range dsns {
		b, err := backend.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		if err := b.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		out[name] = b.Store
	}
	return out
}

func newStreamFixture(t *testing.T, store toolplane.Store) *streamFixture {
	t.Helper()
	f := &streamFixture{gate: make(chan struct{})}
	hs := handler.NewRegistry()
	var defs []toolplane.Definition
	for _, name := range []string{"feed.rows", "feed.web"} {
		defs = append(defs, toolplane.Definition{
			Name: name, Version: "1.0.0", Description: "Stream rows.", Kind: toolplane.KindInternal, Effect: toolplane.EffectRead,
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"},"note":{"type":"string"}}}`),
			OutputSchema: json.RawMessage(`{"type":"object"}`),
			Binding:      toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}},
			Annotations:  toolplane.Annotations{OpenWorld: name == "feed.web"},
			Timeout:      toolplane.Duration(30 * time.Second),
		})
		b, err := handler.BindFunc(name, func(ctx context.Context, _ handler.Call, args any) (any, error) {
			m, _ := args.(map[string]any)
			n, _ := m["n"].(json.Number).Int64()
			for i := int64(1); i <= n; i++ {
				_ = handler.Emit(ctx, map[string]any{"row": i, "note": m["note"]})
				if i == n/2 {
					select {
					case <-f.gate:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
			}
			return map[string]any{"rows": n}, nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := hs.Register(b); err != nil {
			t.Fatal(err)
		}
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: demotest.Bindings{Registry: hs}})
	if err != nil {
		t.Fatal(err)
	}
	f.serve(t, store, reg, hs)
	return f
}

// serve serves reg's tools, bound in hs, on store through f, and mints
// f's keys: each may call feed.* and demo.*.
func (f *streamFixture) serve(t *testing.T, store toolplane.Store, reg *registry.Registry, hs *handler.Registry) {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := async.New(async.Config{Store: store, Invoker: iv, Poll: 20 * time.Millisecond, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	svc.UseScheduler(runAtOnce{svc: &svc})
	layer := &door.Door{Invoker: iv, Registry: reg, Store: store, Log: quiet, Async: svc}
	f.api = &httpapi.Server{Door: layer, Store: store, Log: quiet, Heartbeat: 50 * time.Millisecond}
	f.srv = httptest.NewServer(f.api.Handler())
	t.Cleanup(f.srv.Close)
	key := func(org, subject string) string {
		id, secret, err := apikey.New(toolplane.CredentialAgent)
		if err != nil {
			t.Fatal(err)
		}
		c := &toolplane.Credential{ID: id, OrganizationID: org, Kind: toolplane.CredentialAgent, Subject: subject,
			Tools: []string{"feed.*", "demo.*"}, Hash: apikey.Hash(secret), CreatedAt: time.Now()}
		if err := store.InsertCredential(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		return apikey.Key(id, secret)
	}
	f.agent, f.other, f.stranger = key("org-1", "agent-feed"), key("org-1", "agent-other"), key("org-2", "agent-feed")
}

// event is one server-sent event read, or a comment (Comment set).
type event struct {
	ID, Name, Data string
	Comment        bool
}

// events opens req and answers its status and a channel of the events
// read, closed when the response ends; cancel drops the connection.
func (f *streamFixture) events(t *testing.T, method, path, key, body string, header http.Header) (int, <-chan event, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, method, f.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	out := make(chan event, 1000)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		close(out)
		out2 := make(chan event, 1)
		out2 <- event{Data: string(b)}
		close(out2)
		return resp.StatusCode, out2, cancel
	}
	go func() {
		defer close(out)
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		var e event
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				if e != (event{}) {
					out <- e
				}
				e = event{}
			case strings.HasPrefix(line, ":"):
				e.Comment = true
			case strings.HasPrefix(line, "id: "):
				e.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				e.Name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.Data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return resp.StatusCode, out, cancel
}

// next answers the next event that is not a comment, and how many
// comments came before it.
func next(t *testing.T, ch <-chan event) (event, int) {
	t.Helper()
	comments := 0
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatal("the stream ended")
			}
			if e.Comment && e.Name == "" {
				comments++
				continue
			}
			return e, comments
		case <-timeout:
			t.Fatal("no event in time")
		}
	}
}

// chunkOf decodes a chunk event's data.
func chunkOf(t *testing.T, e event) (seq int64, row int, untrusted bool) {
	t.Helper()
	var v struct {
		Seq       int64
		Data      struct{ Row int }
		Untrusted bool
	}
	if e.Name != "chunk" || json.Unmarshal([]byte(e.Data), &v) != nil || fmt.Sprint(v.Seq) != e.ID {
		t.Fatalf("not a chunk: %+v", e)
	}
	return v.Seq, v.Data.Row, v.Untrusted
}

// A streamed invoke answers the invocation's id first, then its chunks
// in order; a client that drops the connection mid-stream loses nothing:
// it reconnects with Last-Event-ID and reads each later chunk once, then
// the call's bounded result, and the response ends. Heartbeats keep an
// idle stream open. Another agent, or another organization's, is
// answered 404.
func TestStreamedInvokeResumesAfterADisconnect(t *testing.T) {
	t.Parallel()
	for name, store := range streamStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newStreamFixture(t, store)
			status, ch, drop := f.events(t, "POST", "/v1/tools/feed.web/invoke", f.agent, `{"arguments":{"n":8,"note":"hi"}}`, nil)
			if status != http.StatusOK {
				t.Fatalf("streamed invoke: %d %v", status, <-ch)
			}
			first, _ := next(t, ch)
			var acc struct{ ID, Status string }
			if first.Name != "accepted" || json.Unmarshal([]byte(first.Data), &acc) != nil || !strings.HasPrefix(acc.ID, "inv_") {
				t.Fatalf("first event: %+v", first)
			}
			for want := 1; want <= 3; want++ {
				e, _ := next(t, ch)
				seq, row, untrusted := chunkOf(t, e)
				if seq != int64(want) || row != want || !untrusted {
					t.Fatalf("chunk %d: seq %d row %d untrusted %v", want, seq, row, untrusted)
				}
			}
			// The handler holds after row 4; the stream idles, beating.
			// Beats come every 50 ms; a loaded machine may hold one back.
			beats := 0
			for deadline := time.Now().Add(10 * time.Second); beats == 0 && time.Now().Before(deadline); {
				_, b := nextWithin(t, ch, 300*time.Millisecond)
				beats += b
			}
			if beats == 0 {
				t.Fatal("no heartbeat on an idle stream")
			}
			drop() // gone after chunk 3 (chunk 4 may have been sent, unread)

			for _, who := range []string{f.other, f.stranger} {
				if status, _, stop := f.events(t, "GET", "/v1/invocations/"+acc.ID+"/events", who, "", nil); status != http.StatusNotFound {
					t.Errorf("another reader: %d, want 404", status)
					stop()
				} else {
					stop()
				}
			}

			close(f.gate)
			status, ch, stop := f.events(t, "GET", "/v1/invocations/"+acc.ID+"/events", f.agent, "", http.Header{"Last-Event-Id": {"3"}})
			defer stop()
			if status != http.StatusOK {
				t.Fatalf("resume: %d %v", status, <-ch)
			}
			for want := 4; want <= 8; want++ {
				e, _ := next(t, ch)
				if seq, row, _ := chunkOf(t, e); seq != int64(want) || row != want {
					t.Fatalf("resumed chunk %d: seq %d row %d", want, seq, row)
				}
			}
			last, _ := next(t, ch)
			var res struct {
				Status string
				Result struct {
					OK   bool
					Data struct{ Rows int }
					Meta struct{ Untrusted bool }
				}
			}
			if last.Name != "result" || json.Unmarshal([]byte(last.Data), &res) != nil || res.Status != "succeeded" ||
				!res.Result.OK || res.Result.Data.Rows != 8 || !res.Result.Meta.Untrusted {
				t.Fatalf("final event: %+v", last)
			}
			for e := range ch {
				if !e.Comment {
					t.Fatalf("an event after the result: %+v", e)
				}
			}

			// Read again from the start, the stream is whole.
			status, ch, stop2 := f.events(t, "GET", "/v1/invocations/"+acc.ID+"/events?after=0", f.agent, "", nil)
			defer stop2()
			n := 0
			for e := range ch {
				if e.Name == "chunk" {
					n++
					if seq, _, _ := chunkOf(t, e); seq != int64(n) {
						t.Fatalf("replay: chunk %d numbered %d", n, seq)
					}
				}
			}
			if status != http.StatusOK || n != 8 {
				t.Fatalf("replay: %d, %d chunks", status, n)
			}
			if status, _, stop := f.events(t, "GET", "/v1/invocations/"+acc.ID+"/events", f.agent, "", http.Header{"Last-Event-Id": {"three"}}); status != http.StatusBadRequest {
				t.Errorf("a malformed Last-Event-ID: %d", status)
				stop()
			} else {
				stop()
			}
		})
	}
}

// nextWithin reads for d and answers the events and comments seen.
func nextWithin(t *testing.T, ch <-chan event, d time.Duration) ([]event, int) {
	t.Helper()
	var evs []event
	beats := 0
	timeout := time.After(d)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return evs, beats
			}
			if e.Comment && e.Name == "" {
				beats++
			} else {
				evs = append(evs, e)
			}
		case <-timeout:
			return evs, beats
		}
	}
}

// Each chunk of a streamed call of a tool whose answers carry outside
// text reaches the client with every string fenced (demo.search_tickets
// emits each ticket, its customer's words included, as it finds it), in
// the streamed invoke and in the /events read back, as the result's
// outside-text fields are.
func TestStreamedChunksOfOutsideTextAreFenced(t *testing.T) {
	t.Parallel()
	for name, store := range streamStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := &streamFixture{gate: make(chan struct{})}
			reg, hs := demotest.Registry(t)
			f.serve(t, store, reg, hs)
			// checkChunks reads events to the result and answers the
			// chunks read, each checked fenced, and the tickets answered.
			checkChunks := func(ch <-chan event) (chunks, tickets int) {
				t.Helper()
				for e := range ch {
					switch e.Name {
					case "chunk":
						var v struct {
							Data      map[string]any
							Untrusted bool
						}
						if err := json.Unmarshal([]byte(e.Data), &v); err != nil || !v.Untrusted || len(v.Data) == 0 {
							t.Fatalf("chunk %s: want a ticket labelled untrusted (%v)", e.Data, err)
						}
						chunks++
						for k, s := range v.Data {
							text, _ := s.(string)
							if text == "" {
								continue
							}
							if src, _, ok := fencetest.Unfence(text); !ok || src != "demo.search_tickets chunk" {
								t.Errorf("chunk %s: %s %q is not fenced", e.ID, k, text)
							}
						}
					case "result":
						var res struct {
							Result struct{ Data []any }
						}
						if err := json.Unmarshal([]byte(e.Data), &res); err != nil {
							t.Fatalf("result %s: %v", e.Data, err)
						}
						return chunks, len(res.Result.Data)
					}
				}
				t.Fatal("the stream ended before its result")
				return 0, 0
			}
			status, ch, stop := f.events(t, "POST", "/v1/tools/demo.search_tickets/invoke", f.agent, `{"arguments":{"query":"ed"}}`, nil)
			defer stop()
			if status != http.StatusOK {
				t.Fatalf("streamed invoke: %d %v", status, <-ch)
			}
			first, _ := next(t, ch)
			var acc struct{ ID string }
			if first.Name != "accepted" || json.Unmarshal([]byte(first.Data), &acc) != nil {
				t.Fatalf("first event: %+v", first)
			}
			if chunks, tickets := checkChunks(ch); chunks < 2 || chunks != tickets {
				t.Fatalf("%d chunks for %d tickets", chunks, tickets)
			}
			status, ch, stop2 := f.events(t, "GET", "/v1/invocations/"+acc.ID+"/events?after=0", f.agent, "", nil)
			defer stop2()
			if chunks, tickets := checkChunks(ch); status != http.StatusOK || chunks < 2 || chunks != tickets {
				t.Fatalf("read back: %d, %d chunks for %d tickets", status, chunks, tickets)
			}
		})
	}
}
