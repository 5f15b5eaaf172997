// Package mcpserver serves toolplane's tools over the Model Context
// Protocol (Streamable HTTP), with the official Go SDK. A client
// authenticates with the same API keys as the REST API; it sees the tools
// its key grants, under their model-facing names, and every tools/call goes
// through the invoker like any other door. A refusal is a tool result with
// isError set and the stable code, so the model can act on it; a call that
// waits for a person answers a result saying so, with the approval's id and
// expiry, and the same call in the same session after the approval answers
// the executed result. A key may instead be listed the meta-tools
// (find_tools, describe_tool, call_tool), alone or beside its agent's
// most-used tools (see meta.go): it may call the same tools, through the
// same path.
package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/projection"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/upstream"
)

// Server serves the MCP endpoint. It is a translation of the protocol onto
// its Door: what a request authenticates as, what a key is shown, how a
// call is made and answered are the door layer's, shared with every other
// door; what is here is MCP's own (sessions, their caps and their store,
// the fast path, what a client is told).
type Server struct {
	// Door is the door layer the server's requests go through (required):
	// its Invoker runs the calls, its Registry is the catalogue sessions
	// show and follow, and it authenticates (API keys in its Store, JWTs
	// with its Tokens, its key cache), applies its rate limits, decides
	// what a key is shown (its Authz, whose changes sessions follow) and
	// caps every session's cost at its RunBudgetCents (the session is the
	// run; a client may name a lower ceiling in the call's _meta,
	// "toolplane/max_cost_cents", never a higher one). Handler and
	// UpstreamHandler panic without one, as a mux does on a nil handler:
	// a server that would authenticate nobody is a wiring mistake.
	Door *door.Door
	// AuthorizationServer, when set, is the issuer of the access tokens
	// the Door accepts beside API keys (toolplane's own authorization
	// server, or an external one whose JWTs the Door's Tokens verify): the
	// protected resource metadata names it (see ResourceMetadataHandler)
	// and a 401 points at that metadata.
	AuthorizationServer string
	// Scopes, when set, are the scopes the protected resource metadata
	// lists (scopes_supported): what a client asks the authorization
	// server for when no challenge named one.
	Scopes []string
	// Log receives what the server's clients are not told; nil is the
	// Door's Log, or slog.Default() when that is nil too.
	Log *slog.Logger
	// Version is reported to clients as the server implementation version.
	Version string
	// PublicURL is where people reach this deployment (http://host:port).
	// When set, a call that waits for approval also asks a client that
	// supports URL elicitation to show the person the approval's address.
	PublicURL string
	// Upstreams, when set, supplies the resources and prompts the governed
	// copy of each upstream relays beside its tools.
	Upstreams *upstream.Set
	// AllowedHosts are the names, besides loopback ones, a browser may
	// reach this endpoint by (see ProtectHost): the public URL's host.
	AllowedHosts []string
	// StreamResponses answers each POST as a server-sent event stream
	// instead of one application/json body. Both are the spec's Streamable
	// HTTP. A stream lets a server send notifications about a call (its
	// progress, its logs) before the answer; toolplane sends none (nor
	// relays an upstream's), and in JSON mode a message that is not the
	// answer still reaches a client on its standalone stream, so the
	// default is the JSON body, which costs less per call (no stream to
	// open, frame and flush). Set it when a client needs the streamed form.
	StreamResponses bool

	// SessionIdle ends an MCP session nobody used for this long (default
	// 30 minutes); a request in flight keeps it, an open stream alone does
	// not (as with the SDK's own timeout).
	SessionIdle time.Duration
	// TaskRetention is how long an ended asynchronous call is kept (the
	// platform's retention of ended calls): a task's ttl says it. Zero
	// leaves every task's ttl null.
	TaskRetention time.Duration

	// MaxSessionsPerKey caps the MCP sessions one credential holds on this
	// node, and MaxSessions those of all credentials together (zero: the
	// defaults, DefaultMaxSessionsPerKey and DefaultMaxSessions). A session
	// is held from the request that opens it until its client ends it
	// (DELETE) or it idles out (SessionIdle); a request that would open one
	// past a cap is refused (429 for the key's, 503 for the node's) with a
	// JSON-RPC error saying how to free one.
	MaxSessionsPerKey int
	MaxSessions       int

	// Audit, when set, is the audit trail a hybrid listing (see
	// toolplane.ListingHybrid) counts each agent's recent calls in, to
	// list its most-used tools; without it a hybrid listing shows the
	// meta-tools alone.
	Audit AuditLister

	// Sessions, when set, is where sessions live beyond this node's memory
	// (see durable.go): any node sharing the store continues a session
	// another opened, a restarted node continues its own, and a DELETE or
	// an expiry on one node ends the session on all. Without it a session
	// lives and dies with the node that opened it.
	Sessions toolplane.SessionStore
	// SessionTouch is how often, at most, a node moves a stored session's
	// expiry on while serving it, and so how late an expiry or a DELETE
	// made on another node is noticed here (default 5 seconds).
	SessionTouch time.Duration

	mu       sync.Mutex
	sessions map[*session]struct{}
	// pendingByKey and pendingAll count the session openings in flight
	// (see reserve).
	pendingByKey map[string]int
	pendingAll   int
	// byID finds an established session by the SDK's session id, for the
	// fast path.
	byID  map[string]*session
	watch sync.Once
	// sdkCalls counts the tool calls the SDK dispatched rather than the
	// fast path: what a test reads to know which answered.
	sdkCalls atomic.Int64

	// restoring holds a channel per session id being restored from the
	// store, closed when done (see stored).
	restoreMu sync.Mutex
	restoring map[string]chan struct{}
	// storeSwept is when this node last swept expired stored sessions.
	storeSwept atomic.Int64
	// usage keeps each agent's recent call counts (see callCounts).
	usage usageCache
}

