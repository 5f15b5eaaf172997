package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/async"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/demo"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// taskRig is an MCP door whose calls may run asynchronously: the demo
// helpdesk's tools and demo.slow_report, a tool that runs async and lasts
// until its context ends or the test releases it. Accepted calls run on
// goroutines, through the one service, as a worker runs them.
type taskRig struct {
	url     string
	iv      *invoke.Invoker
	store   toolplane.Store
	reg     *registry.Registry
	release chan struct{}
	// started is told when demo.slow_report starts; stopped when its
	// context ended before it was released.
	started, stopped chan struct{}
	// keys: the agent's, another agent's of the organization, and an
	// agent's of another organization.
	key, other, stranger string
}

type slowIn struct {
	Topic string `json:"topic"`
}

type slowOut struct {
	Report string `json:"report"`
}

// runner is the rig's scheduler: each accepted call runs on a goroutine,
// again after each wait the service asks for (shortened, for the test).
type runner struct{ svc *async.Service }

func (r *runner) Accepted(_ context.Context, c *toolplane.AsyncCall) error {
	go func() {
		for {
			err := r.svc.Run(context.Background(), c.OrganizationID, c.ID, false)
			var again *async.Again
			if !errors.As(err, &again) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return nil
}

func (*runner) Ended(context.Context, *toolplane.AsyncCall) error { return nil }

func newTaskRig(t *testing.T) *taskRig {
	t.Helper()
	ctx := context.Background()
	rig := &taskRig{release: make(chan struct{}), started: make(chan struct{}, 4), stopped: make(chan struct{}, 4)}
	defs, bs, err := demo.New().Catalogue()
	if err != nil {
		t.Fatal(err)
	}
	slow, err := handler.Define[slowIn, slowOut](toolplane.Definition{Name: "demo.slow_report", Version: "1.0.0", Kind: toolplane.KindInternal,
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "demo.slow_report"}}, Effect: toolplane.EffectRead,
		Description: "Write a report on a topic. It takes a while, so it runs asynchronously.", Mode: toolplane.ModeAsync,
		Annotations: toolplane.Annotations{LongRunning: true}, Timeout: toolplane.Duration(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := handler.Bind("demo.slow_report", func(ctx context.Context, _ handler.Call, in slowIn) (slowOut, error) {
		rig.started <- struct{}{}
		select {
		case <-rig.release:
			return slowOut{Report: "all about " + in.Topic}, nil
		case <-ctx.Done():
			rig.stopped <- struct{}{}
			return slowOut{}, ctx.Err()
		}
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := handler.NewRegistry()
	if err := hs.Register(append(bs, b)...); err != nil {
		t.Fatal(err)
	}
	reg, _, err := registry.Build(append(defs, slow), registry.Options{Bindings: demotest.Bindings{Registry: hs}})
	if err != nil {
		t.Fatal(err)
	}
	store := sqlitetest.New(t)
	quiet := slog.New(slog.DiscardHandler)
	approvals := approval.New(approval.Config{Store: store, TTL: time.Hour})
	rig.iv, err = invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Approvals: approvals, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	mint := func(org, subject string) string {
		id, secret, _ := apikey.New(toolplane.CredentialAgent)
		if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: org, Kind: toolplane.CredentialAgent, Subject: subject,
			Tools: []string{"demo.*"}, Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		return apikey.Key(id, secret)
	}
	rig.key, rig.other, rig.stranger = mint("org-1", "agent-1"), mint("org-1", "agent-2"), mint("org-2", "agent-1")
	rig.store, rig.reg = store, reg
	t.Cleanup(func() {
		select {
		case <-rig.release:
		default:
			close(rig.release)
		}
	})
	rig.url = rig.node(t)
	return rig
}

// node answers the URL of one more node of the rig's deployment: its own
// asynchronous service and MCP door over the same store, where sessions
// are kept.
func (rig *taskRig) node(t *testing.T) string {
	t.Helper()
	svc, err := async.New(async.Config{Store: rig.store, Invoker: rig.iv, Poll: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	svc.UseScheduler(&runner{svc})
	d := mcpserver.NewTestDoor(rig.iv, rig.reg, rig.store)
	d.Async = svc
	// The search a key in meta-tool mode finds tools with.
	d.Discovery = discovery.New(discovery.Options{})
	t.Cleanup(d.Discovery.Follow(rig.reg))
	srv := httptest.NewServer((&mcpserver.Server{Door: d, Version: "test", PublicURL: "https://toolplane.example", TaskRetention: 24 * time.Hour,
		Sessions: rig.store}).Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// recorder keeps the bodies of the answers the client read.
type recorder struct {
	mu     sync.Mutex
	bodies []string
}

func (rec *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || resp.Header.Get("Content-Type") != "application/json" {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	rec.mu.Lock()
	rec.bodies = append(rec.bodies, string(body))
	rec.mu.Unlock()
	return resp, err
}

func (rec *recorder) find(part string) string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, b := range rec.bodies {
		if strings.Contains(b, part) {
			return b
		}
	}
	return ""
}

// The task methods as the go-sdk client sends them: custom methods, since
// the SDK does not know them.
type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type taskOut struct {
	mcp.ResultBase
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

type listIn struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

type listOut struct {
	mcp.ResultBase
	Tasks      []taskOut `json:"tasks"`
	NextCursor string    `json:"nextCursor"`
}

// list answers the ids of every task tasks/list pages through.
func (c *taskClient) list(t *testing.T) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for range 100 {
		page, err := mcp.CallCustomMethod[*listIn, *listOut](t.Context(), c.cs, "tasks/list", &listIn{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range page.Tasks {
			ids = append(ids, tk.TaskID)
		}
		if cursor = page.NextCursor; cursor == "" {
			return ids
		}
	}
	t.Fatal("tasks/list never ended")
	return nil
}

// taskClient is a go-sdk client session of one key, able to send the task
// methods, with the answers it read recorded.
type taskClient struct {
	cs   *mcp.ClientSession
	rec  *recorder
	url  string
	key  string
	next int
}

func (rig *taskRig) connect(t *testing.T, key string, opts *mcp.ClientOptions) *taskClient {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "tasks", Version: "1"}, opts)
	for _, m := range []string{"tasks/get", "tasks/cancel"} {
		if err := mcp.AddSendingCustomMethod[*taskIDParams, *taskOut](client, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := mcp.AddSendingCustomMethod[*taskIDParams, *mcp.CallToolResult](client, "tasks/result"); err != nil {
		t.Fatal(err)
	}
	if err := mcp.AddSendingCustomMethod[*listIn, *listOut](client, "tasks/list"); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: rig.url, HTTPClient: &http.Client{Transport: bearer{key, rec}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	return &taskClient{cs: cs, rec: rec, url: rig.url, key: key, next: 100}
}

// callAsTask makes a task-augmented tools/call on the client's session:
// the go-sdk client has no member for params.task, so it is sent as the
// client would, on its session.
func (c *taskClient) callAsTask(t *testing.T, tool, args string) map[string]json.RawMessage {
	t.Helper()
	c.next++
	body := `{"jsonrpc":"2.0","id":` + itoa(c.next) + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,"task":{"ttl":60000}}}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.cs.ID())
	req.Header.Set("Mcp-Protocol-Version", c.cs.InitializeResult().ProtocolVersion)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var msg struct {
		Result map[string]json.RawMessage `json:"result"`
		Error  any                        `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil || msg.Error != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/call of %s as a task: %d %s", tool, resp.StatusCode, raw)
	}
	return msg.Result
}

// boundaryToken matches the boundary of an untrusted-data fence.
var boundaryToken = regexp.MustCompile(`boundary=\\+"[A-Z0-9]+\\+"`)

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// created answers the task a CreateTaskResult carries.
func created(t *testing.T, res map[string]json.RawMessage) taskOut {
	t.Helper()
	var tk taskOut
	if err := json.Unmarshal(res["task"], &tk); err != nil || !strings.HasPrefix(tk.TaskID, "inv_") {
		t.Fatalf("not a CreateTaskResult: %s", mustJSON(res))
	}
	return tk
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func (c *taskClient) get(t *testing.T, id string) (*taskOut, error) {
	return mcp.CallCustomMethod[*taskIDParams, *taskOut](t.Context(), c.cs, "tasks/get", &taskIDParams{TaskID: id})
}

func (c *taskClient) cancel(t *testing.T, id string) (*taskOut, error) {
	return mcp.CallCustomMethod[*taskIDParams, *taskOut](t.Context(), c.cs, "tasks/cancel", &taskIDParams{TaskID: id})
}

func (c *taskClient) result(t *testing.T, id string) (*mcp.CallToolResult, error) {
	return mcp.CallCustomMethod[*taskIDParams, *mcp.CallToolResult](t.Context(), c.cs, "tasks/result", &taskIDParams{TaskID: id})
}

// invalidParams reports whether err is the JSON-RPC error -32602.
func invalidParams(err error) bool {
	var we *jsonrpc.Error
	return errors.As(err, &we) && we.Code == jsonrpc.CodeInvalidParams
}

// A client of the 2025-11-25 protocol is told the door takes tasks, and
// each tool that it may run as one; a call made as a task answers its task
// at once, and the task's status, result and cancellation follow the
// asynchronous call it is: its result is what the call made in its request
// answers, a call waiting for approval needs input (naming the approval),
// a cancel of a running call stops its handler, a cancel of an ended task
// is refused, and nobody else (another agent, another organization) finds
// the task.
func TestTasksThroughTheGoSDKClient(t *testing.T) {
	t.Parallel()
	rig := newTaskRig(t)
	c := rig.connect(t, rig.key, nil)
	if v := c.cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %s; the test needs 2025-11-25", v)
	}
	if init := c.rec.find(`"protocolVersion"`); !strings.Contains(init, `"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`) {
		t.Fatalf("initialize declares no tasks: %s", init)
	}
	var listing struct {
		Result struct {
			Tools []struct {
				Name      string         `json:"name"`
				Execution map[string]any `json:"execution"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(c.rec.find(`"tools":[`)), &listing); err != nil || len(listing.Result.Tools) < 5 {
		t.Fatalf("tools/list: %v", err)
	}
	for _, tool := range listing.Result.Tools {
		if tool.Execution["taskSupport"] != "optional" {
			t.Errorf("%s: execution %v, want taskSupport optional", tool.Name, tool.Execution)
		}
	}

	// A read as a task answers what the same call answers in its request.
	search := `{"query":"cracked"}`
	tk := created(t, c.callAsTask(t, "demo_search_tickets", search))
	if tk.Status != "working" || tk.TTL != nil || tk.PollInterval != 1000 || tk.CreatedAt == "" || tk.LastUpdatedAt == "" {
		t.Fatalf("the created task: %+v", tk)
	}
	got, err := c.result(t, tk.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if rel, _ := got.Meta["io.modelcontextprotocol/related-task"].(map[string]any); rel["taskId"] != tk.TaskID {
		t.Errorf("the result names task %v, want %s", got.Meta, tk.TaskID)
	}
	direct, err := c.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "demo_search_tickets", Arguments: json.RawMessage(search)})
	if err != nil {
		t.Fatal(err)
	}
	// Equal but for the random boundary each rendering of outside text
	// draws.
	same := func(v any) string { return boundaryToken.ReplaceAllString(mustJSON(v), "B") }
	if got.IsError || same(got.Content) != same(direct.Content) || same(got.StructuredContent) != same(direct.StructuredContent) ||
		got.Meta["toolplane/untrusted"] != direct.Meta["toolplane/untrusted"] {
		t.Fatalf("the task's result\n%s\nis not the call's\n%s", mustJSON(got), mustJSON(direct))
	}
	done, err := c.get(t, tk.TaskID)
	if err != nil || done.Status != "completed" || done.TTL == nil || *done.TTL < (24*time.Hour).Milliseconds() || done.TaskID != tk.TaskID {
		t.Fatalf("tasks/get of the ended task: %+v, %v", done, err)
	}
	if _, err := c.cancel(t, tk.TaskID); !invalidParams(err) {
		t.Fatalf("cancel of an ended task: %v, want -32602", err)
	}

	// Nobody else finds it.
	for name, key := range map[string]string{"another agent": rig.other, "another organization": rig.stranger} {
		o := rig.connect(t, key, nil)
		if _, err := o.get(t, tk.TaskID); !invalidParams(err) {
			t.Errorf("%s reads the task: %v", name, err)
		}
		if _, err := o.result(t, tk.TaskID); !invalidParams(err) {
			t.Errorf("%s reads the task's result: %v", name, err)
		}
		if _, err := o.cancel(t, tk.TaskID); !invalidParams(err) {
			t.Errorf("%s cancels the task: %v", name, err)
		}
	}
	if _, err := c.get(t, "inv_nope"); !invalidParams(err) {
		t.Errorf("an unknown task: %v", err)
	}

	// A running call cancelled: its handler stops, the task ends cancelled.
	slow := created(t, c.callAsTask(t, "demo_slow_report", `{"topic":"tides"}`))
	<-rig.started
	if cur, err := c.get(t, slow.TaskID); err != nil || cur.Status != "working" {
		t.Fatalf("the running task: %+v, %v", cur, err)
	}
	cancelled, err := c.cancel(t, slow.TaskID)
	if err != nil || cancelled.Status != "cancelled" {
		t.Fatalf("tasks/cancel: %+v, %v", cancelled, err)
	}
	select {
	case <-rig.stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler never saw its context end")
	}
	if r, err := c.result(t, slow.TaskID); err != nil || !r.IsError {
		t.Fatalf("the cancelled task's result: %+v, %v", r, err)
	}

	// A refund waits for a person: input required, naming the approval;
	// once approved, it runs and its result is the refund.
	refund := created(t, c.callAsTask(t, "demo_refund_order", `{"order_id":"o-502","amount_cents":1250,"reason":"charged twice"}`))
	var waiting *taskOut
	for range 100 {
		if waiting, err = c.get(t, refund.TaskID); err != nil {
			t.Fatal(err)
		}
		if waiting.Status != "working" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	calls, err := rig.store.GetAsyncCall(t.Context(), "org-1", refund.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if waiting.Status != "input_required" || calls.ApprovalID == "" || !strings.Contains(waiting.StatusMessage, calls.ApprovalID) {
		t.Fatalf("the refund's task: %+v (approval %q)", waiting, calls.ApprovalID)
	}
	if _, err := rig.iv.Resolve(t.Context(), calls.ApprovalID, approval.Decision{Approve: true}, &toolplane.Credential{OrganizationID: "org-1",
		Kind: toolplane.CredentialPerson, Subject: "ada", Roles: []string{toolplane.RoleApprover}}); err != nil {
		t.Fatal(err)
	}
	paid, err := c.result(t, refund.TaskID)
	if err != nil || paid.IsError || !strings.Contains(mustJSON(paid.Content), "remaining_cents") {
		t.Fatalf("the approved refund's result: %s, %v", mustJSON(paid), err)
	}

	// tasks/list answers the agent's tasks, oldest first; the others'
	// lists hold none of them.
	if got, want := c.list(t), []string{tk.TaskID, slow.TaskID, refund.TaskID}; mustJSON(got) != mustJSON(want) {
		t.Fatalf("tasks/list = %v, want %v", got, want)
	}
	for _, key := range []string{rig.other, rig.stranger} {
		if got := rig.connect(t, key, nil).list(t); len(got) != 0 {
			t.Fatalf("another caller lists %v", got)
		}
	}
}

// tasks/list pages: a cursor leads to the next page and no task is
// listed twice or missed; a cursor the server never answered is refused.
func TestTasksListPages(t *testing.T) {
	t.Parallel()
	rig := newTaskRig(t)
	c := rig.connect(t, rig.key, nil)
	var want []string
	for range 53 {
		want = append(want, created(t, c.callAsTask(t, "demo_search_tickets", `{"query":"cracked"}`)).TaskID)
	}
	if got := c.list(t); mustJSON(got) != mustJSON(want) {
		t.Fatalf("listed %d tasks %v, want %d", len(got), got, len(want))
	}
	if _, err := mcp.CallCustomMethod[*listIn, *listOut](t.Context(), c.cs, "tasks/list", &listIn{Cursor: "nonsense"}); !invalidParams(err) {
		t.Fatalf("a made-up cursor: %v", err)
	}
}

// A session of a protocol before tasks is told of none, and a call that
// asks for a task anyway runs as a plain call (the spec's rule for a
// receiver that did not declare the capability).
func TestTasksAreNotOfferedBefore20251125(t *testing.T) {
	t.Parallel()
	rig := newTaskRig(t)
	post := func(sid, body string) (string, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, rig.url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+rig.key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Header.Get("Mcp-Session-Id"), string(b)
	}
	sid, init := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if sid == "" || strings.Contains(init, `"tasks"`) {
		t.Fatalf("initialize at 2025-06-18: %s", init)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if _, list := post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); !strings.Contains(list, "demo_search_tickets") || strings.Contains(list, "taskSupport") {
		t.Fatalf("tools/list at 2025-06-18: %s", list)
	}
	_, answer := post(sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"demo_search_tickets","arguments":{"query":"cracked"},"task":{}}}`)
	if !strings.Contains(answer, `"content"`) || strings.Contains(answer, `"taskId"`) {
		t.Fatalf("a task asked for at 2025-06-18: %s", answer)
	}
	if _, got := post(sid, `{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"inv_x"}}`); !strings.Contains(got, "-32601") {
		t.Fatalf("tasks/get at 2025-06-18: %s", got)
	}
}

// A long asynchronous call made in its request (no task) keeps the client
// told where it stands: a client that gave a progress token hears a
// progress notification naming the invocation while the call runs, then
// the call's result.
func TestLongAsyncCallSendsProgress(t *testing.T) {
	t.Parallel()
	rig := newTaskRig(t)
	heard := make(chan *mcp.ProgressNotificationParams, 8)
	c := rig.connect(t, rig.key, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		heard <- req.Params
	}})
	type answer struct {
		r   *mcp.CallToolResult
		err error
	}
	out := make(chan answer, 1)
	go func() {
		r, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "demo_slow_report", Arguments: map[string]any{"topic": "tides"},
			Meta: mcp.Meta{"progressToken": "report-1"}})
		out <- answer{r, err}
	}()
	<-rig.started
	select {
	case p := <-heard:
		if p.ProgressToken != "report-1" || !strings.Contains(p.Message, "inv_") || p.Progress < 1 {
			t.Fatalf("progress: %+v", p)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no progress notification while the call ran")
	}
	close(rig.release)
	select {
	case a := <-out:
		if a.err != nil || a.r.IsError || !strings.Contains(mustJSON(a.r.Content), "all about tides") {
			t.Fatalf("the call's answer: %s, %v", mustJSON(a.r), a.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the call never answered")
	}
}

// tsTaskAnswer is what ts_task.cjs printed.
type tsTaskAnswer struct {
	IsTask     bool           `json:"isTask"`
	TaskID     string         `json:"taskId"`
	Created    string         `json:"created"`
	Statuses   []string       `json:"statuses"`
	IsError    bool           `json:"isError"`
	Text       string         `json:"text"`
	Meta       map[string]any `json:"meta"`
	Structured any            `json:"structured"`
	Error      string         `json:"error"`
	Cancelled  string         `json:"cancelled"`
	After      string         `json:"after"`
	Listed     []string       `json:"listed"`
}

func (c nodeClients) tsTask(t *testing.T, url, key, tool, args, mode string) tsTaskAnswer {
	t.Helper()
	script, _ := filepath.Abs("testdata/ts_task.cjs")
	cmd := exec.CommandContext(t.Context(), c.node, script, url, key, tool, args, mode)
	cmd.Env = append(os.Environ(), "NODE_PATH="+c.sdk)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the TypeScript client failed on %s: %v\n%s", tool, err, stderr.String())
	}
	var a tsTaskAnswer
	if err := json.Unmarshal(out, &a); err != nil {
		t.Fatalf("the TypeScript client printed %q: %v", out, err)
	}
	return a
}

// The TypeScript SDK's tasks API drives the door's tasks: it sees from
// the capability and the tool listing that a tool may run as a task, calls
// it as one, polls the task to its end and reads its result (validated
// against the tool's output schema); a call waiting for a person is
// answered once approved; a task it cancels is cancelled; and it lists
// the tasks it made.
func TestTasksThroughTheTypeScriptSDK(t *testing.T) {
	t.Parallel()
	clients := findNodeClients(t)
	rig := newTaskRig(t)

	got := clients.tsTask(t, rig.url, rig.key, "demo_search_tickets", `{"query":"cracked"}`, "stream")
	if !got.IsTask || !strings.HasPrefix(got.TaskID, "inv_") || got.Created != "working" || got.Error != "" || got.IsError ||
		!strings.Contains(got.Text, "t-1001") || len(got.Statuses) == 0 || got.Statuses[len(got.Statuses)-1] != "completed" {
		t.Fatalf("a read as a task: %+v", got)
	}
	if rel, _ := got.Meta["io.modelcontextprotocol/related-task"].(map[string]any); rel["taskId"] != got.TaskID {
		t.Errorf("the result names task %v, want %s", got.Meta, got.TaskID)
	}

	// A refund: the client polls (or, told input is required, waits in
	// tasks/result) until a person approves, and reads the refund.
	answered := make(chan tsTaskAnswer, 1)
	go func() {
		answered <- clients.tsTask(t, rig.url, rig.key, "demo_refund_order", `{"order_id":"o-502","amount_cents":1250,"reason":"charged twice"}`, "stream")
	}()
	var approvalID string
	for range 200 {
		list, _, err := rig.store.ListApprovals(t.Context(), "org-1", toolplane.ApprovalPending, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) > 0 {
			approvalID = list[0].ID
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if approvalID == "" {
		t.Fatal("the refund never waited for an approval")
	}
	if _, err := rig.iv.Resolve(t.Context(), approvalID, approval.Decision{Approve: true}, &toolplane.Credential{OrganizationID: "org-1",
		Kind: toolplane.CredentialPerson, Subject: "ada", Roles: []string{toolplane.RoleApprover}}); err != nil {
		t.Fatal(err)
	}
	select {
	case paid := <-answered:
		if paid.Error != "" || paid.IsError || paid.Structured == nil || !strings.Contains(paid.Text, "remaining_cents") {
			t.Fatalf("the approved refund: %+v", paid)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the refund's task never answered")
	}

	cancelled := clients.tsTask(t, rig.url, rig.key, "demo_slow_report", `{"topic":"tides"}`, "cancel")
	if cancelled.Cancelled != "cancelled" || cancelled.After != "cancelled" || len(cancelled.Listed) != 3 ||
		cancelled.Listed[0] != got.TaskID || cancelled.Listed[2] != cancelled.TaskID {
		t.Fatalf("a cancelled task: %+v", cancelled)
	}
}

// rpc posts one JSON-RPC request on session sid at base and answers the
// decoded answer.
func rpc(t *testing.T, base, key, sid, body string) (result map[string]any, rpcErr map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var msg struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatalf("%s answered %d %s", body, resp.StatusCode, raw)
	}
	return msg.Result, msg.Error
}

// A task is the deployment's, not the node's: the session continued on
// another node reads it, and cancels it there while it runs on the first
// (whose handler is told to stop).
func TestTaskContinuesOnAnotherNode(t *testing.T) {
	t.Parallel()
	rig := newTaskRig(t)
	c := rig.connect(t, rig.key, nil)
	slow := created(t, c.callAsTask(t, "demo_slow_report", `{"topic":"tides"}`))
	<-rig.started
	other := rig.node(t)
	sid := c.cs.ID()
	get := `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"` + slow.TaskID + `"}}`
	if res, e := rpc(t, other, rig.key, sid, get); e != nil || res["status"] != "working" || res["taskId"] != slow.TaskID {
		t.Fatalf("tasks/get on the other node: %v %v", res, e)
	}
	if res, e := rpc(t, other, rig.key, sid, `{"jsonrpc":"2.0","id":8,"method":"tasks/cancel","params":{"taskId":"`+slow.TaskID+`"}}`); e != nil || res["status"] != "cancelled" {
		t.Fatalf("tasks/cancel on the other node: %v %v", res, e)
	}
	select {
	case <-rig.stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler on the first node never saw its context end")
	}
	res, e := rpc(t, other, rig.key, sid, `{"jsonrpc":"2.0","id":9,"method":"tasks/result","params":{"taskId":"`+slow.TaskID+`"}}`)
	if meta, _ := res["_meta"].(map[string]any); e != nil || res["isError"] != true || meta["io.modelcontextprotocol/related-task"] == nil {
		t.Fatalf("tasks/result on the other node: %v %v", res, e)
	}
	// Another key presenting the session finds nothing.
	if _, e := rpc(t, other, rig.other, sid, get); e == nil {
		t.Fatal("another agent read the task through the session's id")
	}
}
