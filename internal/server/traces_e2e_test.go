package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/upstream"
)

// otlpReceiver is an OTLP/HTTP collector on loopback: it decodes the
// protobuf exports toolplane's exporter posts to /v1/traces and keeps
// their spans.
type otlpReceiver struct {
	url   string
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	rc.url = serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.Error(w, "not here", http.StatusNotFound)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	return rc
}

// trace answers the spans received in the trace traceID (hex).
func (rc *otlpReceiver) trace(traceID string) []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range rc.spans {
		if hex.EncodeToString(s.TraceId) == traceID {
			out = append(out, s)
		}
	}
	return out
}

// await polls until found answers true on the spans received (the
// exporter sends in batches, every few seconds), or fails the test.
func (rc *otlpReceiver) await(t *testing.T, what string, found func([]*tracepb.Span) bool) []*tracepb.Span {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rc.mu.Lock()
		all := append([]*tracepb.Span(nil), rc.spans...)
		rc.mu.Unlock()
		if found(all) {
			return all
		}
		if time.Now().After(deadline) {
			var names []string
			for _, s := range all {
				names = append(names, s.Name)
			}
			t.Fatalf("%s: not received within 30s; spans: %v", what, names)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func spanID(s *tracepb.Span) string   { return hex.EncodeToString(s.SpanId) }
func parentID(s *tracepb.Span) string { return hex.EncodeToString(s.ParentSpanId) }

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// eventCode answers the toolplane.code of s's refusal event, "" for none.
func eventCode(s *tracepb.Span) string {
	for _, ev := range s.Events {
		if ev.Name != "toolplane.refusal" {
			continue
		}
		for _, kv := range ev.Attributes {
			if kv.Key == "toolplane.code" {
				return kv.Value.GetStringValue()
			}
		}
	}
	return ""
}

// childrenOf answers the spans whose parent is the span id parent.
func childrenOf(spans []*tracepb.Span, parent string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range spans {
		if parentID(s) == parent {
			out = append(out, s)
		}
	}
	return out
}

func childNamed(spans []*tracepb.Span, parent, name string) *tracepb.Span {
	for _, s := range childrenOf(spans, parent) {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// traceUpstream is an MCP server whose one tool, bounce, calls back into
// toolplane's /mcp once (its first call), as a server that itself calls
// tools passes on the trace context it was given: the traceparent of its
// call's _meta, sent as the HTTP header of every request it makes. It
// records the traceparent of each call's _meta and of each HTTP request
// carrying a tools/call.
type traceUpstream struct {
	url            string
	toolplane, key string
	mu             sync.Mutex
	metas, headers []string
}

func newTraceUpstream(t *testing.T) *traceUpstream {
	t.Helper()
	u := &traceUpstream{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "loop", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "bounce", Description: "Calls itself once more through toolplane, passing on the trace context."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			tp, _ := req.Params.Meta["traceparent"].(string)
			u.mu.Lock()
			u.metas = append(u.metas, tp)
			first := len(u.metas) == 1
			u.mu.Unlock()
			if !first {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "bounced"}}}, nil, nil
			}
			text, err := callTraced(ctx, u.toolplane, u.key, tp, nil)
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "once more: " + text}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	u.url = serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(raw))
		if bytes.Contains(raw, []byte(`"tools/call"`)) {
			u.mu.Lock()
			u.headers = append(u.headers, r.Header.Get("Traceparent"))
			u.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	return u
}

// traced adds an API key, and a traceparent when set, to every request
// an MCP client sends.
type traced struct{ key, parent string }

func (b traced) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	if b.parent != "" {
		r.Header.Set("Traceparent", b.parent)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// callTraced calls mcp.loop.bounce on toolplane at base, as key, with
// header as every request's traceparent header and meta as the call's
// _meta, and answers the text of its result.
func callTraced(ctx context.Context, base, key, header string, meta mcp.Meta) (string, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "tracer", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: traced{key: key, parent: header}}}, nil)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer s.Close()
	name := ""
	for tool, err := range s.Tools(ctx, nil) {
		if err != nil {
			return "", err
		}
		if strings.Contains(tool.Name, "bounce") {
			name = tool.Name
		}
	}
	if name == "" {
		return "", fmt.Errorf("toolplane lists no bounce tool")
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}, Meta: meta})
	if err != nil {
		return "", fmt.Errorf("call: %w", err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("the call answered an error: %s", b.String())
	}
	return b.String(), nil
}

