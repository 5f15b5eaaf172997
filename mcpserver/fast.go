package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/httperr"
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

// fast answers the tools/call requests it can on the endpoint of door (""
// for /mcp, an upstream's slug for its governed copy) and passes every
// other request to next (that endpoint's SDK handler). It runs after
// authentication.
func (s *Server) fast(next http.Handler, door string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get("Mcp-Session-Id")
		if sid == "" {
			if r.Method == http.MethodPost {
				var m *opening
				r, m = s.opening(w, r)
				// An initialize opens a session the SDK then holds (it
				// closes any other it made for a request without one), so
				// it is what the caps count: any request without a session
				// but one message of another method, since an initialize
				// inside a batch opens a session all the same.
				if !m.other {
					release, refusal := s.reserve(r)
					if refusal != nil {
						refusal.write(w, m.id)
						return
					}
					defer release()
				}
			}
			next.ServeHTTP(w, r)
			return
		}
		sess := s.session(sid)
		if sess == nil {
			// A session this node does not hold may be stored: opened on
			// another node, or on this one before a restart.
			var answered bool
			if sess, answered = s.stored(w, r, sid, door, next); answered {
				return
			}
		}
		if sess != nil && sess.foreign(r) {
			// Another organization's session is not found, whatever its
			// id, on the node that holds it as on every other (stored
			// reads only the caller's organization).
			fail(w, httperr.NotFound, "session not found")
			return
		}
		if sess == nil || sess.upstream != door || !sess.owns(r) {
			// Another endpoint's session, or another key's: this
			// endpoint's SDK handler answers as it would.
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodDelete {
			// The client ends the session, on every node: the stored row
			// goes first (another node holding it learns at its next
			// touch). Nothing more is answered on the fast path, and what
			// toolplane still asks the client is abandoned, or the SDK's
			// Close would wait for it.
			if err := sess.deleteStored(r.Context()); err != nil {
				s.Log.ErrorContext(r.Context(), "session delete failed", "err", err)
				fail(w, httperr.Unavailable, "the session cannot be ended right now; try again shortly")
				return
			}
			sess.closing.Store(true)
			sess.abandon()
		} else if !sess.touch(r.Context()) {
			// Ended on another node, or expired: ended here too, and the
			// SDK answers as it does for a session it does not hold.
			sess.endHere()
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		// Like the SDK's own timer, only the owner's messages count as
		// use: an open stream alone does not keep a session.
		sess.begin()
		defer sess.end()
		if !sess.accepts(r) {
			next.ServeHTTP(w, r)
			return
		}
		// A narrowed OAuth token's body was read and parsed already, to
		// check the tool against its consent (see scoped).
		body, c, ok, read := parsed(r)
		if !read {
			var err error
			body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
			if err != nil {
				// The SDK words the refusal: give it what was read and the
				// error that stopped the read.
				r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
				next.ServeHTTP(w, r)
				return
			}
			// A batch, another method, a notification, or a call the fast
			// path is not certain to read exactly as the SDK does goes to
			// the SDK. (A notifications/cancelled is the SDK's too: the
			// invoker runs a handler detached from its caller anyway, so
			// that an effect is never abandoned half-way, on either path.)
			c, ok = parseCall(body)
		}
		if ok && c.task && sess.tasksOn() {
			// A task-augmented call, which the SDK would run as a plain
			// one: answered here, on either response mode.
			sess.answerTask(w, r, c)
			return
		}
		if !ok || s.StreamResponses || c.progress {
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return
		}
		sess.answerCall(w, r, c)
	})
}

// toolCall is a tools/call request as the fast path reads it.
type toolCall struct {
	id        json.RawMessage
	name      string
	arguments json.RawMessage
	meta      mcp.Meta
	// task is set when the call asks to run as a task (params.task);
	// progress when it names a progress token.
	task, progress bool
}

