package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/modelname"
	"github.com/toolplane/toolplane/projection"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/semver"
)

// A key whose listing is meta (toolplane.ListingMeta) is shown the three
// meta-tools of package discovery instead of every tool it may call; one
// whose listing is hybrid is shown its agent's most-used tools beside
// them. What the key may call is the same in every mode: find_tools and
// describe_tool read exactly what door.Door.Shown answers for the caller
// now (a grant added or removed reaches them at the next call, whatever
// the listing), and call_tool calls the tool it names through invokeTool,
// the path of a direct tools/call of it, with the call_tool request's own
// _meta: the same run, idempotency key, approvals, replays, refusals,
// tasks and result. A name the caller is not shown is answered as a
// direct call of a tool the session does not list.

// defaultFindLimit is how many matches find_tools answers when the model
// names no limit, and maxFindLimit the most it may ask for (its schema's
// bounds).
const (
	defaultFindLimit = 5
	maxFindLimit     = 20
)

// metaTools are the meta-tools as a listing shows them, in their order.
var metaTools = func() []*mcp.Tool {
	var out []*mcp.Tool
	for _, m := range discovery.MetaTools() {
		out = append(out, &mcp.Tool{Name: m.Name, Title: m.Title, Description: m.Description, InputSchema: m.InputSchema,
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: m.ReadOnly}})
	}
	return out
}()

// isMeta reports whether name is a meta-tool's.
func isMeta(name string) bool {
	return name == discovery.FindTools || name == discovery.DescribeTool || name == discovery.CallTool
}

// listingOf answers how a session of cred on the endpoint upstream lists
// tools: a governed copy of an upstream lists the server's own tools, as
// the server does, whatever the key's listing; otherwise the listing the
// client's endpoint URL asks for (see askedListing), else the key's.
func listingOf(cred *toolplane.Credential, upstream string, asked listingAsk) (toolplane.ToolListing, int) {
	if cred == nil || upstream != "" {
		return toolplane.ListingFull, 0
	}
	if asked.listing != "" {
		c := toolplane.Credential{Listing: asked.listing, ListingTop: asked.top}
		return c.ToolListing()
	}
	return cred.ToolListing()
}

// listingAsk is the listing a client's endpoint URL asks for; zero when it
// asks none.
type listingAsk struct {
	listing toolplane.ToolListing
	top     int
}

// askedListing reads the listing the request's URL asks for:
// /mcp?listing=meta, or ?listing=hybrid&top=N. A client connected by its
// URL alone (an OAuth client, a JWT's agent) has no key setting to carry
// it, and how tools are listed is the client's context to spend: every
// mode reaches exactly what the credential may call, so the URL chooses
// presentation, never power. Anything else is refused, named.
func askedListing(r *http.Request) (listingAsk, error) {
	q := r.URL.Query()
	l, top := q.Get("listing"), q.Get("top")
	if l == "" && top == "" {
		return listingAsk{}, nil
	}
	ask := listingAsk{listing: toolplane.ToolListing(l)}
	if l == "" || !ask.listing.Valid() {
		return listingAsk{}, fmt.Errorf("%w: the endpoint's listing parameter is full, meta or hybrid (?listing=hybrid&top=N)", toolplane.ErrInvalid)
	}
	if top != "" {
		n, err := strconv.Atoi(top)
		if err != nil || n < 1 || n > toolplane.MaxListingTop || ask.listing != toolplane.ListingHybrid {
			return listingAsk{}, fmt.Errorf("%w: the endpoint's top parameter is a number of tools from 1 to %d, with listing=hybrid", toolplane.ErrInvalid, toolplane.MaxListingTop)
		}
		ask.top = n
	}
	return ask, nil
}

// follow makes the session list tools as cred, the credential a request
// of the session's owner was admitted with, now says: a key's listing
// changed after the session opened reaches it at its next request (this
// node's key cache forgets a key changed through its API at once; another
// node's within its time to live), and the client is told its list
// changed.
func (sess *session) follow(cred *toolplane.Credential) {
	if cred == nil || cred.ID != sess.cred.ID {
		return
	}
	mode, top := listingOf(cred, sess.upstream, sess.asked)
	sess.mu.Lock()
	same := sess.listing == mode && sess.top == top
	sess.listing, sess.top = mode, top
	sess.mu.Unlock()
	if !same {
		sess.sync()
	}
}