// sessionIdle ends an MCP session nobody used for this long.
const sessionIdle = 30 * time.Minute

// Handler answers the MCP endpoint: every tool the caller's key grants,
// under model-facing names.
func (s *Server) Handler() http.Handler { return s.handler("") }

// UpstreamHandler answers the governed copy of one upstream MCP server:
// only that server's tools, under the names the server itself gives them,
// each call still decided, journalled, bounded and audited by the invoker.
// A client pointed here instead of at the server sees the same tools.
func (s *Server) UpstreamHandler(slug string) http.Handler { return s.handler(slug) }

// handler answers an MCP endpoint. Every request authenticates (a key
// revoked mid-session is refused within apikey.DefaultCacheTTL, at once when
// revoked through this node's API), and a session is
// bound to the credential that opened it: another key presenting its
// session id is refused by the SDK.
func (s *Server) handler(upstream string) http.Handler {
	if s.Door == nil {
		panic("mcpserver: Server.Door is required")
	}
	if s.Log == nil {
		s.Log = s.Door.Log
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	s.watch.Do(func() {
		s.Door.Registry.Watch(func() { go s.refresh() })
		if a := s.Door.Authz; a != nil {
			a.OnChange(func() { go s.refresh() })
		}
	})
	if upstream != "" && s.Upstreams != nil {
		s.Upstreams.OnChange(upstream, func(uri string) {
			if uri == "" {
				go s.refresh()
				return
			}
			s.resourceUpdated(upstream, uri)
		})
	}
	// The SDK asks for a server on every request but uses it only to open
	// a session; on any other request it reads just the protocol versions.
	probe := s.serverFor(nil, upstream, listingAsk{})
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if r.Header.Get("Mcp-Session-Id") != "" || r.Method != http.MethodPost {
			// Only a POST without a session opens one; the SDK refuses a
			// GET or DELETE without one after asking.
			return probe
		}
		if srv, ok := r.Context().Value(restoringKey{}).(*mcp.Server); ok {
			// A stored session restored on this node (see restore).
			return srv
		}
		cred := credentialOf(r)
		asked, _ := askedListing(r) // refused before, in listingParams
		// The SDK asks twice while opening a session (first for the
		// protocol versions alone): one request builds one session.
		if m, ok := r.Context().Value(openingKey{}).(*opening); ok {
			if m.discover {
				return probe
			}
			m.once.Do(func() { m.srv = s.serverFor(cred, upstream, asked) })
			return m.srv
		}
		return s.serverFor(cred, upstream, asked)
	}, &mcp.StreamableHTTPOptions{Logger: s.Log, JSONResponse: !s.StreamResponses, MaxRequestBodyBytes: maxRequestBody,
		// Sessions idle out on toolplane's own timer (see activity), which
		// also sees the calls the fast path answers.
		// ProtectHost below judges Host (and Origin) with the allowed
		// names; the SDK's own loopback check would refuse them again.
		DisableLocalhostProtection: len(s.AllowedHosts) > 0})
	h = listingParams(s.fast(private(h), upstream))
	path := "/mcp"
	if upstream != "" {
		path += "/" + upstream
	}
	meta := s.ResourceMetadataURL(path)
	verify := func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		// The door layer (see admit) has already authenticated the token,
		// recorded the key's use, and refused every request it did not
		// admit as an agent's.
		a, _ := r.Context().Value(admittedKey{}).(*door.Caller)
		if a == nil || a.Credential == nil {
			return nil, fmt.Errorf("%w: the key is not valid", auth.ErrInvalidToken)
		}
		cred := a.Credential
		return &auth.TokenInfo{
			// The session belongs to this credential of this organization;
			// see sessionOwner for an OAuth client's.
			UserID:     sessionOwner(cred),
			Expiration: cred.ExpiresAt,
			Extra:      map[string]any{"credential": cred},
		}, nil
	}
	// Host and Origin are judged before the key: a page a browser was
	// tricked into loading is refused whatever it sends. The SDK's bearer
	// check puts the admitted credential where the SDK binds sessions to
	// it (auth.TokenInfoFromContext); every error answer, the SDK's
	// included, is JSON (httperr.JSON).
	h = s.scoped(meta, upstream, h)
	h = auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true, ResourceMetadataURL: meta})(h)
	// The caller's trace context (the traceparent header; a call's _meta
	// may name its own, see invokeTool) is the request's parent.
	return s.Door.Traced("mcp", httperr.JSON(ProtectHost(s.admit(meta, h), s.AllowedHosts...), true, maxRequestBody))
}

// noStore is the Cache-Control of every MCP answer: each depends on the
// key (its session, the tools its grants show), so no cache, shared or
// not, may keep one; no-transform as the protocol's streams ask.
const noStore = "private, no-store, no-transform"

// private marks every answer of next as noStore, over the SDK's own
// "no-cache" (which lets a shared cache store an answer).
func private(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&privateWriter{ResponseWriter: w}, r)
	})
}

// privateWriter sets Cache-Control to noStore as the header is sent.
type privateWriter struct {
	http.ResponseWriter
	sent bool
}

func (p *privateWriter) mark() {
	if !p.sent {
		p.sent = true
		p.Header().Set("Cache-Control", noStore)
	}
}

func (p *privateWriter) WriteHeader(code int) { p.mark(); p.ResponseWriter.WriteHeader(code) }

func (p *privateWriter) Write(b []byte) (int, error) { p.mark(); return p.ResponseWriter.Write(b) }

// Flush sends the header (marked) and what was written so far: the SDK
// flushes its event streams through an http.ResponseController.
func (p *privateWriter) Flush() {
	p.mark()
	_ = http.NewResponseController(p.ResponseWriter).Flush()
}

