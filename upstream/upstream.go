package upstream

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/projection"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/tracectx"
)

// DefaultResync is how often a connected server's tool list is compared
// with the registry even when it announced no change.
const DefaultResync = time.Hour

// Options tune a Set.
type Options struct {
	Logger *slog.Logger
	// Resync defaults to DefaultResync.
	Resync time.Duration
	// Version is reported to servers as the client implementation version.
	Version string
}

// Set is the upstream servers of one toolplane process. It implements
// invoke.Remotes (the binding and presence check of every remote tool) and
// the connection half of registry.Bindings.
type Set struct {
	reg  *registry.Registry
	log  *slog.Logger
	opt  Options
	ups  map[string]*upstream
	wg   sync.WaitGroup
	stop context.CancelFunc
}

// upstream is one server and what toolplane last learnt of it.
type upstream struct {
	set  *Set
	cfg  Config
	sync chan struct{} // a request to synchronise the tool list now

	mu      sync.Mutex
	session *mcp.ClientSession
	// client is the HTTP client the session uses, for the lean call path (nil
	// for a stdio server); lost is closed when a call finds the session
	// gone at the server, telling the loop to reconnect.
	client *http.Client
	lost   chan struct{}
	// via is how the lean path sends on the session (see senderOf).
	via sender
	// remote is the tool list last read, by remote name.
	remote map[string]*mcp.Tool
	// contracts remembers each tool's schema hash and version, so a
	// changed contract gets a new version.
	contracts map[string]contract
	bindings  map[string]*handler.Binding
	// steering remembers, by remote name, the text addressed to the model
	// last reported for a tool, so each finding is logged once.
	steering map[string]string
	// overrides are the operator's stored settings, by remote name: each
	// replaces the file's relaxation of its tool (see Settings).
	overrides map[string]Relax

	// publish orders the registry updates of this server: a tool list
	// derived under older settings never lands after one derived under
	// newer, so a tightening is not undone by a resync racing it.
	publish sync.Mutex

	relay relay
	// transport carries every HTTP request to the server, across
	// reconnections, so its idle connections are kept and reused.
	transport *http.Transport
	// ids numbers the calls of the lean path.
	ids atomic.Uint64
	// mask hides the secrets of the server's URL in error text (nil when
	// it has none); see scrub.
	mask *strings.Replacer
	// personal is the sessions opened with people's tokens, for a server
	// bound to a connection provider (see personal.go).
	personal *personal

	// health is what the operator reads of the connection: when the
	// session last came up, and the last failure to connect or to list
	// the tools (scrubbed), until the next success. u.mu guards it.
	health health
}

// health is one server's connection as the operator reads it.
type health struct {
	connectedAt time.Time
	failedAt    time.Time
	// failingSince is the first failure since the last success.
	failingSince time.Time
	lastErr      string
}

// failed records err (already scrubbed) as the server's last failure.
func (u *upstream) failed(err error) {
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.health.failingSince.IsZero() {
		u.health.failingSince = now
	}
	u.health.failedAt, u.health.lastErr = now, cut(err.Error(), maxHealthError)
}

// maxHealthError bounds what the operator is shown of a failure.
const maxHealthError = 300

// succeeded records that the server answered: it is failing no more.
func (u *upstream) succeeded(connected bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if connected {
		u.health.connectedAt = time.Now()
	}
	u.health.failingSince, u.health.lastErr = time.Time{}, ""
}

// maxIdlePerServer is how many idle connections to one server are kept
// for reuse. Each concurrent call holds a connection for its request, and
// the default of two would make every call beyond the second open (and
// then drop) a connection of its own: under concurrency the federation
// would measure TCP setup instead of calls.
const maxIdlePerServer = 256

// newTransport answers the HTTP transport of one server: the default one's
// settings (proxy from the environment, timeouts, HTTP/2) with a pool as
// large as the concurrency toolplane serves.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = maxIdlePerServer
	t.MaxIdleConnsPerHost = maxIdlePerServer
	return t
}

type contract struct {
	hash  string
	major int
	// first is the hash of the contract first listed by this node, and
	// changedAt when a listing last changed it: a tool whose contract is
	// no longer the one it was ingested with has drifted.
	first     string
	changedAt time.Time
}

// ErrNotConnected: the server is not connected now; the call was not sent.
var ErrNotConnected = errors.New("upstream not connected")