// lookup answers what the session lists under name: a tool (l), or a
// meta-tool (meta, its name).
func (sess *session) lookup(name string) (l listed, meta string, known bool) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.metaOn && isMeta(name) {
		return listed{}, name, true
	}
	l, known = sess.onServer[name]
	return l, "", known
}

// unavailable answers a call of a tool the session does not list: the
// same answer for a tool that does not exist and one the key may not
// call, whether called directly or through call_tool.
func (sess *session) unavailable(name string) *mcp.CallToolResult {
	sess.mu.Lock()
	searching := sess.metaOn
	sess.mu.Unlock()
	return unavailable(name, searching)
}

// syncMeta puts the meta-tools on the session's server, or takes them
// off. sess.mu is held.
func (sess *session) syncMeta(on bool) {
	switch {
	case on && !sess.metaOn:
		for _, t := range metaTools {
			// A copy per session: each server keeps the tool it is given.
			tool := *t
			sess.srv.AddTool(&tool, sess.metaHandler(t.Name))
		}
	case !on && sess.metaOn:
		sess.srv.RemoveTools(discovery.FindTools, discovery.DescribeTool, discovery.CallTool)
	}
	sess.metaOn = on
}

// metaHandler answers a tools/call of the meta-tool name as the SDK
// dispatches it (the fast path calls callMeta directly).
func (sess *session) metaHandler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sess.s.sdkCalls.Add(1)
		var cred *toolplane.Credential
		if req.Extra != nil && req.Extra.TokenInfo != nil {
			cred, _ = req.Extra.TokenInfo.Extra["credential"].(*toolplane.Credential)
		}
		return sess.callMeta(ctx, req.Session, cred, name, req.Params.Arguments, req.Params.Meta)
	}
}

// callMeta answers a call of the meta-tool name with the arguments raw
// and the request's _meta, for the credential the request was admitted
// with (nil: the session's).
func (sess *session) callMeta(ctx context.Context, ss *mcp.ServerSession, cred *toolplane.Credential, name string, raw json.RawMessage, meta mcp.Meta) (*mcp.CallToolResult, error) {
	if cred == nil {
		cred = sess.cred
	}
	switch name {
	case discovery.FindTools:
		return sess.findTools(ctx, cred, raw)
	case discovery.DescribeTool:
		return sess.describeTool(ctx, cred, raw)
	}
	target, args, refused, err := sess.callTarget(ctx, cred, raw)
	if err != nil || refused != nil {
		return refused, err
	}
	return sess.invokeTool(ctx, ss, cred, target, args, meta)
}

// callTarget reads call_tool's arguments: the platform name of the tool
// named and the arguments to call it with, or the refusal of arguments
// that name no tool the caller is shown (as a direct call of a tool the
// session does not list is refused).
func (sess *session) callTarget(ctx context.Context, cred *toolplane.Credential, raw json.RawMessage) (string, json.RawMessage, *mcp.CallToolResult, error) {
	var in struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := strictDecode(raw, &in); err != nil || in.Name == nil {
		return "", nil, refusal(toolplane.Fail(toolplane.CodeInvalidInput,
			`call_tool takes {"name": the tool's name, "arguments": its arguments}; use describe_tool for a tool's arguments`)), nil
	}
	t, err := sess.shownTool(ctx, cred, *in.Name)
	if err != nil {
		return "", nil, nil, err
	}
	if t == nil {
		return "", nil, sess.unavailable(*in.Name), nil
	}
	return t.Def.Name, in.Arguments, nil, nil
}

// shownTool answers the tool cred is shown now under name (its model
// name, or its platform name), nil when none is: a tool that does not
// exist and one cred may not call are the same nothing.
func (sess *session) shownTool(ctx context.Context, cred *toolplane.Credential, name string) (*registry.Tool, error) {
	shown, err := sess.s.Door.Shown(ctx, cred, "")
	if err != nil {
		sess.s.Log.ErrorContext(ctx, "grants could not be read", "err", err)
		return nil, errors.New("the platform could not complete this call")
	}
	var found *registry.Tool
	for _, t := range shown {
		// The whole list is walked whatever is found, so a name the
		// caller is shown costs what one it is not shown costs.
		if found == nil && (t.Model == name || t.Def.Name == name) {
			found = t
		}
	}
	return found, nil
}

