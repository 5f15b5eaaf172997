package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/anomaly"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/async"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/auditexport"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/ceiling"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/discovery/signals"
	"github.com/toolplane/toolplane/facts"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/demo"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/internal/metrics"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/resilience"
	"github.com/toolplane/toolplane/rules"
	httpruntime "github.com/toolplane/toolplane/runtime/http"
	sqlruntime "github.com/toolplane/toolplane/runtime/sql"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/signing"
	"github.com/toolplane/toolplane/slack"
	"github.com/toolplane/toolplane/spend"
	"github.com/toolplane/toolplane/upstream"
)

// sources are what a node serves tools from: the handlers compiled in,
// the definitions to register, and the upstream MCP servers.
type sources struct {
	handlers  *handler.Registry
	defs      []toolplane.Definition
	upstreams *upstream.Set
}

// catalogue answers the node's sources: the handlers compiled in (the
// demo's, when asked), the definitions to register (the demo's, then the
// tools directory's), and the upstream servers (the file's, then the
// listed ones).
func (s *Server) catalogue() (sources, error) {
	cfg := s.cfg
	src := sources{handlers: handler.NewRegistry()}
	if cfg.Demo {
		ds, bs, err := demo.New().Catalogue()
		if err != nil {
			return src, fmt.Errorf("demo catalogue: %w", err)
		}
		if err := src.handlers.Register(bs...); err != nil {
			return src, fmt.Errorf("demo catalogue: %w", err)
		}
		src.defs = append(src.defs, ds...)
	}
	if cfg.ToolsDir != "" {
		loaded, err := loadTools(cfg.ToolsDir, cfg.Stderr)
		if err != nil {
			return src, err
		}
		src.defs = append(src.defs, loaded...)
	}
	var upstreamCfgs []upstream.Config
	if cfg.UpstreamsFile != "" {
		cs, err := upstream.ReadFile(cfg.UpstreamsFile)
		if err != nil {
			return src, err
		}
		upstreamCfgs = append(upstreamCfgs, cs...)
	}
	upstreamCfgs = append(upstreamCfgs, cfg.Upstreams...)
	upstreams, err := upstream.New(upstreamCfgs, upstream.Options{Logger: s.log, Version: cfg.Version})
	if err != nil {
		return src, err
	}
	src.upstreams = upstreams
	return src, nil
}

// services are what the doors serve, built in one place.
type services struct {
	reg              *registry.Registry
	iv               *invoke.Invoker
	upstreams        *upstream.Set
	upstreamSettings *upstream.Settings
	cat              *catalog.Service
	grants           *authz.Service
	rules            *rules.Service
	approvals        *approval.Service
	meters           *metrics.Metrics
	// traffic is the node's breakers, bulkheads and load shedder (nil
	// when off).
	traffic     *resilience.Traffic
	connections *connection.Admin
	broker      *connection.Broker
	keys        *secret.Keyring
	// notes tells people of approvals and uncertain calls; its Links
	// check the one-click links its messages carry.
	notes *notify.Service
	// slack answers the buttons of approval messages in Slack, and
	// keeps the links of Slack accounts to people; nil when the store
	// keeps no links.
	slack *slack.Service
	// webhookSecrets keeps the organizations' callback signing secrets.
	webhookSecrets *signing.Secrets
	// ceilings keeps the organizations' vendor ceilings, checked before
	// they are stored.
	ceilings *ceiling.Service
	// spend keeps the organizations' daily spend ceilings and reports
	// their spend.
	spend *spend.Service
	// known remembers which organizations have a daily ceiling, so the
	// metered calls of those without skip reading the day's counter.
	known *spend.Known
	// async accepts calls to run later, runs them on the background work
	// and posts their callbacks, signed with webhookSecrets.
	async *async.Service
	// exports ship the audit trail to the configured sinks (none: empty).
	exports *auditexport.Exporters
	// anomalies is the anomaly triage (nil when off).
	anomalies *anomaly.Service
	// discovery is the node's search index, following the registry.
	discovery *discovery.Index
	// signals are the health and popularity the search ranks by, from
	// the calls the invoker observes and the breakers.
	signals *signals.Keeper
}

