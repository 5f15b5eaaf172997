// Package server builds one toolplane node from a plain Config — its
// database, services, background work and doors — and runs it until its
// context ends. `toolplane serve` parses its flags into a Config and
// starts this; so do the tests that need a whole server in their process,
// so what they test is what ships.
package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/toolplane/toolplane/auditchain"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/clientcert"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/jwtauth"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/providerjob"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/resilience"
	"github.com/toolplane/toolplane/signin"
	"github.com/toolplane/toolplane/tlscert"
	"github.com/toolplane/toolplane/upstream"
)

// DefaultOrganization is the organization a single-tenant install serves.
const DefaultOrganization = "default"

// The defaults a zero Config field takes. They are the ones `toolplane
// serve` documents for its flags, so a server started from a Config and
// one started from the command line behave alike.
const (
	// DefaultAddr is where the API listens.
	DefaultAddr = "127.0.0.1:8080"
	// DefaultDatabase is the embedded store's SQLite file.
	DefaultDatabase = "toolplane-data/toolplane.db"
	// DefaultRateLimit is the requests per minute each key may make on a
	// node.
	DefaultRateLimit = 600
	// DefaultAuthFailureLimit is the failed authentications per minute
	// allowed on a node from one client address.
	DefaultAuthFailureLimit = 30
	// DefaultHeartbeat is how often a node tells the others it is alive.
	DefaultHeartbeat = 2 * time.Second
	// DefaultNodeDeadAfter is how long a node may go without a heartbeat
	// before the claims it held are decided.
	DefaultNodeDeadAfter = 10 * time.Second
	// DefaultCatalogPoll is how often a node polls the catalogue's
	// revision when nothing else told it of a change: the store's change
	// feed tells every write (PostgreSQL's on every node, SQLite's in
	// process), and a cut feed is read again in full when it is
	// connected again, so the poll only covers a writer the feed does not
	// hear (another process on a SQLite file) and a cut not yet noticed.
	DefaultCatalogPoll = 30 * time.Second
	// DefaultSweepEvery is how often the sweep decides lost claims and
	// schedules approved calls.
	DefaultSweepEvery = 10 * time.Second
	// DefaultVersion is the version reported when Config.Version is empty.
	DefaultVersion = "devel"
)

