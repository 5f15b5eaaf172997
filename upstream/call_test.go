package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/upstream"
)

// modes are the two ways a Streamable HTTP server answers a call: one JSON
// response, or a stream of events.
var modes = []struct {
	name string
	json bool
}{{"sse", false}, {"json", true}}

// startSet runs a Set over cfgs with a registry of their tools and no
// invoker: the lean path's tests call the bindings as the invoker does.
func startSet(tb testing.TB, cfgs ...upstream.Config) *upstream.Set {
	tb.Helper()
	set, err := upstream.New(cfgs, upstream.Options{Logger: slog.New(slog.DiscardHandler), Version: "test"})
	if err != nil {
		tb.Fatal(err)
	}
	reg, _, err := registry.Build(nil, registry.Options{Bindings: bindings{handler.NewRegistry(), set}})
	if err != nil {
		tb.Fatal(err)
	}
	set.UseRegistry(reg)
	set.Start(context.Background(), 20*time.Second)
	tb.Cleanup(set.Close)
	return set
}

// callBound calls a listed tool through its binding, as the invoker does.
func callBound(t *testing.T, set *upstream.Set, slug, name, key string, args any) (any, *handler.Binding, error) {
	t.Helper()
	b, err := set.Binding(&toolplane.RemoteBinding{ConnectionID: slug, RemoteName: name})
	if err != nil {
		t.Fatalf("binding of %s: %v", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := b.Invoke(ctx, handler.Call{Tool: "mcp." + slug + "." + name, Key: key, Attempt: 1}, args)
	return out, b, err
}

type statsOut struct {
	Count int      `json:"count"`
	Ratio float64  `json:"ratio"`
	Label string   `json:"label"`
	Tags  []string `json:"tags"`
}

// federated serves goUpstream's server, with tools the lean path must
// answer exactly as the SDK path does, through a watch, in one of the
// modes.
func federated(tb testing.TB, jsonResponse bool) (*watch, string) {
	tb.Helper()
	w := &watch{next: sdkHandler(tb, jsonResponse), expired: map[string]bool{}, methods: map[string]int{}}
	hs := httptest.NewServer(w)
	tb.Cleanup(hs.Close)
	return w, hs.URL
}

// sdkHandler is the Streamable HTTP handler of goUpstream's server and the
// lean path's own tools.
func sdkHandler(tb testing.TB, jsonResponse bool) http.Handler {
	tb.Helper()
	var sent atomic.Int32
	srv, _ := goUpstream(tb, &sent)
	mcp.AddTool(srv, &mcp.Tool{Name: "stats", Description: "Numbers, structured."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, statsOut, error) {
			return nil, statsOut{Count: 3, Ratio: 0.25, Label: "<a & b>", Tags: []string{"x"}}, nil
		})
	size := int64(42)
	mcp.AddTool(srv, &mcp.Tool{Name: "mixed", Description: "Every kind of block."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "plain"},
				&mcp.TextContent{Text: "noted", Annotations: &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: 0.5}},
				&mcp.TextContent{Text: "with meta", Meta: mcp.Meta{"k": "v"}},
				&mcp.ImageContent{Data: []byte("png bytes"), MIMEType: "image/png"},
				&mcp.ResourceLink{URI: "note://readme", Name: "readme", Size: &size},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "note://inline", MIMEType: "text/plain", Text: "inline"}},
			}, StructuredContent: map[string]any{"n": 7, "ok": true}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "pinger", Description: "Asks the client things while it runs."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if err := req.Session.Ping(ctx, nil); err != nil {
				return nil, nil, fmt.Errorf("ping: %w", err)
			}
			roots, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, nil, fmt.Errorf("roots: %w", err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("pinged; %d roots", len(roots.Roots))}}}, nil, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: jsonResponse})
}

// watch stands in front of an SDK server: it counts the methods sent, and
// answers 404 for a session it was told has expired, as a server that
// dropped the session does.
type watch struct {
	next    http.Handler
	mu      sync.Mutex
	expired map[string]bool
	methods map[string]int
}

