package mcpserver

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/toolplane/toolplane/httperr"
)

// Defaults of the session caps. A session holds the SDK's server and
// session and the tools it was shown, so its size grows with the catalogue
// (about 12 KB with one tool: heap in use after a collection, over 500
// sessions). It is held until its client ends it or it idles out; 64 per
// key leaves room for a fleet of concurrent runs on one key, and 2048 per
// node bounds what all keys together can hold.
const (
	DefaultMaxSessionsPerKey = 64
	DefaultMaxSessions       = 2048
)

// capRefusal is a request refused because opening its session would pass a
// cap: the code whose status (from the httperr table) it answers, and the
// JSON-RPC error that says which cap and how to free a session.
type capRefusal struct {
	code httperr.Code
	msg  string
}

// reserve counts the session r is about to open against the caps: the
// caller's credential's and the node's. It answers the release to call once
// the request is answered (by then the session is established, and counted
// as such, or it never will be), or the refusal when a cap is reached.
// Sessions established and still held count, and so do openings in flight,
// so concurrent openings cannot pass a cap together.
func (s *Server) reserve(r *http.Request) (release func(), refusal *capRefusal) {
	cred := credentialOf(r)
	if cred == nil {
		// Not authenticated: the SDK opens nothing for it.
		return func() {}, nil
	}
	key := cred.OrganizationID + "\x00" + cred.ID
	perKey, perNode := s.caps()
	s.mu.Lock()
	defer s.mu.Unlock()
	mine, all := s.pendingByKey[key], s.pendingAll
	for sess := range s.sessions {
		if sess.cred == nil || sess.closing.Load() || sess.ss.Load() == nil || !sess.live() {
			continue
		}
		all++
		if sess.cred.ID == cred.ID && sess.cred.OrganizationID == cred.OrganizationID {
			mine++
		}
	}
	idle := s.idle()
	switch {
	case mine >= perKey:
		return nil, &capRefusal{httperr.RateLimited, fmt.Sprintf(
			"this key holds %d MCP sessions on this server, the most one key may; end a session you no longer use (DELETE this endpoint with its Mcp-Session-Id header) or let one idle out (%s unused), then initialize again", mine, idle)}
	case all >= perNode:
		return nil, &capRefusal{httperr.Unavailable, fmt.Sprintf(
			"this server holds %d MCP sessions, the most it keeps; end a session you no longer use (DELETE this endpoint with its Mcp-Session-Id header), wait for one to idle out (%s unused), or try another server", all, idle)}
	}
	if s.pendingByKey == nil {
		s.pendingByKey = map[string]int{}
	}
	s.pendingByKey[key]++
	s.pendingAll++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.pendingByKey[key]--; s.pendingByKey[key] <= 0 {
			delete(s.pendingByKey, key)
		}
		s.pendingAll--
	}, nil
}

// caps answers the caps in force: the configured ones, or the defaults.
func (s *Server) caps() (perKey, perNode int) {
	perKey, perNode = s.MaxSessionsPerKey, s.MaxSessions
	if perKey <= 0 {
		perKey = DefaultMaxSessionsPerKey
	}
	if perNode <= 0 {
		perNode = DefaultMaxSessions
	}
	return perKey, perNode
}

// write answers the refusal as a JSON-RPC error to the request id (null
// when it had none) with the status of the refusal's code.
func (c *capRefusal) write(w http.ResponseWriter, id json.RawMessage) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{Code: -32000, Message: c.msg}})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", noStore)
	w.WriteHeader(c.code.Status())
	w.Write(b)
}
