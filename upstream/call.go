package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/jsondec"
	"github.com/toolplane/toolplane/tracectx"
)

// The lean call path.
//
// A federated call is the hot path of an HTTP upstream, and the SDK client
// makes it expensive: every message it reads goes through a JSON decoder
// that allocates a 32 KiB buffer, and the answer crosses several goroutines
// (the HTTP reader, the connection's reader, the waiting call) before the
// caller sees it. A profile put ClientSession.CallTool at about a sixth of
// toolplane's CPU per federated call.
//
// So for an HTTP server toolplane sends tools/call itself: one POST on the
// session the SDK client opened (its Mcp-Session-Id and negotiated
// Mcp-Protocol-Version), read on the calling goroutine, the answer decoded
// straight from the body. Everything else (initialize, tools/list and the
// resyncs, notifications on the standalone stream, resources and prompts)
// stays with the SDK client, which owns the session; so do calls to a stdio
// server and calls on a session of the stateless protocol (see
// statelessProtocol).

// statelessProtocol is the first protocol version (SEP-2575) whose requests
// carry a per-request _meta triple and Mcp-Method, Mcp-Name and Mcp-Param-*
// headers the SDK derives from the tool's schema. The lean path speaks the
// session protocol only: a session that negotiated this version or a later
// one keeps the SDK's call. Versions are dates, so they order as strings
// (the SDK compares them the same way).
const statelessProtocol = "2026-07-28"

const (
	// maxAnswer caps what one call reads from the server: an answer is
	// held in memory whole, and a server must not be able to make
	// toolplane hold an unbounded one.
	maxAnswer = 64 << 20
	// maxDrain and drainWait bound the read of what is left of a response
	// after the call's answer (the end of a stream, a trailing newline),
	// done so the connection goes back to the pool. A server that holds a
	// stream open after answering costs that connection, not the
	// caller's time.
	maxDrain  = 64 << 10
	drainWait = 100 * time.Millisecond
	// cancelWait bounds the notifications/cancelled sent for an abandoned
	// call, as the SDK client bounds its own.
	cancelWait = 5 * time.Second
	// maxExcerpt bounds how much of a refusal's body is read for its
	// error.
	maxExcerpt = 4 << 10
)

var (
	errTooLarge    = fmt.Errorf("answer larger than %d bytes", maxAnswer)
	errStreamEnd   = errors.New("the stream ended before the call's response")
	errNoResult    = errors.New("the response carries neither a result nor an error")
	errOtherAnswer = errors.New("the response answers another request")
)

// lean reports whether a call on cs takes the lean path: the server is
// reached over HTTP (hc is the client its session uses) and the session
// speaks the session protocol.
func lean(cs *mcp.ClientSession, hc *http.Client) bool {
	if hc == nil {
		return false
	}
	res := cs.InitializeResult()
	return res != nil && res.ProtocolVersion < statelessProtocol
}

// callSDK calls a remote tool through the SDK client: the path of a stdio
// server, and of a session the lean path does not speak.
func (u *upstream) callSDK(ctx context.Context, cs *mcp.ClientSession, name string, meta callMeta, args any, structured bool) (any, error) {
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	if !meta.empty() {
		params.Meta = meta.sdk()
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			if refused := u.refused(we); refused != nil {
				return nil, refused
			}
		}
		return nil, err
	}
	if res.IsError {
		return nil, &handler.Invalid{Message: "the tool answered an error: " + contentText(res.Content)}
	}
	return output(res, structured)
}

// idempotencyMeta is the _meta key that carries the call's idempotency key.
const idempotencyMeta = "toolplane/idempotency_key"