// Config is everything a node is built from. Every field's zero value is
// a working default, so Config{} serves the embedded SQLite store on
// DefaultAddr like `toolplane serve` with no flags; a limit that has a
// default is turned off with a negative value.
type Config struct {
	// PolicyEngines are the rule languages an organization's policy
	// bundles may be written in (Cedar, Rego); a bundle in a language
	// without an engine is refused at publish. With none, no bundle can
	// be published and the grants alone decide.
	PolicyEngines []policy.Engine
	// Addr is where the API (REST under /v1, MCP at /mcp) listens;
	// default DefaultAddr. With port 0 a free port is chosen: Server.Addr
	// answers it.
	Addr string
	// Database is a SQLite file path or a PostgreSQL DSN (postgres://...);
	// default DefaultDatabase.
	Database string
	// DataDir is where first start writes the admin credential (and,
	// unless KEK or KEKFile gives them, the key connection secrets are
	// sealed under); default the SQLite file's directory, or
	// toolplane-data for PostgreSQL.
	DataDir string
	// KEK holds the key-encryption keys connection secrets are sealed
	// under, as TOOLPLANE_KEK (KEKEnv) gives them to `toolplane serve`:
	// one "<id> <base64 key>" per line, the first current, or one bare
	// key (see secret.LoadKeyring). KEKFile may give them instead, never
	// both. Nodes sharing a database share their keys.
	KEK toolplane.SecretString
	// KEKFile is a file of the key-encryption keys, in KEK's form; it
	// must be readable by its owner alone.
	KEKFile string
	// AuditSigningKey is the file of the operator's audit signing keys
	// (auditchain.KeySet): the newest signs the audit chains' checkpoints,
	// every one is published at /.well-known/toolplane-audit-keys. Empty
	// is audit-signing-keys.json in DataDir, made with a fresh key when
	// absent; with neither, no checkpoint is signed.
	AuditSigningKey string
	// AuditRetention, when positive, is how long audit events are kept:
	// one node at a time drops the older ones, as whole ranges under
	// signed checkpoints, each drop an audit event of its own. Zero keeps
	// every event.
	AuditRetention time.Duration
	// Vault, with its Addr set, is the Vault (or OpenBao) server
	// connections may keep their secrets in (ConnectionConfig.Vault).
	// Without it such a connection is refused at creation, and one made
	// elsewhere answers unavailable.
	Vault VaultConfig
	// SQLiteDir holds the SQLite files SQL connections may open, each
	// organization's in a directory named by its ID (SQLiteDir/default/
	// for a single-tenant install); default the data directory's sql/. No
	// connection opens a file outside its organization's directory, the
	// platform's own database among them.
	SQLiteDir string
	// ToolsDir, when set, is a directory of tool definitions (*.yaml,
	// *.yml, *.json) to load.
	ToolsDir string
	// Demo adds the built-in demo catalogue (and, at first start, a demo
	// agent's key granted it).
	Demo bool
	// UpstreamsFile, when set, is a file of upstream MCP servers to ingest
	// and govern; Upstreams are more, after the file's.
	UpstreamsFile string
	Upstreams     []upstream.Config
	// ProviderWebhooks are the vendors whose callbacks the webhook route
	// accepts, each with its signing secret (docs/provider-jobs.md).
	ProviderWebhooks []ProviderWebhook
	// ProviderWebhookRateLimit is how many deliveries one client address
	// may make to the webhook route a minute; default
	// DefaultProviderWebhookRateLimit, negative for no limit.
	ProviderWebhookRateLimit int
	// ProviderJobTools, when set, adds the compiled-in tools that submit
	// and collect provider jobs.
	ProviderJobTools ProviderJobTools
	// JWTIssuer, when set, accepts JWTs from this issuer besides API keys;
	// it needs JWTAudience (the aud they must name) and JWTJWKSURL (where
	// the issuer publishes its signing keys).
	JWTIssuer, JWTAudience, JWTJWKSURL string
	// OAuthExternalIssuer makes the protected resource metadata of /mcp
	// (and the 401s pointing at it) name JWTIssuer as the authorization
	// server clients get tokens from, instead of toolplane's own (the
	// default, issuer PublicURL): for an organization whose identity
	// provider issues the tokens, verified by its JWKS as any JWT of
	// JWTIssuer. It needs JWTIssuer.
	OAuthExternalIssuer bool
	// TLSCert and TLSKey, when set, are the PEM files of the certificate
	// (chain) and private key the API is served over TLS with (HTTP/2 and
	// HTTP/1.1), both or neither; a replacement of either file is served
	// from the next handshake on, with no restart (package tlscert).
	TLSCert, TLSKey string
	// ClientCA, when set, is a PEM bundle of the CAs agents' client
	// certificates are issued by: a request with no bearer token and a
	// certificate that verifies authenticates as the agent the
	// certificate maps to (package clientcert). It is asked for at the
	// handshake when TLSCert is set, and read from the
	// X-Forwarded-Client-Cert header of a ClientCertProxies proxy.
	ClientCA string
	// ClientCertProxies are the TLS-terminating proxies (IP addresses or
	// CIDR prefixes) whose X-Forwarded-Client-Cert header names the
	// client's certificate; none by default. It is a list of its own, not
	// TrustedProxies: a forwarded certificate proves nothing of its
	// holder (certificates are public), so only a proxy that verified the
	// client's handshake itself and overwrites the header may send one,
	// which a proxy trusted only for X-Forwarded-For need not do.
	ClientCertProxies []string
	// ClientCertRevoked, when set, is the file of revoked client
	// certificates' serials, one in hex a line, reloaded when it changes.
	// It needs ClientCA.
	ClientCertRevoked string
	// SPIFFETrustDomain, when set, is the one trust domain a client
	// certificate's SPIFFE ID may name. It needs ClientCA.
	SPIFFETrustDomain string
	// SignInClientID, when set, lets people sign in to a browser session
	// (at /signin) through JWTIssuer, as an OpenID Connect client of it
	// with this id and SignInClientSecret; the redirect URI to register
	// is PublicURL + /signin/callback. ID tokens are read with the
	// claims SignInClaims names (by default jwtauth's: org,
	// toolplane_roles, and JWTClaims.Groups or else groups), and a token
	// naming no organization
	// signs its person in to DefaultOrganization. Without it people sign
	// in by pasting their own API key.
	SignInClientID     string
	SignInClientSecret toolplane.SecretString
	SignInClaims       signin.Claims
	// SessionIdleTimeout and SessionMaxAge end browser sessions; zero
	// takes signin.DefaultIdleTimeout and signin.DefaultMaxAge.
	SessionIdleTimeout, SessionMaxAge time.Duration
	// JWTClaims names the claims of the issuer's tokens that carry a
	// person's roles, groups, manager and attributes (see
	// jwtauth.Claims): what rules read of the person a delegated token
	// acts for, and which group grants stand for them.
	JWTClaims jwtauth.Claims
	// RateLimit is the requests per minute each API key may make,
	// counting only requests that authenticated as it, across the nodes
	// sharing RateLimitStore; default DefaultRateLimit, negative: no
	// limit.
	RateLimit int
	// AgentRateLimit is the calls per minute each agent identity may make
	// within its organization, across the nodes sharing RateLimitStore;
	// zero or negative: no limit. A tool's own rate is its definition's
	// execution.rate_per_minute.
	AgentRateLimit int
	// RateLimitStore is where the rate limits are kept: "memory" (this
	// node alone), "postgres" (the database, shared by the nodes on it),
	// or a redis:// or rediss:// URL; default: "postgres" when Database is
	// PostgreSQL, "memory" otherwise. A shared store that does not answer
	// leaves each decision to the node's own limit (see ratelimit.Shared).
	RateLimitStore string
	// RateLimitTimeout bounds each decision of a shared rate-limit store;
	// past it the node decides on its own limit. Zero takes
	// ratelimit.DefaultTimeout.
	RateLimitTimeout time.Duration
	// AuthFailureLimit is the failed authentications per minute allowed on
	// this node from one client address; default DefaultAuthFailureLimit,
	// negative: no limit.
	AuthFailureLimit int
	// TrustedProxies are the reverse proxies (IP addresses or CIDR
	// prefixes) whose X-Forwarded-For names the client address failed
	// authentications are counted under; none: every request counts under
	// its connection's address (see ratelimit.Proxies).
	TrustedProxies []string
	// MCPSessionsPerKey and MCPSessions cap the MCP sessions one key, and
	// all keys together, hold open on this node; zero or negative: the
	// mcpserver defaults.
	MCPSessionsPerKey, MCPSessions int
	// MaxBatchCalls is how many calls one batch (POST /v1/invoke:batch)
	// may carry; zero or negative: httpapi.DefaultMaxBatch.
	MaxBatchCalls int
	// OAuth is the server's own OAuth authorization server, for clients
	// that connect to /mcp by its URL alone.
	OAuth OAuthConfig
	// PublicURL is where people reach this server (approval links, the
	// served OpenAPI document's servers, the issuer of its own OAuth
	// authorization server); default http:// (https:// with TLSCert) and
	// the bound address.
	PublicURL string
	// NotifyAllowCIDRs are the address ranges (or single addresses)
	// notification channels may reach besides public addresses: an
	// internal webhook receiver or mail relay. Every other loopback,
	// private, link-local or metadata destination is refused when a
	// channel is created and at every send (notify.Config.AllowCIDRs).
	NotifyAllowCIDRs []string
	// SlackAPI and SlackHooks are where Slack is: the Web API's base a
	// Slack channel with a bot token posts through, and what every
	// response_url of a button press must start with; defaults
	// notify.DefaultSlackAPI and notify.DefaultSlackHooks. Only a
	// Slack-compatible service of one's own (or a test's fake) sets them.
	SlackAPI, SlackHooks string
	// WebhookSecretGrace is how long an organization's callback signing
	// secret keeps signing beside the one a rotation made; zero:
	// signing.DefaultGrace (a day).
	WebhookSecretGrace time.Duration
	// AuditExportNATS, when set with AuditExportNATSStream, exports the
	// audit trail to that NATS server's JetStream stream (created when
	// absent), every event on toolplane.audit.<organization>, through the
	// store's outbox: at least once, deduplicated by event (Nats-Msg-Id).
	AuditExportNATS       string
	AuditExportNATSStream string
	// AuditExportDir, when set, exports the audit trail to JSON Lines
	// files in that directory, rotated by size and age, through the same
	// outbox.
	AuditExportDir string
	// MetricsToken, when set, is the bearer token /metrics requires;
	// empty leaves /metrics open, for a scraper on a private network.
	MetricsToken string
	// MetricsMaxLabelValues caps the distinct values each label of each
	// metric family keeps (tools, versions, agents, organizations); past
	// it, values are counted under __overflow__. Zero:
	// metrics.DefaultMaxLabelValues.
	MetricsMaxLabelValues int
	// TimeZone is the IANA name of the deployment's time zone
	// ("Europe/Paris"): the one an organization's rules read time in, and
	// the org_time policy fact with them, unless its policy bundle names
	// another; default UTC.
	TimeZone string
	// RunBudgetCents, when positive, caps every run's cost, on every door;
	// a caller may ask for a lower cap, never a higher one.
	RunBudgetCents int64
	// PprofAddr, when set, serves Go's runtime profiles on an address of
	// its own (never the API's).
	PprofAddr string
	// Node is this node's name, unique in the deployment and kept across
	// restarts; default HOST:PORT of Addr, or HOST-PID when the port is 0.
	Node string
	// Traffic sets this node's circuit breakers, bulkheads and load
	// shedding (package resilience; zero fields take its defaults);
	// TrafficOff turns them all off.
	Traffic    resilience.Config
	TrafficOff bool
	// LeaseMargin is added to a tool's timeout to form a write's claim
	// lease; default invoke.DefaultLeaseMargin.
	LeaseMargin time.Duration
	// MaxHops is the most tool-to-tool hops below a call from a door
	// (a caller asking for more gets this many); default
	// invoke.DefaultMaxHops, negative: none (a tool calls no tool).
	MaxHops int
	// Heartbeat is how often this node tells the others it is alive;
	// default DefaultHeartbeat.
	Heartbeat time.Duration
	// NodeDeadAfter is how long a node may go without a heartbeat before
	// the claims it held are decided; default DefaultNodeDeadAfter,
	// negative: by their leases alone.
	NodeDeadAfter time.Duration
	// Embeddings turns on semantic search (off when its URL is empty).
	Embeddings EmbeddingsConfig
	// SearchPopularity ranks the tools an organization calls most a
	// little higher in its searches.
	SearchPopularity bool
	// CatalogPoll is how often this node reads the catalogue's revision
	// besides hearing the store's change feed (the fallback when the feed
	// is cut, or the store tells none); default DefaultCatalogPoll.
	CatalogPoll time.Duration
	// SweepEvery is how often the sweep decides lost claims and schedules
	// approved calls; default DefaultSweepEvery.
	SweepEvery time.Duration
	// AsyncStaleAfter is how long an asynchronous call still moving, or a
	// callback still due, goes untouched before the sweep hands it to a
	// worker again (jobs.Options.AsyncStaleAfter); default a minute.
	AsyncStaleAfter time.Duration
	// AnomalyOff turns the anomaly triage off: no baseline is kept and
	// nothing is filed (the items filed before stay readable).
	AnomalyOff bool
	// AnomalyWindow is the width of one anomaly window, at least a
	// minute; default anomaly.DefaultWindow. AnomalyThreshold is the
	// score that flags; default anomaly.DefaultThreshold.
	AnomalyWindow    time.Duration
	AnomalyThreshold float64
	// AnomalyNotify tells of every item the triage files on its
	// organization's default notification channels, as an uncertain
	// call is told; off by default.
	AnomalyNotify bool
	// TracerProvider, when set, receives the span of every call (a test's
	// recorder, or a provider the embedding program configured). Nil: an
	// OTLP/HTTP exporter when TracingEnv names one
	// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER=otlp, ...), and
	// otherwise no spans at all.
	TracerProvider trace.TracerProvider
	// TracingEnv reads the standard OpenTelemetry environment (OTEL_*)
	// that chooses the exporter when TracerProvider is nil; `toolplane
	// serve` gives os.Getenv. The exporter it builds reads the rest of its
	// settings (headers, timeout, TLS) from the process's environment
	// itself. Nil: no exporter.
	TracingEnv func(name string) string
	// Logger receives the server's log; nil discards it.
	Logger *slog.Logger
	// Stdout receives the lines an operator reads at start and stop (where
	// it serves, the first start's credentials file, "toolplane stopped");
	// Stderr the problems found in tool definitions, line by line. Nil
	// discards them.
	Stdout, Stderr io.Writer
	// Version is this build's version, reported to MCP clients and to
	// upstream servers alike; default DefaultVersion.
	Version string
}

