package server

import (
	"context"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"strings"
	"time"

	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/authserver"
	"github.com/toolplane/toolplane/console"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/jwtauth"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/providerjob"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/runs"
	"github.com/toolplane/toolplane/signin"
	"github.com/toolplane/toolplane/slack"
	trafficview "github.com/toolplane/toolplane/traffic"
)

// doors builds the REST and MCP doors over svc, the console, the sign-in
// and the metrics route on the API's listener, and, when asked, the
// profiles' own listener.
func (s *Server) doors(svc *services) error {
	gate := s.gate(svc)
	s.door = gate
	people, err := s.signIn(gate, svc.keys)
	if err != nil {
		return err
	}
	mcp := s.mcpDoor(gate, svc)
	web, err := s.console(gate, svc, people)
	if err != nil {
		return err
	}
	// An MCP client's notification stream (a GET) carries no call, and
	// stays open as long as the client does: it ends when shutdown begins,
	// so an idle client does not hold the server for the grace meant for
	// calls in flight.
	streams, endStreams := context.WithCancel(context.Background())
	s.closers = append(s.closers, endStreams)
	hooks, err := s.receiver(svc)
	if err != nil {
		return err
	}
	as, err := s.authServer(gate, svc, people)
	if err != nil {
		return err
	}
	if as != nil && mcp.AuthorizationServer == "" {
		mcp.AuthorizationServer = as.Issuer()
	}
	mux := s.routes(streams, svc, mcp, s.apiDoor(gate, svc, people, mcp, as), people.Handler(), web.Handler())
	if as != nil {
		oauth := as.Handler()
		mux.Handle(authserver.Path+"/", oauth)
		mux.Handle("GET "+authserver.MetadataPath, oauth)
		mux.Handle("GET "+authserver.OpenIDPath, oauth)
		mux.Handle("GET "+authserver.MetadataPath+"/", oauth)
	}
	// A vendor's callback door: authenticated by the vendor's signature,
	// not by a key, so it is not behind the API's gate.
	mux.Handle(providerjob.Route, hooks)
	// Slack's button presses: authenticated by Slack's signature with
	// the channel's signing secret, not by a key.
	if svc.slack != nil {
		mux.Handle(slack.Route, svc.slack.Handler())
	}
	// No WriteTimeout: MCP answers over long-lived event streams.
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute, TLSConfig: s.tlsConfig()}
	s.srv.RegisterOnShutdown(endStreams)
	return s.pprof()
}

// gate answers what every door does (authentication, rate limits, what a
// key is shown, calls and the run budget), set once for all of them.
func (s *Server) gate(svc *services) *door.Door {
	cfg := s.cfg
	var tokens apikey.TokenVerifier
	if cfg.JWTIssuer != "" {
		tokens = &jwtauth.Verifier{Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience, JWKSURL: cfg.JWTJWKSURL, Claims: cfg.JWTClaims}
	}
	gate := &door.Door{Invoker: svc.iv, Registry: svc.reg, Store: s.b.Store, Log: s.log, Tokens: tokens,
		Keys: apikey.NewCache(apikey.DefaultCacheSize, apikey.DefaultCacheTTL), Authz: svc.grants, RunBudgetCents: cfg.RunBudgetCents, Async: svc.async,
		Tracer: s.tracerOf, Discovery: svc.discovery}
	if cfg.RateLimit > 0 {
		// One budget per key, whichever door and node it comes through.
		gate.Limiter = s.limits.Limiter("key", cfg.RateLimit, time.Minute)
	}
	if cfg.AuthFailureLimit > 0 {
		// Failed authentications have a budget of their own, also shared
		// by the doors, so nobody without a key's secret spends its.
		gate.Failures = ratelimit.NewFailures(cfg.AuthFailureLimit, time.Minute)
	}
	// Checked by withDefaults.
	gate.Proxies, _ = ratelimit.ParseProxies(cfg.TrustedProxies)
	if s.certs != nil {
		gate.Certificates = s.certs
		// Checked by withDefaults.
		gate.CertProxies, _ = ratelimit.ParseProxies(cfg.ClientCertProxies)
	}
	return gate
}

// mcpDoor answers the MCP door: the platform's tools at /mcp and each
// upstream server's at /mcp/<slug>.
func (s *Server) mcpDoor(gate *door.Door, svc *services) *mcpserver.Server {
	cfg := s.cfg
	// The protected resource metadata names toolplane's own authorization
	// server (its issuer is the public URL) and the scope that asks for
	// every tool the person may call; or, when the operator prefers, the
	// external issuer whose JWTs the gate verifies, whose scopes are its
	// own.
	as, scopes := strings.TrimRight(s.public, "/"), []string{"tools"}
	if cfg.OAuthExternalIssuer || cfg.OAuth.Off {
		// With no authorization server of its own, the operator's issuer
		// (if any) is the only one there is.
		as, scopes = cfg.JWTIssuer, nil
	}
	var allowedHosts []string
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Hostname() != "" {
		allowedHosts = append(allowedHosts, u.Hostname())
	}
	return &mcpserver.Server{Door: gate, Log: s.log, Version: cfg.Version, PublicURL: s.public, AllowedHosts: allowedHosts, Upstreams: svc.upstreams,
		MaxSessionsPerKey: cfg.MCPSessionsPerKey, MaxSessions: cfg.MCPSessions,
		// Sessions live in the database, so any node (and this one after a
		// restart) continues a session a client holds.
		Sessions: s.b.Store, AuthorizationServer: as, Scopes: scopes,
		// A hybrid listing counts each agent's recent calls in the trail.
		Audit: s.b.Store,
		// A task's ttl is how long its ended call is kept.
		TaskRetention: jobs.DefaultRetention}
}

