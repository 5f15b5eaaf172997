package mcpserver

import (
	"context"
	"encoding/json"
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
// gave a progress token hears every progressEvery where the call stands,
// and, as the call streams them, each of its chunks (see chunkProgress).
// The call runs on whether or not the client waits: one that leaves reads
// it later by its invocation id (GET /v1/invocations/{id}, or its
// /events), which every progress notification names.
func (sess *session) awaitAsync(ctx context.Context, ss *mcp.ServerSession, cred *toolplane.Credential, c *toolplane.AsyncCall, token any) (*mcp.CallToolResult, error) {
	svc := sess.s.Door.Async
	notify := token != nil && ss != nil
	var after int64
	for n := 1; ; n++ {
		var (
			cur    *toolplane.AsyncCall
			chunks []toolplane.StreamChunk
			err    error
		)
		if notify {
			cur, chunks, err = svc.Events(ctx, c.OrganizationID, c.ID, cred, after, progressEvery)
		} else {
			cur, err = svc.Wait(ctx, c.OrganizationID, c.ID, cred, progressEvery)
		}
		if err != nil {
			sess.s.Log.ErrorContext(ctx, "asynchronous call unreadable", "call", c.ID, "err", err)
			return nil, fmt.Errorf("the platform could not read call %s", c.ID)
		}
		if len(chunks) > 0 {
			for i, ch := range chunks {
				// A lost notification costs the client one chunk of a
				// preview, never the call's answer.
				_ = ss.NotifyProgress(ctx, chunkProgress(token, float64(n+i), c, ch))
				after = ch.Seq
			}
			n += len(chunks) - 1
			continue
		}
		if cur.Status.Terminal() {
			return sess.asyncResult(cred, cur), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if notify {
			msg := fmt.Sprintf("%s is %s (invocation %s)", c.Tool, cur.Status, c.ID)
			if cur.ApprovalID != "" && cur.Status == toolplane.AsyncQueued {
				msg = fmt.Sprintf("%s waits for approval %s (invocation %s)", c.Tool, cur.ApprovalID, c.ID)
			}
			_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: msg})
		}
	}
}

// streamChunk is how a chunk reads in a progress notification: the same
// envelope the REST door's chunk event carries.
type streamChunk struct {
	Seq       int64           `json:"seq"`
	Data      json.RawMessage `json:"data,omitempty"`
	Cut       json.RawMessage `json:"cut,omitempty"`
	Truncated bool            `json:"truncated"`
	Untrusted bool            `json:"untrusted"`
}

// chunkProgress answers the progress notification of one chunk of c's
// stream: its partial content, as the result boundary left it, in the
// message (and in _meta for a client that reads it there), labelled
// untrusted when it came from outside, as a result is.
func chunkProgress(token any, progress float64, c *toolplane.AsyncCall, ch toolplane.StreamChunk) *mcp.ProgressNotificationParams {
	v := streamChunk{Seq: ch.Seq, Truncated: ch.Truncated, Untrusted: ch.Untrusted}
	if ch.Cut {
		v.Cut = ch.Data
	} else {
		v.Data = ch.Data
	}
	enc, err := json.Marshal(v)
	if err != nil {
		enc = []byte(`{"error":"unrenderable"}`)
	}
	meta := mcp.Meta{"toolplane/invocation_id": c.ID, "toolplane/seq": ch.Seq}
	if ch.Untrusted {
		meta[untrustedMetaKey] = true
	}
	return &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Message: string(enc), Meta: meta}
}

// asyncResult answers an ended asynchronous call as a tool result: its
// stored answer rendered as a synchronous call's is (its untrusted label,
// structured content and lifted media included), naming the invocation.
func (sess *session) asyncResult(cred *toolplane.Credential, c *toolplane.AsyncCall) *mcp.CallToolResult {
	out := sess.taskPayload(cred, c)
	delete(out.Meta, metaRelatedTask)
	out.Meta["toolplane/invocation_id"] = c.ID
	out.Meta["toolplane/status"] = string(c.Status)
	return out
}