// metaOf answers the _meta toolplane sends with call, made with ctx: its
// idempotency key, so a server that deduplicates makes a replay after a
// lost worker one effect there too; and the time and hops a call the
// server makes back into toolplane has (toolplane.MetaTimeoutMS, the
// time the handler has left; toolplane.MetaRemainingHops, one fewer than
// the call's), so a server calling back is counted down, never reset;
// and the W3C trace context of the call's attempt (tracectx.Parent,
// tracectx.State, as the MCP community's convention names them), so the
// server's spans, and a second toolplane's, continue the call's trace.
func metaOf(ctx context.Context, call handler.Call) callMeta {
	m := callMeta{Key: call.Key}
	m.TraceParent, m.TraceState = tracectx.Strings(ctx)
	if call.Invocation != nil {
		hops := call.Invocation.Hops - 1
		m.Hops = &hops
	}
	if dl, ok := ctx.Deadline(); ok {
		ms := max(time.Until(dl).Milliseconds(), 1)
		m.TimeoutMS = &ms
	}
	return m
}

// refused answers the ending of a JSON-RPC error that says the server
// refused the request before running it (invalid params, no such method),
// or nil for any other error. If the server no longer knows the tool, the
// next list says so: a resync is requested.
func (u *upstream) refused(we *jsonrpc.Error) error {
	if we.Code != jsonrpc.CodeInvalidParams && we.Code != jsonrpc.CodeMethodNotFound {
		return nil
	}
	u.requestSync()
	return &handler.Invalid{Message: "the server refused the call: " + we.Message}
}

// httpCall is one tools/call the lean path sends.
type httpCall struct {
	u   *upstream
	cs  *mcp.ClientSession
	via sender
	// session and version are the session's Mcp-Session-Id (empty for a
	// server that keeps none) and negotiated Mcp-Protocol-Version.
	session, version string
	// id is the call's JSON-RPC id: a string with a prefix the SDK client
	// never uses (its ids are integers), so the two never collide on the
	// session.
	id   string
	name string
}

// callHTTP calls a remote tool on an HTTP server's session by the lean path.
// Its endings are the SDK path's: a request the server refused before
// processing it releases the claim (Unavailable, RetryableUpstream) or is a
// definite invalid answer (Invalid); anything after the request may have
// been processed is a plain error, which classify holds as uncertain.
func (u *upstream) callHTTP(ctx context.Context, cs *mcp.ClientSession, via sender, name string, meta callMeta, args any, structured bool) (any, error) {
	c := &httpCall{u: u, cs: cs, via: via, session: cs.ID(), version: cs.InitializeResult().ProtocolVersion,
		id: "tp-" + strconv.FormatUint(u.ids.Add(1), 10), name: name}
	body, err := c.request(meta, args)
	if err != nil {
		// Nothing was sent: the claim is released.
		return nil, &handler.Unavailable{Err: c.wrap(err)}
	}
	// The request's own context, so the drain can be cut short without
	// touching the caller's.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := c.post(rctx, body)
	if err != nil {
		if dialFailed(err) {
			// No connection, so no request: nothing was sent.
			return nil, &handler.Unavailable{Err: c.wrap(err)}
		}
		return nil, c.unanswered(ctx, err)
	}
	defer resp.Body.Close()
	if err := c.status(resp); err != nil {
		return nil, err
	}
	var msg rpcMessage
	in := &capped{r: resp.Body, n: maxAnswer}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "application/json":
		err = c.decodeJSON(in, &msg)
	case "text/event-stream":
		err = c.decodeStream(rctx, in, &msg)
	default:
		err = fmt.Errorf("HTTP %d with content type %q and no JSON-RPC response", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if err != nil {
		return nil, c.unanswered(ctx, err)
	}
	drain(resp.Body, cancel)
	return c.answer(&msg, structured)
}

func (c *httpCall) wrap(err error) error {
	return fmt.Errorf("call %s on %s: %w", c.name, c.u.cfg.Slug, err)
}

// unanswered ends a call whose request may have reached the server but
// whose answer was not read. If the caller gave up (its context ended), the
// server is told, as the SDK client tells it, so the tool does not keep
// working for nobody; the session protocol does not cancel a tool when its
// HTTP request goes away.
func (c *httpCall) unanswered(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		c.abandon(ctx)
		return c.wrap(ctx.Err())
	}
	return c.wrap(err)
}

// callRequest is the JSON-RPC request of a tools/call, encoded straight
// from its fields.
type callRequest struct {
	JSONRPC string     `json:"jsonrpc"`
	ID      string     `json:"id"`
	Method  string     `json:"method"`
	Params  callParams `json:"params"`
}