// ConfigError says which Config field cannot be used and why. A command
// line that fills a Config from flags names the flag instead with
// Describe, so the rule is written once, here.
type ConfigError struct {
	// Field is the Config field at fault, e.g. "JWTIssuer".
	Field string
	// Needs, when set, are the other fields Field needs and that are not
	// all set.
	Needs []string
	// Err, otherwise, is why Field's value cannot be used.
	Err error
}

func (e *ConfigError) Error() string { return e.Describe(func(f string) string { return f }) }

// Unwrap answers why the value cannot be used.
func (e *ConfigError) Unwrap() error { return e.Err }

// Describe is the error's message with every field named by name(field).
func (e *ConfigError) Describe(name func(field string) string) string {
	if len(e.Needs) > 0 {
		needs := make([]string, len(e.Needs))
		for i, n := range e.Needs {
			needs[i] = name(n)
		}
		return name(e.Field) + " needs " + strings.Join(needs, " and ")
	}
	if e.Err == nil {
		return name(e.Field) + ": cannot be used"
	}
	return name(e.Field) + ": " + e.Err.Error()
}

// ErrNegative: a duration that must be positive (zero takes the default)
// is negative.
var ErrNegative = errors.New("is negative (zero takes the default)")

// ErrNoCertificatePath: client certificates are configured, but none can
// arrive: the server serves no TLS of its own and trusts no proxy to
// forward them.
var ErrNoCertificatePath = errors.New("client certificates arrive over this server's own TLS (TLSCert) or from a proxy that ends TLS (ClientCertProxies); neither is set")

