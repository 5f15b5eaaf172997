package mcpserver

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httperr"
)

// scoped answers a tools/call outside the consent of the OAuth access
// token the request was admitted with (door.Scope) as the MCP
// authorization spec's scope challenge: HTTP 403 with
// WWW-Authenticate: Bearer error="insufficient_scope", scope="tool:<name>"
// and the endpoint's resource metadata (meta), so the client asks the
// person for that tool and retries with the new token. Every other
// request, and every request of a credential that is not such a token,
// reaches next untouched: an API key's narrowing, like any refusal, is a
// tool result the model reads.
//
// Only a narrowed token pays for reading the body here; the name is the
// one the endpoint shows (model-facing on /mcp, the upstream's own on a
// governed copy), so a tool the token was not shown is still found.
func (s *Server) scoped(meta, upstream string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred := credentialOf(r)
		if cred == nil || cred.ClientID == "" {
			next.ServeHTTP(w, r)
			return
		}
		s.rescope(r, cred)
		if len(cred.Tools) == 0 || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
		if err != nil {
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
			next.ServeHTTP(w, r)
			return
		}
		c, ok := parseCall(body)
		r.Body = &readBody{Reader: bytes.NewReader(body), body: body, call: c, ok: ok}
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		platform := s.platformName(cred.OrganizationID, upstream, c.name)
		if platform == "" {
			next.ServeHTTP(w, r)
			return
		}
		var scope *door.ScopeError
		if err := door.Scope(cred, platform); errors.As(err, &scope) {
			w.Header().Set("WWW-Authenticate", apikey.InsufficientScope(meta, scope.Scope(), "the token's consent does not cover this tool"))
			fail(w, httperr.Denied, err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}

// platformName answers the platform name of the tool an endpoint shows
// as name to org's agents ("" when none is).
func (s *Server) platformName(org, upstream, name string) string {
	for _, t := range s.Door.Registry.Tools(org) {
		if upstream == "" {
			if t.Model == name {
				return t.Def.Name
			}
			continue
		}
		if rb := t.Def.Binding.Remote; rb != nil && rb.ConnectionID == upstream && rb.RemoteName == name {
			return t.Def.Name
		}
	}
	return ""
}

// rescope makes the listing of the session r names follow the consent of
// cred, an OAuth access token of the session's own owner (sessionOwner) whose
// narrowing differs from the one the listing shows: after a step-up the
// client goes on in its session with a token for more tools, and is shown
// them (a tools/list_changed follows). Calls are decided on the token
// presented in any case; a session held by another node follows at its
// next listing there.
func (s *Server) rescope(r *http.Request, cred *toolplane.Credential) {
	sess := s.session(r.Header.Get("Mcp-Session-Id"))
	if sess == nil || !sess.owns(r) {
		return
	}
	shown := sess.cred
	if c := sess.consented.Load(); c != nil {
		shown = c
	}
	if slices.Equal(shown.Tools, cred.Tools) {
		return
	}
	sess.consented.Store(cred)
	sess.sync()
}

// readBody is a request body scoped read whole, with what parseCall
// answered of it, so that the fast path after it takes the call as read
// instead of reading and parsing the body again. Whoever reads it from
// the start reads the body.
type readBody struct {
	*bytes.Reader
	body []byte
	call toolCall
	ok   bool
}

// Close does nothing: the body is in memory.
func (*readBody) Close() error { return nil }

// parsed answers the body and its reading when r's body is one scoped
// read and nobody has read from it since.
func parsed(r *http.Request) (body []byte, c toolCall, ok, read bool) {
	rb, read := r.Body.(*readBody)
	if !read || rb.Len() != len(rb.body) {
		return nil, toolCall{}, false, false
	}
	return rb.body, rb.call, rb.ok, true
}