// callParams carries what mcp.CallToolParams carries on the SDK path.
type callParams struct {
	Name      string    `json:"name"`
	Arguments any       `json:"arguments"`
	Meta      *callMeta `json:"_meta,omitempty"`
}

// callMeta is the _meta of a call (see metaOf); the keys are
// idempotencyMeta, toolplane.MetaTimeoutMS, toolplane.MetaRemainingHops,
// tracectx.Parent and tracectx.State.
type callMeta struct {
	Key         string `json:"toolplane/idempotency_key,omitempty"`
	TimeoutMS   *int64 `json:"toolplane/timeout_ms,omitempty"`
	Hops        *int   `json:"toolplane/remaining_hops,omitempty"`
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

func (m callMeta) empty() bool {
	return m.Key == "" && m.TimeoutMS == nil && m.Hops == nil && m.TraceParent == ""
}

// sdk answers m as the SDK client's _meta.
func (m callMeta) sdk() mcp.Meta {
	out := mcp.Meta{}
	if m.Key != "" {
		out[idempotencyMeta] = m.Key
	}
	if m.TimeoutMS != nil {
		out[toolplane.MetaTimeoutMS] = *m.TimeoutMS
	}
	if m.Hops != nil {
		out[toolplane.MetaRemainingHops] = *m.Hops
	}
	if m.TraceParent != "" {
		out[tracectx.Parent] = m.TraceParent
		if m.TraceState != "" {
			out[tracectx.State] = m.TraceState
		}
	}
	return out
}

// noArguments is sent for a call without arguments, as the SDK sends {}
// rather than null.
var noArguments = struct{}{}

// request encodes the call. The buffer is not pooled: the transport may
// read a request body after Do returns.
func (c *httpCall) request(meta callMeta, args any) (*bytes.Buffer, error) {
	if args == nil {
		args = noArguments
	}
	r := callRequest{JSONRPC: "2.0", ID: c.id, Method: "tools/call", Params: callParams{Name: c.name, Arguments: args}}
	if !meta.empty() {
		r.Params.Meta = &meta
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&r); err != nil {
		return nil, fmt.Errorf("encode the request: %w", err)
	}
	return &buf, nil
}

// post sends one JSON-RPC message on the session, with the headers the SDK
// client sends and the configured ones (which, as headerTransport adds
// them to the SDK's requests, take precedence).
func (c *httpCall) post(ctx context.Context, body *bytes.Buffer) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.u.cfg.URL, body)
	if err != nil {
		return nil, err
	}
	// The keys are canonical already; the values share one array (each
	// slice capped, so an append elsewhere copies rather than overwrites
	// a neighbour) instead of allocating one slice per header per call.
	v := &[4]string{"application/json", "application/json, text/event-stream", c.session, c.version}
	h := req.Header
	h["Content-Type"] = v[0:1:1]
	h["Accept"] = v[1:2:2]
	if c.session != "" {
		h["Mcp-Session-Id"] = v[2:3:3]
	}
	if c.version != "" {
		h["Mcp-Protocol-Version"] = v[3:4:4]
	}
	// The trace context rides in the header too, for a server (or a proxy
	// before it) that reads only HTTP's.
	tracectx.ToHeader(ctx, h)
	for k, vs := range c.via.headers {
		// Shared, not copied: nothing changes a request's headers once
		// it is sent.
		h[k] = vs
	}
	return c.via.hc.Do(req)
}