// strictDecode decodes a meta-tool's arguments into v, refusing a member
// v does not name (the schemas say additionalProperties: false) and
// anything but one object.
func strictDecode(raw json.RawMessage, v any) error {
	if firstByte(raw) != '{' {
		return errors.New("not an object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one value")
	}
	return nil
}

// found is one match as find_tools answers it.
type found struct {
	// Name is what the model calls the tool by (through call_tool, or
	// directly when it is listed).
	Name    string           `json:"name"`
	Title   string           `json:"title,omitempty"`
	Summary string           `json:"summary"`
	Effect  toolplane.Effect `json:"effect"`
	// RequiresApproval says a person decides each call before it runs.
	RequiresApproval bool `json:"requires_approval,omitempty"`
	// Deprecated says the version is to be retired; Replacement names
	// what replaces it, when the caller may call that.
	Deprecated  bool   `json:"deprecated,omitempty"`
	Replacement string `json:"replacement,omitempty"`
	// Requires are the tools whose output this one takes, PairsWith
	// those usually called beside it.
	Requires  []string `json:"requires_output_of,omitempty"`
	PairsWith []string `json:"commonly_paired_with,omitempty"`
	// Untrusted says the tool came from an upstream MCP server: its title
	// and summary are the server's words, fenced as untrusted data.
	Untrusted bool `json:"untrusted,omitempty"`
}

// findAnswer is find_tools' structured answer.
type findAnswer struct {
	Matches     []found `json:"matches"`
	NoGoodMatch bool    `json:"no_good_match,omitempty"`
	// Total is how many tools matched, of which Matches are the best.
	Total int `json:"total"`
}

// findTools answers find_tools: door.Door.Search over what cred is shown
// now, as structured content and a short text the model reads.
func (sess *session) findTools(ctx context.Context, cred *toolplane.Credential, raw json.RawMessage) (*mcp.CallToolResult, error) {
	var in struct {
		Query *string  `json:"query"`
		Tags  []string `json:"tags"`
		Limit int      `json:"limit"`
	}
	if err := strictDecode(raw, &in); err != nil || in.Query == nil {
		return refusal(toolplane.Fail(toolplane.CodeInvalidInput,
			`find_tools takes {"query": what you want done, "tags": optional tags every match holds, "limit": optional 1 to 20}`)), nil
	}
	limit := in.Limit
	switch {
	case limit == 0:
		limit = defaultFindLimit
	case limit < 0 || limit > maxFindLimit:
		return refusal(toolplane.Fail(toolplane.CodeInvalidInput, fmt.Sprintf("limit is 1 to %d", maxFindLimit))), nil
	}
	res, err := sess.s.Door.Search(ctx, cred, "", discovery.Query{Text: *in.Query, Tags: in.Tags, Limit: limit})
	switch {
	case errors.Is(err, toolplane.ErrInvalid):
		return refusal(toolplane.Fail(toolplane.CodeInvalidInput, err.Error())), nil
	case errors.Is(err, toolplane.ErrNotFound):
		return refusal(toolplane.Fail(toolplane.CodeUnavailable, "searching tools is not available on this deployment")), nil
	case err != nil:
		sess.s.Log.ErrorContext(ctx, "tool search failed", "err", err)
		return nil, errors.New("the platform could not complete this call")
	}
	out := findAnswer{Matches: []found{}, NoGoodMatch: res.NoGoodMatch, Total: res.Total}
	untrusted := false
	for _, m := range res.Matches {
		f := found{Name: m.Model, Title: m.Title, Summary: m.Summary, Effect: m.Effect, Deprecated: m.State == toolplane.StateDeprecated,
			Requires: modelNames(m.Requires), PairsWith: modelNames(m.PairsWith)}
		if m.Replacement != "" {
			name, rng := semver.SplitRef(m.Replacement)
			f.Replacement = modelname.Derive(name)
			if rng != "" {
				f.Replacement += "@" + rng
			}
		}
		if t := m.Tool; t != nil {
			f.RequiresApproval = t.Def.Annotations.RequiresApproval
			if r := t.Def.Binding.Remote; r != nil {
				src := "mcp:" + r.ConnectionID
				f.Title, f.Summary, f.Untrusted = fenceNonEmpty(src, f.Title), fenceNonEmpty(src, f.Summary), true
				untrusted = true
			}
		}
		out.Matches = append(out.Matches, f)
	}
	enc, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode the matches: %w", err)
	}
	r := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: findText(out)}}, StructuredContent: json.RawMessage(enc)}
	if untrusted {
		r.Meta = untrustedMeta()
	}
	return r, nil
}

