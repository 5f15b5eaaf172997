package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
)

// answerKind is what one attempt of an action answered, as an agent that
// retries until it knows reads it.
type answerKind int

const (
	// answerRetry: no decision yet (a dropped connection, a lost session,
	// an identical call in flight, a node not ready, a rate limit, a
	// platform fault); the agent calls again with the same key.
	answerRetry answerKind = iota
	answerOK
	answerReplayed
	answerUncertain
	// answerFailed: a definite failure; the agent stops.
	answerFailed
)

func (k answerKind) String() string {
	return [...]string{"retry", "ok", "replayed", "uncertain", "failed"}[k]
}

// attempt is one call's answer.
type attempt struct {
	kind answerKind
	// code is the stable error code, or what kind of retry it was
	// ("transport", "session_lost", "in_flight", "rate_limited", ...).
	code string
	// interrupted: the connection or the session failed under the call,
	// so the call may or may not have reached a node.
	interrupted bool
	detail      string
}

// retryCodes are the answers that decide nothing: the call was refused
// before it was journalled (a node still ingesting the upstream's tools
// answers tool_unavailable or unavailable), or it is running elsewhere, or
// the platform failed and said so. A code outside the stable set (an API
// code such as in_flight or rate_limited, or one added later) decides
// nothing when the answer says it is retryable.
var retryCodes = map[string]bool{
	"unavailable": true, "tool_unavailable": true, "retryable_upstream": true, "internal_error": true, "timeout": true,
}

// chaosEnvelope is the result envelope both doors render, and the API's
// error envelope.
type chaosEnvelope struct {
	OK    *bool `json:"ok"`
	Error *struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Retryable bool   `json:"retryable"`
	} `json:"error"`
	Meta struct {
		Replayed bool `json:"replayed"`
	} `json:"meta"`
}

// classify reads an envelope.
func classify(env chaosEnvelope, raw []byte) attempt {
	switch {
	case env.OK != nil && *env.OK && env.Meta.Replayed:
		return attempt{kind: answerReplayed}
	case env.OK != nil && *env.OK:
		return attempt{kind: answerOK}
	case env.Error == nil:
		return attempt{kind: answerFailed, code: "unreadable", detail: string(raw)}
	case env.Error.Code == string(toolplane.CodeUncertain):
		return attempt{kind: answerUncertain, code: env.Error.Code, detail: env.Error.Message}
	case retryCodes[env.Error.Code], !toolplane.Code(env.Error.Code).Valid() && env.Error.Retryable:
		return attempt{kind: answerRetry, code: env.Error.Code, detail: env.Error.Message}
	}
	return attempt{kind: answerFailed, code: env.Error.Code, detail: env.Error.Message}
}

// restDoor calls the counting tool over REST, passing the action's id as
// the caller's idempotency key.
type restDoor struct {
	base, key, tool string
	client          *http.Client
}

func (d *restDoor) call(ctx context.Context, id string) attempt {
	body, _ := json.Marshal(map[string]any{"arguments": map[string]any{"id": id}, "idempotency_key": id})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.base+"/v1/tools/"+d.tool+"/invoke", bytes.NewReader(body))
	if err != nil {
		return attempt{kind: answerFailed, code: "request", detail: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+d.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return attempt{kind: answerRetry, code: "transport", interrupted: true, detail: err.Error()}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return attempt{kind: answerRetry, code: "transport", interrupted: true, detail: err.Error()}
	}
	var env chaosEnvelope
	if err := json.Unmarshal(raw, &env); err != nil {
		if resp.StatusCode >= 500 {
			return attempt{kind: answerRetry, code: http.StatusText(resp.StatusCode), detail: string(raw)}
		}
		return attempt{kind: answerFailed, code: "unreadable", detail: string(raw)}
	}
	// Besides tool results (200), the API's error envelope: 409
	// in_flight, 429 rate_limited, 5xx.
	return classify(env, raw)
}

// mcpDoor calls the counting tool through toolplane's MCP endpoint with
// the official SDK client, passing the action's id as
// _meta["toolplane/idempotency_key"]. When a call fails under it (the
// node died, or the next request reached a node that does not know the
// session), the session is dropped and the next attempt opens a new one,
// as a client reconnecting after a failure does.
type mcpDoor struct {
	endpoint, tool string
	client         *mcp.Client
	httpClient     *http.Client

	cs       *mcp.ClientSession
	sessions int // sessions opened
}

func (d *mcpDoor) call(ctx context.Context, id string) attempt {
	if d.cs == nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cs, err := d.client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: d.endpoint, HTTPClient: d.httpClient, MaxRetries: -1}, nil)
		cancel()
		if err != nil {
			return attempt{kind: answerRetry, code: "connect", detail: err.Error()}
		}
		d.cs = cs
		d.sessions++
	}
	r, err := d.cs.CallTool(ctx, &mcp.CallToolParams{
		Name: d.tool, Arguments: map[string]any{"id": id},
		Meta: mcp.Meta{idempotencyMeta: id},
	})
	if err != nil {
		d.drop()
		if errors.Is(err, mcp.ErrSessionMissing) {
			// The node that got the request does not know the session
			// (another node holds it, or held it and died): it refused the
			// call without running it.
			return attempt{kind: answerRetry, code: "session_missing", detail: err.Error()}
		}
		return attempt{kind: answerRetry, code: "session_lost", interrupted: true, detail: err.Error()}
	}
	text := textOf(r)
	var env chaosEnvelope
	if json.Unmarshal([]byte(text), &env) != nil || (env.OK == nil && env.Error == nil) {
		if r.IsError {
			// The door's prose for an identical call in flight.
			return attempt{kind: answerRetry, code: "in_flight", detail: text}
		}
		return attempt{kind: answerFailed, code: "unreadable", detail: text}
	}
	a := classify(env, []byte(text))
	if a.code == "tool_unavailable" {
		// A session opened on a node still ingesting the upstream lists
		// no such tool; a new session lists again.
		d.drop()
	}
	return a
}

// drop abandons the session; closing it may wait on a dead node, so it
// is closed in the background.
func (d *mcpDoor) drop() {
	if d.cs == nil {
		return
	}
	cs := d.cs
	d.cs = nil
	go cs.Close()
}

// close ends the session at the end of the run.
func (d *mcpDoor) close() {
	if d.cs != nil {
		d.cs.Close()
		d.cs = nil
	}
}