// dialFailed reports whether a request failed to get a connection at all,
// so it cannot have reached the server.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// status answers the ending of a response that carries no answer to read:
// nil for a 200, whose body is the answer.
func (c *httpCall) status(resp *http.Response) error {
	switch code := resp.StatusCode; {
	case code == http.StatusOK:
		return nil
	case code == http.StatusNotFound && c.session != "":
		// The server no longer knows the session (it expired, or the
		// server restarted) and processed nothing. The SDK client would
		// have noticed on its own request; on this one toolplane must,
		// or every call would meet the same 404 until the next resync.
		c.u.lose(c.cs)
		return &handler.Unavailable{Err: c.wrap(fmt.Errorf("HTTP %d: %w", code, mcp.ErrSessionMissing))}
	case code == http.StatusTooManyRequests:
		// The server refused the request for rate before handling it; the
		// invoker's retry loop may try a read again after the wait it
		// asked for.
		return &handler.RetryableUpstream{Err: c.wrap(fmt.Errorf("HTTP %d: %s", code, excerpt(resp.Body))), After: retryAfter(resp.Header, time.Now())}
	case refusedBefore[code]:
		// A status the transport answers before the message is handled.
		// A JSON-RPC error in the body must say the same (the message
		// could not be read, or named no method or tool the server has)
		// for the claim to be released: an application error under a 4xx
		// may have followed an effect, and is held as uncertain.
		text := excerpt(resp.Body)
		var m rpcMessage
		if json.Unmarshal([]byte(text), &m) == nil && m.Error != nil {
			switch m.Error.Code {
			case jsonrpc.CodeInvalidParams, jsonrpc.CodeMethodNotFound:
				return c.u.refused(m.Error)
			case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest:
				return &handler.Unavailable{Err: c.wrap(fmt.Errorf("HTTP %d: %w", code, m.Error))}
			}
			return c.wrap(fmt.Errorf("HTTP %d: %w", code, m.Error))
		}
		return &handler.Unavailable{Err: c.wrap(fmt.Errorf("HTTP %d: %s", code, text))}
	default:
		// A 5xx, another 4xx, or a 2xx without the answer (a 202 says
		// the server took the request): the server may have run the call.
		return c.wrap(fmt.Errorf("HTTP %d: %s", code, excerpt(resp.Body)))
	}
}

// refusedBefore are the statuses a Streamable HTTP server answers before
// it handles the message: malformed or unauthorised requests, a method or
// media type it does not take, a body too large, and a 404 on a server
// without sessions (with one, the 404 is handled above).
var refusedBefore = map[int]bool{
	http.StatusBadRequest: true, http.StatusUnauthorized: true, http.StatusForbidden: true, http.StatusNotFound: true,
	http.StatusMethodNotAllowed: true, http.StatusNotAcceptable: true, http.StatusRequestEntityTooLarge: true,
	http.StatusUnsupportedMediaType: true,
}

// maxRetryAfter caps the wait a server's Retry-After asks for.
const maxRetryAfter = 24 * time.Hour

// retryAfter reads a Retry-After header (seconds, or an HTTP date against
// now); zero when there is none to read.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(min(max(n, 0), int(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxRetryAfter)
	}
	return 0
}

// excerpt reads the start of a refusal's body, for its error.
func excerpt(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, maxExcerpt))
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(no body)"
	}
	return s
}

// mediaType answers a Content-Type's media type, lower case, without its
// parameters.
func mediaType(ct string) string {
	ct, _, _ = strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(ct))
}

// rpcMessage is one JSON-RPC message of the server's on the call's
// response: the call's response, a notification, or a request of the
// server's own. The call's result is decoded straight into its final form.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result callResult      `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// callResult is a response's result, read as a tool result in the same
// pass as the message around it, from the message's own bytes: neither
// copied out nor decoded from a copy. A stream may carry responses to
// other requests first, whose results are not tool results: a result that
// does not read as one is kept as its error, for answer to report only if
// the message turns out to be the call's.
type callResult struct {
	present bool // the message has a result that is not null
	res     toolResult
	err     error
}

// resultDecoders read tool results, numbers exact.
var resultDecoders = jsondec.New(jsondec.Options{UseNumber: true})

func (r *callResult) UnmarshalJSON(b []byte) error {
	*r = callResult{}
	if string(b) == "null" {
		return nil
	}
	r.present = true
	r.err = resultDecoders.DecodeOnly(b, &r.res)
	return nil
}

// messageDecoders read the messages of a response.
var messageDecoders = jsondec.New(jsondec.Options{UseNumber: true})

// toolResult is a CallToolResult as plain JSON values, decoded with
// UseNumber so numbers stay exact.
type toolResult struct {
	Content           []map[string]any `json:"content"`
	StructuredContent any              `json:"structuredContent"`
	IsError           bool             `json:"isError"`
}

