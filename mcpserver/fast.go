package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
)

// maxRequestBody bounds one POST to the MCP endpoint, on the fast path and
// in the SDK alike: arguments are bounded by their schemas long before
// this, so a larger body is refused rather than read.
const maxRequestBody = 8 << 20

// A tools/call is almost every request an agent sends, and the SDK spends
// more on one than toolplane's whole pipeline does (it decodes the message
// twice, through a reader that allocates 32 KiB each time, and hands it
// between goroutines before the handler runs and after). The fast path
// answers a tools/call of an established session itself: the same checks
// the SDK makes, the same handler, the same JSON-RPC answer. Everything it
// does not recognise with certainty (another method, a batch, a session
// it has not seen initialised, an unexpected header) goes to the SDK
// untouched, which stays the one authority on the protocol.

// fast answers the tools/call requests it can and passes every other
// request to next (the SDK's handler). It runs after authentication.
func (s *Server) fast(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get("Mcp-Session-Id")
		if sid == "" {
			next.ServeHTTP(w, r)
			return
		}
		sess := s.session(sid)
		if sess == nil {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodDelete && sess.owns(r) {
			// The client ends the session: what toolplane still asks it
			// is abandoned first, or the SDK's Close would wait for it.
			sess.abandon()
		}
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		// Like the SDK's own timer, only messages from the client count as
		// use: an open stream alone does not keep a session.
		sess.begin()
		defer sess.end()
		if s.StreamResponses || !sess.accepts(r) {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
		if err != nil {
			// The SDK words the refusal: give it what was read and the
			// error that stopped the read.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
			next.ServeHTTP(w, r)
			return
		}
		var msg struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
		}
		// A batch, another method or a notification goes to the SDK. (A
		// notifications/cancelled is the SDK's to see too: the invoker runs
		// a handler detached from the caller anyway, so that an effect is
		// never abandoned half-way, on either path.)
		if firstByte(body) != '{' || json.Unmarshal(body, &msg) != nil || msg.JSONRPC != "2.0" ||
			msg.Method != "tools/call" || !validID(msg.ID) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return
		}
		sess.answerCall(w, r, msg.ID, msg.Params)
	})
}

// errReader replays a read error.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// validID reports whether raw is a JSON-RPC request id the fast path
// answers: a string or an integer. Anything else (null, absence, a number
// with a fraction or an exponent) is the SDK's to judge.
func validID(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		var s string
		return json.Unmarshal(raw, &s) == nil
	}
	digits := bytes.TrimPrefix(raw, []byte("-"))
	if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0' && len(digits) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// session answers the live session with the SDK's id sid, or nil when
// there is none this node knows to be established.
func (s *Server) session(sid string) *session {
	s.mu.Lock()
	sess := s.byID[sid]
	s.mu.Unlock()
	if sess == nil || !sess.live() {
		return nil
	}
	return sess
}

// live reports whether the SDK still holds the session (it ends one on a
// DELETE, an idle timeout or a closed connection).
func (sess *session) live() bool {
	ss := sess.ss.Load()
	if ss == nil {
		return false
	}
	for other := range sess.srv.Sessions() {
		if other == ss {
			return true
		}
	}
	return false
}

