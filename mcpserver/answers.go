package mcpserver

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/console"
	"github.com/toolplane/toolplane/invoke"
)

// A call that produced no result of its tool (it waits for a person, an
// identical call is running, it was refused) answers a tool result with
// isError set. The MCP specification has clients validate a result
// against the tool's output schema only when it is not an error, so a
// client shows such an answer whatever schema the tool declares; a plain
// result without structured content would be rejected by every client that
// validates (the TypeScript SDK, the Inspector, mcp-remote), and the model
// would never learn the approval's id.

// metaApproval is the _meta key of an approval-required answer's details:
// {id, status, expires_at, url, approve}.
const metaApproval = boundary.MetaPrefix + "approval"

// approvalResult answers a call that waits for a person: an error result
// whose text says what happened, where the person answers, and what the
// agent does next, with the same details, structured, in _meta. The flat
// keys toolplane/approval_id and toolplane/approval_expires_at stay for
// clients that read them.
func (s *Server) approvalResult(ar *invoke.ApprovalRequired) *mcp.CallToolResult {
	expires := ar.ExpiresAt.UTC().Format(time.RFC3339)
	var b strings.Builder
	if ar.Existing {
		fmt.Fprintf(&b, "Still waiting for approval %s: this identical call was already submitted and waits for a person; nothing was done yet and no new approval was filed.", ar.ID)
	} else {
		fmt.Fprintf(&b, "Approval required: this call waits for a person's approval (approval %s); nothing was done yet.", ar.ID)
	}
	fmt.Fprintf(&b, " The approval expires at %s; unanswered by then, the call is not made.", expires)
	details := map[string]any{"id": ar.ID, "status": "pending", "expires_at": expires}
	if ar.Ignored != "" {
		// The caller named an approval that does not authorize this call:
		// it learns why, rather than believing the approval was lost.
		fmt.Fprintf(&b, " The %s you sent was not used: %s.", metaAuthorizedBy, ar.Ignored)
		details["authorized_by_ignored"] = ar.Ignored
	}
	if base := strings.TrimRight(s.PublicURL, "/"); base != "" {
		// The console is where a person answers; the REST action stays
		// for a person's key.
		show := s.approvalURL(ar.ID)
		approve := base + "/v1/approvals/" + url.PathEscape(ar.ID) + "/approve"
		details["url"], details["approve"] = show, "POST "+approve
		fmt.Fprintf(&b, " A person who may answer it opens it in the console at %s (or, with an approver's key, approves it with POST %s or rejects it with .../reject).", show, approve)
	}
	if ar.Preview != "" {
		fmt.Fprintf(&b, " The person sees: %s.", strings.TrimSuffix(ar.Preview, "."))
	}
	fmt.Fprintf(&b, " What to do: tell the user that approval %s is needed, then wait. Once it is approved, call this tool again with the same arguments and _meta {%q: %q} to get the result (it runs once, whichever session asks); calling again before then answers that it is still waiting. Do not change the arguments to get around it: other arguments need their own approval.",
		ar.ID, metaAuthorizedBy, ar.ID)
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: b.String()}},
		Meta: mcp.Meta{
			metaApproval:                                details,
			boundary.MetaPrefix + "approval_id":         ar.ID,
			boundary.MetaPrefix + "approval_expires_at": expires,
		},
	}
}

// approvalURL answers where a person finds approval id: its page in the
// console, which shows it to whoever signs in with the right to read it.
func (s *Server) approvalURL(id string) string {
	return console.ApprovalURL(s.PublicURL, id)
}