func (w *watch) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	gone := w.expired[r.Header.Get("Mcp-Session-Id")]
	w.mu.Unlock()
	if gone {
		http.Error(rw, "session not found", http.StatusNotFound)
		return
	}
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		var m struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(body, &m) == nil {
			w.mu.Lock()
			w.methods[m.Method]++
			w.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	w.next.ServeHTTP(rw, r)
}

func (w *watch) expire(session string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expired[session] = true
}

func (w *watch) count(method string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.methods[method]
}

// plainJSON reads s as the plain JSON values an answer is made of.
func plainJSON(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

func TestLeanCallAnswersAsTheSDKPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tool string
		args any
		// want is the answer as JSON ("" for an error), or invalid the
		// message of the invalid answer.
		want, invalid string
	}{
		{tool: "peek", args: map[string]any{}, want: `{"content":[{"type":"text","text":"peeked"}]}`},
		{tool: "lookup", args: map[string]any{"id": "r-7"}, want: `{"found":true,"id":"r-7"}`},
		{tool: "stats", want: `{"count":3,"label":"<a & b>","ratio":0.25,"tags":["x"]}`},
		{tool: "mixed", args: map[string]any{}, want: `{"content":[
			{"type":"text","text":"plain"},
			{"type":"text","text":"noted","annotations":{"audience":["user"],"priority":0.5}},
			{"type":"text","text":"with meta","_meta":{"k":"v"}},
			{"type":"image","mimeType":"image/png","data":"cG5nIGJ5dGVz"},
			{"type":"resource_link","uri":"note://readme","name":"readme","size":42},
			{"type":"resource","resource":{"uri":"note://inline","mimeType":"text/plain","text":"inline"}}
		],"structuredContent":{"n":7,"ok":true}}`},
		{tool: "pinger", args: map[string]any{}, want: `{"content":[{"type":"text","text":"pinged; 0 roots"}]}`},
		{tool: "fail", args: map[string]any{}, invalid: "the tool answered an error: quota exceeded for this account"},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			_, url := federated(t, mode.json)
			set := startSet(t, upstream.Config{Slug: "up", URL: url})
			if id, isLean := set.Session("up"); id == "" || !isLean {
				t.Fatalf("session %q, lean %v: an HTTP server's calls do not take the lean path", id, isLean)
			}
			for _, tt := range tests {
				t.Run(tt.tool, func(t *testing.T) {
					t.Parallel()
					got, _, err := callBound(t, set, "up", tt.tool, "key-1", tt.args)
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					old, oldErr := set.CallVia(ctx, "up", tt.tool, "key-1", tt.args, true)
					if tt.invalid != "" {
						var inv, oldInv *handler.Invalid
						if !errors.As(err, &inv) || inv.Message != tt.invalid {
							t.Fatalf("lean path: %v, want invalid %q", err, tt.invalid)
						}
						if !errors.As(oldErr, &oldInv) || oldInv.Message != inv.Message {
							t.Errorf("the SDK path answered %v, the lean path %v", oldErr, err)
						}
						return
					}
					if err != nil || oldErr != nil {
						t.Fatalf("lean path: %v; SDK path: %v", err, oldErr)
					}
					if !reflect.DeepEqual(got, old) {
						t.Errorf("lean path %#v\nSDK path  %#v", got, old)
					}
					if want := plainJSON(t, tt.want); !reflect.DeepEqual(got, want) {
						t.Errorf("answered %#v\nwant      %#v", got, want)
					}
				})
			}
		})
	}
}

func TestLeanCallRefusedByTheServerRequestsAResync(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			w, url := federated(t, mode.json)
			set := startSet(t, upstream.Config{Slug: "up", URL: url})
			lists := w.count("tools/list")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// A tool the server does not know: it refuses the request
			// (invalid params) before running anything.
			_, err := set.CallVia(ctx, "up", "nope", "", map[string]any{}, false)
			var inv *handler.Invalid
			if !errors.As(err, &inv) || inv.Message != `the server refused the call: unknown tool "nope"` {
				t.Fatalf("unknown tool: %v", err)
			}
			eventually(t, "the tool list to be read again", func() bool { return w.count("tools/list") > lists })
		})
	}
}