// Unwrap answers the writer underneath, for http.ResponseController.
func (p *privateWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// admittedKey holds, in a request's context, the *door.Caller the door
// layer admitted, for the SDK's token check to report.
type admittedKey struct{}

// admit authenticates a request's bearer token through the door layer
// every door shares (door.Door.Authenticate: the bearer rule, the gate's
// authentication and failure and per-key limits, the key's use), so an
// agent looping on tools/call is slowed the same way whichever door it
// uses, and wrong secrets sent under a key's id never spend its holder's
// budget. It answers every refusal: 401 with a Bearer challenge (naming
// meta, the endpoint's protected resource metadata, when there is one) for
// a missing or refused token, 403 for a person's key (valid, but tools are
// called with an agent's), 429 over a budget, 503 when credentials cannot
// be checked (see refuse). Only an admitted agent's request reaches next.
func (s *Server) admit(meta string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := s.Door.AuthenticateRequest(r, w.Header())
		if err == nil {
			err = door.CallsTools(c.Credential)
		}
		if err != nil {
			refuse(w, meta, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), admittedKey{}, &c))
		if r.Header.Get("Authorization") == "" {
			// Admitted by its client certificate: the SDK's bearer check,
			// which puts the credential where the SDK binds sessions to
			// it, reads a bearer token before it asks toolplane's verify
			// (which reads the admitted caller, not the token). The
			// credential's public id stands in for one, on this request's
			// copy of the header alone.
			r.Header = r.Header.Clone()
			r.Header.Set("Authorization", "Bearer "+c.Credential.ID)
		}
		next.ServeHTTP(w, r)
	})
}

// session is what one MCP session sees: the server the SDK runs for it,
// the tools on it, and the contracts its client was shown.
type session struct {
	s        *Server
	srv      *mcp.Server
	cred     *toolplane.Credential
	upstream string
	created  time.Time
	// restored is set for a session this node restored from the store
	// rather than opened; runID is its run, as stored.
	restored bool
	runID    string
	// touched is when this node last touched the stored session (unix
	// nanoseconds; see touch).
	touched atomic.Int64
	// consented, when set, is the OAuth access token of the session's
	// credential last presented with a consent other than the one the
	// session was opened with (a step-up): the listing shows what it
	// admits (see rescope).
	consented atomic.Pointer[toolplane.Credential]
	// ss is the SDK's half of the session once established; act is what
	// keeps it alive.
	ss  atomic.Pointer[mcp.ServerSession]
	act activity
	// version is the protocol version the session negotiated (a string,
	// once initialised); closing is set once the session is ending.
	version atomic.Value
	closing atomic.Bool
	// recounting is set while a hybrid listing is read again (recount).
	recounting atomic.Bool
	// life ends when the session does (abandon): what toolplane asks the
	// client meanwhile (an elicitation) is abandoned then, because the
	// SDK's Close waits for every request the session has open.
	life    context.Context
	abandon context.CancelFunc

	mu sync.Mutex
	// relayed names the resources (by URI), templates (by URI template)
	// and prompts (by name) on srv, for the governed copy of an upstream.
	relayed map[string]bool
	// subs are the resources this session subscribed to at the upstream.
	subs map[string]bool
	// onServer maps each tool name on srv to the platform name and the
	// schema hash and version it was added at.
	onServer map[string]listed
	// shown is the schema hash of each tool (by platform name) as the
	// client last listed it: the run's frozen contracts. listings counts
	// the listings that replaced it on this node, so a touch that read
	// the stored contracts does not put back older ones over a listing
	// made meanwhile.
	shown    map[string]string
	listings int
	// listing is how the session lists tools, and top a hybrid listing's
	// number of most-used tools (see follow); metaOn is set while the
	// meta-tools are on srv.
	listing toolplane.ToolListing
	top     int
	metaOn  bool
	// asked is the listing the endpoint URL the session was opened at
	// asks for, which the key's setting does not override.
	asked listingAsk
}

type listed struct {
	platform, hash, version string
	// The hints tools/list shows, which an operator's runtime setting of
	// an upstream tool changes without a new version.
	effect      toolplane.Effect
	annotations toolplane.Annotations
	// description is the model-facing one, which a deprecation changes
	// without a new version.
	description string
}

// listingParams refuses a request whose URL asks for a listing that is
// not one (see askedListing), on every request of a session alike.
func listingParams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := askedListing(r); err != nil {
			httperr.Fail(w, r, nil, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serverFor builds the MCP server a session of cred sees, opened at an
// endpoint URL asking for the listing asked.
func (s *Server) serverFor(cred *toolplane.Credential, upstream string, asked listingAsk) *mcp.Server {
	srv, _ := s.build(cred, upstream, nil, asked)
	return srv
}

// build builds the MCP server a session of cred sees, and the session:
// a new one, or the stored row restored.
func (s *Server) build(cred *toolplane.Credential, upstream string, row *toolplane.Session, asked listingAsk) (*mcp.Server, *session) {
	life, abandon := context.WithCancel(context.Background())
	sess := &session{s: s, cred: cred, upstream: upstream, created: time.Now(), life: life, abandon: abandon,
		onServer: map[string]listed{}, shown: map[string]string{}, relayed: map[string]bool{}, subs: map[string]bool{}}
	sess.asked = asked
	sess.listing, sess.top = listingOf(cred, upstream, asked)
	if row != nil {
		sess.restored, sess.runID = true, row.RunID
		for k, v := range row.Contracts {
			sess.shown[k] = v
		}
	}
	opts := &mcp.ServerOptions{
		Logger: sdkLogger(s.Log),
		// Tools may appear later (an upstream connecting, a grant added),
		// so the capability and its change notifications are always on.
		Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{ListChanged: true}},
		// A listing is what this key's grants show (the protocol's default
		// scope is public): only the client that asked may keep it, and
		// only until it asks again, since grants change at any time.
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope, c.TTLMs = "private", 0 },
	}
	if cat, ok := s.catalogue(upstream); ok && cat.Subscribe {
		opts.SubscribeHandler = sess.subscribe
		opts.UnsubscribeHandler = sess.unsubscribe
	}
	if row != nil {
		// The SDK names the session it opens for the restoring initialize
		// with the stored id.
		opts.GetSessionID = func() string { return row.ID }
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "toolplane", Version: s.Version}, opts)
	sess.srv = srv
	if cred == nil {
		return srv, sess
	}
	sess.sync()
	srv.AddReceivingMiddleware(sess.register, sess.recordListing, sess.unknownTool)
	sess.serveTasks(srv)
	s.sweep()
	if row == nil {
		s.sweepStored()
	}
	s.mu.Lock()
	if s.sessions == nil {
		s.sessions = map[*session]struct{}{}
	}
	s.sessions[sess] = struct{}{}
	s.mu.Unlock()
	return srv, sess
}