// apiDoor answers the REST door. Its 401s name the OAuth protected
// resource metadata (RFC 9728) the MCP door publishes.
func (s *Server) apiDoor(gate *door.Door, svc *services, people *signin.Service, mcp *mcpserver.Server, as *authserver.Server) *httpapi.Server {
	return &httpapi.Server{Door: gate, Store: s.b.Store, Log: s.log, AuditExports: svc.exports, Catalog: svc.cat, UpstreamSettings: svc.upstreamSettings, Connections: svc.connections,
		Rules: svc.rules, People: people, Notifications: svc.notes, Slack: svc.slack, WebhookSecrets: svc.webhookSecrets, VendorCeilings: svc.ceilings, Anomalies: svc.anomalies, Spend: svc.spend, PublicURL: s.public, Console: console.Path, MaxBatch: s.cfg.MaxBatchCalls, ProviderJobs: s.pj,
		ResourceMetadata: mcp.ResourceMetadataURL(""), Metadata: mcp.ResourceMetadataHandler(), AuditKeys: s.publicAuditKeys(),
		AuditPurges: s.auditPurges(), AuditSinks: audit.NewSinks(s.b.Store, nil), OAuth: oauthAdmin(as)}
}

// auditPurges answers the purge service, or nil when the node signs no
// checkpoints (a drop needs one at its end) or its store keeps no chain.
func (s *Server) auditPurges() *audit.Purges {
	keys := s.signingKeys()
	st, ok := s.b.Store.(audit.PurgeStore)
	if keys == nil || !ok {
		return nil
	}
	return audit.NewPurges(audit.PurgesConfig{Store: st, Keys: keys})
}

// auditPurgeJob answers the purges the background work finishes (a
// confirmed purge whose drop did not finish), or nil when the node
// purges nothing.
func (s *Server) auditPurgeJob() jobs.AuditPurges {
	if p := s.auditPurges(); p != nil {
		return p
	}
	return nil
}

// console answers the web console. It reads and acts through the
// services the API does: the same trail, catalogue, grants, and keys over
// the doors' key cache (a key revoked in either is refused at once on
// this node), and the doors' search and dependency graph.
func (s *Server) console(gate *door.Door, svc *services, people *signin.Service) (*console.Console, error) {
	web, err := console.New(console.Config{People: people, Invoker: svc.iv, Registry: svc.reg, Links: svc.notes.Links(), Notifications: svc.notes,
		PublicURL: s.public, Logger: s.log, Trail: audit.NewTrail(s.b.Store), Catalog: svc.cat, Authz: svc.grants,
		Keys: apikey.NewKeys(apikey.KeysConfig{Store: s.b.Store, Cache: gate.Keys}), Credentials: s.b.Store, Anomalies: svc.anomalies, Spend: svc.spend,
		Purges: s.auditPurges(), Sinks: audit.NewSinks(s.b.Store, nil), Door: gate,
		Traffic: trafficview.New(s.b.Store, nil), Runs: runs.New(s.b.Store),
		Connections: svc.connections, Upstreams: svc.upstreamSettings, Breakers: svc.traffic, Rules: svc.rules, ConnectedClients: s.connectedClients()})
	if err != nil {
		return nil, &ConfigError{Field: "PublicURL", Err: err}
	}
	return web, nil
}

// connectedClients answers the address of the authorization server's page
// of a person's connected clients, "" when it is off (authServer's
// conditions).
func (s *Server) connectedClients() string {
	if _, ok := s.b.Store.(authserver.Store); !ok || s.cfg.OAuth.Off {
		return ""
	}
	return strings.TrimRight(s.public, "/") + authserver.Path + "/consents"
}

// routes answers the API listener's routes: MCP (its GET streams ended
// when streams ends, see endOnShutdown), dynamic client registration,
// metrics, sign-in, the console, and the REST door for everything else.
func (s *Server) routes(streams context.Context, svc *services, mcp *mcpserver.Server, api *httpapi.Server, signIn, pages http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/mcp", forResource(s.public+"/mcp", endOnShutdown(streams, mcp.Handler())))
	mux.Handle("POST "+mcpserver.RegistrationPath, mcp.RegistrationHandler())
	for _, slug := range svc.upstreams.Slugs() {
		mux.Handle("/mcp/"+slug, forResource(s.public+"/mcp/"+slug, endOnShutdown(streams, mcp.UpstreamHandler(slug))))
	}
	mux.Handle("GET /metrics", bearerOnly(s.cfg.MetricsToken, svc.meters.Handler()))
	mux.Handle(signin.Path+"/", signIn)
	mux.Handle(signin.Path, signIn)
	mux.Handle(console.Path+"/", pages)
	mux.Handle(console.Path, pages)
	mux.Handle("/", api.Handler())
	return mux
}

// pprof listens for Go's runtime profiles on Config.PprofAddr, when set:
// on an address of its own, since profiles show internals no API caller
// should reach.
func (s *Server) pprof() error {
	if s.cfg.PprofAddr == "" {
		return nil
	}
	pl, err := net.Listen("tcp", s.cfg.PprofAddr)
	if err != nil {
		return &ConfigError{Field: "PprofAddr", Err: err}
	}
	s.pprofLn = pl
	pm := http.NewServeMux()
	pm.HandleFunc("/debug/pprof/", pprof.Index)
	pm.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	pm.HandleFunc("/debug/pprof/profile", pprof.Profile)
	pm.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	pm.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ps := &http.Server{Handler: pm, ReadHeaderTimeout: 10 * time.Second}
	s.pprofSrv = ps
	s.closers = append(s.closers, func() { ps.Close(); pl.Close() })
	return nil
}