// withDefaults answers c with its defaults applied, or the first field
// that cannot be used. It opens nothing, so a bad Config leaves no trace.
func (c Config) withDefaults() (Config, error) {
	if c.JWTIssuer != "" && (c.JWTAudience == "" || c.JWTJWKSURL == "") {
		return c, &ConfigError{Field: "JWTIssuer", Needs: []string{"JWTAudience", "JWTJWKSURL"}}
	}
	if c.OAuthExternalIssuer && c.JWTIssuer == "" {
		return c, &ConfigError{Field: "OAuthExternalIssuer", Needs: []string{"JWTIssuer"}}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		if c.TLSCert == "" {
			return c, &ConfigError{Field: "TLSKey", Needs: []string{"TLSCert"}}
		}
		return c, &ConfigError{Field: "TLSCert", Needs: []string{"TLSKey"}}
	}
	if c.ClientCA != "" && c.TLSCert == "" && len(c.ClientCertProxies) == 0 {
		return c, &ConfigError{Field: "ClientCA", Err: ErrNoCertificatePath}
	}
	for _, f := range []struct {
		field string
		set   bool
	}{{"ClientCertRevoked", c.ClientCertRevoked != ""}, {"SPIFFETrustDomain", c.SPIFFETrustDomain != ""}} {
		if f.set && c.ClientCA == "" {
			return c, &ConfigError{Field: f.field, Needs: []string{"ClientCA"}}
		}
	}
	if c.SignInClientID != "" && c.JWTIssuer == "" {
		return c, &ConfigError{Field: "SignInClientID", Needs: []string{"JWTIssuer"}}
	}
	if v := c.Vault; v.Addr == "" {
		for _, f := range []struct {
			field string
			set   bool
		}{{"Vault.TokenFile", v.TokenFile != ""}, {"Vault.Namespace", v.Namespace != ""}, {"Vault.CAFile", v.CAFile != ""}} {
			if f.set {
				return c, &ConfigError{Field: f.field, Needs: []string{"Vault.Addr"}}
			}
		}
	}
	if c.KEK != "" && c.KEKFile != "" {
		return c, &ConfigError{Field: "KEKFile", Err: fmt.Errorf("%s is set too; give the keys one way", KEKEnv)}
	}
	if _, err := ratelimit.ParseProxies(c.ClientCertProxies); err != nil {
		return c, &ConfigError{Field: "ClientCertProxies", Err: err}
	}
	if _, err := ratelimit.ParseProxies(c.TrustedProxies); err != nil {
		return c, &ConfigError{Field: "TrustedProxies", Err: err}
	}
	if store, err := rateLimitStore(c.RateLimitStore, c.Database); err != nil {
		return c, &ConfigError{Field: "RateLimitStore", Err: err}
	} else {
		c.RateLimitStore = store
	}
	if _, err := adapters(c.ProviderWebhooks); err != nil {
		return c, err
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"Heartbeat", c.Heartbeat}, {"SweepEvery", c.SweepEvery}, {"AsyncStaleAfter", c.AsyncStaleAfter}, {"Vault.CacheTTL", c.Vault.CacheTTL},
		{"SessionIdleTimeout", c.SessionIdleTimeout}, {"SessionMaxAge", c.SessionMaxAge}, {"RateLimitTimeout", c.RateLimitTimeout}} {
		if d.v < 0 {
			return c, &ConfigError{Field: d.field, Err: fmt.Errorf("%v %w", d.v, ErrNegative)}
		}
	}
	if err := c.checkAnomaly(); err != nil {
		return c, err
	}
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.Database == "" {
		c.Database = DefaultDatabase
	}
	if c.Node == "" {
		c.Node = defaultNodeName(c.Addr)
	}
	if c.RateLimit == 0 {
		c.RateLimit = DefaultRateLimit
	}
	if c.AuthFailureLimit == 0 {
		c.AuthFailureLimit = DefaultAuthFailureLimit
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	switch {
	case c.NodeDeadAfter == 0:
		c.NodeDeadAfter = DefaultNodeDeadAfter
	case c.NodeDeadAfter < 0:
		c.NodeDeadAfter = 0 // what invoke and jobs read as "by leases alone"
	}
	if c.CatalogPoll <= 0 {
		c.CatalogPoll = DefaultCatalogPoll
	}
	if c.SweepEvery == 0 {
		c.SweepEvery = DefaultSweepEvery
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Stderr == nil {
		c.Stderr = io.Discard
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	return c, nil
}

// Server is one node, built and listening, not yet serving until Run.
type Server struct {
	cfg Config
	log *slog.Logger
	// auditKeys is the audit signing keys (Config.AuditSigningKey), loaded
	// once; nil when none are configured.
	auditKeys     *auditchain.KeySet
	auditKeysOnce sync.Once
	// public is where people reach the server: Config.PublicURL, or the
	// listener's address.
	public string

	// bg is the background work's context (watchers, heartbeat, upstream
	// resync, the runner), ended when the server stops; stopBG ends it.
	bg     context.Context
	stopBG context.CancelFunc
	// loops are the watchers and the heartbeat, waited for after bg ends
	// so none of them reads the database after it closes.
	loops sync.WaitGroup

	// zone is Config.TimeZone, loaded.
	zone *time.Location

	b *backend.Backend
	// limits keeps the rate limits (Config.RateLimitStore).
	limits *ratelimit.Shared
	reg    *registry.Registry
	iv     *invoke.Invoker
	// door is what every door does (the gate), and answers searches.
	door *door.Door
	// tracerOf is the tracer of the calls' and the doors' spans (nil when
	// none is recorded).
	tracerOf trace.Tracer
	runner   backend.Runner
	// pj is the node's provider jobs service; self its instance id.
	pj       *providerjob.Service
	self     string
	running  bool // the runner started, so stopping must stop it
	ln       net.Listener
	srv      *http.Server
	pprofLn  net.Listener
	pprofSrv *http.Server
	// closers release what New opened, in reverse order.
	closers []func()

	ran  atomic.Bool
	stop sync.Once

	// tls serves the API's certificate when Config.TLSCert is set; certs
	// authenticates client certificates when Config.ClientCA is.
	tls   *tlscert.Reloader
	certs *clientcert.Authority
}

// New builds the node cfg describes, in this order: it makes the node's
// directories, opens and migrates the database, registers the node,
// mints the first credentials on an empty database, listens, loads the
// catalogue (demo, tools directory, upstreams), builds the services and
// the background work (settling the claims a lost node left), and the
// doors. ctx bounds the start only; the server runs until Run's context
// ends, or Close.
//
// An error says what failed; a Config field that cannot be used is a
// *ConfigError, and tool definitions that do not pass registration's
// checks wrap a *registry.CheckError (their problems are also written to
// Stderr). Whatever New opened before failing is released.
func New(ctx context.Context, cfg Config) (_ *Server, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	zone := time.UTC
	if cfg.TimeZone != "" {
		if zone, err = time.LoadLocation(cfg.TimeZone); err != nil {
			return nil, &ConfigError{Field: "TimeZone", Err: err}
		}
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	s := &Server{cfg: cfg, log: cfg.Logger, bg: bg, stopBG: stopBG, zone: zone}
	defer func() {
		if err != nil {
			s.release()
		}
	}()

	// The certificates are read before anything is opened: a pair that
	// does not load fails the start, saying which file, and leaves no
	// trace.
	if err := s.loadCertificates(); err != nil {
		return nil, err
	}
	d, err := makeDirs(cfg)
	if err != nil {
		return nil, err
	}
	b, err := backend.Open(ctx, cfg.Database)
	if err != nil {
		return nil, err
	}
	s.b = b
	s.closers = append(s.closers, b.Close)
	if err := b.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	self, err := jobs.Register(ctx, b.Store, cfg.Node, time.Now())
	if err != nil {
		return nil, err
	}
	// First start writes the admin's credentials before the port
	// listens: whoever sees the port open may read them.
	if err := firstStart(ctx, b, cfg.Database, cfg.DataDir, cfg.Demo, cfg.Stdout, s.log); err != nil {
		return nil, fmt.Errorf("first start: %w", err)
	}
	// The listener comes before the services: the address it is given is
	// the public URL's default, which the services build links from.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	s.ln = ln
	s.closers = append(s.closers, func() { ln.Close() })
	s.public = cfg.PublicURL
	if s.public == "" {
		s.public = s.scheme() + "://" + ln.Addr().String()
	}
	src, err := s.catalogue()
	if err != nil {
		return nil, err
	}
	s.self = self.ID
	if err := s.providerJobs(&src); err != nil {
		return nil, err
	}
	svc, err := s.services(ctx, self, d, src)
	if err != nil {
		return nil, err
	}
	if err := s.doors(svc); err != nil {
		return nil, err
	}
	return s, nil
}

// disk is where a node keeps its own files.
type disk struct {
	// sqliteDir holds the SQLite files SQL connections may open, each
	// organization's in a directory named by its ID.
	sqliteDir string
	// keyFile is the file of the key-encryption keys: Config.KEKFile, or
	// the data directory's kek when neither it nor Config.KEK gives them;
	// empty when Config.KEK does.
	keyFile string
}

// makeDirs answers where the node's files are and makes the directories
// they need, before anything is opened: a directory that cannot be made
// fails the start before the database is touched, and no later step
// creates one.
func makeDirs(cfg Config) (disk, error) {
	d := disk{sqliteDir: cfg.SQLiteDir, keyFile: cfg.KEKFile}
	dataDir := dataDirOf(cfg.Database, cfg.DataDir)
	if d.sqliteDir == "" {
		d.sqliteDir = filepath.Join(dataDir, "sql")
	}
	if err := os.MkdirAll(filepath.Join(d.sqliteDir, DefaultOrganization), 0o700); err != nil {
		return d, &ConfigError{Field: "SQLiteDir", Err: err}
	}
	if cfg.KEK == "" && cfg.KEKFile == "" {
		d.keyFile = filepath.Join(dataDir, "kek")
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return d, fmt.Errorf("data directory: %w", err)
		}
	}
	return d, nil
}

// Addr answers the address the API listens on: Config.Addr with the port
// chosen when it was 0.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// ErrRun: Run or Close was already called; a Server runs once.
var ErrRun = errors.New("server: already run or closed")

// Run serves until ctx ends, then shuts down gracefully: the listener
// stops and calls in flight finish (or hold their claims) within 30
// seconds, the background jobs in hand finish, the invoker's calls end,
// "toolplane stopped" is written, and queued audit events are stored
// before the database closes. An error is returned when serving failed;
// the server is released either way.
func (s *Server) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return ErrRun
	}
	fmt.Fprintf(s.cfg.Stdout, "toolplane serving %d tool(s) on %s://%s (REST under /v1, MCP at /mcp; %s %s)\n", len(s.reg.Tools("")), s.scheme(), s.ln.Addr(), s.b.Kind, s.b.Where)
	done := make(chan error, 1)
	go func() {
		if s.tls != nil {
			// The certificate comes from TLSConfig (reloaded); net/http
			// adds HTTP/2.
			done <- s.srv.ServeTLS(s.ln, "", "")
			return
		}
		done <- s.srv.Serve(s.ln)
	}()
	if s.pprofSrv != nil {
		go func() { _ = s.pprofSrv.Serve(s.pprofLn) }()
		fmt.Fprintf(s.cfg.Stdout, "runtime profiles on http://%s/debug/pprof/\n", s.pprofLn.Addr())
	}
	var err error
	select {
	case err = <-done:
		if errors.Is(err, http.ErrServerClosed) {
			err = nil // Close shut it down
		}
	case <-ctx.Done():
	}
	s.stop.Do(func() { s.shutdown(err == nil) })
	return err
}