// refresh brings every live session's tools up to date with the registry;
// the SDK tells each client its list changed.
func (s *Server) refresh() {
	for _, sess := range s.sweep() {
		sess.sync()
	}
}

// sweep forgets the servers whose sessions all ended (releasing their
// upstream subscriptions) and answers the live ones.
func (s *Server) sweep() []*session {
	s.mu.Lock()
	var live, dead []*session
	for sess := range s.sessions {
		n := 0
		for range sess.srv.Sessions() {
			n++
		}
		if n == 0 && time.Since(sess.created) > time.Minute {
			delete(s.sessions, sess)
			dead = append(dead, sess)
			continue
		}
		live = append(live, sess)
	}
	s.mu.Unlock()
	for _, sess := range dead {
		sess.abandon()
		sess.forget()
		sess.release()
	}
	return live
}

// sync makes the session's tools the ones the door layer shows its key
// now (door.Door.Shown), of its upstream alone on a governed copy.
func (sess *session) sync() {
	cred := sess.cred
	if c := sess.consented.Load(); c != nil {
		cred = c
	}
	shown, err := sess.s.Door.Shown(context.Background(), cred, "")
	if err != nil {
		// Keep what the session shows; the next change or listing tries
		// again, and every call is decided on the grants anyway.
		sess.s.Log.Error("grants could not be read", "err", err)
		return
	}
	// What the key may call, listed or not: a deprecated tool's
	// description names its replacement only when it is one of these.
	names := make(map[string]bool, len(shown))
	for _, t := range shown {
		names[t.Def.Name] = true
	}
	isShown := func(name string) bool { return names[name] }
	sess.mu.Lock()
	mode, top := sess.listing, sess.top
	sess.mu.Unlock()
	switch mode {
	case toolplane.ListingMeta:
		shown = nil
	case toolplane.ListingHybrid:
		shown = mostUsed(shown, sess.s.callCounts(context.Background(), cred), top)
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.listing != mode || sess.top != top {
		// Changed meanwhile: its own sync follows.
		return
	}
	sess.syncMeta(mode != toolplane.ListingFull)
	want := make(map[string]*registry.Tool, len(shown))
	for _, t := range shown {
		if sess.upstream != "" {
			if r := t.Def.Binding.Remote; r == nil || r.ConnectionID != sess.upstream {
				continue
			}
		}
		want[sess.nameOf(t)] = t
	}
	var gone []string
	for name := range sess.onServer {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
			delete(sess.onServer, name)
		}
	}
	if len(gone) > 0 {
		sess.srv.RemoveTools(gone...)
	}
	sess.syncRelayed(len(want) > 0)
	for name, t := range want {
		l := listed{platform: t.Def.Name, hash: t.Def.SchemaHash, version: t.Def.Version, effect: t.Def.Effect, annotations: t.Def.Annotations,
			description: t.ModelDescriptionFor(isShown)}
		if sess.onServer[name] == l {
			continue
		}
		tool := projection.ShownFor(t, isShown)
		if sess.upstream != "" {
			tool.Name = t.Def.Binding.Remote.RemoteName
		}
		sess.srv.AddTool(tool, sess.call(t.Def.Name))
		sess.onServer[name] = l
	}
}

// catalogue answers what an upstream publishes besides tools ("" and
// deployments without upstreams have nothing).
func (s *Server) catalogue(slug string) (upstream.Catalogue, bool) {
	if slug == "" || s.Upstreams == nil {
		return upstream.Catalogue{}, false
	}
	return s.Upstreams.Catalogue(slug)
}

// syncRelayed makes the resources, templates and prompts of a governed
// copy the upstream's now. They are shown to a session that may call at
// least one of the upstream's tools. sess.mu is held.
func (sess *session) syncRelayed(visible bool) {
	cat, ok := sess.s.catalogue(sess.upstream)
	if !ok {
		return
	}
	slug, ups := sess.upstream, sess.s.Upstreams
	want := map[string]bool{}
	if visible {
		for _, r := range cat.Resources {
			key := "r " + r.URI
			want[key] = true
			if !sess.relayed[key] {
				sess.srv.AddResource(r, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
					return labelResource(ups.ReadResource(ctx, slug, req.Params.URI))
				})
			}
		}
		for _, t := range cat.Templates {
			key := "t " + t.URITemplate
			want[key] = true
			if !sess.relayed[key] {
				sess.srv.AddResourceTemplate(t, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
					return labelResource(ups.ReadResource(ctx, slug, req.Params.URI))
				})
			}
		}
		for _, p := range cat.Prompts {
			key := "p " + p.Name
			want[key] = true
			if !sess.relayed[key] {
				sess.srv.AddPrompt(p, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return labelPrompt(ups.GetPrompt(ctx, slug, req.Params))
				})
			}
		}
	}
	for key := range sess.relayed {
		if want[key] {
			continue
		}
		switch kind, name := key[:1], key[2:]; kind {
		case "r":
			sess.srv.RemoveResources(name)
		case "t":
			sess.srv.RemoveResourceTemplates(name)
		case "p":
			sess.srv.RemovePrompts(name)
		}
	}
	sess.relayed = want
}