// New answers the set of configured servers, not yet connected. reg is the
// registry their tools are ingested into (it may be set later with
// UseRegistry, since the registry's own bindings name the set).
func New(cfgs []Config, opt Options) (*Set, error) {
	if err := Check(cfgs); err != nil {
		return nil, err
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Resync <= 0 {
		opt.Resync = DefaultResync
	}
	s := &Set{log: opt.Logger, opt: opt, ups: map[string]*upstream{}}
	for _, c := range cfgs {
		s.ups[c.Slug] = &upstream{set: s, cfg: c, sync: make(chan struct{}, 1),
			contracts: map[string]contract{}, bindings: map[string]*handler.Binding{}, steering: map[string]string{},
			relay: relay{subs: map[string]int{}, listeners: map[int]func(string){}}, transport: newTransport(), mask: urlMasker(c.URL),
			personal: newPersonal()}
	}
	return s, nil
}

// UseRegistry names the registry the tools are ingested into. It must be
// called before Start.
func (s *Set) UseRegistry(reg *registry.Registry) { s.reg = reg }

// Slugs answers the configured connections, in no particular order.
func (s *Set) Slugs() []string {
	out := make([]string, 0, len(s.ups))
	for slug := range s.ups {
		out = append(out, slug)
	}
	return out
}

// Connection reports whether id is a configured upstream (registry
// Bindings).
func (s *Set) Connection(id string) bool { _, ok := s.ups[id]; return ok }

// Start connects to every server and keeps each connected and its tools
// synchronised until Close. It waits up to wait for the first
// synchronisation of every server, so a process that starts serving has
// the tools of the servers that answered; a server that did not is retried
// in the background, and its tools appear when it answers.
func (s *Set) Start(ctx context.Context, wait time.Duration) {
	if s.reg == nil {
		panic("upstream: Start before UseRegistry")
	}
	ctx, s.stop = context.WithCancel(ctx)
	first := make(chan struct{}, len(s.ups))
	for _, u := range s.ups {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			u.loop(ctx, first)
		}()
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for range s.ups {
		select {
		case <-first:
		case <-timer.C:
			return
		}
	}
}

// Close disconnects every server (a stdio server's process is stopped).
func (s *Set) Close() {
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
	for _, u := range s.ups {
		u.personal.closeAll()
		u.transport.CloseIdleConnections()
	}
}

// Sync synchronises one server's tools now.
func (s *Set) Sync(ctx context.Context, slug string) error {
	u, ok := s.ups[slug]
	if !ok {
		return fmt.Errorf("%w: no upstream %q", ErrConfig, slug)
	}
	return u.syncTools(ctx)
}

// Binding answers the binding that calls a remote tool (invoke.Remotes).
// It is the presence check: a tool the server's last list did not hold,
// or that no platform tool declares (ingestion refused it), answers
// toolplane.ErrNotFound; a server not connected, ErrNotConnected.
func (s *Set) Binding(r *toolplane.RemoteBinding) (*handler.Binding, error) {
	u, ok := s.ups[r.ConnectionID]
	if !ok {
		return nil, fmt.Errorf("connection %s: %w", r.ConnectionID, toolplane.ErrNotFound)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.remote[r.RemoteName]; !ok {
		if u.remote == nil && u.session == nil {
			return nil, fmt.Errorf("connection %s: %w", r.ConnectionID, ErrNotConnected)
		}
		return nil, fmt.Errorf("%s on %s: %w", r.RemoteName, r.ConnectionID, toolplane.ErrNotFound)
	}
	if u.session == nil && u.cfg.Connection == "" {
		// A server bound to a connection provider is called on the
		// sessions of people's tokens: the shared one only lists.
		return nil, fmt.Errorf("connection %s: %w", r.ConnectionID, ErrNotConnected)
	}
	// Listed is not ingested: a tool ingestion refused (a schema over a
	// bound, a colliding name) is declared by no platform tool, and is
	// not called, whatever definition binds it.
	if f, ok := s.reg.Floor(toolplane.Binding{Remote: r}); !ok || f.Default {
		return nil, fmt.Errorf("%s on %s is not ingested: %w", r.RemoteName, r.ConnectionID, toolplane.ErrNotFound)
	}
	b, ok := u.bindings[r.RemoteName]
	if !ok {
		var err error
		// Both call paths return once the call's context ends (an HTTP
		// request bound to it, or the SDK's call awaiting it).
		b, err = handler.BindFunc("mcp."+u.cfg.Slug+"."+r.RemoteName, u.caller(r.RemoteName), classify, handler.WithContextBound(),
			handler.WithTarget("upstream:"+u.cfg.Slug))
		if err != nil {
			return nil, err
		}
		u.bindings[r.RemoteName] = b
	}
	return b, nil
}

// loop keeps the server connected and its tools synchronised.
func (u *upstream) loop(ctx context.Context, first chan<- struct{}) {
	log := u.set.log.With("upstream", u.cfg.Slug)
	backoff := time.Second
	announced := false
	for ctx.Err() == nil {
		cs, hc, err := u.connect(ctx, nil)
		if err != nil {
			u.failed(u.scrub(err))
			log.Warn("upstream connection failed", "err", u.scrub(err), "retry_in", backoff)
			if !announced {
				announced = true
				first <- struct{}{}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, time.Minute)
			continue
		}
		backoff = time.Second
		lost := make(chan struct{})
		u.mu.Lock()
		u.session, u.client, u.lost, u.via = cs, hc, lost, senderOf(hc)
		u.mu.Unlock()
		if err := u.syncTools(ctx); err != nil {
			u.failed(u.scrub(err))
			log.Warn("upstream tool list not read", "err", u.scrub(err))
		} else {
			u.succeeded(true)
			log.Info("upstream connected", "tools", u.toolCount())
		}
		if !announced {
			announced = true
			first <- struct{}{}
		}
		closed := make(chan struct{})
		go func() { _ = cs.Wait(); close(closed) }()
		ticker := time.NewTicker(u.set.opt.Resync)
	connected:
		for {
			select {
			case <-ctx.Done():
				ticker.Stop()
				_ = cs.Close()
				u.drop(cs)
				return
			case <-closed:
				log.Warn("upstream disconnected; reconnecting")
				break connected
			case <-lost:
				log.Warn("upstream session lost; reconnecting")
				_ = cs.Close()
				break connected
			case <-ticker.C:
			case <-u.sync:
			}
			if err := u.syncTools(ctx); err != nil {
				u.failed(u.scrub(err))
				log.Warn("upstream tool list not read", "err", u.scrub(err))
			} else {
				u.succeeded(false)
			}
		}
		ticker.Stop()
		u.drop(cs)
	}
}

// drop forgets a session that ended; the tools stay registered (calls
// answer unavailable until the server is back).
func (u *upstream) drop(cs *mcp.ClientSession) {
	u.mu.Lock()
	if u.session == cs {
		u.session = nil
	}
	u.mu.Unlock()
}

// lose ends a session the server no longer knows (it answered a call on
// it 404): the session is forgotten at once, so calls answer unavailable
// rather than meet the same 404, and the loop reconnects. The SDK client
// notices a lost session on its own requests; a call sent by the lean path
// must report it.
func (u *upstream) lose(cs *mcp.ClientSession) {
	u.personal.drop(cs)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session != cs {
		return // already dropped, or replaced
	}
	u.session = nil
	close(u.lost)
}

func (u *upstream) toolCount() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.remote)
}