// services builds, in this order, what decides calls (policy), what keeps
// the registry current (the catalogue's watches), the connections and the
// runtimes they are released to, the invoker, the notifications, and the
// background work, which it starts last. The node is self; its files are
// in d.
func (s *Server) services(ctx context.Context, self *toolplane.Node, d disk, src sources) (*services, error) {
	tracer, spans, err := s.tracer(ctx)
	if err != nil {
		return nil, err
	}
	clients := &egressClients{}
	run, sqlRuntime, err := s.buildRuntimes(d, clients)
	if err != nil {
		return nil, err
	}
	pol, err := s.buildPolicy(src, run)
	if err != nil {
		return nil, err
	}
	s.reg = pol.reg
	meters := metrics.NewWith(metrics.Config{Pending: metrics.Pending(s.b.Store), Uncertain: metrics.Uncertain(s.b.Store),
		MaxLabelValues: s.cfg.MetricsMaxLabelValues, Log: s.log})
	svc := &services{reg: pol.reg, grants: pol.grants, rules: pol.rules, upstreams: src.upstreams,
		approvals: approval.New(approval.Config{Store: s.b.Store, Usage: s.b.Store, Decided: meters.ApprovalDecided}),
		meters:    meters,
		ceilings:  ceiling.New(s.b.Store, nil),
		spend:     spend.New(s.b.Store, nil),
		known:     spend.NewKnown(s.b.Store, nil)}
	svc.spend.Tell(svc.known)
	if spans != nil {
		svc.meters.WatchSpans(spans)
	}
	if s.limits, err = s.rateLimits(ctx, svc.meters); err != nil {
		return nil, err
	}
	if svc.cat, svc.upstreamSettings, err = s.watchCatalogue(ctx, pol, src.upstreams); err != nil {
		return nil, err
	}
	if svc.keys, svc.connections, svc.broker, err = s.buildConnections(self, d, clients, sqlRuntime); err != nil {
		return nil, err
	}
	if svc.exports, err = s.auditExports(ctx, svc.meters); err != nil {
		return nil, err
	}
	if !s.cfg.TrafficOff {
		svc.traffic = resilience.New(s.cfg.Traffic)
		svc.meters.WatchTraffic(svc.traffic)
	}
	if svc.discovery, svc.signals, err = s.buildDiscovery(svc); err != nil {
		return nil, err
	}
	// The index follows the registry from here on: every publish, retire
	// or upstream change this node's registry takes is searchable once
	// the registry serves it.
	s.closers = append(s.closers, svc.discovery.Follow(pol.reg))
	if svc.iv, err = s.buildInvoker(self, src, pol, svc, run, tracer); err != nil {
		return nil, err
	}
	s.iv = svc.iv
	svc.notes, err = notify.New(notify.Config{Store: s.b.Store, Keys: svc.keys, PublicURL: s.public, AllowCIDRs: s.cfg.NotifyAllowCIDRs,
		SlackAPI: s.cfg.SlackAPI, SlackHooks: s.cfg.SlackHooks})
	switch {
	case errors.Is(err, notify.ErrSlackAPI):
		return nil, &ConfigError{Field: "SlackAPI", Err: err}
	case errors.Is(err, notify.ErrSlackHooks):
		return nil, &ConfigError{Field: "SlackHooks", Err: err}
	case err != nil:
		return nil, &ConfigError{Field: "NotifyAllowCIDRs", Err: err}
	}
	if st, ok := s.b.Store.(slack.Store); ok {
		// A press decides through the invoker, as the console does.
		svc.slack, err = slack.New(slack.Config{Store: st, Keys: svc.keys, Channels: svc.notes, Decider: svc.iv, Logger: s.log})
		if err != nil {
			return nil, err
		}
	}
	svc.webhookSecrets, err = signing.New(signing.Config{Store: s.b.Store, Keys: svc.keys, Grace: s.cfg.WebhookSecretGrace})
	if err != nil {
		return nil, &ConfigError{Field: "WebhookSecretGrace", Err: err}
	}
	svc.async, err = async.New(async.Config{Store: s.b.Store, Invoker: svc.iv, Signer: svc.webhookSecrets,
		Node: self.ID, NodeDeadAfter: s.cfg.NodeDeadAfter,
		AllowCIDRs: s.cfg.NotifyAllowCIDRs, Log: s.log})
	if err != nil {
		return nil, &ConfigError{Field: "NotifyAllowCIDRs", Err: err}
	}
	notice := &anomalyNotice{}
	if svc.anomalies, err = s.buildAnomalies(svc.meters, notice); err != nil {
		return nil, err
	}
	if s.runner, err = s.buildBackground(ctx, self, svc); err != nil {
		return nil, err
	}
	notice.use(s.runner)
	s.running = true
	return svc, nil
}