func (sess *session) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	sess.mu.Lock()
	already := sess.subs[req.Params.URI]
	sess.mu.Unlock()
	if already {
		return nil
	}
	if err := sess.s.Upstreams.Subscribe(ctx, sess.upstream, req.Params.URI); err != nil {
		return err
	}
	sess.mu.Lock()
	sess.subs[req.Params.URI] = true
	sess.mu.Unlock()
	return nil
}

func (sess *session) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	sess.mu.Lock()
	had := sess.subs[req.Params.URI]
	delete(sess.subs, req.Params.URI)
	sess.mu.Unlock()
	if !had {
		return nil
	}
	return sess.s.Upstreams.Unsubscribe(ctx, sess.upstream, req.Params.URI)
}

// release ends the upstream subscriptions of a session that is gone.
func (sess *session) release() {
	sess.mu.Lock()
	subs := sess.subs
	sess.subs = map[string]bool{}
	sess.mu.Unlock()
	for uri := range subs {
		_ = sess.s.Upstreams.Unsubscribe(context.Background(), sess.upstream, uri)
	}
}

// resourceUpdated tells the sessions of a governed copy that subscribed to
// uri that it changed.
func (s *Server) resourceUpdated(slug, uri string) {
	s.mu.Lock()
	var to []*session
	for sess := range s.sessions {
		if sess.upstream == slug {
			to = append(to, sess)
		}
	}
	s.mu.Unlock()
	for _, sess := range to {
		sess.mu.Lock()
		subscribed := sess.subs[uri]
		sess.mu.Unlock()
		if subscribed {
			_ = sess.srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
		}
	}
}

// nameOf is the name the session shows t under.
func (sess *session) nameOf(t *registry.Tool) string {
	if sess.upstream != "" {
		return t.Def.Binding.Remote.RemoteName
	}
	return t.Model
}

// recordListing freezes, at each tools/list the client makes, the
// contracts it was shown: a later call on a tool whose contract changed
// since answers tool_changed instead of running a call shaped for the old
// one.
func (sess *session) recordListing(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
			c, _ := extra.TokenInfo.Extra["credential"].(*toolplane.Credential)
			sess.follow(c)
		}
		if method == "tools/list" {
			// A listing shows the grants as they are now, including a
			// change made on another node.
			sess.sync()
		}
		res, err := next(ctx, method, req)
		if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil && method == "tools/list" {
			sess.mu.Lock()
			// A new map, never a change to the one calls hold: a call takes
			// the contracts without copying them.
			shown := make(map[string]string, len(sess.shown)+len(lr.Tools))
			for k, v := range sess.shown {
				shown[k] = v
			}
			changed := false
			for _, t := range lr.Tools {
				if l, ok := sess.onServer[t.Name]; ok {
					changed = changed || shown[l.platform] != l.hash
					shown[l.platform] = l.hash
				}
			}
			sess.shown = shown
			sess.listings++
			sess.mu.Unlock()
			if changed {
				// Any node continuing the session holds the run to what
				// its client was shown.
				sess.saveContracts(ctx, shown)
			}
		}
		return res, err
	}
}

// unknownTool answers a tools/call of a name the session does not show as
// the invoker answers one (a tool_unavailable result the model can act
// on), not as a protocol error: a tool removed or ungranted mid-session is
// a refusal like any other.
func (sess *session) unknownTool(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		ctr, ok := req.(*mcp.CallToolRequest)
		if !ok || ctr.Params == nil {
			return next(ctx, method, req)
		}
		if _, _, known := sess.lookup(ctr.Params.Name); known {
			return next(ctx, method, req)
		}
		return sess.unavailable(ctr.Params.Name), nil
	}
}

// unavailable answers a call of a tool the session does not show, on
// either path; searching says the session lists the meta-tools, which
// find the tools it does not list.
func unavailable(name string, searching bool) *mcp.CallToolResult {
	hint := "use only the tools you were given"
	if searching {
		hint = "find a tool with find_tools and call it with call_tool"
	}
	r := toolplane.Fail(toolplane.CodeToolUnavailable, fmt.Sprintf("no tool named %q is available; %s", name, hint))
	if err := toolplane.CheckLen("the tool name", name, toolplane.MaxNameLen); err != nil {
		// Not echoed: the answer stays bounded whatever the client sent.
		r = toolplane.Fail(toolplane.CodeInvalidInput, err.Error()+"; "+hint)
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(boundary.Render(r))}}}
}

// refusal answers r, a refusal, as an error tool result the model reads.
func refusal(r toolplane.Result) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(boundary.Render(r))}}}
}

// call answers a tools/call of the tool named name through the invoker,
// as the SDK dispatches it (the fast path calls invokeTool directly).
func (sess *session) call(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sess.s.sdkCalls.Add(1)
		var cred *toolplane.Credential
		if req.Extra != nil && req.Extra.TokenInfo != nil {
			cred, _ = req.Extra.TokenInfo.Extra["credential"].(*toolplane.Credential)
		}
		return sess.invokeTool(ctx, req.Session, cred, name, req.Params.Arguments, req.Params.Meta)
	}
}

