package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
)

// progressEvery is how often a client waiting for an asynchronous call is
// told it still runs, when it gave a progress token.
const progressEvery = 5 * time.Second

// awaitAsync answers a call accepted to run later (its tool runs async):
// the client's request stays open until the call ends, and a client that
// gave a progress token hears every progressEvery where the call stands.
// The call runs on whether or not the client waits: one that leaves reads
// it later by its invocation id (GET /v1/invocations/{id}), which every
// progress notification names.
func (sess *session) awaitAsync(ctx context.Context, ss *mcp.ServerSession, cred *toolplane.Credential, c *toolplane.AsyncCall, token any) (*mcp.CallToolResult, error) {
	svc := sess.s.Door.Async
	for n := 1; ; n++ {
		cur, err := svc.Wait(ctx, c.OrganizationID, c.ID, cred, progressEvery)
		if err != nil {
			sess.s.Log.ErrorContext(ctx, "asynchronous call unreadable", "call", c.ID, "err", err)
			return nil, fmt.Errorf("the platform could not read call %s", c.ID)
		}
		if cur.Status.Terminal() {
			return asyncResult(cur), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if token != nil && ss != nil {
			msg := fmt.Sprintf("%s is %s (invocation %s)", c.Tool, cur.Status, c.ID)
			if cur.ApprovalID != "" && cur.Status == toolplane.AsyncQueued {
				msg = fmt.Sprintf("%s waits for approval %s (invocation %s)", c.Tool, cur.ApprovalID, c.ID)
			}
			// A lost notification costs the client one line of progress,
			// never the call.
			_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: msg})
		}
	}
}

// asyncResult answers an ended asynchronous call as a tool result: its
// stored answer, rendered as every other result is.
func asyncResult(c *toolplane.AsyncCall) *mcp.CallToolResult {
	meta := mcp.Meta{"toolplane/invocation_id": c.ID, "toolplane/status": string(c.Status)}
	if c.Status == toolplane.AsyncCancelled {
		r := refusal(toolplane.Fail(toolplane.CodeUnavailable, "the call was cancelled before it ended; nothing more will happen for it"))
		r.Meta = meta
		return r
	}
	return &mcp.CallToolResult{IsError: c.Status != toolplane.AsyncSucceeded, Meta: meta,
		Content: []mcp.Content{&mcp.TextContent{Text: string(c.Result)}}}
}