// tracer answers the invoker's and the doors' tracer (see tracing), nil
// when no span is recorded, and the queue whose dropped spans /metrics
// counts (nil for a provider the Config gave).
func (s *Server) tracer(ctx context.Context) (trace.Tracer, *spanQueue, error) {
	tp, stop, q, err := tracing(ctx, s.cfg, s.cfg.TracingEnv)
	if err != nil {
		return nil, nil, &ConfigError{Field: "TracerProvider", Err: err}
	}
	if stop != nil {
		s.closers = append(s.closers, stop)
	}
	if tp == nil {
		return nil, nil, nil
	}
	s.tracerOf = tp.Tracer("github.com/toolplane/toolplane")
	return s.tracerOf, q, nil
}

// policyParts are the registry and what decides every call over it.
type policyParts struct {
	reg *registry.Registry
	// options check definitions, the registry's and the catalogue's
	// published ones alike: their bindings and the runtimes they run on.
	options registry.Options
	// facts are the policy facts the node resolves.
	facts  policy.Facts
	grants *authz.Service
	// rules decide every call, whichever door it came through (REST,
	// MCP, an approved call resumed), in the invoker's policy step: the
	// grants, then the organization's latest policy bundle.
	rules *rules.Service
}

// buildPolicy registers src's definitions against the handlers, the
// upstream servers and the policy facts, and builds the grants and the
// rules over that registry.
func (s *Server) buildPolicy(src sources, run *runtimes) (*policyParts, error) {
	zones := &ruleZones{}
	builtin := facts.Builtin(facts.Config{Spend: s.b.Store, Zone: zones.Zone})
	resolvers, err := policyFacts(builtin, src.handlers)
	if err != nil {
		return nil, err
	}
	// A definition is checked by the runtimes this node binds it with.
	opts := registry.Options{Bindings: serveBindings{src.handlers, src.upstreams, resolvers}, Runtimes: run.set}
	reg, _, err := registry.Build(src.defs, opts)
	if err != nil {
		var ce *registry.CheckError
		if errors.As(err, &ce) {
			for _, p := range ce.Problems {
				fmt.Fprintln(s.cfg.Stderr, p.String())
			}
			return nil, &DefinitionsError{Check: ce, Handlers: src.handlers.Keys()}
		}
		return nil, err
	}
	grants := authz.New(authz.Config{Store: s.b.Store, Registry: reg})
	decider := rules.New(rules.Config{Store: s.b.Store, Grants: authz.Policy{Service: grants}, Engines: s.cfg.PolicyEngines, Zone: s.zone,
		RunCost: s.b.Store.RunTreeCost})
	zones.rules = decider
	return &policyParts{reg: reg, options: opts, facts: resolvers, grants: grants, rules: decider}, nil
}