// ours reports whether id is the call's.
func (c *httpCall) ours(id json.RawMessage) bool {
	if len(id) == len(c.id)+2 && id[0] == '"' && string(id[1:len(id)-1]) == c.id {
		return true
	}
	// The same string, escaped differently.
	var s string
	return json.Unmarshal(id, &s) == nil && s == c.id
}

// decodeJSON reads an application/json response: the call's response,
// decoded straight from the body.
func (c *httpCall) decodeJSON(r io.Reader, msg *rpcMessage) error {
	if err := messageDecoders.Decode(r, msg); err != nil {
		return fmt.Errorf("read the response: %w", err)
	}
	if msg.Method != "" || !c.ours(msg.ID) {
		return errOtherAnswer
	}
	return nil
}

// decodeStream reads a text/event-stream response until the call's
// response. The server may send notifications first (progress and log
// messages, which toolplane does not relay; a list change or a resource
// update, which it acts on as the SDK client's handlers do), and requests
// of its own, which are answered on the session so the call can go on.
func (c *httpCall) decodeStream(ctx context.Context, r io.Reader, msg *rpcMessage) error {
	ev := getEvents(r)
	defer putEvents(ev)
	for {
		data, err := ev.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				// The lean path does not resume a stream (a GET with
				// Last-Event-ID, as the SDK client can when the server
				// keeps its events): the answer is lost, and the call
				// ends uncertain, the safe ending for a write.
				return errStreamEnd
			}
			return fmt.Errorf("read the stream: %w", err)
		}
		*msg = rpcMessage{}
		if err := messageDecoders.DecodeOnly(data, msg); err != nil {
			return fmt.Errorf("read an event: %w", err)
		}
		switch {
		case msg.Method == "":
			if c.ours(msg.ID) {
				return nil
			}
			// A response to some other request is not this call's
			// business.
		case len(msg.ID) > 0 && !bytes.Equal(msg.ID, []byte("null")):
			c.reply(ctx, msg)
		default:
			c.u.notified(msg.Method, msg.Params)
		}
	}
}

// reply answers a request the server sent on the call's stream, as the SDK
// client would for toolplane's client, which offers no roots, sampling or
// elicitation: a ping is answered, roots/list is an empty list, anything
// else is a method toolplane does not have. A reply that cannot be sent is
// logged; the call goes on, bounded by its context.
func (c *httpCall) reply(ctx context.Context, req *rpcMessage) {
	type reply struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *jsonrpc.Error  `json:"error,omitempty"`
	}
	r := reply{JSONRPC: "2.0", ID: req.ID}
	switch req.Method {
	case "ping":
		r.Result = struct{}{}
	case "roots/list":
		r.Result = struct {
			Roots []struct{} `json:"roots"`
		}{Roots: []struct{}{}}
	default:
		r.Error = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + req.Method}
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(&r); err != nil {
		c.u.set.log.Warn("upstream request not answered", "upstream", c.u.cfg.Slug, "method", req.Method, "err", c.u.scrub(err))
		return
	}
	resp, err := c.post(ctx, &buf)
	if err != nil {
		c.u.set.log.Warn("upstream request not answered", "upstream", c.u.cfg.Slug, "method", req.Method, "err", c.u.scrub(err))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		c.u.set.log.Warn("upstream refused toolplane's answer", "upstream", c.u.cfg.Slug, "method", req.Method, "status", resp.StatusCode, "body", excerpt(resp.Body))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
}

// abandon sends notifications/cancelled for the call, in the background
// and bounded, as the SDK client does: the caller returns at once.
func (c *httpCall) abandon(ctx context.Context) {
	note := struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  struct {
			RequestID string `json:"requestId"`
			Reason    string `json:"reason,omitempty"`
		} `json:"params"`
	}{JSONRPC: "2.0", Method: "notifications/cancelled"}
	note.Params.RequestID = c.id
	note.Params.Reason = ctx.Err().Error()
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(&note); err != nil {
		return
	}
	go func() {
		nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelWait)
		defer cancel()
		resp, err := c.post(nctx, &buf)
		if err != nil {
			c.u.set.log.Debug("upstream not told of an abandoned call", "upstream", c.u.cfg.Slug, "err", c.u.scrub(err))
			return
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		resp.Body.Close()
	}()
}