// invokeTool calls the tool named name (its platform name) through the
// invoker, for the credential the door admitted this very request with
// (cred; nil is the session's). A session is bound to its credential's id,
// but a token of that id may say less than the one that opened the session
// (a JWT reissued with fewer tools): the call is decided on what the
// caller presents now, as on the REST door. The MCP session is the run:
// two identical writes in one session are one effect.
func (sess *session) invokeTool(ctx context.Context, ss *mcp.ServerSession, cred *toolplane.Credential, name string, raw json.RawMessage, meta mcp.Meta) (*mcp.CallToolResult, error) {
	s := sess.s
	if cred == nil {
		cred = sess.cred
	}
	call, refused := sess.doorCall(ss, name, raw, meta)
	if refused != nil {
		return refused, nil
	}
	// A traceparent in the call's _meta (the MCP convention) is its
	// parent, over the HTTP request's.
	ctx, sp := s.Door.TraceMeta(ctx, meta, name)
	defer sp.End()
	a := s.Door.Call(ctx, door.Caller{Credential: cred, At: time.Now()}, call)
	sess.recount(cred)
	return sess.answer(ctx, ss, cred, name, a, meta)
}

// recount lists a hybrid session's most-used tools again once the counts
// it listed them by are due to be read again: a call moves them, and the
// client is told when the list changed.
func (sess *session) recount(cred *toolplane.Credential) {
	sess.mu.Lock()
	hybrid := sess.listing == toolplane.ListingHybrid
	sess.mu.Unlock()
	if hybrid && sess.s.usageStale(cred) && sess.recounting.CompareAndSwap(false, true) {
		go func() {
			defer sess.recounting.Store(false)
			sess.sync()
		}()
	}
}

// answer answers a, the door's answer to a call of the tool named name
// made by cred with meta, as a tools/call result.
func (sess *session) answer(ctx context.Context, ss *mcp.ServerSession, cred *toolplane.Credential, name string, a door.Answer, meta mcp.Meta) (*mcp.CallToolResult, error) {
	s := sess.s
	switch a.Kind {
	case door.Accepted:
		return sess.awaitAsync(ctx, ss, cred, a.Async, meta[progressToken])
	case door.ApprovalRequired:
		s.elicitApproval(sess.life, ss, a.Approval)
		return s.approvalResult(a.Approval), nil
	case door.InFlight:
		if a.RetryAfter == 0 {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "An identical call is running; try again shortly."}}}, nil
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: a.Message}},
			Meta: mcp.Meta{"toolplane/retry_after_seconds": door.RetryAfterSeconds(a.RetryAfter)}}, nil
	case door.Invalid, door.Denied:
		// An identifier the client sent (in the call's _meta) is past its
		// bound, or the call lacks what its tool needs: the caller's
		// mistake, refused before anything was decided.
		code := toolplane.CodeInvalidInput
		if a.Kind == door.Denied {
			code = toolplane.CodeDenied
		}
		return refusal(toolplane.Fail(code, a.Message)), nil
	case door.Unavailable, door.Fault:
		return nil, fmt.Errorf("the platform could not complete this call")
	}
	res := a.Result
	if res.Error != nil && res.Error.AuthorizationURL != "" {
		s.elicitConnection(sess.life, ss, res.Error.AuthorizationURL)
	}
	return sess.render(cred, name, res), nil
}

// doorCall answers the door's call of the tool named name (its platform
// name) in session ss, with what the client's _meta names, or the refusal
// of a _meta the client sent wrong.
func (sess *session) doorCall(ss *mcp.ServerSession, name string, raw json.RawMessage, meta mcp.Meta) (door.Call, *mcp.CallToolResult) {
	run := sess.runID
	if run == "" {
		id := "session"
		if ss != nil {
			id = ss.ID()
		}
		run = runOf(sess.cred, id)
	}
	// shown is replaced, never changed in place, so the call reads the
	// contracts of this moment without copying them.
	sess.mu.Lock()
	var contracts map[string]string
	if len(sess.shown) > 0 {
		contracts = sess.shown
	}
	sess.mu.Unlock()
	call := door.Call{Tool: name, Arguments: raw, Source: toolplane.SourceMCP, RunID: run, StepPath: "agent", Contracts: contracts}
	if m := meta; m != nil {
		if id, ok := m[metaAuthorizedBy].(string); ok {
			call.AuthorizedBy = id
		}
		if who, present := m[metaOnBehalfOf]; present {
			// Refused when not a name, never ignored: the caller would
			// believe the call was made for the person.
			str, ok := who.(string)
			if !ok || str == "" {
				return call, refusal(toolplane.Fail(toolplane.CodeInvalidInput, fmt.Sprintf("_meta[%q] is a non-empty string when sent", metaOnBehalfOf)))
			}
			call.OnBehalfOf = str
		}
		if n, ok := m["toolplane/max_cost_cents"].(float64); ok && n > 0 {
			call.MaxCostCents = int64(n)
		}
		// The time and the hops the caller gives the call: refused when
		// not numbers, never ignored, as the REST door refuses them.
		if v, present := m[toolplane.MetaTimeoutMS]; present {
			ms, ok := metaNumber(v)
			t, err := door.TimeoutMillis(ms)
			if !ok || err != nil {
				return call, refusal(toolplane.Fail(toolplane.CodeInvalidInput, fmt.Sprintf("_meta[%q] is a positive number of milliseconds when sent", toolplane.MetaTimeoutMS)))
			}
			call.Timeout = t
		}
		if v, present := m[toolplane.MetaRemainingHops]; present {
			n, ok := metaNumber(v)
			if !ok || n != math.Trunc(n) || math.Abs(n) > 1<<20 {
				return call, refusal(toolplane.Fail(toolplane.CodeInvalidInput, fmt.Sprintf("_meta[%q] is a whole number when sent", toolplane.MetaRemainingHops)))
			}
			call.Hops, call.HopsAsked = int(n), true
		}
		// A run and an idempotency key the client keeps across sessions,
		// as the REST door takes them: a retry after a reconnect (a new
		// session) is then the same action. The invoker scopes both to
		// the agent, and the journal to the organization. A value that is
		// not a string is refused, never ignored: the client would believe
		// its retry protected.
		for i, key := range [...]string{metaRunID, metaIdempotencyKey} {
			v, present := m[key]
			if !present {
				continue
			}
			str, ok := v.(string)
			if !ok || str == "" {
				return call, refusal(toolplane.Fail(toolplane.CodeInvalidInput, fmt.Sprintf("_meta[%q] is a non-empty string when sent", key)))
			}
			if i == 0 {
				call.RunID = str
			} else {
				call.IdempotencyKey = str
			}
		}
	}
	// A session the client did not name as its run (nor the call by a key
	// of its own) is no boundary it chose: clients open one per call, so
	// the same agent's approval of the same call in another session is
	// offered to this one (see approval.Service.Open).
	call.SessionRun = call.RunID == run && call.IdempotencyKey == ""
	return call, nil
}