// modelNames answers the model-facing names of platform names.
func modelNames(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = modelname.Derive(n)
	}
	return out
}

// findText renders find_tools' answer for a model that reads only text:
// one line per match (a fenced summary takes its fence's lines).
func findText(a findAnswer) string {
	if len(a.Matches) == 0 {
		if a.NoGoodMatch {
			return "No tool you may call matches this well enough. Say what you want done in other words, or with fewer tags."
		}
		return "No tool you may call matches this."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d matching tools, best first. describe_tool answers one's arguments; call_tool calls it.\n", len(a.Matches), a.Total)
	for _, m := range a.Matches {
		fmt.Fprintf(&b, "- %s (%s", m.Name, m.Effect)
		if m.RequiresApproval {
			b.WriteString("; a person approves each call")
		}
		if m.Deprecated {
			b.WriteString("; deprecated")
			if m.Replacement != "" {
				b.WriteString(", use " + m.Replacement)
			}
		}
		if len(m.Requires) > 0 {
			b.WriteString("; needs the output of " + strings.Join(m.Requires, ", "))
		}
		if len(m.PairsWith) > 0 {
			b.WriteString("; often with " + strings.Join(m.PairsWith, ", "))
		}
		b.WriteString("): " + m.Summary + "\n")
	}
	return b.String()
}

// describeTool answers describe_tool: the declaration of one tool cred is
// shown now, as a listing would show it. Its contract is frozen for the
// session, as a listing freezes what it shows: a call after the tool's
// schema changed answers tool_changed instead of running a call shaped
// for the old one.
func (sess *session) describeTool(ctx context.Context, cred *toolplane.Credential, raw json.RawMessage) (*mcp.CallToolResult, error) {
	var in struct {
		Name *string `json:"name"`
	}
	if err := strictDecode(raw, &in); err != nil || in.Name == nil {
		return refusal(toolplane.Fail(toolplane.CodeInvalidInput, `describe_tool takes {"name": the tool's name, as find_tools named it}`)), nil
	}
	t, err := sess.shownTool(ctx, cred, *in.Name)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return notShown(*in.Name), nil
	}
	// A replacement the key may not call is not named.
	decl := projection.ShownFor(t, func(name string) bool {
		u, err := sess.s.Door.ShownTool(ctx, cred, "", name)
		return err == nil && u != nil
	})
	r := t.Def.Binding.Remote
	if r != nil {
		// The server's words: fenced where the model reads them as text.
		src := "mcp:" + r.ConnectionID
		decl.Title, decl.Description = fenceNonEmpty(src, decl.Title), fenceNonEmpty(src, decl.Description)
	}
	enc, err := json.Marshal(decl)
	if err != nil {
		return nil, fmt.Errorf("encode %s's declaration: %w", t.Def.Name, err)
	}
	text := string(enc)
	out := &mcp.CallToolResult{StructuredContent: json.RawMessage(enc)}
	if r != nil {
		// The schema's own descriptions are the server's too.
		text = boundary.Fence("mcp:"+r.ConnectionID, text)
		out.Meta = untrustedMeta()
	}
	out.Content = []mcp.Content{&mcp.TextContent{Text: text}}
	sess.freeze(ctx, t)
	return out, nil
}

// notShown answers describe_tool of a name the caller is shown no tool
// by: the same for one that does not exist and one it may not call.
func notShown(name string) *mcp.CallToolResult {
	msg := fmt.Sprintf("no tool named %q you may call; find one with find_tools", name)
	if err := toolplane.CheckLen("the tool name", name, toolplane.MaxNameLen); err != nil {
		msg = err.Error() + "; find a tool with find_tools"
	}
	return refusal(toolplane.Fail(toolplane.CodeNotFound, msg))
}

// freeze holds the session's run to t's contract as describe_tool showed
// it (see recordListing).
func (sess *session) freeze(ctx context.Context, t *registry.Tool) {
	sess.mu.Lock()
	if sess.shown[t.Def.Name] == t.Def.SchemaHash {
		sess.mu.Unlock()
		return
	}
	shown := make(map[string]string, len(sess.shown)+1)
	for k, v := range sess.shown {
		shown[k] = v
	}
	shown[t.Def.Name] = t.Def.SchemaHash
	sess.shown = shown
	sess.listings++
	sess.mu.Unlock()
	sess.saveContracts(ctx, shown)
}
