package mcpserver

import (
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolplane/toolplane/httperr"
)

// MetadataPath is where a resource's OAuth protected resource metadata is
// (RFC 9728 §3): the server's own at this path, an endpoint's at this path
// followed by the endpoint's (§3.1), as /.well-known/oauth-protected-resource/mcp.
const MetadataPath = "/.well-known/oauth-protected-resource"

// ResourceMetadataURL answers the URL of the protected resource metadata
// of the resource at path ("" for the whole server, "/mcp" for the MCP
// endpoint), for a 401's WWW-Authenticate to name; "" when the document
// does not exist (see ResourceMetadataHandler).
func (s *Server) ResourceMetadataURL(path string) string {
	if s.AuthorizationServer == "" || s.PublicURL == "" {
		return ""
	}
	return strings.TrimRight(s.PublicURL, "/") + MetadataPath + path
}

// ResourceMetadataHandler answers GET MetadataPath and GET
// MetadataPath/mcp (and /mcp/<slug> for each governed upstream) with the
// RFC 9728 document of that resource: its URL, the authorization server
// that issues the JWTs it accepts, and that tokens go in the
// Authorization header.
//
// The documents exist only where an authorization server is configured:
// the MCP authorization spec requires a document to name at least one,
// and an API key is not obtained through OAuth. Without one they answer
// 404 and no 401 points at them, so a client holding a bad API key shows
// the refusal instead of starting an OAuth flow against a server that
// has none.
func (s *Server) ResourceMetadataHandler() http.Handler {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, _ := strings.CutPrefix(r.URL.Path, MetadataPath)
		if s.ResourceMetadataURL(path) == "" || !s.resource(path) {
			httperr.Send(w, r, httperr.NotFound, "no protected resource metadata for "+r.URL.Path+
				"; this server has no OAuth authorization server (send an API key as Authorization: Bearer <key>)", "")
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=300")
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               strings.TrimRight(s.PublicURL, "/") + path,
			AuthorizationServers:   []string{s.AuthorizationServer},
			BearerMethodsSupported: []string{"header"},
			ScopesSupported:        s.Scopes,
			ResourceName:           "toolplane",
		}).ServeHTTP(w, r)
	})
	return httperr.JSON(h, false, 0)
}

// RegistrationPath is where an OAuth client registers itself (RFC 7591)
// with an authorization server that published no metadata: the MCP
// TypeScript SDK (behind mcp-remote, Claude Code and most applications)
// answers any 401 by starting OAuth, and when the resource names no
// authorization server it takes the resource's own origin for one and
// registers at this path. There is nothing to register with until toolplane
// has an authorization server: the answer is the reason and what to do
// instead, which such a client shows as it stands, rather than a bare 404
// that says only that registration failed.
const RegistrationPath = "/register"

// noRegistrationMessage is why no OAuth client registers here, and how a
// client authenticates instead.
const noRegistrationMessage = "toolplane has no OAuth authorization server, so no client registers here: it takes an agent's API key. " +
	"Send it as Authorization: Bearer <key> (mcp-remote: --header \"Authorization:Bearer ${TOOLPLANE_KEY}\"); " +
	"`toolplane client config claude-desktop|cursor|vscode` prints a client's configuration with it."

// RegistrationHandler answers POST RegistrationPath: 404 in the form of
// an RFC 7591 error (what a registering client reads), saying why no
// client registers and what to do instead. Where an authorization server
// is configured, clients register with it, never here: the path is then
// an ordinary unknown route.
func (s *Server) RegistrationHandler() http.Handler {
	return http.HandlerFunc(s.noRegistration)
}

func (s *Server) noRegistration(w http.ResponseWriter, r *http.Request) {
	if s.AuthorizationServer != "" {
		httperr.Send(w, r, httperr.NotFound, "no such route: "+r.Method+" "+r.URL.Path+"; clients register with the authorization server "+s.AuthorizationServer, "")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	httperr.WriteJSON(w, http.StatusNotFound, map[string]string{"error": "registration_not_supported", "error_description": noRegistrationMessage})
}

// resource reports whether path names a resource this server serves: the
// server itself, its MCP endpoint, or a governed upstream's.
func (s *Server) resource(path string) bool {
	switch {
	case path == "", path == "/mcp":
		return true
	case strings.HasPrefix(path, "/mcp/") && s.Upstreams != nil:
		return slices.Contains(s.Upstreams.Slugs(), strings.TrimPrefix(path, "/mcp/"))
	}
	return false
}
