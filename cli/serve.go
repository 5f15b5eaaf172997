package cli

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/backend"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/demo"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/jobs"
	"github.com/toolplane/toolplane/jwtauth"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/metrics"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/toolfile"
	"github.com/toolplane/toolplane/upstream"
)

// DefaultOrganization is the organization a single-tenant install serves.
const DefaultOrganization = "default"

// newServeCmd runs the server. Its flags are parsed by serve itself, one
// flag set in one place, so the flags a deployment uses are defined where
// they are read.
func newServeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "serve [flags]",
		Short: "run the API, the MCP endpoint and the background work (toolplane serve --help for its flags)",
		Long: `serve runs the API (REST under /v1, MCP at /mcp) and the background work.
With no flags it serves an embedded SQLite file; --demo adds a catalogue that
really works; --database names a PostgreSQL DSN for a node of many.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if a.signals {
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
			}
			if code := serve(ctx, args, a.stdout, a.stderr); code != 0 {
				return silent(code)
			}
			return nil
		},
	}
}

// serve runs the server until ctx ends, then shuts down gracefully: the
// listener stops, calls in flight finish (or hold their claims), background
// jobs in hand finish, and queued audit events are stored.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	database := databaseFlag(fs)
	toolsDir := fs.String("tools", "", "a directory of tool definitions (*.yaml, *.yml, *.json) to load")
	withDemo := fs.Bool("demo", false, "add the built-in demo catalogue (search, add a note, refund with approval, metered analysis)")
	jwtIssuer := fs.String("jwt-issuer", "", "accept JWTs from this issuer (iss) besides API keys; needs --jwt-audience and --jwt-jwks-url")
	jwtAudience := fs.String("jwt-audience", "", "the audience (aud) accepted JWTs must name")
	jwtJWKS := fs.String("jwt-jwks-url", "", "where the issuer publishes its signing keys (JWKS)")
	rateLimit := fs.Int("rate-limit", 600, "requests per minute each API key may make on this node, counting only requests that authenticated as it (0: no limit)")
	authFailures := fs.Int("auth-failure-limit", 30, "failed authentications per minute allowed on this node from one client address (its connection's address; an IPv6 /64), and for one key id; past it failures answer 429, and an address past it is refused before its key is checked (0: no limit)")
	sessionsPerKey := fs.Int("mcp-sessions-per-key", mcpserver.DefaultMaxSessionsPerKey, "MCP sessions one key may hold open on this node; past it, opening one answers 429 until one ends (DELETE) or idles out")
	sessions := fs.Int("mcp-sessions", mcpserver.DefaultMaxSessions, "MCP sessions this node holds open, all keys together; past it, opening one answers 503")
	dataDir := fs.String("data", "", "where first start writes the admin credential; default: the SQLite file's directory, or toolplane-data")
	upstreamsFile := fs.String("upstreams", "", "a file of upstream MCP servers to ingest and govern (see docs/upstreams.md)")
	var upstreamFlags stringList
	fs.Var(&upstreamFlags, "upstream", "an upstream MCP server, slug=URL or slug=COMMAND ARGS (repeatable)")
	publicURL := fs.String("public-url", "", "where people reach this server (approval links and the served OpenAPI document's servers point here); default: http://ADDR")
	metricsToken := fs.String("metrics-token", os.Getenv("TOOLPLANE_METRICS_TOKEN"), "require this bearer token on /metrics ($TOOLPLANE_METRICS_TOKEN; empty: /metrics is open, for a scraper on a private network)")
	runBudget := fs.Int64("run-budget-cents", 0, "cap every run's cost, in cents: a metered call past it answers budget_exhausted (0: no cap; a caller may ask for a lower one)")
	gcPercent := fs.Int("gc-percent", 300, "the garbage collector's target (GOGC) when GOGC is not set: a server's live heap is small and every call allocates, so collecting at 3x the live heap spends far less CPU for a few more megabytes")
	logLevel := fs.String("log-level", "info", "the least severe log records written: debug, info, warn or error (debug adds every MCP session's opening and end)")
	logFormat := fs.String("log-format", "json", "the log's format on stderr: json (one object a line) or text (key=value)")
	pprofAddr := fs.String("pprof-addr", "", "serve Go's runtime profiles (net/http/pprof) on this address, e.g. 127.0.0.1:6060; off by default, never on the API's address")
	nodeName := fs.String("node", "", "this node's name, unique in the deployment and kept across restarts: a node that restarts under its name releases its earlier instance's claims at start (default: HOST:PORT of --addr, or HOST-PID when the port is 0)")
	leaseMargin := fs.Duration("lease-margin", invoke.DefaultLeaseMargin, "added to a tool's timeout to form a write's claim lease: a live call must never outlast its lease (pauses, slow commits), and a dead node's claims are decided by heartbeats long before it ends")
	heartbeatEvery := fs.Duration("heartbeat", 2*time.Second, "how often this node tells the others it is alive")
	deadAfter := fs.Duration("node-dead-after", 10*time.Second, "how long a node may go without a heartbeat before it is known dead and the claims it held are decided (released if never dispatched, otherwise uncertain or run again); 0: by their leases alone")
	sweepEvery := fs.Duration("sweep-every", 10*time.Second, "how often the sweep decides claims whose node died or whose lease ended, and schedules approved calls")
	if err := fs.Parse(longDashesIn(fs, args)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, "usage: toolplane serve [flags]\n\nflags:\n%s", fs.FlagUsages())
			return 0
		}
		fmt.Fprintf(stderr, "toolplane serve: %v\nRun 'toolplane serve --help' for usage.\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "toolplane serve: takes no arguments, got %q\nRun 'toolplane serve --help' for usage.\n", fs.Args())
		return 2
	}
	log, err := newLogger(stderr, *logLevel, *logFormat)
	if err != nil {
		fmt.Fprintf(stderr, "toolplane serve: %v\n", err)
		return 2
	}
	if _, set := os.LookupEnv("GOGC"); !set && *gcPercent != 0 {
		debug.SetGCPercent(*gcPercent)
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "toolplane serve: "+format+"\n", a...)
		return 1
	}

	b, err := backend.Open(ctx, *database)
	if err != nil {
		return fail("%v", err)
	}
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		return fail("migrate: %v", err)
	}

	name := *nodeName
	if name == "" {
		name = defaultNodeName(*addr)
	}
	self, err := jobs.Register(ctx, b.Store, name, time.Now())
	if err != nil {
		return fail("%v", err)
	}

	handlers := handler.NewRegistry()
	var defs []toolplane.Definition
	if *withDemo {
		ds, bs, err := demo.New().Catalogue()
		if err != nil {
			return fail("demo catalogue: %v", err)
		}
		if err := handlers.Register(bs...); err != nil {
			return fail("demo catalogue: %v", err)
		}
		defs = append(defs, ds...)
	}
	if *toolsDir != "" {
		loaded, err := loadTools(*toolsDir, stderr)
		if err != nil {
			return fail("%v", err)
		}
		defs = append(defs, loaded...)
	}
	var upstreamCfgs []upstream.Config
	if *upstreamsFile != "" {
		cs, err := upstream.ReadFile(*upstreamsFile)
		if err != nil {
			return fail("%v", err)
		}
		upstreamCfgs = append(upstreamCfgs, cs...)
	}
	for _, v := range upstreamFlags {
		c, err := upstream.ParseFlag(v)
		if err != nil {
			return fail("--upstream: %v", err)
		}
		upstreamCfgs = append(upstreamCfgs, c)
	}
	upstreams, err := upstream.New(upstreamCfgs, upstream.Options{Logger: log, Version: "0.1"})
	if err != nil {
		return fail("%v", err)
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: serveBindings{handlers, upstreams}})
	if err != nil {
		var ce *registry.CheckError
		if errors.As(err, &ce) {
			for _, p := range ce.Problems {
				fmt.Fprintln(stderr, p.String())
			}
			return fail("%d tool definition problem(s); this binary's handlers are: %s", len(ce.Problems), strings.Join(handlers.Keys(), ", "))
		}
		return fail("%v", err)
	}

	writer := audit.NewWriter(b.Store, 0, log)
	defer writer.Close()
	approvals := approval.New(b.Store, nil, 0)
	meters := metrics.New(metrics.Pending(b.Store), log)
	upstreams.UseRegistry(reg)
	// The operator's stored settings are applied before the first tool
	// list is ingested: a tool tightened at runtime is never served under
	// the file's relaxation, not even while the node starts.
	upstreamSettings := upstream.NewSettings(b.Store, upstreams, DefaultOrganization, log)
	if err := upstreamSettings.Refresh(ctx); err != nil {
		return fail("%v", err)
	}
	go upstreamSettings.Watch(ctx, 2*time.Second)
	upstreams.Start(ctx, 30*time.Second)
	defer upstreams.Close()
	// Published versions join the registry from the store, on every node.
	cat := catalog.New(catalog.Config{Store: b.Store, Registry: reg, Options: registry.Options{Bindings: serveBindings{handlers, upstreams}},
		Logger: log})
	if err := cat.Refresh(ctx); err != nil {
		return fail("load the published catalogue: %v", err)
	}
	go cat.Watch(ctx, 2*time.Second)
	grants := authz.New(b.Store, reg, log, nil)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: handlers, Remotes: upstreams, Store: b.Store, Policy: authz.Policy{Service: grants},
		Approvals: approvals, Audit: writer, Logger: log, Node: self.ID, Observer: meters,
		LeaseMargin: *leaseMargin, NodeDeadAfter: *deadAfter,
		// An approved call or a replay runs on the grants and the key as
		// they are when it runs, not as they were when it was filed.
		Principals: authz.Principals{Grants: grants, Keys: b.Store}})
	if err != nil {
		return fail("%v", err)
	}
	runner, err := b.Runner(jobs.Deps{Invoker: iv, Approvals: approvals, Store: b.Store, Maint: b.Store, Sunset: cat},
		jobs.Options{Logger: log, DeadAfter: *deadAfter, SweepEvery: *sweepEvery, Node: self.ID})
	if err != nil {
		return fail("%v", err)
	}
	iv.UseScheduler(runner)
	go jobs.Heartbeat(ctx, b.Store, self, *heartbeatEvery, nil, log)
	// The claims of this node's earlier instance (and of any node that
	// died meanwhile) are decided before this one serves: its callers'
	// retries find their never-dispatched keys free, not in flight.
	if err := runner.SettleLost(ctx); err != nil {
		return fail("settle lost claims: %v", err)
	}
	if err := runner.Start(ctx); err != nil {
		return fail("background work: %v", err)
	}

	if err := firstStart(ctx, b, *database, *dataDir, *withDemo, stdout); err != nil {
		return fail("first start: %v", err)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fail("listen on %s: %v", *addr, err)
	}
	var tokens apikey.TokenVerifier
	if *jwtIssuer != "" {
		if *jwtAudience == "" || *jwtJWKS == "" {
			return fail("--jwt-issuer needs --jwt-audience and --jwt-jwks-url")
		}
		tokens = &jwtauth.Verifier{Issuer: *jwtIssuer, Audience: *jwtAudience, JWKSURL: *jwtJWKS}
	}
	keys := apikey.NewCache(apikey.DefaultCacheSize, apikey.DefaultCacheTTL)
	// What every door does (authentication, rate limits, what a key is
	// shown, calls and the run budget) is set once, for both doors.
	doors := &door.Door{Invoker: iv, Registry: reg, Store: b.Store, Log: log, Tokens: tokens, Keys: keys, Authz: grants, RunBudgetCents: *runBudget}
	api := &httpapi.Server{Invoker: iv, Registry: reg, Store: b.Store, Log: log, Keys: keys, Catalog: cat, Authz: grants, Door: doors,
		UpstreamSettings: upstreamSettings}
	if *rateLimit > 0 {
		// One budget per key, whichever door it comes through.
		doors.Limiter = ratelimit.New(*rateLimit, time.Minute)
	}
	if *authFailures > 0 {
		// Failed authentications have a budget of their own, also shared
		// by the doors, so nobody without a key's secret spends its.
		doors.Failures = ratelimit.NewFailures(*authFailures, time.Minute)
	}
	var allowedHosts []string
	if u, err := url.Parse(*publicURL); err == nil && u.Hostname() != "" {
		allowedHosts = append(allowedHosts, u.Hostname())
	}
	public := *publicURL
	if public == "" {
		public = "http://" + ln.Addr().String()
	}
	api.PublicURL = public
	mcpDoor := &mcpserver.Server{Invoker: iv, Registry: reg, Store: b.Store, Log: log, Version: version(), PublicURL: public, AllowedHosts: allowedHosts, Upstreams: upstreams, Door: doors,
		MaxSessionsPerKey: *sessionsPerKey, MaxSessions: *sessions,
		// Sessions live in the database, so any node (and this one after a
		// restart) continues a session a client holds.
		Sessions: b.Store, AuthorizationServer: *jwtIssuer}
	// OAuth protected resource metadata (RFC 9728): the server's, which
	// the REST door's 401s name, and each MCP endpoint's.
	api.ResourceMetadata, api.Metadata = mcpDoor.ResourceMetadataURL(""), mcpDoor.ResourceMetadataHandler()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpDoor.Handler())
	for _, slug := range upstreams.Slugs() {
		mux.Handle("/mcp/"+slug, mcpDoor.UpstreamHandler(slug))
	}
	mux.Handle("GET /metrics", bearerOnly(*metricsToken, meters.Handler()))
	mux.Handle("/", api.Handler())
	// No WriteTimeout: MCP answers over long-lived event streams.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	fmt.Fprintf(stdout, "toolplane serving %d tool(s) on http://%s (REST under /v1, MCP at /mcp; %s %s)\n", len(reg.Tools("")), ln.Addr(), b.Kind, b.Where)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	if *pprofAddr != "" {
		// On an address of its own: profiles show internals no API caller
		// should reach.
		pl, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return fail("--pprof-addr: %v", err)
		}
		pm := http.NewServeMux()
		pm.HandleFunc("/debug/pprof/", pprof.Index)
		pm.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		pm.HandleFunc("/debug/pprof/profile", pprof.Profile)
		pm.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		pm.HandleFunc("/debug/pprof/trace", pprof.Trace)
		ps := &http.Server{Handler: pm, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = ps.Serve(pl) }()
		defer ps.Close()
		fmt.Fprintf(stdout, "runtime profiles on http://%s/debug/pprof/\n", pl.Addr())
	}

	select {
	case err := <-done:
		return fail("%v", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		log.Error("shutdown: calls still in flight", "err", err)
	}
	if err := runner.Stop(shutdown); err != nil {
		log.Error("shutdown: background work", "err", err)
	}
	iv.Wait()
	fmt.Fprintln(stdout, "toolplane stopped")
	return 0
}

// loadTools reads every definition file in dir.
func loadTools(dir string, stderr io.Writer) ([]toolplane.Definition, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tools directory: %w", err)
	}
	var defs []toolplane.Definition
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		d, notes, err := toolfile.ReadFile(filepath.Join(dir, e.Name()))
		for _, n := range notes {
			fmt.Fprintf(stderr, "%s: note: %s: %s\n", e.Name(), n.Field, n.Message)
		}
		if err != nil {
			return nil, err
		}
		defs = append(defs, d)
	}
	return defs, nil
}

// firstStartChange is the ID of the change that records a database's
// first start. The credentials first start mints have random IDs, like any
// key's (a fixed ID would tell everyone which id to present as the admin's);
// what makes one node's keys the first ones, when several nodes start on
// one empty database at once, is this change: each node stores its keys and
// then appends it, exactly one append succeeds, and every other node
// revokes the keys it stored and forgets them.
const firstStartChange = "chg_first_start"

// firstDemoGrantID is the demo agent's grant of the demo tools.
const firstDemoGrantID = "grt_first_demo"

// firstStart mints an admin credential (and, with the demo, an agent's) the
// first time the database is served. The keys are written to a file only
// the operator can read before they are stored, so a key never exists that
// nobody holds; the file is created exclusively and never through a
// symbolic link, so a file planted in the data directory cannot capture
// them.
func firstStart(ctx context.Context, b *backend.Backend, database, dataDir string, withDemo bool, stdout io.Writer) error {
	existing, _, err := b.Store.ListCredentials(ctx, DefaultOrganization, "", 1)
	if err != nil {
		return err
	}
	if len(existing) > 0 {
		return nil
	}
	if dataDir == "" {
		dataDir = "toolplane-data"
		if !backend.IsPostgres(database) {
			dataDir = filepath.Dir(database)
		}
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	type minted struct {
		cred *toolplane.Credential
		line string
	}
	mint := func(kind toolplane.CredentialKind, subject, label string, roles, tools []string) (minted, error) {
		id, secret, err := apikey.New(kind)
		if err != nil {
			return minted{}, err
		}
		c := &toolplane.Credential{ID: id, OrganizationID: DefaultOrganization, Kind: kind, Subject: subject, Roles: roles,
			Tools: tools, Hash: apikey.Hash(secret), Label: label, CreatedAt: time.Now(), CreatedBy: "first start"}
		return minted{c, fmt.Sprintf("%s=%s", label, apikey.Key(id, secret))}, nil
	}
	admin, err := mint(toolplane.CredentialPerson, "admin", "TOOLPLANE_ADMIN_KEY", []string{toolplane.RolePlatformAdmin, toolplane.RoleApprover, toolplane.RoleAuditor}, nil)
	if err != nil {
		return err
	}
	keys := []minted{admin}
	if withDemo {
		agent, err := mint(toolplane.CredentialAgent, "demo-agent", "TOOLPLANE_DEMO_AGENT_KEY", nil, nil)
		if err != nil {
			return err
		}
		keys = append(keys, agent)
	}
	var text strings.Builder
	for _, k := range keys {
		text.WriteString(k.line + "\n")
	}
	file := filepath.Join(dataDir, "credentials.env")
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s already exists but the database holds no credentials: move it away (it may hold another database's keys) or choose another --data directory", file)
	}
	if err != nil {
		return err
	}
	_, werr := f.WriteString(text.String())
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(file)
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := b.Store.InsertCredential(ctx, admin.cred); err != nil {
		os.Remove(file) // nothing was stored
		return fmt.Errorf("store first credentials: %w", err)
	}
	now := time.Now()
	err = b.Store.AppendChange(ctx, &toolplane.Change{ID: firstStartChange, OrganizationID: DefaultOrganization,
		Kind: "credential.first_start", Subject: admin.cred.ID, Actor: "first start", CreatedAt: now})
	if errors.Is(err, toolplane.ErrExists) {
		// Another node started on this database at the same moment and its
		// keys are the first ones; this node's admin key is withdrawn.
		admin.cred.RevokedAt = now
		if ok, err := b.Store.UpdateCredential(ctx, admin.cred); err != nil || !ok {
			return fmt.Errorf("withdraw the admin key %s that lost the first start to another node (it is in %s): %v", admin.cred.ID, file, err)
		}
		os.Remove(file)
		fmt.Fprintln(stdout, "first start: another node created the first credentials; they are in its data directory")
		return nil
	}
	if err != nil {
		return fmt.Errorf("record the first start (the admin key in %s is valid): %w", file, err)
	}
	for _, k := range keys[1:] {
		if err := b.Store.InsertCredential(ctx, k.cred); err != nil {
			// The admin key in the file works: keep it.
			return fmt.Errorf("store first credentials (the admin key in %s is valid): %w", file, err)
		}
	}
	if withDemo {
		// The demo agent's key narrows nothing: what it may call is what
		// its identity is granted, so the identity gets the demo
		// catalogue, recorded like any grant (and revocable like one).
		g := &toolplane.Grant{ID: firstDemoGrantID, OrganizationID: DefaultOrganization, AgentID: "demo-agent", Pattern: "demo.*",
			GrantedBy: "first start", CreatedAt: now}
		if err := b.Store.InsertGrant(ctx, g); err != nil {
			return fmt.Errorf("grant the demo agent the demo tools (the keys in %s are valid): %w", file, err)
		}
		detail, _ := json.Marshal(g)
		if err := b.Store.AppendChange(ctx, &toolplane.Change{ID: toolplane.NewID("chg_"), OrganizationID: DefaultOrganization,
			Kind: "grant.add", Subject: g.AgentID, Actor: "first start", Detail: detail, CreatedAt: now}); err != nil {
			return fmt.Errorf("record the demo agent's grant: %w", err)
		}
	}
	fmt.Fprintf(stdout, "first start: credentials written to %s (readable by you only); they are not shown again\n", file)
	return nil
}

// serveBindings resolves definitions against the handlers compiled into
// this binary and the configured upstream servers; it holds no fact
// resolvers yet.
type serveBindings struct {
	*handler.Registry
	upstreams *upstream.Set
}

func (b serveBindings) Connection(id string) bool { return b.upstreams.Connection(id) }
func (serveBindings) FactResolver(string) bool    { return false }

// bearerOnly requires Authorization: Bearer token on next, compared in
// constant time; an empty token leaves next open.
func bearerOnly(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			httperr.Send(w, r, httperr.Unauthenticated, "metrics need the metrics token", "")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ", ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
func (l *stringList) Type() string       { return "stringList" }

// defaultNodeName answers a node name stable across restarts when the
// node listens on a fixed port (two nodes on one host cannot share one),
// and unique to the process otherwise.
func defaultNodeName(addr string) string {
	h, err := os.Hostname()
	if err != nil {
		h = "node"
	}
	if _, port, err := net.SplitHostPort(addr); err == nil && port != "" && port != "0" {
		return h + ":" + port
	}
	return h + "-" + fmt.Sprint(os.Getpid())
}
