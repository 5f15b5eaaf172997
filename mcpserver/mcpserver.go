// Package mcpserver serves toolplane's tools over the Model Context
// Protocol (Streamable HTTP), with the official Go SDK. A client
// authenticates with the same API keys as the REST API; it sees the tools
// its key grants, under their model-facing names, and every tools/call goes
// through the invoker like any other door. A refusal is a tool result with
// isError set and the stable code, so the model can act on it; a call that
// waits for a person answers a result saying so, with the approval's id and
// expiry, and the same call in the same session after the approval answers
// the executed result.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/projection"
	"github.com/toolplane/toolplane/registry"
)

// Server serves the MCP endpoint.
type Server struct {
	Invoker  *invoke.Invoker
	Registry *registry.Registry
	Store    apikey.Getter
	// Tokens, when set, verifies bearer tokens that are not API keys.
	Tokens apikey.TokenVerifier
	Log    *slog.Logger
	// Version is reported to clients as the server implementation version.
	Version string
}

// sessionIdle ends an MCP session nobody used for this long.
const sessionIdle = 30 * time.Minute

// Handler answers the MCP endpoint. Every request authenticates (a key
// revoked mid-session is refused at its next request), and a session is
// bound to the credential that opened it: another key presenting its
// session id is refused by the SDK.
func (s *Server) Handler() http.Handler {
	if s.Log == nil {
		s.Log = slog.Default()
	}
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		var cred *toolplane.Credential
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
			cred, _ = ti.Extra["credential"].(*toolplane.Credential)
		}
		return s.serverFor(cred)
	}, &mcp.StreamableHTTPOptions{Logger: s.Log, SessionTimeout: sessionIdle})
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		cred, err := apikey.Authenticator{Store: s.Store, Tokens: s.Tokens}.Authenticate(ctx, token, time.Now())
		switch {
		case errors.Is(err, toolplane.ErrUnauthenticated):
			return nil, fmt.Errorf("%w: the key is not valid", auth.ErrInvalidToken)
		case err != nil:
			s.Log.ErrorContext(ctx, "credential lookup failed", "err", err)
			return nil, errors.New("credentials cannot be checked right now")
		case cred.Kind != toolplane.CredentialAgent:
			return nil, fmt.Errorf("%w: tools are called with an agent's key", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{
			// The session belongs to this credential of this organization.
			UserID:     cred.OrganizationID + "\x00" + cred.ID,
			Expiration: cred.ExpiresAt,
			Extra:      map[string]any{"credential": cred},
		}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
}

// serverFor builds the MCP server a session of cred sees: the tools its
// key grants, each projected under its model-facing name.
func (s *Server) serverFor(cred *toolplane.Credential) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "toolplane", Version: s.Version}, &mcp.ServerOptions{Logger: s.Log})
	if cred == nil {
		return srv
	}
	var granted []string
	for _, t := range s.Registry.Tools() {
		if cred.Grants(t.Def.Name) {
			granted = append(granted, t.Def.Name)
		}
	}
	for _, t := range s.Registry.Tools() {
		if !cred.Grants(t.Def.Name) {
			continue
		}
		srv.AddTool(projection.MCP(&t.Def), s.call(t, cred, granted))
	}
	return srv
}

// call answers a tools/call of t through the invoker. The MCP session is
// the run: two identical writes in one session are one effect.
func (s *Server) call(t *registry.Tool, cred *toolplane.Credential, granted []string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		session := "session"
		if req.Session != nil {
			session = req.Session.ID()
		}
		inv := &toolplane.Invocation{
			OrganizationID: cred.OrganizationID, RunID: "mcp:" + cred.ID + ":" + session, AgentID: cred.Subject,
			StepPath: "agent", Principal: toolplane.Principal{ID: cred.Subject, Tools: granted}, Source: toolplane.SourceMCP,
		}
		if m := req.Params.Meta; m != nil {
			if id, ok := m["toolplane/authorized_by"].(string); ok {
				inv.AuthorizedBy = id
			}
		}
		raw := req.Params.Arguments
		if len(raw) == 0 {
			raw = json.RawMessage(`{}`)
		}
		res, err := s.Invoker.InvokeJSON(ctx, t.Def.Name, raw, inv)
		var ar *invoke.ApprovalRequired
		switch {
		case errors.As(err, &ar):
			msg := fmt.Sprintf("This call waits for a person's approval (approval %s, expires %s); nothing was done yet. After it is approved, call again with the same arguments in this session to get the result.",
				ar.ID, ar.ExpiresAt.UTC().Format(time.RFC3339))
			if ar.Preview != "" {
				msg += " The person sees: " + ar.Preview
			}
			return &mcp.CallToolResult{
				Content: []mcp.Content{&mcp.TextContent{Text: msg}},
				Meta:    mcp.Meta{"toolplane/approval_id": ar.ID, "toolplane/approval_expires_at": ar.ExpiresAt.UTC().Format(time.RFC3339)},
			}, nil
		case errors.Is(err, invoke.ErrInFlight):
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "An identical call is running; try again shortly."}}}, nil
		case err != nil:
			s.Log.ErrorContext(ctx, "tool call fault", "tool", t.Def.Name, "err", err)
			return nil, fmt.Errorf("the platform could not complete this call")
		}
		out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(boundary.Render(res))}}, IsError: !res.OK}
		if res.OK {
			if _, isObject := res.Data.(map[string]any); isObject {
				out.StructuredContent = res.Data
			}
		}
		return out, nil
	}
}