// metaNumber reads a _meta value that must be a number: a float64 as JSON
// decodes it, or a json.Number.
func metaNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// render answers res, the answer of a call of the tool named name made by
// cred, as the session answers a tools/call: the rendered envelope, the
// structured content of an object answer, an upstream's own form on its
// governed copy, the untrusted label.
func (sess *session) render(cred *toolplane.Credential, name string, res toolplane.Result) *mcp.CallToolResult {
	s := sess.s
	var lifted []mcp.Content
	if res.OK && (sess.upstream != "" || strings.HasPrefix(name, "mcp.")) {
		// Only a tool bound to an upstream answers in the server's form;
		// on /mcp those are the ingested mcp.<slug>.<name>, and the prefix
		// spares every other call the registry look-up.
		if t, ok := s.Door.Registry.Get(cred.OrganizationID, name); ok && t.Def.Binding.Remote != nil {
			switch {
			case sess.upstream != "":
				if out, ok := copyAnswer(&t.Def, res, sess.upstream); ok {
					return out
				}
			case upstream.ContentOutput(&t.Def):
				// On /mcp the model reads toolplane's envelope; an image or
				// audio the server sent leaves it for a block of its own.
				res.Data, lifted = liftMedia(res.Data)
				if res.Meta.Untrusted {
					// Out of the envelope, a block has lost its label:
					// it is cleaned as the governed copy cleans it (its
					// text fenced, its identifiers kept only in their own
					// syntax; an image's data is left alone).
					fence(lifted, "mcp:"+t.Def.Binding.Remote.ConnectionID)
				}
			}
		}
	}
	out := &mcp.CallToolResult{Content: append([]mcp.Content{&mcp.TextContent{Text: string(boundary.Render(res))}}, lifted...), IsError: !res.OK}
	if res.OK {
		if _, isObject := res.Data.(map[string]any); isObject {
			// Already-encoded JSON: the answer's encoder copies it instead
			// of walking the map by reflection (and sorting its keys) again.
			out.StructuredContent = encodedJSON(boundary.Encode(nil, res.Data))
		}
	}
	if res.Meta.Untrusted {
		// The text is the rendered envelope, which says so in its own
		// meta; the label here says it to a client that reads only the
		// protocol's.
		out.Meta = untrustedMeta()
	}
	return out
}

// copyAnswer answers a successful call on the governed copy of upstream
// slug in the form the server answers, not in toolplane's envelope: the
// content blocks of a tool that answers them, and for a tool with an
// output schema its structured content with that JSON as the text block
// (the form the MCP specification asks a server to send; toolplane keeps,
// bounds and journals the structured content alone). Text is fenced and
// the result labelled when it came from outside the platform.
func copyAnswer(d *toolplane.Definition, res toolplane.Result, slug string) (*mcp.CallToolResult, bool) {
	var out *mcp.CallToolResult
	if upstream.ContentOutput(d) {
		content, structured, ok := upstream.Content(res.Data)
		if !ok {
			return nil, false
		}
		out = &mcp.CallToolResult{Content: content, StructuredContent: structured}
	} else {
		if _, isObject := res.Data.(map[string]any); !isObject {
			return nil, false
		}
		enc := boundary.Encode(nil, res.Data)
		out = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(enc)}}, StructuredContent: encodedJSON(enc)}
	}
	if res.Meta.Untrusted {
		fence(out.Content, "mcp:"+slug)
		out.Meta = untrustedMeta()
	}
	return out, true
}