// requestSync asks the loop to synchronise soon; requests coalesce.
func (u *upstream) requestSync() {
	select {
	case u.sync <- struct{}{}:
	default:
	}
}

// notified acts on a notification the server sent on a call's stream, as
// the SDK client's handlers (set in connect) act on those it reads: a list
// changed is synchronised, a resource update relayed. Progress and log
// messages are not relayed.
func (u *upstream) notified(method string, params json.RawMessage) {
	switch method {
	case "notifications/tools/list_changed", "notifications/resources/list_changed", "notifications/prompts/list_changed":
		u.requestSync()
	case "notifications/resources/updated":
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(params, &p) == nil && p.URI != "" {
			u.relay.notify(p.URI)
		}
	}
}

// connect opens a session. For an HTTP server it also answers the HTTP
// client the session uses, which the lean call path shares (the same
// configured headers, the same pooled transport); hc, when given, is that
// client instead (one presenting a person's token).
func (u *upstream) connect(ctx context.Context, hc *http.Client) (*mcp.ClientSession, *http.Client, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "toolplane", Version: u.set.opt.Version}, &mcp.ClientOptions{
		Logger:                     u.set.log,
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { u.requestSync() },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { u.requestSync() },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { u.requestSync() },
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			if r.Params != nil {
				u.relay.notify(r.Params.URI)
			}
		},
		// (The lean call path acts on the same notifications when they
		// arrive on a call's stream: see notified.)
	})
	var t mcp.Transport
	switch {
	case u.cfg.URL != "" && hc != nil:
		t = &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, HTTPClient: hc}
	case u.cfg.URL != "":
		headers := http.Header{}
		for k, v := range u.cfg.Headers {
			ev, err := expand(v)
			if err != nil {
				return nil, nil, fmt.Errorf("header %s: %w", k, err)
			}
			headers.Set(k, ev)
		}
		hc = &http.Client{Transport: headerTransport{headers, u.transport}}
		t = &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, HTTPClient: hc}
	default:
		cmd := exec.CommandContext(ctx, u.cfg.Command[0], u.cfg.Command[1:]...)
		cmd.Env = commandEnv(os.Environ())
		for k, v := range u.cfg.Env {
			ev, err := expand(v)
			if err != nil {
				return nil, nil, fmt.Errorf("env %s: %w", k, err)
			}
			cmd.Env = append(cmd.Env, k+"="+ev)
		}
		cmd.Stderr = &lineLogger{log: u.set.log.With("upstream", u.cfg.Slug)}
		t = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := client.Connect(cctx, t, nil)
	if err != nil {
		if len(u.cfg.Command) > 0 {
			// A server that exits at start most often misses something of
			// its environment, which it says on its stderr (logged).
			return nil, nil, fmt.Errorf("connect %s: %w (the server's stderr is in the log as upstream stderr; a command server starts with PATH, HOME, the locale and the variables its env names, not toolplane's whole environment)", u.cfg.Slug, err)
		}
		return nil, nil, fmt.Errorf("connect %s: %w", u.cfg.Slug, err)
	}
	return cs, hc, nil
}