// ruleZones answers an organization's time zone from its rules, so the
// org_time fact and the rules never disagree on the hour. The facts are
// built before the rules (the registry checks definitions against the
// facts, and the rules decide over that registry's grants), so rules is
// set once built, before any call.
type ruleZones struct{ rules *rules.Service }

// Zone answers the zone org's rules read time in.
func (z *ruleZones) Zone(ctx context.Context, org string) (*time.Location, error) {
	return z.rules.Zone(ctx, org)
}

// watchCatalogue keeps the registry current on this node: the
// operator's stored upstream settings, the upstream servers' tool lists,
// and the versions published in the store.
func (s *Server) watchCatalogue(ctx context.Context, pol *policyParts, upstreams *upstream.Set) (*catalog.Service, *upstream.Settings, error) {
	upstreams.UseRegistry(pol.reg)
	// The operator's stored settings are applied before the first tool
	// list is ingested: a tool tightened at runtime is never served under
	// the file's relaxation, not even while the node starts.
	settings := upstream.NewSettings(s.b.Store, upstreams, DefaultOrganization, s.log)
	if err := settings.Refresh(ctx); err != nil {
		return nil, nil, err
	}
	// Read again when the store tells of a change (on any node), and
	// polled besides, for a writer the feed does not hear or a feed that
	// lost its connection.
	feed, _ := s.b.Store.(toolplane.ChangeFeed)
	s.loops.Go(func() { settings.Follow(s.bg, feed, s.cfg.CatalogPoll) })
	upstreams.Start(s.bg, 30*time.Second)
	s.closers = append(s.closers, upstreams.Close)
	// Published versions join the registry from the store, on every node.
	cat := catalog.New(catalog.Config{Store: s.b.Store, Registry: pol.reg, Options: pol.options,
		Logger: s.log})
	if err := cat.Refresh(ctx); err != nil {
		return nil, nil, fmt.Errorf("load the published catalogue: %w", err)
	}
	// Refreshed when the store tells of a change to the catalogue (on any
	// node), and polled besides, for a store that tells none or a feed
	// that lost its connection.
	s.loops.Go(func() { cat.Follow(s.bg, feed, s.cfg.CatalogPoll) })
	return cat, settings, nil
}

// buildRuntimes answers the runtimes of tools bound to an HTTP request or
// a SQL statement, each registered through its contract, and the SQL
// runtime itself, which also inspects a connection's database role; an
// HTTP call goes out through the client of its connection's egress rules.
func (s *Server) buildRuntimes(d disk, clients *egressClients) (*runtimes, *sqlruntime.Runtime, error) {
	sqlRuntime := sqlruntime.New(sqlruntime.Config{SQLiteDir: d.sqliteDir, Dial: egressDial, Logger: s.log})
	s.closers = append(s.closers, func() { sqlRuntime.Close() })
	run, err := newRuntimes(httpruntime.New(httpruntime.Config{Client: clients.forReleased}).Contract(), sqlRuntime.Contract())
	if err != nil {
		return nil, nil, err
	}
	return run, sqlRuntime, nil
}

// buildConnections answers the keyring connection secrets are sealed
// under and the connections' admin side and broker over it, whose loops
// it starts. roles inspects a SQL connection's database role when it is
// created, as the runtime inspects it again before its first call.
func (s *Server) buildConnections(self *toolplane.Node, d disk, clients *egressClients, roles connection.RoleInspector) (*secret.Keyring, *connection.Admin, *connection.Broker, error) {
	keys, err := s.keyring(d)
	if err != nil {
		return nil, nil, nil, err
	}
	vault, err := s.vault()
	if err != nil {
		return nil, nil, nil, err
	}
	conns, broker, err := connection.New(connection.Config{Store: s.b.Store, Keys: keys, Node: self.ID, Logger: s.log,
		BaseURL: s.public, Client: clients.forRules, Vault: vault, VaultTTL: s.cfg.Vault.CacheTTL, Roles: roles})
	if err != nil {
		return nil, nil, nil, err
	}
	s.loops.Go(func() {
		sweepEvery(s.bg, stateSweepEvery, conns.SweepStates, s.log, "expired authorizations not removed")
	})
	// The broker keeps connections in memory while it is told of their
	// changes; without the watch every call reads the store.
	s.loops.Go(func() {
		if err := broker.Watch(s.bg); err != nil && s.bg.Err() == nil {
			s.log.Error("connections are read from the store on every call", "err", err)
		}
	})
	return keys, conns, broker, nil
}

