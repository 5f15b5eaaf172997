package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/door"
)

// The tasks utility of the 2025-11-25 protocol lets a client make a
// tools/call that answers at once with a task, and read the task later
// (tasks/get), wait for its result (tasks/result) or cancel it
// (tasks/cancel). Toolplane's asynchronous calls are exactly that, so a
// task is an asynchronous call and its id the invocation id: the same call
// reads through GET /v1/invocations/{id}, and the same rules decide who may
// read and cancel it (another organization's, or another agent's, is not
// found).
//
// The SDK knows neither the capability nor the methods, so toolplane adds
// them where they pass: the capability and each tool's task support are
// written into the initialize and tools/list answers, the methods are
// registered with the SDK as custom methods (answered by a middleware that
// sees the caller's credential), and a task-augmented tools/call (the SDK
// would drop its task member) is answered by the fast path, which reads the
// request itself.

// tasksProtocol is the first protocol version with the tasks utility.
// Later versions (the stateless protocol onwards) move it to an
// extension, which toolplane does not declare.
const tasksProtocol = "2025-11-25"

// metaRelatedTask names, in a result's _meta, the task it belongs to.
const metaRelatedTask = "io.modelcontextprotocol/related-task"

// taskPollInterval is the polling interval suggested to clients, in
// milliseconds: a wait for a result is better spent in tasks/result.
const taskPollInterval = 1000

// cancelSettle bounds how long tasks/cancel waits for a running call to
// stop before it answers.
const cancelSettle = 5 * time.Second

// The task methods.
const (
	methodTasksGet    = "tasks/get"
	methodTasksResult = "tasks/result"
	methodTasksCancel = "tasks/cancel"
	methodTasksList   = "tasks/list"
)

// taskPage is how many tasks one tasks/list answers.
const taskPage = 50

// tasksOn reports whether the session serves tasks: the deployment runs
// calls asynchronously and the session negotiated a protocol with tasks.
func (sess *session) tasksOn() bool {
	v, _ := sess.version.Load().(string)
	return sess.s.Door.Async != nil && versionHasTasks(v)
}

// versionHasTasks reports whether protocol version v has the tasks
// utility in the form toolplane serves.
func versionHasTasks(v string) bool { return v >= tasksProtocol && v < statelessProtocol }