// accepts reports whether r is a request the fast path may answer for this
// session: from the credential that opened it, with the headers the SDK
// requires, at the protocol version the session negotiated.
func (sess *session) accepts(r *http.Request) bool {
	if !sess.owns(r) {
		return false // the SDK refuses another key's use of a session
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	if len(r.Header.Values("Last-Event-ID")) > 0 {
		return false
	}
	jsonOK, streamOK := false, false
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	if !jsonOK || !streamOK {
		return false
	}
	ss := sess.ss.Load()
	p := ss.InitializeParams()
	if p == nil {
		return false
	}
	v := r.Header.Get("Mcp-Protocol-Version")
	return v == "" || v == p.ProtocolVersion
}

// owns reports whether r comes from the credential that opened the session.
func (sess *session) owns(r *http.Request) bool {
	ti := auth.TokenInfoFromContext(r.Context())
	if ti == nil {
		return false
	}
	cred, _ := ti.Extra["credential"].(*toolplane.Credential)
	return cred != nil && cred.ID == sess.cred.ID && cred.OrganizationID == sess.cred.OrganizationID
}

// answerCall answers one tools/call as the SDK would: the handler's result,
// or a JSON-RPC error.
func (sess *session) answerCall(w http.ResponseWriter, r *http.Request, id, raw json.RawMessage) {
	var params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      mcp.Meta        `json:"_meta"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &params) != nil {
		writeRPC(w, id, nil, &rpcError{Code: -32602, Message: "invalid tools/call params"})
		return
	}
	ctx := r.Context()
	sess.mu.Lock()
	l, known := sess.onServer[params.Name]
	sess.mu.Unlock()
	var res *mcp.CallToolResult
	var err error
	if known {
		res, err = sess.invokeTool(ctx, sess.ss.Load(), l.platform, params.Arguments, params.Meta)
	} else {
		f := toolplane.Fail(toolplane.CodeToolUnavailable, fmt.Sprintf("no tool named %q is available; use only the tools you were given", params.Name))
		res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(boundary.Render(f))}}}
	}
	if err != nil {
		writeRPC(w, id, nil, &rpcError{Code: 0, Message: err.Error()})
		return
	}
	if res.Content == nil {
		res.Content = []mcp.Content{} // never "null", as the SDK ensures
	}
	writeRPC(w, id, res, nil)
}

type rpcError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

// writeRPC writes one JSON-RPC response as the answer's JSON body.
func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, rerr *rpcError) {
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *rpcError       `json:"error,omitempty"`
	}{"2.0", id, result, rerr}
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *rpcError       `json:"error"`
		}{"2.0", id, &rpcError{Code: -32603, Message: "the result could not be encoded"}})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache, no-transform")
	w.Write(b)
}

// activity is what keeps a session alive: the client's requests in flight
// and the end of the last one. The SDK's own idle timer would see only the
// requests it handles, and close a session busy with fast-path calls.
type activity struct {
	inflight atomic.Int64
	last     atomic.Int64 // unix nanoseconds

	mu    sync.Mutex
	timer *time.Timer
}

func (sess *session) begin() { sess.act.inflight.Add(1) }

func (sess *session) end() {
	sess.act.last.Store(time.Now().UnixNano())
	sess.act.inflight.Add(-1)
}

// established records the SDK's session once the client has initialised
// it, so the fast path can answer its calls, and starts its idle timer.
func (sess *session) established(ss *mcp.ServerSession) {
	if ss == nil || ss.ID() == "" || !sess.ss.CompareAndSwap(nil, ss) {
		return
	}
	sess.act.last.Store(time.Now().UnixNano())
	s := sess.s
	s.mu.Lock()
	if s.byID == nil {
		s.byID = map[string]*session{}
	}
	s.byID[ss.ID()] = sess
	s.mu.Unlock()
	sess.act.mu.Lock()
	sess.act.timer = time.AfterFunc(s.idle(), sess.expire)
	sess.act.mu.Unlock()
}

// expire closes the session when nothing is in flight and nothing ended
// within the idle time; otherwise it looks again when the time could be up.
func (sess *session) expire() {
	idle := sess.s.idle()
	wait := idle - time.Since(time.Unix(0, sess.act.last.Load()))
	if sess.act.inflight.Load() > 0 {
		wait = idle
	}
	if wait > 0 {
		sess.act.mu.Lock()
		sess.act.timer.Reset(wait)
		sess.act.mu.Unlock()
		return
	}
	sess.abandon()
	if ss := sess.ss.Load(); ss != nil {
		ss.Close()
	}
	sess.forget()
}

// forget drops the session from the fast path's index and stops its timer.
func (sess *session) forget() {
	ss := sess.ss.Load()
	if ss == nil {
		return
	}
	s := sess.s
	s.mu.Lock()
	if s.byID[ss.ID()] == sess {
		delete(s.byID, ss.ID())
	}
	s.mu.Unlock()
	sess.act.mu.Lock()
	if sess.act.timer != nil {
		sess.act.timer.Stop()
	}
	sess.act.mu.Unlock()
}

// idle is how long a session may sit unused.
func (s *Server) idle() time.Duration {
	if s.SessionIdle > 0 {
		return s.SessionIdle
	}
	return sessionIdle
}

// register is the receiving middleware that notices the session's SDK
// half (after its initialize, or the first message after), so the fast
// path can answer its calls and its idle time is kept.
func (sess *session) register(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if sess.ss.Load() == nil {
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
				sess.established(ss)
			}
		}
		return res, err
	}
}