func TestLeanCallReconnectsWhenTheSessionIsGone(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			w, url := federated(t, mode.json)
			set := startSet(t, upstream.Config{Slug: "up", URL: url})
			before, _ := set.Session("up")
			if before == "" {
				t.Fatal("no session")
			}
			// The server forgets the session (it expired, or restarted);
			// only the lean call can notice: the SDK client sends nothing.
			w.expire(before)
			_, b, err := callBound(t, set, "up", "peek", "", map[string]any{})
			var un *handler.Unavailable
			if !errors.As(err, &un) || !errors.Is(err, mcp.ErrSessionMissing) {
				t.Fatalf("call on a lost session: %v", err)
			}
			if o := b.Classify(err); o.Kind != handler.Release {
				t.Errorf("call on a lost session: outcome %v, want the claim released", o.Kind)
			}
			eventually(t, "a new session", func() bool { id, _ := set.Session("up"); return id != "" && id != before })
			got, _, err := callBound(t, set, "up", "peek", "", map[string]any{})
			if want := plainJSON(t, `{"content":[{"type":"text","text":"peeked"}]}`); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("after reconnecting: %#v %v", got, err)
			}
		})
	}
}

// wireSession is the session the hand-written server keeps.
const wireSession = "wire-1"

// wireServer is an MCP server written by hand on the wire format, for what
// an SDK server does not do on demand: requests of its own on a call's
// stream, odd statuses, a call that never ends.
type wireServer struct {
	mu        sync.Mutex
	calls     map[string]wireCall        // by tool name
	replies   map[string]json.RawMessage // by the id of the server's request
	cancelled []string
	replied   chan struct{}
	lists     int // tools/list requests
}

// wireCall is what the server saw of one tools/call.
type wireCall struct {
	header http.Header
	id     json.RawMessage
	meta   map[string]any
}

// wireMsg is any JSON-RPC message, as the server reads and writes it.
type wireMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// wireTools are the server's tools, each named for how it answers.
var wireTools = []string{"chatty", "big", "garbled", "boom", "accepted", "refused", "invalid", "busy", "odd", "hang", "conflict", "failed", "notifier"}

func newWireServer(t *testing.T) (*wireServer, string) {
	s := &wireServer{calls: map[string]wireCall{}, replies: map[string]json.RawMessage{}, replied: make(chan struct{}, 16)}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs.URL
}

// answerJSON answers a POST with one JSON-RPC message.
func answerJSON(w http.ResponseWriter, m wireMsg) {
	m.JSONRPC = "2.0"
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(m)
}