// liftMedia takes the image and audio blocks (and embedded resources
// holding a blob) out of the answer of a remote tool that answers content
// blocks, for the /mcp door to send as content blocks of their own rather
// than as base64 inside the envelope's JSON text. Each is replaced in the
// envelope by a note of its type and of the result's block that holds it
// (1 is the first after the envelope), so the model reads where it went.
// data itself is left as it was.
func liftMedia(data any) (any, []mcp.Content) {
	m, ok := data.(map[string]any)
	if !ok {
		return data, nil
	}
	items, ok := m["content"].([]any)
	if !ok {
		return data, nil
	}
	var moved []any
	kept := make([]any, len(items))
	for i, it := range items {
		kept[i] = it
		b, ok := it.(map[string]any)
		if !ok {
			continue
		}
		switch b["type"] {
		case "image", "audio":
		case "resource":
			if r, ok := b["resource"].(map[string]any); !ok || r["blob"] == nil {
				continue
			}
		default:
			continue
		}
		moved = append(moved, it)
		note := map[string]any{"type": b["type"], "content_block": len(moved)}
		if mt, ok := b["mimeType"].(string); ok {
			note["mimeType"] = mt
		}
		kept[i] = note
	}
	if len(moved) == 0 {
		return data, nil
	}
	blocks, _, ok := upstream.Content(map[string]any{"content": moved})
	if !ok || len(blocks) != len(moved) {
		return data, nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	out["content"] = kept
	return out, blocks
}

// untrustedMetaKey labels, in a tool result's _meta, a result that carries
// content from outside the platform. Data cannot forge it: the boundary
// renames any key in the toolplane/ namespace that a tool's answer holds.
const untrustedMetaKey = boundary.MetaPrefix + "untrusted"

func untrustedMeta() mcp.Meta { return mcp.Meta{untrustedMetaKey: true} }

// labelResource labels a resource read from an upstream as untrusted in
// its _meta. Its text is left as the server wrote it: a resource is a
// document a client may use as such (a file, a JSON record), which a fence
// would change.
func labelResource(res *mcp.ReadResourceResult, err error) (*mcp.ReadResourceResult, error) {
	if res != nil {
		res.Meta = labelled(res.Meta)
	}
	return res, err
}

// labelPrompt labels a prompt got from an upstream as untrusted in its
// _meta, and each message's content block in its own (a message has no
// _meta of its own). Its text is left as the server wrote it: a prompt is
// instructions a user picks to send, which a fence would change.
func labelPrompt(res *mcp.GetPromptResult, err error) (*mcp.GetPromptResult, error) {
	if res == nil {
		return res, err
	}
	res.Meta = labelled(res.Meta)
	for _, m := range res.Messages {
		if m == nil {
			continue
		}
		switch c := m.Content.(type) {
		case *mcp.TextContent:
			c.Meta = labelled(c.Meta)
		case *mcp.ImageContent:
			c.Meta = labelled(c.Meta)
		case *mcp.AudioContent:
			c.Meta = labelled(c.Meta)
		case *mcp.ResourceLink:
			c.Meta = labelled(c.Meta)
		case *mcp.EmbeddedResource:
			c.Meta = labelled(c.Meta)
		}
	}
	return res, err
}

// labelled answers the _meta m of something from an upstream with the
// untrusted label set, and without the keys of m that could pass for
// toolplane's: the server's own _meta does not speak for toolplane.
func labelled(m mcp.Meta) mcp.Meta {
	if m == nil {
		m = mcp.Meta{}
	}
	for k := range m {
		if boundary.LooksLikeMarker(k) {
			delete(m, k)
		}
	}
	m[untrustedMetaKey] = true
	return m
}

// elicitConnection asks a client that supports URL elicitation to show
// the person a call was made for where they connect the account the call
// needs (connection_required, connection_expired). Like an approval's, it
// does not wait: the call has answered, and the model reads the link too.
func (s *Server) elicitConnection(life context.Context, ss *mcp.ServerSession, link string) {
	if !elicitsURL(ss) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(life, 10*time.Minute)
		defer cancel()
		_, err := ss.Elicit(ctx, &mcp.ElicitParams{
			Mode:          "url",
			Message:       "A tool call needs you to connect your account. Open the link to connect it, then ask again.",
			URL:           link,
			ElicitationID: toolplane.NewID("eli_"),
		})
		if err != nil {
			s.Log.Debug("connection elicitation not shown", "err", err)
		}
	}()
}

// elicitsURL reports whether the client of ss supports URL elicitation.
func elicitsURL(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil && p.Capabilities.Elicitation.URL != nil
}

// elicitApproval asks a client that supports URL elicitation to show the
// person the approval's address. It does not wait: the call has already
// answered that it waits for approval, and a client that never answers the
// elicitation must not hold the call.
func (s *Server) elicitApproval(life context.Context, ss *mcp.ServerSession, ar *invoke.ApprovalRequired) {
	if s.PublicURL == "" || !elicitsURL(ss) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(life, 10*time.Minute)
		defer cancel()
		_, err := ss.Elicit(ctx, &mcp.ElicitParams{
			Mode:          "url",
			Message:       fmt.Sprintf("A tool call waits for approval %s. Open the link to review it.", ar.ID),
			URL:           s.approvalURL(ar.ID),
			ElicitationID: ar.ID,
		})
		if err != nil {
			s.Log.Debug("approval elicitation not shown", "approval", ar.ID, "err", err)
		}
	}()
}

// sessionOwner names whom an MCP session belongs to: a credential of an
// organization, or, for an OAuth access token, the client acting as its
// agent for the person. Each authorization of a client is a consent of its
// own (a new credential ID), and a client that steps up or signs in again
// goes on in its session with the new token, as the MCP authorization
// spec's scope challenge expects; another client, person or agent may not.
func sessionOwner(cred *toolplane.Credential) string {
	if cred.ClientID != "" {
		return strings.Join([]string{cred.OrganizationID, "oauth", cred.ClientID, cred.Subject, cred.ActsFor}, "\x00")
	}
	return cred.OrganizationID + "\x00" + cred.ID
}

// storedOwner is sessionOwner as a stored session row keeps it (its
// CredentialID, beside its organization), so a node that resumes the
// session compares owners as the node that opened it does: the
// credential's ID, or, for an OAuth access token, a digest of its client,
// agent and person (a client ID may be a long URL).
func storedOwner(cred *toolplane.Credential) string {
	if cred.ClientID == "" {
		return cred.ID
	}
	sum := sha256.Sum256([]byte(sessionOwner(cred)))
	return "oauth:" + hex.EncodeToString(sum[:16])
}