// parseCall reads body as one tools/call request, with the SDK's reading:
// member names matched exactly (encoding/json would also take "METHOD" or
// "Name"), a version tag of "2.0", a string or integer id, params an
// object whose name is a string. It answers false for anything else, and
// for a request of the stateless protocol (its _meta names the version),
// which the SDK handles differently.
func parseCall(body []byte) (toolCall, bool) {
	// Validated whole first, as json.Unmarshal would, so that the walk
	// below reads well-formed JSON only; the members' names are matched
	// exactly and the last of a repeated name wins, as a map's decoding
	// does. The id and arguments kept are slices of body, which nobody
	// writes to once read.
	if firstByte(body) != '{' || !json.Valid(body) {
		return toolCall{}, false
	}
	var jsonrpc, method, id, raw []byte
	for m := newMembers(body); ; {
		name, value, more := m.next()
		if !more {
			break
		}
		switch {
		case textIs(name, "jsonrpc"):
			jsonrpc = value
		case textIs(name, "method"):
			method = value
		case textIs(name, "id"):
			id = value
		case textIs(name, "params"):
			raw = value
		}
	}
	if !textIs(jsonrpc, "2.0") || !textIs(method, "tools/call") || !validID(id) || firstByte(raw) != '{' {
		return toolCall{}, false
	}
	var c toolCall
	var name, meta, task []byte
	for m := newMembers(raw); ; {
		member, value, more := m.next()
		if !more {
			break
		}
		switch {
		case textIs(member, "name"):
			name = value
		case textIs(member, "arguments"):
			c.arguments = value
		case textIs(member, "_meta"):
			meta = value
		case textIs(member, "task"):
			task = value
		}
	}
	c.id = id
	var ok bool
	if c.name, ok = textOf(name); !ok {
		return toolCall{}, false
	}
	if meta != nil && !bytes.Equal(meta, []byte("null")) {
		if json.Unmarshal(meta, &c.meta) != nil {
			return toolCall{}, false
		}
		if _, stateless := c.meta["io.modelcontextprotocol/protocolVersion"]; stateless {
			return toolCall{}, false
		}
		// The client hears progress on the request's own stream, which
		// the SDK keeps open (unless the call runs as a task).
		_, c.progress = c.meta[progressToken]
	}
	if task != nil {
		if firstByte(task) != '{' {
			return toolCall{}, false
		}
		c.task = true
	}
	return c, true
}

// progressToken is the _meta member a client names its progress
// notifications by.
const progressToken = "progressToken"

// isString reports whether raw is the JSON string want.
func isString(raw json.RawMessage, want string) bool {
	return textIs(bytes.TrimSpace(raw), want)
}

// opening holds the server built for a request without a session: the
// SDK asks for one twice per such request, and each would otherwise be a
// session of toolplane's (a grants read, a place in the sweep). A
// server/discover (the client probing for the stateless protocol before it
// initialises) opens nothing: the capabilities every server shares answer
// it (discover is set, and no session is built).
type opening struct {
	once     sync.Once
	srv      *mcp.Server
	discover bool
	// other is set for one message of a method other than initialize,
	// which opens no session that outlives the request; id is the
	// JSON-RPC id of a request that is one message, for a refusal to
	// answer.
	other bool
	id    json.RawMessage
}

type openingKey struct{}