func (s *wireServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		http.Error(w, "no standalone stream", http.StatusMethodNotAllowed)
		return
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var m wireMsg
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case m.Method == "":
		// A reply to a request of ours.
		raw, _ := json.Marshal(m)
		s.mu.Lock()
		s.replies[string(m.ID)] = raw
		s.mu.Unlock()
		s.replied <- struct{}{}
		w.WriteHeader(http.StatusAccepted)
	case m.Method == "initialize":
		w.Header().Set("Mcp-Session-Id", wireSession)
		answerJSON(w, wireMsg{ID: m.ID, Result: json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"wire","version":"1"}}`)})
	case m.Method == "tools/list":
		s.mu.Lock()
		s.lists++
		s.mu.Unlock()
		var tools []string
		for _, name := range wireTools {
			tools = append(tools, `{"name":"`+name+`","inputSchema":{"type":"object"}}`)
		}
		answerJSON(w, wireMsg{ID: m.ID, Result: json.RawMessage(`{"tools":[` + strings.Join(tools, ",") + `]}`)})
	case m.Method == "tools/call":
		s.call(w, r, &m)
	case m.ID == nil:
		if m.Method == "notifications/cancelled" {
			var p struct {
				RequestID string `json:"requestId"`
			}
			_ = json.Unmarshal(m.Params, &p)
			s.mu.Lock()
			s.cancelled = append(s.cancelled, p.RequestID)
			s.mu.Unlock()
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		// server/discover among them: the client falls back to initialize.
		answerJSON(w, wireMsg{ID: m.ID, Error: json.RawMessage(`{"code":-32601,"message":"method not found"}`)})
	}
}

func (s *wireServer) call(w http.ResponseWriter, r *http.Request, m *wireMsg) {
	var p struct {
		Name string         `json:"name"`
		Meta map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(m.Params, &p)
	s.mu.Lock()
	s.calls[p.Name] = wireCall{header: r.Header.Clone(), id: m.ID, meta: p.Meta}
	s.mu.Unlock()
	id := string(m.ID)
	stream := func() func(string) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		return func(ev string) {
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}
	switch p.Name {
	case "chatty":
		send := stream()
		send(": a comment\n\n")
		send("id: 1\n\n") // an event without data
		send("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
		send("id: 2\r\nretry: 1000\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"srv-ping\",\"method\":\"ping\"}\r\n\r\n")
		send("data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"roots/list\"}\n\n")
		send("data: {\"jsonrpc\":\"2.0\",\"id\":\"srv-sample\",\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[],\"maxTokens\":1}}\n\n")
		// Not the call's response: another event type, another id.
		send("event: decoy\ndata: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"decoy\"}]}}\n\n")
		send("data: {\"jsonrpc\":\"2.0\",\"id\":\"other\",\"result\":{}}\n\n")
		// Another request's result that is no tool result at all.
		send("data: {\"jsonrpc\":\"2.0\",\"id\":\"other-2\",\"result\":{\"content\":\"not blocks\"}}\n\n")
		// The server waits for its three answers before answering.
		for range 3 {
			select {
			case <-s.replied:
			case <-time.After(5 * time.Second):
				send("data: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"error\":{\"code\":-32000,\"message\":\"no answer to the server's requests\"}}\n\n")
				return
			}
		}
		// The response, over two data lines.
		send("data: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\ndata: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"pong\"}]}}\n\n")
	case "big":
		send := stream()
		send("data: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" + strings.Repeat("x", 100_000) + "\"}]}}\n\n")
	case "garbled":
		// The call's response, with a result that is no tool result.
		stream()("data: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{\"content\":\"not blocks\"}}\n\n")
	case "boom":
		http.Error(w, "kaput", http.StatusInternalServerError)
	case "accepted":
		w.WriteHeader(http.StatusAccepted)
	case "refused":
		http.Error(w, "bad request", http.StatusBadRequest)
	case "invalid":
		w.WriteHeader(http.StatusBadRequest)
		answerJSON(w, wireMsg{ID: m.ID, Error: json.RawMessage(`{"code":-32602,"message":"bad arguments"}`)})
	case "busy":
		http.Error(w, "slow down", http.StatusTooManyRequests)
	case "odd":
		answerJSON(w, wireMsg{ID: m.ID, Error: json.RawMessage(`{"code":-32000,"message":"database locked"}`)})
	case "hang":
		stream()(": working\n\n")
		<-r.Context().Done()
	case "conflict":
		// A 4xx a transport does not answer before handling: the call
		// may have run.
		http.Error(w, "version conflict", http.StatusConflict)
	case "failed":
		// A 400 that says the tool failed, not that the request was bad.
		w.WriteHeader(http.StatusBadRequest)
		answerJSON(w, wireMsg{ID: m.ID, Error: json.RawMessage(`{"code":-32603,"message":"half done"}`)})
	case "notifier":
		send := stream()
		send("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
		// The event's name with a space after it, as some servers write it.
		send("event: message \ndata: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"noted\"}]}}\n\n")
	}
}

func (s *wireServer) listed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists
}

// A list change the server announces on a call's stream is acted on, as
// the SDK client acts on one it reads elsewhere.
func TestLeanCallActsOnNotificationsOnItsStream(t *testing.T) {
	t.Parallel()
	srv, url := newWireServer(t)
	set := startSet(t, upstream.Config{Slug: "wire", URL: url})
	before := srv.listed()
	if got, _, err := callBound(t, set, "wire", "notifier", "", nil); err != nil || !reflect.DeepEqual(got, plainJSON(t, `{"content":[{"type":"text","text":"noted"}]}`)) {
		t.Fatalf("answered %v, %v", got, err)
	}
	eventually(t, "the tool list to be read again", func() bool { return srv.listed() > before })
}

func TestLeanCallOverTheWire(t *testing.T) {
	t.Parallel()
	srv, url := newWireServer(t)
	set := startSet(t, upstream.Config{Slug: "wire", URL: url, Headers: map[string]string{"X-Api-Key": "secret"}})
	if id, isLean := set.Session("wire"); id != wireSession || !isLean {
		t.Fatalf("session %q, lean %v", id, isLean)
	}
	tests := []struct {
		tool string
		// want is the answer as JSON; otherwise the call fails, ending as
		// outcome, and check looks at its error.
		want    string
		outcome handler.OutcomeKind
		check   func(t *testing.T, err error)
	}{
		{tool: "chatty", want: `{"content":[{"type":"text","text":"pong"}]}`},
		{tool: "big", want: `{"content":[{"type":"text","text":"` + strings.Repeat("x", 100_000) + `"}]}`},
		{tool: "garbled", outcome: handler.Held, check: func(t *testing.T, err error) {
			if !strings.Contains(err.Error(), "read the result") {
				t.Errorf("an unreadable result: %v", err)
			}
		}},
		{tool: "boom", outcome: handler.Held, check: func(t *testing.T, err error) {
			var un *handler.Unavailable
			if errors.As(err, &un) || !strings.Contains(err.Error(), "HTTP 500: kaput") {
				t.Errorf("a 500: %v", err)
			}
		}},
		{tool: "accepted", outcome: handler.Held},
		{tool: "refused", outcome: handler.Release, check: func(t *testing.T, err error) {
			var un *handler.Unavailable
			if !errors.As(err, &un) {
				t.Errorf("a 400: %v", err)
			}
		}},
		{tool: "invalid", outcome: handler.Definite, check: func(t *testing.T, err error) {
			var inv *handler.Invalid
			if !errors.As(err, &inv) || inv.Message != "the server refused the call: bad arguments" {
				t.Errorf("a 400 with invalid params: %v", err)
			}
		}},
		{tool: "busy", outcome: handler.Release, check: func(t *testing.T, err error) {
			var re *handler.RetryableUpstream
			if !errors.As(err, &re) {
				t.Errorf("a 429: %v", err)
			}
		}},
		{tool: "conflict", outcome: handler.Held, check: func(t *testing.T, err error) {
			var un *handler.Unavailable
			if errors.As(err, &un) {
				t.Errorf("a 409 released the claim: %v", err)
			}
		}},
		{tool: "failed", outcome: handler.Held, check: func(t *testing.T, err error) {
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != -32603 {
				t.Errorf("a 400 carrying an internal error: %v", err)
			}
		}},
		{tool: "notifier", want: `{"content":[{"type":"text","text":"noted"}]}`},
		{tool: "odd", outcome: handler.Held, check: func(t *testing.T, err error) {
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != -32000 || we.Message != "database locked" {
				t.Errorf("a JSON-RPC error: %v", err)
			}
		}},
	}
	t.Run("calls", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.tool, func(t *testing.T) {
				t.Parallel()
				got, b, err := callBound(t, set, "wire", tt.tool, "key-"+tt.tool, nil)
				if tt.want != "" {
					if want := plainJSON(t, tt.want); err != nil || !reflect.DeepEqual(got, want) {
						t.Fatalf("answered %.200v, %v", got, err)
					}
				} else {
					if err == nil {
						t.Fatalf("answered %v, want a failure", got)
					}
					if o := b.Classify(err); o.Kind != tt.outcome {
						t.Errorf("%v: outcome %v, want %v", err, o.Kind, tt.outcome)
					}
					if tt.check != nil {
						tt.check(t, err)
					}
				}
			})
		}
		t.Run("hang", func(t *testing.T) {
			t.Parallel()
			b, err := set.Binding(&toolplane.RemoteBinding{ConnectionID: "wire", RemoteName: "hang"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err = b.Invoke(ctx, handler.Call{Key: "key-hang"}, nil)
			if !errors.Is(err, context.DeadlineExceeded) || b.Classify(err).Kind != handler.Held {
				t.Fatalf("a call that outlived its context: %v", err)
			}
		})
	})

	// Every call went on toolplane's session, as the SDK client sends its
	// own requests, under an id of the lean path's.
	srv.mu.Lock()
	calls, replies := maps.Clone(srv.calls), maps.Clone(srv.replies)
	srv.mu.Unlock()
	for _, name := range wireTools {
		c, ok := calls[name]
		if !ok {
			t.Errorf("%s was not called", name)
			continue
		}
		h := c.header
		if h.Get("Mcp-Session-Id") != wireSession || h.Get("Mcp-Protocol-Version") != "2025-06-18" || h.Get("X-Api-Key") != "secret" ||
			h.Get("Content-Type") != "application/json" || h.Get("Accept") != "application/json, text/event-stream" {
			t.Errorf("%s sent with headers %v", name, h)
		}
		var id string
		if err := json.Unmarshal(c.id, &id); err != nil || !strings.HasPrefix(id, "tp-") {
			t.Errorf("%s sent with id %s", name, c.id)
		}
		if c.meta["toolplane/idempotency_key"] != "key-"+name {
			t.Errorf("%s sent with _meta %v", name, c.meta)
		}
	}
	// The server's requests on the stream were answered.
	for id, want := range map[string]string{
		`"srv-ping"`:   `{"jsonrpc":"2.0","id":"srv-ping","result":{}}`,
		`7`:            `{"jsonrpc":"2.0","id":7,"result":{"roots":[]}}`,
		`"srv-sample"`: `{"jsonrpc":"2.0","id":"srv-sample","error":{"code":-32601,"message":"method not found: sampling/createMessage"}}`,
	} {
		if got := replies[id]; string(got) != want {
			t.Errorf("request %s answered %s, want %s", id, got, want)
		}
	}
	// The abandoned call was cancelled at the server.
	var hangID string
	_ = json.Unmarshal(calls["hang"].id, &hangID)
	eventually(t, "the abandoned call to be cancelled", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.cancelled) == 1 && srv.cancelled[0] == hangID
	})
}

// BenchmarkCall compares the lean path with the SDK client's CallTool
// (followed by the same output conversion, as the caller did), on one
// session of an SDK server over loopback HTTP, in both response modes, for
// a text answer and a structured one. The server runs in process: its
// allocations are counted too, and are the same for both paths.
func BenchmarkCall(b *testing.B) {
	tools := []struct {
		name string
		args any
	}{{"peek", map[string]any{}}, {"lookup", map[string]any{"id": "r-7"}}}
	for _, mode := range modes {
		hs := httptest.NewServer(sdkHandler(b, mode.json))
		b.Cleanup(hs.Close)
		set := startSet(b, upstream.Config{Slug: "up", URL: hs.URL})
		for _, tool := range tools {
			for _, path := range []struct {
				name string
				sdk  bool
			}{{"lean", false}, {"sdk", true}} {
				b.Run(mode.name+"/"+tool.name+"/"+path.name, func(b *testing.B) {
					ctx := context.Background()
					b.ReportAllocs()
					for b.Loop() {
						if _, err := set.CallVia(ctx, "up", tool.name, "", tool.args, path.sdk); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