// Close releases a server whose Run was never called: its listeners, its
// background work and its database. While Run serves, Close shuts the
// server down as the end of Run's context would, and Run returns nil;
// after Run has returned it does nothing.
func (s *Server) Close() error {
	s.ran.Store(true)
	s.stop.Do(func() { s.shutdown(false) })
	return nil
}

// shutdown stops the server in the order callers rely on: no new
// requests, then the requests in flight, the background work and the
// invoker's calls, and last what New opened. stopped says whether to
// tell the operator the server stopped.
//
// The background context ends only after all of that: a call in flight
// to an upstream server needs its connection (kept by the upstream
// loops), and a job in hand would be cancelled, not finished, if the
// runner's context ended before its graceful Stop.
func (s *Server) shutdown(stopped bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.log.Error("shutdown: calls still in flight", "err", err)
	}
	s.stopWork(ctx)
	s.stopBG()
	s.loops.Wait()
	if stopped {
		fmt.Fprintln(s.cfg.Stdout, "toolplane stopped")
	}
	s.closeAll()
}

// release undoes a New that failed part way.
func (s *Server) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.stopWork(ctx)
	s.stopBG()
	s.loops.Wait()
	s.closeAll()
}

// stopWork stops the background work and waits for the invoker's calls.
func (s *Server) stopWork(ctx context.Context) {
	if s.running {
		if err := s.runner.Stop(ctx); err != nil {
			s.log.Error("shutdown: background work", "err", err)
		}
	}
	if s.iv != nil {
		s.iv.Wait()
	}
}

// closeAll closes what New opened, last opened first.
func (s *Server) closeAll() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// DefinitionsError: the tool definitions did not pass registration's
// checks. It wraps the *registry.CheckError that lists the problems.
type DefinitionsError struct {
	Check *registry.CheckError
	// Handlers are the handler keys this binary has, which a definition's
	// binding may name.
	Handlers []string
}

func (e *DefinitionsError) Error() string {
	return fmt.Sprintf("%d tool definition problem(s); this binary's handlers are: %s", len(e.Check.Problems), strings.Join(e.Handlers, ", "))
}

// Unwrap answers the registry's CheckError.
func (e *DefinitionsError) Unwrap() error { return e.Check }

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