// syncTools reads the server's tool list and puts it in the registry.
func (u *upstream) syncTools(ctx context.Context) error {
	u.mu.Lock()
	cs := u.session
	u.mu.Unlock()
	if cs == nil {
		return ErrNotConnected
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	remote := map[string]*mcp.Tool{}
	for t, err := range cs.Tools(lctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools of %s: %w", u.cfg.Slug, err)
		}
		remote[t.Name] = t
	}
	u.publish.Lock()
	u.mu.Lock()
	u.remote = remote
	for name := range u.bindings {
		if _, ok := remote[name]; !ok {
			delete(u.bindings, name)
		}
	}
	u.mu.Unlock()
	u.ingest()
	u.publish.Unlock()
	return u.syncCatalogue(lctx, cs)
}

// ingest puts the tools last listed into the registry under the current
// settings. u.publish is held.
func (u *upstream) ingest() {
	u.mu.Lock()
	defs := make([]toolplane.Definition, 0, len(u.remote))
	for _, t := range u.remote {
		d, err := u.definition(t)
		if err != nil {
			u.set.log.Warn("remote tool not ingested", "upstream", u.cfg.Slug, "tool", t.Name, "err", u.scrub(err))
			continue
		}
		defs = append(defs, d)
	}
	u.mu.Unlock()
	for _, p := range u.set.reg.SetGroup(u.cfg.Slug, defs) {
		// A collision with a platform tool, or a schema toolplane cannot
		// check: the remote tool is left out, never shadowing another.
		u.set.log.Warn("remote tool refused", "upstream", u.cfg.Slug, "problem", p.String())
	}
}

// override makes the stored settings of each server those given (by slug,
// then remote name), re-ingesting the tools of a server whose settings
// changed at once, from its last tool list: the next call is decided
// under them, on this node, without asking the server anything.
func (s *Set) override(all map[string]map[string]Relax) {
	for slug, u := range s.ups {
		u.publish.Lock()
		u.mu.Lock()
		changed := !maps.EqualFunc(u.overrides, all[slug], equalRelax)
		u.overrides = all[slug]
		listed := len(u.remote) > 0
		u.mu.Unlock()
		if changed && listed {
			u.ingest()
		}
		u.publish.Unlock()
	}
}

func equalRelax(a, b Relax) bool {
	return a.Effect == b.Effect && equalOpt(a.Destructive, b.Destructive) && equalOpt(a.RequiresApproval, b.RequiresApproval) &&
		a.IdempotentDownstream == b.IdempotentDownstream && a.MaxAttempts == b.MaxAttempts
}