// drain reads what is left of a response after its answer, so its
// connection is reused, giving up after drainWait (cancel ends the
// request).
func drain(body io.Reader, cancel context.CancelFunc) {
	t := time.AfterFunc(drainWait, cancel)
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrain))
	t.Stop()
}

// answer turns the call's response into the caller's ending, exactly as
// the SDK path does.
func (c *httpCall) answer(msg *rpcMessage, structured bool) (any, error) {
	if msg.Error != nil {
		if refused := c.u.refused(msg.Error); refused != nil {
			return nil, refused
		}
		return nil, c.wrap(fmt.Errorf("JSON-RPC error %d: %w", msg.Error.Code, msg.Error))
	}
	if !msg.Result.present {
		return nil, c.wrap(errNoResult)
	}
	if err := msg.Result.err; err != nil {
		return nil, c.wrap(fmt.Errorf("read the result: %w", err))
	}
	res := &msg.Result.res
	if res.IsError {
		return nil, &handler.Invalid{Message: "the tool answered an error: " + blocksText(res.Content)}
	}
	out, err := res.output(structured)
	if err != nil {
		return nil, c.wrap(err)
	}
	return out, nil
}

// output is what output makes of the same result on the SDK path: the
// structured content for a tool that declares an output schema, otherwise
// the content blocks (and any structured content) as plain JSON.
//
// The values are the decoder's own, numbers as json.Number with the
// server's digits; the SDK path reads them through float64 first, so a
// number a float64 cannot hold (a 64-bit id) or written unusually (1.0,
// 1e3) now arrives as the server wrote it rather than rounded or
// reformatted.
func (r *toolResult) output(structured bool) (any, error) {
	if structured {
		return r.StructuredContent, nil
	}
	content := make([]any, len(r.Content))
	for i, b := range r.Content {
		if bareText(b) {
			// Decoded, the block is already what plainContent builds.
			content[i] = b
			continue
		}
		v, err := sdkBlock(b)
		if err != nil {
			return nil, err
		}
		content[i] = v
	}
	out := map[string]any{"content": content}
	if r.StructuredContent != nil {
		out["structuredContent"] = r.StructuredContent
	}
	return out, nil
}

// bareText reports whether a block is a text block with nothing but its
// text: the common answer, which the SDK path renders as exactly
// {"type":"text","text":...}. Unlike plainContent it need not check the
// text is valid UTF-8: the decoder replaced any invalid byte, as the SDK
// path's re-encoding does.
func bareText(b map[string]any) bool {
	if len(b) != 2 || b["type"] != "text" {
		return false
	}
	_, ok := b["text"].(string)
	return ok
}

// sdkBlock renders any other block the way the SDK path does. It goes
// through the SDK's own content decoding, reached publicly through
// mcp.CallToolResult's UnmarshalJSON, then plainContent: the block keeps the
// wire form of the SDK's content types, and loses what they drop (fields
// they do not know, a block type they refuse), as it did before. Keeping
// the server's raw block would have been cheaper, but would have let
// unknown fields through to the model where the SDK path never did; these
// blocks (images, resources, annotated text) are rare enough for the round
// trip.
func sdkBlock(b map[string]any) (any, error) {
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("content block: %w", err)
	}
	wire := make([]byte, 0, len(raw)+len(`{"content":[]}`))
	wire = append(wire, `{"content":[`...)
	wire = append(wire, raw...)
	wire = append(wire, "]}"...)
	var res mcp.CallToolResult
	if err := json.Unmarshal(wire, &res); err != nil {
		return nil, fmt.Errorf("content block: %w", err)
	}
	if len(res.Content) != 1 {
		return nil, fmt.Errorf("content block: read as %d blocks", len(res.Content))
	}
	return plainContent(res.Content[0])
}