// taskParams are the params of tasks/get, tasks/result and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// listParams are the params of tasks/list.
type listParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// listResult answers tasks/list.
type listResult struct {
	mcp.ResultBase
	Tasks      []task `json:"tasks"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// task is the protocol's Task: where a call stands.
type task struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTL is how long after its creation the task is kept, in
	// milliseconds; null while the call runs (it is kept as long).
	TTL          *int64 `json:"ttl"`
	PollInterval int64  `json:"pollInterval,omitempty"`
}

// taskResult answers tasks/get and tasks/cancel: the task itself.
type taskResult struct {
	mcp.ResultBase
	task
}

// createTaskResult answers a task-augmented tools/call.
type createTaskResult struct {
	Meta mcp.Meta `json:"_meta,omitempty"`
	Task task     `json:"task"`
}

// serveTasks registers the task methods with srv, when the deployment
// runs calls asynchronously. The handlers registered only make the SDK
// accept the methods: the middleware tasks answers them, with the
// credential of the request.
func (sess *session) serveTasks(srv *mcp.Server) {
	if sess.s.Door.Async == nil {
		return
	}
	for _, m := range []string{methodTasksGet, methodTasksResult, methodTasksCancel} {
		err := mcp.AddReceivingCustomMethod(srv, m, func(context.Context, *mcp.ServerSession, *taskParams) (*taskResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task methods are answered before this handler"}
		})
		if err != nil {
			// Only a standard method's name is refused, and these are not.
			panic(err)
		}
	}
	err := mcp.AddReceivingCustomMethod(srv, methodTasksList, func(context.Context, *mcp.ServerSession, *listParams) (*listResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task methods are answered before this handler"}
	})
	if err != nil {
		panic(err)
	}
	srv.AddReceivingMiddleware(sess.tasks)
}

// tasks is the outermost receiving middleware of a session: it declares
// the tasks capability in the initialize answer and each tool's task
// support in tools/list answers, when the session negotiated a protocol
// with tasks, and answers the task methods.
func (sess *session) tasks(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case methodTasksGet, methodTasksResult, methodTasksCancel, methodTasksList:
			return sess.taskMethod(ctx, method, req)
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.InitializeResult:
			if versionHasTasks(r.ProtocolVersion) {
				return &initializeWithTasks{r}, nil
			}
		case *mcp.ListToolsResult:
			if sess.tasksOn() {
				sess.mu.Lock()
				meta := sess.metaOn
				sess.mu.Unlock()
				return &toolsWithTasks{r, meta}, nil
			}
		}
		return res, err
	}
}

// initializeWithTasks is an initialize answer that declares the tasks
// capability: task-augmented tools/call, tasks/cancel and tasks/list.
type initializeWithTasks struct{ *mcp.InitializeResult }

// MarshalJSON writes the SDK's answer with capabilities.tasks added.
func (r *initializeWithTasks) MarshalJSON() ([]byte, error) {
	return withMember(r.InitializeResult, func(m map[string]json.RawMessage) error {
		var caps map[string]json.RawMessage
		if raw, ok := m["capabilities"]; ok {
			if err := json.Unmarshal(raw, &caps); err != nil {
				return err
			}
		}
		if caps == nil {
			caps = map[string]json.RawMessage{}
		}
		caps["tasks"] = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)
		b, err := json.Marshal(caps)
		m["capabilities"] = b
		return err
	})
}

// toolsWithTasks is a tools/list answer whose tools declare that a call
// may run as a task. Every tool may (a call may ask to run later, as on
// the REST door), and none must: a client not using tasks waits for a
// long call in its request, hearing progress.
type toolsWithTasks struct {
	*mcp.ListToolsResult
	// meta is set when the listing holds the meta-tools.
	meta bool
}

// MarshalJSON writes the SDK's answer with each tool's
// execution.taskSupport set to optional; find_tools and describe_tool,
// which answer at once, forbid it (call_tool runs the tool it names, as a
// task when asked).
func (r *toolsWithTasks) MarshalJSON() ([]byte, error) {
	return withMember(r.ListToolsResult, func(m map[string]json.RawMessage) error {
		var tools []map[string]json.RawMessage
		if err := json.Unmarshal(m["tools"], &tools); err != nil {
			return err
		}
		for _, t := range tools {
			t["execution"] = json.RawMessage(`{"taskSupport":"optional"}`)
			if r.meta && (isString(t["name"], discovery.FindTools) || isString(t["name"], discovery.DescribeTool)) {
				t["execution"] = json.RawMessage(`{"taskSupport":"forbidden"}`)
			}
		}
		b, err := json.Marshal(tools)
		m["tools"] = b
		return err
	})
}

// withMember marshals v, lets change edit its members, and marshals the
// result again.
func withMember(v any, change func(map[string]json.RawMessage) error) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if err := change(m); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// taskMethod answers tasks/get, tasks/result, tasks/cancel or tasks/list
// for the credential the request was admitted with. A task the caller may not
// read (another organization's, another agent's) is not found, as one
// that does not exist.
func (sess *session) taskMethod(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
	if !sess.tasksOn() {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%s is not available: the session's protocol version has no tasks", method)}
	}
	cred := sess.cred
	if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
		if c, ok := extra.TokenInfo.Extra["credential"].(*toolplane.Credential); ok {
			cred = c
		}
	}
	if method == methodTasksList {
		lp, _ := req.GetParams().(*listParams)
		return sess.listTasks(ctx, cred, lp)
	}
	p, _ := req.GetParams().(*taskParams)
	if p == nil || p.TaskID == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params.taskId is required"}
	}
	svc := sess.s.Door.Async
	org := cred.OrganizationID
	switch method {
	case methodTasksGet:
		c, err := svc.Get(ctx, org, p.TaskID, cred)
		if err != nil {
			return nil, sess.taskError(ctx, p.TaskID, err)
		}
		return &taskResult{task: sess.taskOf(c)}, nil
	case methodTasksResult:
		// The spec has tasks/result wait for the end, however long; each
		// wait is bounded by the service, and the next begins at once.
		for {
			c, err := svc.Wait(ctx, org, p.TaskID, cred, time.Hour)
			if err != nil {
				return nil, sess.taskError(ctx, p.TaskID, err)
			}
			if c.Status.Terminal() {
				return sess.taskPayload(cred, c), nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	default:
		return sess.cancelTask(ctx, cred, p.TaskID)
	}
}

// cancelTask answers tasks/cancel: the call is cancelled (a queued one at
// once, a running one told to stop), and the answer waits a little for it
// to end. A call that had ended, or that ended before the cancel took
// effect, is refused as the spec refuses a cancel of a terminal task.
func (sess *session) cancelTask(ctx context.Context, cred *toolplane.Credential, id string) (mcp.Result, error) {
	svc := sess.s.Door.Async
	org := cred.OrganizationID
	c, err := svc.Get(ctx, org, id, cred)
	if err != nil {
		return nil, sess.taskError(ctx, id, err)
	}
	if c.Status.Terminal() {
		return nil, terminalTask(c)
	}
	if c, err = svc.Cancel(ctx, org, id, cred); err != nil {
		return nil, sess.taskError(ctx, id, err)
	}
	if !c.Status.Terminal() {
		if c, err = svc.Wait(ctx, org, id, cred, cancelSettle); err != nil {
			return nil, sess.taskError(ctx, id, err)
		}
	}
	switch {
	case c.Status == toolplane.AsyncCancelled:
		return &taskResult{task: sess.taskOf(c)}, nil
	case c.Status.Terminal():
		return nil, terminalTask(c)
	}
	// Still running: its handler was told to stop and has not yet. The
	// task says so; it ends cancelled unless the handler finishes first.
	t := sess.taskOf(c)
	t.StatusMessage = "cancellation requested: the tool's handler was told to stop and has not stopped yet; the task ends cancelled unless the call finishes first"
	return &taskResult{task: t}, nil
}

// listTasks answers tasks/list: the tasks cred may read (see
// async.Service.List), oldest first, a page at a time. The cursor is the
// last task id of the page before.
func (sess *session) listTasks(ctx context.Context, cred *toolplane.Credential, p *listParams) (mcp.Result, error) {
	after := ""
	if p != nil {
		after = p.Cursor
	}
	if after != "" && (!strings.HasPrefix(after, "inv_") || len(after) > toolplane.MaxNameLen) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params.cursor is not a cursor this server answered"}
	}
	calls, err := sess.s.Door.Async.List(ctx, cred.OrganizationID, cred, after, taskPage+1)
	if err != nil {
		return nil, sess.taskError(ctx, "list", err)
	}
	out := &listResult{Tasks: []task{}}
	for i := range calls[:min(len(calls), taskPage)] {
		out.Tasks = append(out.Tasks, sess.taskOf(&calls[i]))
	}
	if len(calls) > taskPage {
		out.NextCursor = calls[taskPage-1].ID
	}
	return out, nil
}

// terminalTask refuses a cancel of an ended task.
func terminalTask(c *toolplane.AsyncCall) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %s already ended (%s); it cannot be cancelled", c.ID, taskStatus(c))}
}

// taskError answers err, from reading or cancelling task id, as a
// JSON-RPC error.
func (sess *session) taskError(ctx context.Context, id string, err error) error {
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no task %q", id)}
	case errors.Is(err, toolplane.ErrForbidden):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	case ctx.Err() != nil:
		return ctx.Err()
	}
	sess.s.Log.ErrorContext(ctx, "task unreadable", "task", id, "err", err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the platform could not read task %s; try again shortly", id)}
}

// taskStatus maps where an asynchronous call stands to the task status:
// a call waiting for a person's approval needs input; an uncertain call
// failed (its statusMessage says why).
func taskStatus(c *toolplane.AsyncCall) string {
	switch c.Status {
	case toolplane.AsyncQueued:
		if c.ApprovalID != "" {
			return "input_required"
		}
		return "working"
	case toolplane.AsyncRunning:
		return "working"
	case toolplane.AsyncSucceeded:
		return "completed"
	case toolplane.AsyncCancelled:
		return "cancelled"
	}
	return "failed"
}

// taskOf answers the task of call c.
func (sess *session) taskOf(c *toolplane.AsyncCall) task {
	t := task{TaskID: c.ID, Status: taskStatus(c), CreatedAt: c.CreatedAt.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: c.UpdatedAt.UTC().Format(time.RFC3339Nano), PollInterval: taskPollInterval}
	if keep := sess.s.TaskRetention; keep > 0 && !c.EndedAt.IsZero() {
		ttl := c.EndedAt.Add(keep).Sub(c.CreatedAt).Milliseconds()
		t.TTL = &ttl
	}
	switch t.Status {
	case "input_required":
		t.StatusMessage = fmt.Sprintf("%s waits for approval %s: a person decides it (GET /v1/approvals/%s); call tasks/result to wait for the outcome", c.Tool, c.ApprovalID, c.ApprovalID)
	case "working":
		t.StatusMessage = fmt.Sprintf("%s is %s", c.Tool, c.Status)
	case "completed":
		t.StatusMessage = fmt.Sprintf("%s succeeded; tasks/result answers its result", c.Tool)
	case "cancelled":
		t.StatusMessage = "the call was cancelled before it ended; nothing more will happen for it"
	case "failed":
		t.StatusMessage = fmt.Sprintf("%s failed (%s); tasks/result answers why", c.Tool, c.Code)
		if c.Status == toolplane.AsyncUncertain {
			t.StatusMessage = fmt.Sprintf("%s is uncertain: its effect may or may not have happened, and the call is held for reconciliation; do not retry it blindly", c.Tool)
		}
	}
	return t
}

// taskPayload answers an ended task's result: the tools/call result a
// synchronous call would have answered, labelled with its task.
func (sess *session) taskPayload(cred *toolplane.Credential, c *toolplane.AsyncCall) *mcp.CallToolResult {
	var out *mcp.CallToolResult
	var res toolplane.Result
	dec := json.NewDecoder(bytes.NewReader(c.Result))
	dec.UseNumber()
	switch {
	case c.Status == toolplane.AsyncCancelled:
		out = refusal(toolplane.Fail(toolplane.CodeUnavailable, "the call was cancelled before it ended; nothing more will happen for it"))
	case dec.Decode(&res) != nil:
		// Not an envelope (never so when stored by the service): its text
		// as it is.
		out = &mcp.CallToolResult{IsError: c.Status != toolplane.AsyncSucceeded, Content: []mcp.Content{&mcp.TextContent{Text: string(c.Result)}}}
	default:
		out = sess.render(cred, c.Tool, res)
	}
	if out.Content == nil {
		out.Content = []mcp.Content{}
	}
	if out.Meta == nil {
		out.Meta = mcp.Meta{}
	}
	out.Meta[metaRelatedTask] = map[string]any{"taskId": c.ID}
	return out
}

// answerTask answers a task-augmented tools/call c on the fast path: the
// call is accepted to run later and answered at once with its task; a call
// refused now (denied, invalid, unknown tool) is answered as a synchronous
// call is, since no task was made for it.
func (sess *session) answerTask(w http.ResponseWriter, r *http.Request, c toolCall) {
	ctx := r.Context()
	ss := sess.ss.Load()
	cred := credentialOf(r)
	sess.follow(cred)
	if cred == nil {
		cred = sess.cred
	}
	l, meta, known := sess.lookup(c.name)
	switch {
	case meta == discovery.CallTool:
		// The task is the call of the tool named, as if called directly.
		platform, args, refused, err := sess.callTarget(ctx, cred, c.arguments)
		if err != nil {
			writeRPC(w, c.id, nil, &rpcError{Code: 0, Message: err.Error()})
			return
		}
		if refused != nil {
			writeRPC(w, c.id, refused, nil)
			return
		}
		l.platform, c.arguments = platform, args
	case meta != "":
		// Searching and describing answer at once: no task is made (their
		// listing says a task is forbidden).
		res, err := sess.callMeta(ctx, ss, cred, meta, c.arguments, c.meta)
		if err != nil {
			writeRPC(w, c.id, nil, &rpcError{Code: 0, Message: err.Error()})
			return
		}
		writeRPC(w, c.id, res, nil)
		return
	case !known:
		writeRPC(w, c.id, sess.unavailable(c.name), nil)
		return
	}
	call, refused := sess.doorCall(ss, l.platform, c.arguments, c.meta)
	if refused != nil {
		writeRPC(w, c.id, refused, nil)
		return
	}
	call.Async = true
	// The task's call, run later, continues the trace its _meta names
	// (see invokeTool).
	ctx, sp := sess.s.Door.TraceMeta(ctx, c.meta, l.platform)
	defer sp.End()
	a := sess.s.Door.Call(ctx, door.Caller{Credential: cred, At: time.Now()}, call)
	if a.Kind == door.Accepted {
		t := sess.taskOf(a.Async)
		writeRPC(w, c.id, createTaskResult{Task: t, Meta: mcp.Meta{
			"io.modelcontextprotocol/model-immediate-response": fmt.Sprintf("%s runs as task %s; its result comes when it ends.", c.name, a.Async.ID)}}, nil)
		return
	}
	res, err := sess.answer(ctx, ss, cred, l.platform, a, c.meta)
	if err != nil {
		writeRPC(w, c.id, nil, &rpcError{Code: 0, Message: err.Error()})
		return
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	writeRPC(w, c.id, res, nil)
}