// tracedServer runs a demo server exporting its spans to the OTLP
// endpoint, with the upstreams ups, and answers its base URL, the demo
// agent's and the admin's keys.
func tracedServer(t *testing.T, endpoint string, ups ...upstream.Config) (base, agent, admin string) {
	t.Helper()
	dir := t.TempDir()
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
	cfg := Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db"), DataDir: dir, Demo: true, RateLimit: -1,
		Stdout: &strings.Builder{}, Upstreams: ups, TracingEnv: func(k string) string { return env[k] }}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	t.Cleanup(func() { stop(); <-ran })
	creds := readCreds(t, dir)
	return "http://" + s.Addr(), creds["TOOLPLANE_DEMO_AGENT_KEY"], creds["TOOLPLANE_ADMIN_KEY"]
}

// The trace of a call through two hops: a client sends its trace context
// in the call's _meta to toolplane's /mcp, for a tool an upstream MCP
// server serves; toolplane sends the trace on to the server (in _meta and
// the HTTP header), and the server calls back into toolplane with it.
// Every span is in the client's trace, and the parent links form the
// tree: client → tools/call → call → stages, the handler's attempt → the
// second hop's door → its authentication and call → its stages and
// handler.
func TestTraceAcrossTwoHops(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	up := newTraceUpstream(t)
	no := false
	base, agent, admin := tracedServer(t, rc.url, upstream.Config{Slug: "loop", URL: up.url, Timeout: 20 * time.Second,
		Tools: map[string]upstream.Relax{"bounce": {Effect: toolplane.EffectRead, RequiresApproval: &no}}})
	if status, got := post(t, base, "/v1/grants", admin, `{"agent_id":"demo-agent","pattern":"mcp.loop.*"}`); status != http.StatusCreated {
		t.Fatalf("grant: %d %s", status, got)
	}
	up.toolplane, up.key = base, agent

	const (
		traceID = "0af7651916cd43dd8448eb211c80319c"
		client  = "b7ad6b7169203331"
		parent  = "00-" + traceID + "-" + client + "-01"
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		text string
		err  error
	)
	for deadline := time.Now().Add(30 * time.Second); ; {
		// The upstream's tools are ingested in the background.
		up.mu.Lock()
		up.metas, up.headers = nil, nil
		up.mu.Unlock()
		text, err = callTraced(ctx, base, agent, "", mcp.Meta{"traceparent": parent})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || !strings.Contains(text, "bounced") {
		t.Fatalf("the two hops answered %q, %v", text, err)
	}

	const tool = "tool mcp.loop.bounce"
	spans := rc.await(t, "both hops' handler spans", func(all []*tracepb.Span) bool {
		n := 0
		for _, s := range all {
			if s.Name == "handler" && hex.EncodeToString(s.TraceId) == traceID {
				n++
			}
		}
		return n >= 2
	})
	spans = rc.trace(traceID)
	_ = spans

	// Hop 1: the client's span is the parent of the tools/call span, the
	// call's span is its child, and the stages are the call's.
	top := childrenOf(spans, client)
	if len(top) != 1 || !strings.HasPrefix(top[0].Name, "tools/call ") || top[0].Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Fatalf("the client's span's children: %v", names(top))
	}
	call1 := childNamed(spans, spanID(top[0]), tool)
	if call1 == nil {
		t.Fatalf("no call span under tools/call: %v", names(childrenOf(spans, spanID(top[0]))))
	}
	for _, stage := range []string{"validate", "limit", "policy", "traffic", "credential", "handler", "boundary", "audit"} {
		if childNamed(spans, spanID(call1), stage) == nil && stage != "credential" {
			t.Errorf("hop 1's call has no %s stage: %v", stage, names(childrenOf(spans, spanID(call1))))
		}
	}
	h1 := childNamed(spans, spanID(call1), "handler")
	if h1 == nil {
		t.Fatal("hop 1 has no handler span")
	}
	if h1.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("hop 1's handler span is %v, want a client span", h1.Kind)
	}
	// The upstream was sent the handler's span, in _meta and the header.
	want := "00-" + traceID + "-" + spanID(h1) + "-01"
	up.mu.Lock()
	metas, headers := append([]string(nil), up.metas...), append([]string(nil), up.headers...)
	up.mu.Unlock()
	if len(metas) != 2 || metas[0] != want {
		t.Errorf("the upstream's calls had _meta traceparents %v, want %s first", metas, want)
	}
	if len(headers) != 2 || headers[0] != want {
		t.Errorf("the upstream's calls had traceparent headers %v, want %s first", headers, want)
	}

	// Hop 2: the server's requests (with the header it was given) are the
	// handler's children: the door's span of each, and under the one
	// carrying the call, its authentication and the call with its stages.
	var call2, door2 *tracepb.Span
	for _, d := range childrenOf(spans, spanID(h1)) {
		if d.Kind != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("hop 1's handler has a %v child %s", d.Kind, d.Name)
		}
		if c := childNamed(spans, spanID(d), tool); c != nil {
			call2, door2 = c, d
		}
	}
	if call2 == nil {
		t.Fatalf("no second call under hop 1's handler: %v", names(childrenOf(spans, spanID(h1))))
	}
	if childNamed(spans, spanID(door2), "authenticate") == nil {
		t.Errorf("hop 2's door has no authenticate span: %v", names(childrenOf(spans, spanID(door2))))
	}
	if h2 := childNamed(spans, spanID(call2), "handler"); h2 == nil {
		t.Errorf("hop 2's call has no handler span: %v", names(childrenOf(spans, spanID(call2))))
	} else if metas[1] != "00-"+traceID+"-"+spanID(h2)+"-01" {
		t.Errorf("the second upstream call had _meta traceparent %s, want hop 2's handler %s", metas[1], spanID(h2))
	}
	// A malformed traceparent, in the header and in _meta, is ignored:
	// the call is answered, in a trace of its own, which the upstream is
	// sent.
	if text, err := callTraced(ctx, base, agent, "00-not-a-trace", mcp.Meta{"traceparent": "00-zz-0-01"}); err != nil || !strings.Contains(text, "bounced") {
		t.Fatalf("with a malformed traceparent: %q, %v", text, err)
	}
	up.mu.Lock()
	third := up.metas[len(up.metas)-1]
	up.mu.Unlock()
	if len(third) != 55 || strings.Contains(third, traceID) || strings.Contains(third, "zz") {
		t.Errorf("after a malformed traceparent the upstream was sent %q, want a trace of the call's own", third)
	}
	// No span of the trace is left without its parent in the trace,
	// but the one under the client's.
	ids := map[string]bool{client: true}
	for _, s := range spans {
		ids[spanID(s)] = true
	}
	for _, s := range spans {
		if !ids[parentID(s)] {
			t.Errorf("span %s has parent %s, not in the trace", s.Name, parentID(s))
		}
	}
}