// buildInvoker answers the invoker every door and job calls through, and
// the audit writer it records with.
func (s *Server) buildInvoker(self *toolplane.Node, src sources, pol *policyParts, svc *services, run *runtimes, tracer trace.Tracer) (*invoke.Invoker, error) {
	writer := audit.NewWriter(audit.WriterConfig{Store: s.b.Store, Logger: s.log})
	s.closers = append(s.closers, writer.Close)
	return invoke.New(invoke.Config{Registry: pol.reg, Handlers: src.handlers, Remotes: src.upstreams, Store: s.b.Store, Policy: pol.rules,
		Runtimes: run, Broker: svc.broker, Facts: pol.facts,
		Approvals: svc.approvals, Audit: writer, Logger: s.log, Node: self.ID, Observer: observers{svc.meters, svc.signals}, Tracer: tracer,
		DailyCeilings: svc.known,
		LeaseMargin:   s.cfg.LeaseMargin, NodeDeadAfter: s.cfg.NodeDeadAfter, Traffic: svc.traffic, MaxHops: s.cfg.MaxHops,
		// A tool's rate and each agent's, across the nodes sharing the
		// rate-limit store.
		CallLimits: &ratelimit.Calls{Shared: s.limits, AgentPerMinute: max(s.cfg.AgentRateLimit, 0)},
		// An approved call or a replay runs on the grants and the key as
		// they are when it runs, not as they were when it was filed.
		Principals: authz.Principals{Grants: pol.grants, Keys: s.b.Store, Consents: s.consentInForce(), CertificateRevoked: s.certificateRevoked()}})
}

// buildBackground answers the node's runner of background work (see
// package jobs), started: the invoker schedules through it, the node's
// heartbeat runs beside it, and the claims a lost node left are settled
// before it starts.
func (s *Server) buildBackground(ctx context.Context, self *toolplane.Node, svc *services) (backend.Runner, error) {
	runner, err := s.b.Runner(jobs.Deps{Invoker: svc.iv, Approvals: svc.approvals, Store: s.b.Store, Maint: s.b.Store, Sunset: svc.cat, Notifier: svc.notes, Async: svc.async,
		ProviderJobs: s.pj, AuditKeys: s.signingKeys(), Anomalies: anomalyJob(svc.anomalies), AuditPurges: s.auditPurgeJob()},
		jobs.Options{Logger: s.log, DeadAfter: s.cfg.NodeDeadAfter, SweepEvery: s.cfg.SweepEvery,
			AsyncStaleAfter: s.cfg.AsyncStaleAfter, Node: self.ID, AuditRetention: s.cfg.AuditRetention})
	if err != nil {
		return nil, err
	}
	svc.iv.UseScheduler(runner)
	svc.iv.UseNotice(runner)
	svc.async.UseScheduler(runner)
	s.loops.Go(func() { jobs.Heartbeat(s.bg, s.b.Store, self, s.cfg.Heartbeat, nil, s.log) })
	// The claims of this node's earlier instance (and of any node that
	// died meanwhile) are decided before this one serves: its callers'
	// retries find their never-dispatched keys free, not in flight.
	if err := runner.SettleLost(ctx); err != nil {
		return nil, fmt.Errorf("settle lost claims: %w", err)
	}
	if err := runner.Start(s.bg); err != nil {
		return nil, fmt.Errorf("background work: %w", err)
	}
	return runner, nil
}