// opening answers r carrying an opening for the server the SDK will ask
// for, after a look at which method the request is.
func (s *Server) opening(w http.ResponseWriter, r *http.Request) (*http.Request, *opening) {
	m := &opening{}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
	} else {
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg map[string]json.RawMessage
		if firstByte(body) == '{' && json.Unmarshal(body, &msg) == nil {
			m.discover = isString(msg["method"], "server/discover")
			m.other = !isString(msg["method"], "initialize")
			if validID(msg["id"]) {
				m.id = msg["id"]
			}
		}
	}
	return r.WithContext(context.WithValue(r.Context(), openingKey{}, m)), m
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
	if sess == nil || sess.closing.Load() || !sess.live() {
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

// accepts reports whether r, from the session's owner, is a request the
// fast path may answer: with the headers the SDK requires, at the protocol
// version the session negotiated.
func (sess *session) accepts(r *http.Request) bool {
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
	// The version the session negotiated, which the header must repeat
	// when sent; a session of the stateless protocol is the SDK's.
	negotiated, _ := sess.version.Load().(string)
	if negotiated == "" || negotiated >= statelessProtocol {
		return false
	}
	v := r.Header.Get("Mcp-Protocol-Version")
	return v == "" || v == negotiated
}

// statelessProtocol is the first protocol version (SEP-2575) whose requests
// the SDK reads differently (a per-request _meta, a result type); the fast
// path answers sessions of earlier versions only. Versions are dates, so
// they order as strings, as the SDK compares them.
const statelessProtocol = "2026-07-28"

// owns reports whether r comes from the owner of the session: the
// credential that opened it, or the same OAuth client for the same person
// (sessionOwner).
func (sess *session) owns(r *http.Request) bool {
	cred := credentialOf(r)
	return cred != nil && sameOwner(cred, sess.cred)
}

// sameOwner reports whether sessionOwner(a) == sessionOwner(b) without
// building either text, as every fast-path call asks it: a key's owner
// is its organization and id, each the same when the texts are, and
// different otherwise unless an organization's id holds the separator.
func sameOwner(a, b *toolplane.Credential) bool {
	if a.ClientID == "" && b.ClientID == "" {
		if a.OrganizationID == b.OrganizationID && a.ID == b.ID {
			return true
		}
		if !strings.Contains(a.OrganizationID, "\x00") && !strings.Contains(b.OrganizationID, "\x00") {
			return false
		}
	}
	return sessionOwner(a) == sessionOwner(b)
}

// foreign reports whether r is authenticated as a credential of another
// organization than the session's.
func (sess *session) foreign(r *http.Request) bool {
	cred := credentialOf(r)
	return cred != nil && cred.OrganizationID != sess.cred.OrganizationID
}

// answerCall answers one tools/call as the SDK would: the handler's result,
// or a JSON-RPC error.
func (sess *session) answerCall(w http.ResponseWriter, r *http.Request, c toolCall) {
	cred := credentialOf(r)
	sess.follow(cred)
	l, meta, known := sess.lookup(c.name)
	var res *mcp.CallToolResult
	var err error
	switch {
	case meta != "":
		res, err = sess.callMeta(r.Context(), sess.ss.Load(), cred, meta, c.arguments, c.meta)
	case known:
		res, err = sess.invokeTool(r.Context(), sess.ss.Load(), cred, l.platform, c.arguments, c.meta)
	default:
		res = sess.unavailable(c.name)
	}
	if err != nil {
		writeRPC(w, c.id, nil, &rpcError{Code: 0, Message: err.Error()})
		return
	}
	if res.Content == nil {
		res.Content = []mcp.Content{} // never "null", as the SDK ensures
	}
	writeRPC(w, c.id, res, nil)
}

type rpcError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

// rpcResponse is a JSON-RPC response as encoding/json writes it.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// rpcUnencodable is the response to id whose result could not be
// encoded: an internal error, which always encodes.
func rpcUnencodable(id json.RawMessage) rpcResponse {
	return rpcResponse{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: -32603, Message: "the result could not be encoded"}}
}

// writeRPC writes one JSON-RPC response as the answer's JSON body.
func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, rerr *rpcError) {
	// Encoded into a pooled buffer rather than by json.Marshal, whose
	// answer is a copy of its own of every call's whole answer. An
	// Encoder writes nothing of a value it fails to encode, and ends
	// what it writes with a newline, which the answer leaves out as
	// Marshal did.
	buf := rpcBufs.Get().(*bytes.Buffer)
	defer putRPCBuf(buf)
	buf.Reset()
	enc := json.NewEncoder(buf)
	var err error
	if res, ok := result.(*mcp.CallToolResult); ok && rerr == nil && plainCallResult(res) {
		// Almost every answer: written in one pass (see encodeCallAnswer).
		err = encodeCallAnswer(buf, enc, id, res)
	} else {
		err = enc.Encode(rpcResponse{"2.0", id, result, rerr})
	}
	if err != nil {
		buf.Reset()
		_ = enc.Encode(rpcUnencodable(id))
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", noStore)
	w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// rpcBufs are the buffers the fast path's answers are encoded into.
var rpcBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putRPCBuf pools buf again, unless a rare large answer grew it: that one
// is left to the collector rather than kept.
func putRPCBuf(buf *bytes.Buffer) {
	if buf.Cap() <= 64<<10 {
		rpcBufs.Put(buf)
	}
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
	// In flight first: a call that ends between the two reads has set
	// last before it left, so it is seen either way.
	busy := sess.act.inflight.Load() > 0
	wait := idle - time.Since(time.Unix(0, sess.act.last.Load()))
	if busy {
		wait = idle
	}
	if wait > 0 {
		sess.act.mu.Lock()
		sess.act.timer.Reset(wait)
		sess.act.mu.Unlock()
		return
	}
	sess.endHere()
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
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if ir, ok := res.(*mcp.InitializeResult); ok && err == nil {
			sess.version.Store(ir.ProtocolVersion)
			if ss != nil {
				// Stored before the answer leaves: the client's next
				// request may reach another node.
				if serr := sess.store(ctx, ss, ir.ProtocolVersion); serr != nil {
					sess.s.Log.ErrorContext(ctx, "session not stored", "err", serr)
					go ss.Close()
					return nil, errors.New("the session cannot be recorded right now; initialize again shortly")
				}
			}
		}
		if sess.ss.Load() == nil && ss != nil {
			sess.established(ss)
		}
		return res, err
	}
}