func names(spans []*tracepb.Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

// doREST sends a REST request with key and, when set, a traceparent
// header, and answers the status and body.
func doREST(t *testing.T, method, url, key, traceparent, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if traceparent != "" {
		req.Header.Set("Traceparent", traceparent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// The REST door takes a caller's traceparent header: a call's spans and
// an asynchronous call's (run later by a worker) continue the caller's
// trace; a malformed traceparent is ignored (the call is answered, in a
// trace of its own); a refusal is an event carrying its code on the stage
// that refused and on the call's span.
func TestRESTTraceContext(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	base, agent, _ := tracedServer(t, rc.url)
	const (
		syncTrace, asyncTrace, refusedTrace = "11111111111111111111111111111111", "22222222222222222222222222222222", "33333333333333333333333333333333"
		caller                              = "00f067aa0ba902b7"
	)
	invoke := base + "/v1/tools/demo.search_tickets/invoke"

	if status, raw := doREST(t, "POST", invoke, agent, "00-"+syncTrace+"-"+caller+"-01", `{"arguments":{"query":"cracked"},"run_id":"run-sync"}`); status != http.StatusOK {
		t.Fatalf("sync: %d %s", status, raw)
	}
	if status, raw := doREST(t, "POST", invoke, agent, "00-zz-not-a-trace", `{"arguments":{"query":"cracked"},"run_id":"run-malformed"}`); status != http.StatusOK {
		t.Fatalf("malformed traceparent: %d %s", status, raw)
	}
	status, raw := doREST(t, "POST", invoke, agent, "00-"+asyncTrace+"-"+caller+"-01", `{"arguments":{"query":"cracked"},"run_id":"run-async","mode":"async"}`)
	var acc struct{ ID string }
	if status != http.StatusAccepted || json.Unmarshal(raw, &acc) != nil {
		t.Fatalf("async: %d %s", status, raw)
	}
	if status, raw := doREST(t, "GET", base+"/v1/invocations/"+acc.ID+"?wait=20s", agent, "", ""); status != http.StatusOK || !strings.Contains(string(raw), "succeeded") {
		t.Fatalf("async result: %d %s", status, raw)
	}
	doREST(t, "POST", invoke, agent, "00-"+refusedTrace+"-"+caller+"-01", `{"arguments":{"query":7},"run_id":"run-refused"}`)

	all := rc.await(t, "the four calls' spans", func(all []*tracepb.Span) bool {
		runs := map[string]bool{}
		for _, s := range all {
			if strings.HasPrefix(s.Name, "tool ") {
				runs[spanAttr(s, "toolplane.run")] = true
			}
		}
		return runs["run-sync"] && runs["run-malformed"] && runs["run-async"] && runs["run-refused"]
	})
	tool := map[string]*tracepb.Span{}
	for _, s := range all {
		if strings.HasPrefix(s.Name, "tool ") {
			tool[spanAttr(s, "toolplane.run")] = s
		}
	}
	// The sync call: the caller's span → the door's (renamed to its
	// route) → the call.
	spans := rc.trace(syncTrace)
	door := childrenOf(spans, caller)
	if len(door) != 1 || door[0].Kind != tracepb.Span_SPAN_KIND_SERVER || !strings.Contains(door[0].Name, "/v1/tools/") {
		t.Fatalf("the sync call's door spans: %v", names(door))
	}
	if hex.EncodeToString(tool["run-sync"].TraceId) != syncTrace || parentID(tool["run-sync"]) != spanID(door[0]) {
		t.Errorf("the sync call's span is not the door's child")
	}
	if childNamed(spans, spanID(door[0]), "authenticate") == nil {
		t.Errorf("the door has no authenticate span: %v", names(childrenOf(spans, spanID(door[0]))))
	}
	// Malformed: a trace of its own, whose door span is its root.
	m := tool["run-malformed"]
	var mdoor *tracepb.Span
	for _, s := range all {
		if spanID(s) == parentID(m) {
			mdoor = s
		}
	}
	if mdoor == nil || len(mdoor.ParentSpanId) != 0 {
		t.Errorf("the malformed traceparent's call is not under a root door span: %v", mdoor)
	}
	// Async: the worker's call continues the submitting request's trace,
	// under its door span.
	a := tool["run-async"]
	if got := hex.EncodeToString(a.TraceId); got != asyncTrace {
		t.Errorf("the asynchronous call ran in trace %s, want %s", got, asyncTrace)
	} else if adoor := childrenOf(rc.trace(asyncTrace), caller); len(adoor) != 1 || parentID(a) != spanID(adoor[0]) {
		t.Errorf("the asynchronous call's parent %s is not the submitting request's door span %v", parentID(a), names(adoor))
	}
	// The refusal: the validate stage and the call carry invalid_input.
	r := tool["run-refused"]
	if eventCode(r) != string(toolplane.CodeInvalidInput) || r.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("the refused call's span: event %q status %v", eventCode(r), r.Status)
	}
	if v := childNamed(rc.trace(refusedTrace), spanID(r), "validate"); v == nil || eventCode(v) != string(toolplane.CodeInvalidInput) {
		t.Errorf("the validate stage carries no invalid_input refusal: %v", v)
	}
}