func equalOpt(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// relaxation answers the relaxation of one remote tool: the operator's
// stored setting when there is one, the file's otherwise. u.mu is held.
func (u *upstream) relaxation(name string) (Relax, bool) {
	if r, ok := u.overrides[name]; ok {
		return r, true
	}
	r, ok := u.cfg.Tools[name]
	return r, ok
}

// maxDescription matches the registry's default ceiling.
const maxDescription = 4096

// definition builds the registry entry of a remote tool under the
// restrictive defaults and the owner's relaxations. u.mu is held.
func (u *upstream) definition(t *mcp.Tool) (toolplane.Definition, error) {
	in, err := schemaJSON(t.InputSchema)
	if err != nil {
		return toolplane.Definition{}, fmt.Errorf("input schema: %w", err)
	}
	if in == nil {
		in = json.RawMessage(`{"type":"object"}`)
	}
	out, err := schemaJSON(t.OutputSchema)
	if err != nil {
		return toolplane.Definition{}, fmt.Errorf("output schema: %w", err)
	}
	if out == nil {
		// What the registry validates and bounds the answer against;
		// projection never shows it, the server declared no schema.
		out = json.RawMessage(projection.ContentSchema)
	}
	desc := strings.TrimSpace(t.Description)
	if desc == "" {
		desc = strings.TrimSpace(t.Title)
	}
	if desc == "" {
		desc = fmt.Sprintf("%s, published by MCP server %s without a description.", t.Name, u.cfg.Slug)
	}
	desc = cut(desc, maxDescription)
	d := toolplane.Definition{
		Name: "mcp." + u.cfg.Slug + "." + t.Name, Kind: toolplane.KindMCP, Description: desc,
		InputSchema: in, OutputSchema: out, Owner: u.cfg.Owner, Tags: []string{"mcp", u.cfg.Slug},
		Binding: toolplane.Binding{Remote: &toolplane.RemoteBinding{ConnectionID: u.cfg.Slug, RemoteName: t.Name}},
		Timeout: toolplane.Duration(u.cfg.Timeout),
		// The broker releases a connection of this provider for every
		// call, whose token the call presents.
		Connection: u.cfg.Connection,
	}
	registry.RemoteDefault(&d)
	if r, ok := u.relaxation(t.Name); ok {
		if r.Effect != "" {
			d.Effect = r.Effect
		}
		if r.Destructive != nil {
			d.Annotations.Destructive = *r.Destructive
		}
		if r.RequiresApproval != nil {
			d.Annotations.RequiresApproval = *r.RequiresApproval
		}
		if r.IdempotentDownstream && d.Effect != toolplane.EffectRead {
			// The key travels in every call's _meta; the owner says the
			// server honours it, so a repeat is one effect there.
			d.Annotations.Idempotent = true
			d.Replay = &toolplane.Replay{MaxAttempts: cmp.Or(r.MaxAttempts, DefaultMaxAttempts)}
		}
	}
	u.screen(&d, t.Name)
	if d.Effect == toolplane.EffectRead {
		d.Annotations.Destructive = false
	} else {
		no := false
		d.Repeatable = &no
	}
	hash, err := registry.SchemaHash(&d)
	if err != nil {
		return toolplane.Definition{}, err
	}
	c, seen := u.contracts[t.Name]
	switch {
	case !seen:
		c = contract{hash: hash, major: 1, first: hash}
	case c.hash != hash:
		// The contract changed: a new major version, so a run holding the
		// old one is answered tool_changed rather than sent a call shaped
		// for a tool that no longer exists.
		c = contract{hash: hash, major: c.major + 1, first: c.first, changedAt: time.Now()}
	}
	u.contracts[t.Name] = c
	d.Version = fmt.Sprintf("%d.0.0", c.major)
	d.SchemaHash = hash
	return d, nil
}

// SteeringTag labels an ingested tool whose name, description or schema
// text addresses the model ("ignore all previous instructions…").
const SteeringTag = "instructions-to-the-model"

// screen looks for text addressed to the model in an ingested tool. Such
// text is the server steering agents: it is logged (once per finding), the
// tool is tagged SteeringTag, and its calls need a person's approval even
// where the owner relaxed that, since what the text asks for is exactly a
// call the model would not otherwise make. u.mu is held.
func (u *upstream) screen(d *toolplane.Definition, remote string) {
	found := registry.Instructions(d)
	if len(found) == 0 {
		delete(u.steering, remote)
		return
	}
	d.Tags = append(d.Tags, SteeringTag)
	d.Annotations.RequiresApproval = true
	what := make([]string, len(found))
	for i, f := range found {
		what[i] = f.String()
	}
	if report := strings.Join(what, "; "); u.steering[remote] != report {
		u.steering[remote] = report
		u.set.log.Warn("remote tool text addresses the model; its calls need approval", "upstream", u.cfg.Slug, "tool", d.Name, "found", report)
	}
}

// schemaJSON renders a remote schema for toolplane's compiler. A server
// may state an older draft in $schema; the keywords toolplane checks mean
// the same in 2020-12, and a schema that relies on one that does not fails
// compilation and is left out, never validated loosely.
func schemaJSON(s any) (json.RawMessage, error) {
	if s == nil {
		return nil, nil
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if v, ok := m["$schema"].(string); ok && v != "https://json-schema.org/draft/2020-12/schema" {
		delete(m, "$schema")
	}
	return json.Marshal(m)
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// caller answers the handler function that calls one remote tool: by the
// lean path (call.go) on an HTTP server's session, through the SDK client
// otherwise.
func (u *upstream) caller(name string) handler.Func {
	if u.cfg.Connection != "" {
		return func(ctx context.Context, call handler.Call, args any) (any, error) {
			return u.callAs(ctx, call, name, args)
		}
	}
	return func(ctx context.Context, call handler.Call, args any) (any, error) {
		// One look under the lock: the session to send on, and whether the
		// tool as last listed declares an output schema.
		u.mu.Lock()
		cs, hc, via := u.session, u.client, u.via
		t, listed := u.remote[name]
		structured := listed && t.OutputSchema != nil
		u.mu.Unlock()
		if cs == nil {
			// Nothing was sent: the claim is released.
			return nil, &handler.Unavailable{Err: ErrNotConnected}
		}
		var out any
		var err error
		if lean(cs, hc) {
			out, err = u.callHTTP(ctx, cs, via, name, metaOf(ctx, call), args, structured)
		} else {
			out, err = u.callSDK(ctx, cs, name, metaOf(ctx, call), args, structured)
		}
		// A call's error is logged, and its text can reach the model as
		// an uncertain action's reason.
		return out, u.scrub(err)
	}
}

// scrubbed is an error whose text had the secrets of the server's URL
// masked. It unwraps to the error it stands for, so what kind of ending
// that error was is still read from it.
type scrubbed struct {
	err error
	msg string
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// scrub answers err with the secrets of the server's URL (what
// boundary.RedactURL hides: its user info, token-like path segments and
// query values) masked in its text. The HTTP client quotes a request's URL
// in its errors, minus only the password; the rest, where many servers
// take their key, would otherwise reach the logs and, through an uncertain
// action's reason, a model.
func (u *upstream) scrub(err error) error {
	if err == nil || u.mask == nil {
		return err
	}
	msg := err.Error()
	if m := u.mask.Replace(msg); m != msg {
		return &scrubbed{err: err, msg: m}
	}
	return err
}

// output turns a tool result into the answer toolplane validates: the
// structured content for a tool that declares an output schema, otherwise
// the content blocks (and any structured content) as plain JSON.
func output(res *mcp.CallToolResult, structured bool) (any, error) {
	if structured {
		return plain(res.StructuredContent)
	}
	content := make([]any, len(res.Content))
	for i, c := range res.Content {
		v, err := plainContent(c)
		if err != nil {
			return nil, err
		}
		content[i] = v
	}
	out := map[string]any{"content": content}
	if res.StructuredContent != nil {
		sc, err := plain(res.StructuredContent)
		if err != nil {
			return nil, err
		}
		out["structuredContent"] = sc
	}
	return out, nil
}

// plainContent answers one content block as plain JSON values. A text
// block with nothing but its text, the common answer, is built directly:
// it is exactly what the JSON round trip makes of it (a valid UTF-8 string
// reads back unchanged), without encoding and decoding it on every call.
// Any other block takes the round trip, so its wire form is the SDK's.
func plainContent(c mcp.Content) (any, error) {
	if t, ok := c.(*mcp.TextContent); ok && t.Meta == nil && t.Annotations == nil && utf8.ValidString(t.Text) {
		return map[string]any{"type": "text", "text": t.Text}, nil
	}
	return plain(c)
}

// plain re-reads a value as JSON values, numbers exact.
func plain(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("remote answer: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("remote answer: %w", err)
	}
	return out, nil
}

func contentText(cs []mcp.Content) string {
	var parts []string
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 {
		return "(no text)"
	}
	return strings.Join(parts, " ")
}

// classify ends a call whose transport failed after the request may have
// reached the server: the effect may have happened, so a write is held as
// an uncertain action rather than sent again. The failure is transient,
// and marked so: the invoker attempts a read whose retry is safe again,
// never a write (a remote binding declares no keyed downstream, since
// toolplane cannot know that the server honours the key it is sent).
func classify(err error) handler.Ending {
	var er *egressRefused
	if errors.As(err, &er) {
		return handler.Explain(toolplane.CodeUnavailable, er.Error())
	}
	return handler.Uncertain("the server did not answer the call: " + err.Error()).Retryable(0)
}

// headerTransport adds configured headers to every request.
type headerTransport struct {
	h    http.Header
	base http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.h {
		r.Header[k] = vs
	}
	// A request the SDK client sends for a call carries the call's trace
	// context (it is in its _meta too); the lean path sets it itself.
	if len(r.Header["Traceparent"]) == 0 {
		tracectx.ToHeader(r.Context(), r.Header)
	}
	return t.base.RoundTrip(r)
}

// sender is how the lean path sends a session's requests: the HTTP client
// and the configured headers post sets itself.
type sender struct {
	hc      *http.Client
	headers http.Header
}

// senderOf answers the lean path's sender on hc, a session's client. A
// client whose transport only adds the configured headers (the shared
// session's) is replaced by one on the transport beneath, post setting the
// headers itself: headerTransport clones every request it adds them to,
// as a RoundTripper must not change its request, and post's own request
// can take them directly. Any other client (a person's, which also
// records answers and goes out under egress rules) is used as it is.
func senderOf(hc *http.Client) sender {
	if hc == nil {
		return sender{}
	}
	if t, ok := hc.Transport.(headerTransport); ok {
		direct := *hc
		direct.Transport = t.base
		return sender{hc: &direct, headers: t.h}
	}
	return sender{hc: hc}
}

// lineLogger logs what a stdio server writes to stderr, line by line.
type lineLogger struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) > 4096 {
				l.log.Info("upstream stderr", "line", string(l.buf))
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		l.log.Info("upstream stderr", "line", strings.TrimRight(string(l.buf[:i]), "\r"))
		l.buf = l.buf[i+1:]
	}
}

// ContentOutput reports whether d is a remote tool answering its MCP
// content blocks (it declares no output schema of its own).
func ContentOutput(d *toolplane.Definition) bool { return projection.ContentOutput(d) }

// Content turns the answer of a ContentOutput tool back into MCP content
// blocks, after the boundary bounded and redacted it, so the governed copy
// of a server answers in the form the server does.
func Content(data any) ([]mcp.Content, any, bool) {
	m, ok := data.(map[string]any)
	if !ok {
		return nil, nil, false
	}
	if items, ok := m["content"].([]any); ok {
		out := make([]mcp.Content, 0, len(items))
		for _, it := range items {
			c, ok := textBlock(it)
			if !ok {
				// Not a bare text block: every block takes the wire path.
				return contentFromWire(m)
			}
			out = append(out, c)
		}
		return out, m["structuredContent"], true
	}
	return contentFromWire(m)
}

// textBlock answers a bare text block ({"type":"text","text":...}, the
// form plainContent builds) as the SDK's content without a JSON round
// trip; anything else (a block with annotations, a marker the boundary put
// in place of a block, a string that would not read back unchanged) is
// left to the wire path.
func textBlock(v any) (mcp.Content, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 2 || m["type"] != "text" {
		return nil, false
	}
	text, ok := m["text"].(string)
	if !ok || !utf8.ValidString(text) {
		return nil, false
	}
	return &mcp.TextContent{Text: text}, true
}

// contentFromWire is Content through the blocks' JSON form, read by the
// SDK's own decoding of a tool result (a block's _meta and annotations
// included, which decoding a bare block type would drop), so the blocks
// are exactly what the SDK would have made of the server's answer.
func contentFromWire(m map[string]any) ([]mcp.Content, any, bool) {
	raw, err := json.Marshal(map[string]any{"content": m["content"]})
	if err != nil {
		return nil, nil, false
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, nil, false
	}
	return res.Content, m["structuredContent"], true
}