// blocksText is contentText of the plain blocks: the text of the text
// blocks, for an error the model reads.
func blocksText(blocks []map[string]any) string {
	var parts []string
	for _, b := range blocks {
		if b["type"] == "text" {
			s, _ := b["text"].(string)
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "(no text)"
	}
	return strings.Join(parts, " ")
}

// capped reads at most n bytes and answers errTooLarge, not io.EOF, beyond
// them, so a cut-off answer is never mistaken for a complete one.
type capped struct {
	r io.Reader
	n int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.n <= 0 {
		// At the cap: the body may end exactly there.
		var one [1]byte
		if n, err := c.r.Read(one[:]); n > 0 {
			return 0, errTooLarge
		} else if err != nil {
			return 0, err
		}
		return 0, nil
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

// events reads Server-Sent Events, the way the SDK client reads them:
// "data" fields joined by newlines, events ended by a blank line, comments
// and the other fields (id, retry) ignored, events of a type other than
// "message" skipped. There is no resumption: a stream that ends before the
// call's response ends the call uncertain, as a lost connection does.
type events struct {
	r    *bufio.Reader
	data bytes.Buffer
}

// eventPool keeps the readers (and their buffers) of finished streams: a
// stream's reader is the largest allocation of a streamed call.
var eventPool = sync.Pool{New: func() any { return &events{r: bufio.NewReaderSize(nil, 4<<10)} }}

// maxPooledData is the largest data buffer kept for reuse; a larger one
// came from a rare large answer and is left to the collector.
const maxPooledData = 64 << 10

func getEvents(r io.Reader) *events {
	e := eventPool.Get().(*events)
	e.r.Reset(r)
	return e
}

func putEvents(e *events) {
	e.r.Reset(nil)
	if e.data.Cap() > maxPooledData {
		e.data = bytes.Buffer{}
	}
	e.data.Reset()
	eventPool.Put(e)
}

// next answers the data of the next "message" event that has some (an
// event without data, such as a priming event that only sets an id, is
// skipped); it is valid until the following call. It answers io.EOF at the
// end of the stream. A last event the stream ends without a blank line
// after is still read, as the SDK client reads it.
func (e *events) next() ([]byte, error) {
	e.data.Reset()
	lines := 0      // data lines in this event
	message := true // the event's type is "message" (the default)
	for {
		chunk, err := e.r.ReadSlice('\n')
		if len(chunk) == 0 && err != nil {
			if errors.Is(err, io.EOF) && e.data.Len() > 0 && message {
				return e.data.Bytes(), nil
			}
			return nil, err
		}
		line := chunk
		if err == nil {
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			if len(line) == 0 {
				if e.data.Len() > 0 && message {
					return e.data.Bytes(), nil
				}
				e.data.Reset()
				lines, message = 0, true
				continue
			}
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if lines > 0 {
				e.data.WriteByte('\n')
			}
			lines++
			e.data.Write(value)
			err = e.rest(err, &e.data)
		case "event":
			name := bytes.TrimSpace(value) // as the SDK client reads it
			message = len(name) == 0 || string(name) == "message"
			err = e.rest(err, nil)
		default:
			// A comment (no field name), id, retry or a field nobody
			// defined.
			err = e.rest(err, nil)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
	}
}

// rest reads the rest of a line longer than the reader's buffer (err is
// bufio.ErrBufferFull while some is left), adding it to dst if dst is set.
// It answers the error that ended the line: nil, or the stream's.
func (e *events) rest(err error, dst *bytes.Buffer) error {
	for errors.Is(err, bufio.ErrBufferFull) {
		var chunk []byte
		chunk, err = e.r.ReadSlice('\n')
		if dst == nil {
			continue
		}
		if err != nil {
			dst.Write(chunk)
			continue
		}
		dst.Write(bytes.TrimSuffix(chunk, []byte("\n")))
		// The line ends here; the \r of its \r\n may have ended the
		// previous chunk, so it is trimmed from what was written.
		if b := dst.Bytes(); len(b) > 0 && b[len(b)-1] == '\r' {
			dst.Truncate(len(b) - 1)
		}
	}
	return err
}
