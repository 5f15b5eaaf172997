package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authserver"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/server"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/jwtauth"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/signing"
	"github.com/toolplane/toolplane/upstream"
)

// DefaultOrganization is the organization a single-tenant install serves.
const DefaultOrganization = server.DefaultOrganization

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
			detachOthers(cmd)
			var tune []func(*server.Config)
			if a.tune != nil {
				tune = append(tune, a.tune)
			}
			if code := serve(ctx, args, a.stdout, a.stderr, tune...); code != 0 {
				return silent(code)
			}
			return nil
		},
	}
}

// detachOthers takes every command but cmd off the tree cmd is in. A node
// runs inside the tree's Execute for as long as it serves, which holds the
// tree: every other command and its flag set, 0.3 MB of a node's heap that
// serve, which parses its own flags, never reads.
func detachOthers(cmd *cobra.Command) {
	for c := cmd; c.HasParent(); c = c.Parent() {
		p := c.Parent()
		for _, other := range slices.Clone(p.Commands()) {
			if other != c {
				p.RemoveCommand(other)
			}
		}
	}
}

// serve runs the server until ctx ends, then shuts down gracefully: the
// listener stops, calls in flight finish (or hold their claims), background
// jobs in hand finish, and queued audit events are stored. Each of tune
// completes the configuration the flags made (MainWith).
func serve(ctx context.Context, args []string, stdout, stderr io.Writer, tune ...func(*server.Config)) int {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	addr := fs.String("addr", server.DefaultAddr, "address to listen on")
	database := databaseFlag(fs)
	toolsDir := fs.String("tools", "", "a directory of tool definitions (*.yaml, *.yml, *.json) to load")
	withDemo := fs.Bool("demo", false, "add the built-in demo catalogue (search, add a note, refund with approval, metered analysis)")
	jwtIssuer := fs.String("jwt-issuer", "", "accept JWTs from this issuer (iss) besides API keys; needs --jwt-audience and --jwt-jwks-url")
	jwtAudience := fs.String("jwt-audience", "", "the audience (aud) accepted JWTs must name")
	jwtJWKS := fs.String("jwt-jwks-url", "", "where the issuer publishes its signing keys (JWKS)")
	oauthExternal := fs.Bool("oauth-external-issuer", false, "name --jwt-issuer, not toolplane's own authorization server, as where MCP clients get tokens (the protected resource metadata of /mcp); its tokens are verified by its JWKS")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS (HTTP/2 and HTTP/1.1) with this PEM certificate (chain); needs --tls-key; a replaced file is served from the next connection on, with no restart")
	tlsKey := fs.String("tls-key", "", "the PEM private key of --tls-cert")
	clientCA := fs.String("client-ca", "", "a PEM bundle of the CAs agents' client certificates are issued by: a request without a bearer token and with a certificate that verifies authenticates as the agent it maps to (spiffe://DOMAIN/org/ORG/agent/AGENT, or subject O=ORG, CN=AGENT; see docs/tls.md); behind a --client-cert-proxy, read from its X-Forwarded-Client-Cert header")
	clientRevoked := fs.String("client-cert-revoked", "", "a file of revoked client certificates' serials, one in hex a line (# comments), reloaded when it changes; needs --client-ca")
	spiffeDomain := fs.String("spiffe-trust-domain", "", "the one SPIFFE trust domain a client certificate's SPIFFE ID may name; needs --client-ca")
	signInClient := fs.String("signin-client-id", os.Getenv("TOOLPLANE_SIGNIN_CLIENT_ID"), "let people sign in to a browser session (at /signin) through --jwt-issuer, as its OpenID Connect client with this id and the secret in $TOOLPLANE_SIGNIN_CLIENT_SECRET; register the redirect URI <public URL>/signin/callback ($TOOLPLANE_SIGNIN_CLIENT_ID; empty: people sign in with their own API key)")
	sessionIdle := fs.Duration("session-idle-timeout", 0, "end a browser session unused for this long (0: 30m)")
	sessionMaxAge := fs.Duration("session-max-age", 0, "end a browser session this long after sign-in (0: 12h)")
	rateLimit := fs.Int("rate-limit", server.DefaultRateLimit, "requests per minute each API key may make, counting only requests that authenticated as it, across the nodes sharing --rate-limit-store (0: no limit)")
	agentRate := fs.Int("agent-rate-limit", 0, "calls per minute each agent identity may make within its organization, across the nodes sharing --rate-limit-store; past it a call is answered rate_limited with its wait (0: no limit)")
	rateTimeout := fs.Duration("rate-limit-timeout", ratelimit.DefaultTimeout, "how long a node waits for the shared --rate-limit-store's decision before it decides on its own limit")
	rateStore := fs.String("rate-limit-store", os.Getenv("TOOLPLANE_RATE_LIMIT_STORE"), "where rate limits are kept: memory (this node alone), postgres (the --database, shared by its nodes) or redis://[user:password@]host:port/db ($TOOLPLANE_RATE_LIMIT_STORE, which keeps a password out of the process list); when it does not answer, each node limits on its own, logged and counted (default: postgres on a PostgreSQL database, memory otherwise)")
	authFailures := fs.Int("auth-failure-limit", server.DefaultAuthFailureLimit, "failed authentications per minute allowed on this node from one client address (its connection's address, or the client a --trusted-proxy names; an IPv6 /64); past it failures answer 429, and a key id that failed from that address is refused there before its key is checked (0: no limit)")
	var trustedProxies, certProxies stringList
	fs.Var(&certProxies, "client-cert-proxy", "a TLS-terminating proxy (IP address or CIDR prefix, repeatable or comma-separated) whose X-Forwarded-Client-Cert header names the client's certificate, for --client-ca; it must verify the client's handshake and overwrite the header (docs/tls.md); default none")
	fs.Var(&trustedProxies, "trusted-proxy", "a reverse proxy (IP address or CIDR prefix, repeatable or comma-separated) whose X-Forwarded-For names the client: failed authentications are counted under the rightmost address in it that is not a trusted proxy; default none, every request counts under its connection's address")
	sessionsPerKey := fs.Int("mcp-sessions-per-key", mcpserver.DefaultMaxSessionsPerKey, "MCP sessions one key may hold open on this node; past it, opening one answers 429 until one ends (DELETE) or idles out")
	maxBatch := fs.Int("max-batch-calls", httpapi.DefaultMaxBatch, "calls one batch (POST /v1/invoke:batch) may carry; a batch with more is refused whole, before any of its calls runs")
	webhookGrace := fs.Duration("webhook-secret-grace", signing.DefaultGrace, "how long an organization's callback signing secret keeps signing beside the new one after a rotation, so receivers can update their copy")
	sessions := fs.Int("mcp-sessions", mcpserver.DefaultMaxSessions, "MCP sessions this node holds open, all keys together; past it, opening one answers 503")
	dataDir := fs.String("data", "", "where first start writes the admin credential; default: the SQLite file's directory, or toolplane-data")
	auditKey := fs.String("audit-signing-key", "", "the file of the Ed25519 keys that sign the audit chains' checkpoints (the newest signs; `toolplane audit keygen` adds one); default: audit-signing-keys.json in the data directory, made at first start")
	kekFile := fs.String("kek-file", "", "a file of the keys connection secrets are sealed under, one \"ID BASE64-KEY\" a line, the first current, readable by its owner alone (or $TOOLPLANE_KEK); default: a key created in the data directory at first start. Nodes sharing a database share it")
	vaultAddr := fs.String("vault-addr", os.Getenv("TOOLPLANE_VAULT_ADDR"), "the Vault (or OpenBao) server connections may keep their secrets in, https://vault.example:8200 (plain http only to loopback) ($TOOLPLANE_VAULT_ADDR); empty: no Vault, and a connection naming a Vault entry is refused")
	vaultTokenFile := fs.String("vault-token-file", "", "a file holding the token toolplane reads Vault with, on one line, readable by its owner alone (or $"+server.VaultTokenEnv+"); it needs read access to the entries connections name, and no more")
	vaultNamespace := fs.String("vault-namespace", os.Getenv("TOOLPLANE_VAULT_NAMESPACE"), "the Vault Enterprise or OpenBao namespace the entries are in ($TOOLPLANE_VAULT_NAMESPACE)")
	vaultCAFile := fs.String("vault-ca-file", "", "a PEM file of the certificate authorities Vault's certificate is checked against, instead of the system's")
	vaultCacheTTL := fs.Duration("vault-cache-ttl", connection.DefaultVaultTTL, "how long a secret read from Vault is used before it is read again: a secret rotated in Vault is used within that long")
	sqliteDir := fs.String("sqlite-dir", "", "where SQL connections' SQLite files are, each organization's in a directory named by its ID (DIR/default/shop.db); default: the data directory's sql/")
	upstreamsFile := fs.String("upstreams", "", "a file of upstream MCP servers to ingest and govern (see docs/upstreams.md)")
	var upstreamFlags stringList
	fs.Var(&upstreamFlags, "upstream", "an upstream MCP server, slug=URL or slug=COMMAND ARGS (repeatable)")
	var providerHooks stringList
	fs.Var(&providerHooks, "provider-webhook", "a vendor whose job callbacks POST /v1/webhooks/NAME/JOB_ID accepts, NAME=SCHEME or NAME=body-sha1:CENTS_PER_CREDIT (repeatable); SCHEME is timestamped (a Stripe-style t=…,v1=… HMAC-SHA256 header) or body-sha1 (a FullEnrich-style X-Signature-SHA1 over the body); the signing secret is read from $"+server.ProviderSecretEnvPrefix+"NAME (upper-cased, other characters as _), and never logged")
	webhookRate := fs.Int("provider-webhook-rate-limit", server.DefaultProviderWebhookRateLimit, "vendor deliveries per minute one client address may make to the webhook route on this node (0: no limit)")
	publicURL := fs.String("public-url", "", "where people reach this server (approval links and the served OpenAPI document's servers point here; the issuer of its own OAuth authorization server); default: http://ADDR, or https://ADDR with --tls-cert")
	var notifyAllow stringList
	fs.Var(&notifyAllow, "notify-allow-cidr", "an address range (10.20.0.0/16) or address notification channels may reach besides public addresses, for an internal webhook receiver or mail relay (repeatable); without it a channel whose host is or resolves to a loopback, private, link-local or cloud metadata address is refused at creation and at every send")
	slackAPI := fs.String("slack-api", "", "the base of Slack's Web API that Slack channels with a bot token post and update their messages through; only a Slack-compatible service of one's own sets it (default "+notify.DefaultSlackAPI+")")
	slackHooks := fs.String("slack-hooks", "", "what the response_url of every Slack button press must start with, ending in /, to be answered (the presser told how to link, the message rewritten after a decision); only a Slack-compatible service of one's own sets it (default "+notify.DefaultSlackHooks+")")
	oauthOn := fs.Bool("oauth", true, "serve toolplane's own OAuth authorization server, so MCP clients connect to /mcp by its URL alone (docs/oauth.md)")
	oauthReg := fs.String("oauth-registration", "open", "dynamic client registration: open, allowlist (every redirect URI on --oauth-redirect-allow) or off (clients name themselves by their metadata document URL)")
	var oauthRedirects, oauthDocCIDRs stringList
	fs.Var(&oauthRedirects, "oauth-redirect-allow", "a redirect URI clients may register or name under --oauth-registration allowlist; a trailing * makes it a prefix (repeatable)")
	fs.Var(&oauthDocCIDRs, "oauth-document-allow-cidr", "an address range client metadata documents may be fetched from besides public addresses (repeatable)")
	oauthAgent := fs.String("oauth-agent", "oauth-clients", "the agent identity OAuth clients act as for the person who consented, unless an admin set one for the client (toolplane oauth clients set-agent); grant it the tools such clients may call")
	oauthAccess := fs.Duration("oauth-access-ttl", 0, "how long an OAuth access token lives (0: 10m)")
	oauthRefresh := fs.Duration("oauth-refresh-ttl", 0, "how long an OAuth refresh token lives unused (0: 720h); each use rotates it")
	oauthConsent := fs.Duration("oauth-consent-ttl", 0, "the longest a person's consent to a client lasts (0: 2160h, 90 days); they may choose shorter")
	oauthRegRate := fs.Int("oauth-registrations-per-hour", 0, "client registrations per hour one client address may make (0: 20)")
	oauthMaxClients := fs.Int("oauth-max-clients", authserver.DefaultMaxClients, "OAuth clients the server holds at most, registered and metadata documents' together, across every node; past it a registration is refused (0: no cap). Registrations nobody consented to in 7 days are removed")
	oauthOIDCMaxAge := fs.Duration("oauth-oidc-max-age", authserver.DefaultOIDCMaxAge, "how old the OpenID provider's sign-in behind a consent may be for its tokens to be refreshed and honoured; past it the client sends the person through sign-in again, and roles come fresh from the provider (0: no bound). Consents given with a person's key follow the key at every call instead")
	auditNATS := fs.String("audit-export-nats", "", "export the audit trail to this NATS server's JetStream (nats://host:4222), with --audit-export-nats-stream")
	auditNATSStream := fs.String("audit-export-nats-stream", "", "the JetStream stream the audit trail is exported to (created when absent); events on toolplane.audit.<organization>")
	var auditRetention retentionFlag
	fs.Var(&auditRetention, "audit-retention", "keep audit events this long (400d, 9000h), then drop them as whole ranges under signed checkpoints, one node at a time, each drop recorded as an audit event; off by default (every event kept)")
	auditDir := fs.String("audit-export-dir", "", "export the audit trail to rotating JSON Lines files in this directory")
	metricsMaxLabels := fs.Int("metrics-max-label-values", 0, "distinct values each metric label keeps (tools, versions, agents, organizations) before new ones count under __overflow__ (0: 1000)")
	metricsToken := fs.String("metrics-token", os.Getenv("TOOLPLANE_METRICS_TOKEN"), "require this bearer token on /metrics ($TOOLPLANE_METRICS_TOKEN; empty: /metrics is open, for a scraper on a private network)")
	claimRoles := fs.String("jwt-roles-claim", "", "the claim of a person's token listing their roles, which rules read")
	claimGroups := fs.String("jwt-groups-claim", "", "the claim of a person's token listing their groups: rules read them, and group grants stand for the person")
	claimManager := fs.String("jwt-manager-claim", "", "the claim of a person's token naming their manager")
	claimAttrs := fs.String("jwt-attribute-claims", "", "comma-separated claims copied as the caller's attributes, which rules read")
	timeZone := fs.String("time-zone", "", "the deployment's time zone (IANA name, such as Europe/Paris), in which policy rules and the org_time fact read a call's time unless the organization's bundle names another (default UTC)")
	runBudget := fs.Int64("run-budget-cents", 0, "cap every run's cost, in cents: a metered call past it answers budget_exhausted (0: no cap; a caller may ask for a lower one)")
	gcPercent := fs.Int("gc-percent", 300, "the garbage collector's target (GOGC) when GOGC is not set: a server's live heap is small and every call allocates, so collecting at 3x the live heap spends far less CPU for a few more megabytes")
	logLevel := fs.String("log-level", "info", "the least severe log records written: debug, info, warn or error (debug adds every MCP session's opening and end)")
	logFormat := fs.String("log-format", "json", "the log's format on stderr: json (one object a line) or text (key=value)")
	pprofAddr := fs.String("pprof-addr", "", "serve Go's runtime profiles (net/http/pprof) on this address, e.g. 127.0.0.1:6060; off by default, never on the API's address")
	nodeName := fs.String("node", "", "this node's name (at most 76 bytes), unique in the deployment and kept across restarts: a node that restarts under its name releases its earlier instance's claims at start (default: HOST:PORT of --addr, or HOST-PID when the port is 0)")
	leaseMargin := fs.Duration("lease-margin", invoke.DefaultLeaseMargin, "added to a tool's timeout to form a write's claim lease: a live call must never outlast its lease (pauses, slow commits), and a dead node's claims are decided by heartbeats long before it ends")
	maxHops := fs.Int("max-hops", invoke.DefaultMaxHops, "the most tool-to-tool hops below a call from a door (a tool calling a tool, an upstream MCP server calling back): a chain deeper than this is refused with max_hops_exceeded, and a caller asking for more hops gets this many")
	heartbeatEvery := fs.Duration("heartbeat", server.DefaultHeartbeat, "how often this node tells the others it is alive")
	deadAfter := fs.Duration("node-dead-after", server.DefaultNodeDeadAfter, "how long a node may go without a heartbeat before it is known dead and the claims it held are decided (released if never dispatched, otherwise uncertain or run again); 0: by their leases alone")
	sweepEvery := fs.Duration("sweep-every", server.DefaultSweepEvery, "how often the sweep decides claims whose node died or whose lease ended, and schedules approved calls")
	asyncStale := fs.Duration("async-stale-after", 0, "how long an asynchronous call still queued or running, or a callback still due, goes untouched before the sweep hands it to a worker again, in case its hand-off was lost with a node (0: 1m)")
	embeddingsURL := fs.String("embeddings-url", os.Getenv("TOOLPLANE_EMBEDDINGS_URL"), "turn on semantic search through an OpenAI-compatible embeddings endpoint (Ollama http://host:11434, vLLM http://host:8000/v1, a hosted one): its base, its /v1, or its /embeddings path; each node embeds every tool version in the background and each query at search time, and a search the endpoint does not answer in --embeddings-timeout ranks by words alone ($TOOLPLANE_EMBEDDINGS_URL; empty: off)")
	embeddingsModel := fs.String("embeddings-model", os.Getenv("TOOLPLANE_EMBEDDINGS_MODEL"), "the model the embeddings endpoint embeds with, e.g. nomic-embed-text; vectors are kept per model ($TOOLPLANE_EMBEDDINGS_MODEL)")
	embeddingsKeyFile := fs.String("embeddings-key-file", "", "a file holding the embeddings endpoint's API key on one line, readable by its owner alone (or $"+server.EmbeddingsKeyEnv+"); never logged")
	embeddingsTimeout := fs.Duration("embeddings-timeout", server.DefaultEmbeddingsTimeout, "how long a search waits for its query's vector before answering from the words alone, saying so (degraded: semantic)")
	embeddingsRate := fs.Int("embeddings-per-minute", 60, "the requests each node's background embedding sends the endpoint a minute, each of up to 32 tool texts")
	searchPopularity := fs.Bool("search-popularity", false, "rank the tools an organization called most in the last hour a little higher in its searches (counted per node)")
	catalogPoll := fs.Duration("catalog-poll", server.DefaultCatalogPoll, "how often each node reads the catalogue's revision besides hearing the database's change feed (the fallback when the feed is cut)")
	traffic := trafficFlags(fs)
	anomalies := anomalyFlags(fs)
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
	sampleAllocations(*pprofAddr != "", os.Getenv("GODEBUG"))
	fail := func(err error) int {
		var ce *server.ConfigError
		if errors.As(err, &ce) {
			fmt.Fprintf(stderr, "toolplane serve: %s\n", ce.Describe(serveFlagOf))
			return 1
		}
		fmt.Fprintf(stderr, "toolplane serve: %v\n", err)
		return 1
	}
	// The environment is read here, never by the server: a Config says
	// all a node is built from.
	cfg := server.Config{PolicyEngines: policyEngines, Addr: *addr, Database: *database, DataDir: *dataDir,
		KEK: toolplane.SecretString(os.Getenv(server.KEKEnv)), KEKFile: *kekFile, AuditSigningKey: *auditKey, AuditRetention: time.Duration(auditRetention), SQLiteDir: *sqliteDir, ToolsDir: *toolsDir, Demo: *withDemo,
		UpstreamsFile: *upstreamsFile, JWTIssuer: *jwtIssuer, JWTAudience: *jwtAudience, JWTJWKSURL: *jwtJWKS,
		OAuthExternalIssuer: *oauthExternal, TLSCert: *tlsCert, TLSKey: *tlsKey, ClientCA: *clientCA, ClientCertRevoked: *clientRevoked, SPIFFETrustDomain: *spiffeDomain,
		SignInClientID: *signInClient, SignInClientSecret: toolplane.SecretString(os.Getenv("TOOLPLANE_SIGNIN_CLIENT_SECRET")),
		SessionIdleTimeout: *sessionIdle, SessionMaxAge: *sessionMaxAge,
		RateLimit: *rateLimit, AgentRateLimit: *agentRate, RateLimitStore: *rateStore, RateLimitTimeout: *rateTimeout, AuthFailureLimit: *authFailures, TrustedProxies: splitList(strings.Join(trustedProxies, ",")), ClientCertProxies: splitList(strings.Join(certProxies, ",")), MCPSessionsPerKey: *sessionsPerKey, MCPSessions: *sessions,
		PublicURL: *publicURL, MaxBatchCalls: *maxBatch, NotifyAllowCIDRs: notifyAllow, SlackAPI: *slackAPI, SlackHooks: *slackHooks, WebhookSecretGrace: *webhookGrace, MetricsToken: *metricsToken, MetricsMaxLabelValues: *metricsMaxLabels,
		AuditExportNATS: *auditNATS, AuditExportNATSStream: *auditNATSStream, AuditExportDir: *auditDir, RunBudgetCents: *runBudget, PprofAddr: *pprofAddr, TimeZone: *timeZone,
		JWTClaims: jwtauth.Claims{Roles: *claimRoles, Groups: *claimGroups, Manager: *claimManager, Attributes: splitList(*claimAttrs)},
		Node:      *nodeName, LeaseMargin: *leaseMargin, MaxHops: *maxHops, Heartbeat: *heartbeatEvery, NodeDeadAfter: *deadAfter, SweepEvery: *sweepEvery, AsyncStaleAfter: *asyncStale,
		Vault: server.VaultConfig{Addr: *vaultAddr, Token: toolplane.SecretString(os.Getenv(server.VaultTokenEnv)), TokenFile: *vaultTokenFile,
			Namespace: *vaultNamespace, CAFile: *vaultCAFile, CacheTTL: *vaultCacheTTL},
		OAuth: server.OAuthConfig{Off: !*oauthOn, Registration: *oauthReg, RedirectAllow: oauthRedirects, Agent: *oauthAgent,
			AccessTTL: *oauthAccess, RefreshTTL: *oauthRefresh, ConsentTTL: *oauthConsent, DocumentAllowCIDRs: oauthDocCIDRs, RegistrationsPerHour: *oauthRegRate,
			MaxClients: *oauthMaxClients, OIDCMaxAge: *oauthOIDCMaxAge},
		Embeddings: server.EmbeddingsConfig{URL: *embeddingsURL, Model: *embeddingsModel, Key: toolplane.SecretString(os.Getenv(server.EmbeddingsKeyEnv)),
			KeyFile: *embeddingsKeyFile, Timeout: *embeddingsTimeout, PerMinute: *embeddingsRate},
		SearchPopularity: *searchPopularity, CatalogPoll: *catalogPoll,
		TracingEnv: os.Getenv, Logger: log, Stdout: stdout, Stderr: stderr, Version: version()}
	cfg.ProviderWebhookRateLimit = *webhookRate
	// The flags' 0 is "none"; the config's is "the default".
	if cfg.OAuth.MaxClients <= 0 {
		cfg.OAuth.MaxClients = -1
	}
	if cfg.OAuth.OIDCMaxAge <= 0 {
		cfg.OAuth.OIDCMaxAge = -1
	}
	if cfg.ProviderWebhookRateLimit <= 0 {
		cfg.ProviderWebhookRateLimit = -1
	}
	for _, v := range providerHooks {
		h, err := parseProviderWebhook(v, os.Getenv)
		if err != nil {
			return fail(fmt.Errorf("--provider-webhook: %w", err))
		}
		cfg.ProviderWebhooks = append(cfg.ProviderWebhooks, h)
	}
	for _, v := range upstreamFlags {
		c, err := upstream.ParseFlag(v)
		if err != nil {
			return fail(fmt.Errorf("--upstream: %w", err))
		}
		cfg.Upstreams = append(cfg.Upstreams, c)
	}
	// Here 0 turns a limit off; in a Config it takes the default, and a
	// negative value turns it off.
	if cfg.RateLimit <= 0 {
		cfg.RateLimit = -1
	}
	if cfg.AuthFailureLimit <= 0 {
		cfg.AuthFailureLimit = -1
	}
	if cfg.NodeDeadAfter <= 0 {
		cfg.NodeDeadAfter = -1
	}
	if err := traffic.apply(&cfg); err != nil {
		return fail(err)
	}
	if err := anomalies.apply(&cfg); err != nil {
		return fail(err)
	}
	if cfg.MaxHops <= 0 {
		cfg.MaxHops = -1 // no tool calls a tool
	}
	for _, f := range tune {
		f(&cfg)
	}
	s, err := server.New(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	memCtx, stopMem := context.WithCancel(ctx)
	defer stopMem()
	go releaseMemoryWhenIdle(memCtx, idleCheckEvery, freeOSMemory)
	if err := s.Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}

// serveFlags names the flag that sets each server.Config field, so a
// *server.ConfigError reads in the flags the operator typed.
var serveFlags = map[string]string{
	"Addr": "--addr", "Database": "--database", "DataDir": "--data", "KEKFile": "--kek-file", "AuditSigningKey": "--audit-signing-key", "AuditRetention": "--audit-retention", "SQLiteDir": "--sqlite-dir",
	"ToolsDir": "--tools", "UpstreamsFile": "--upstreams",
	"Upstreams": "--upstream", "JWTIssuer": "--jwt-issuer", "JWTAudience": "--jwt-audience", "JWTJWKSURL": "--jwt-jwks-url",
	"OAuthExternalIssuer": "--oauth-external-issuer", "TLSCert": "--tls-cert", "TLSKey": "--tls-key", "ClientCA": "--client-ca", "ClientCertRevoked": "--client-cert-revoked", "SPIFFETrustDomain": "--spiffe-trust-domain",
	"SignInClientID": "--signin-client-id", "SessionIdleTimeout": "--session-idle-timeout", "SessionMaxAge": "--session-max-age",
	"RateLimit": "--rate-limit", "AgentRateLimit": "--agent-rate-limit", "RateLimitStore": "--rate-limit-store", "RateLimitTimeout": "--rate-limit-timeout", "AuthFailureLimit": "--auth-failure-limit", "TrustedProxies": "--trusted-proxy", "ClientCertProxies": "--client-cert-proxy", "MCPSessionsPerKey": "--mcp-sessions-per-key",
	"MCPSessions": "--mcp-sessions", "MaxBatchCalls": "--max-batch-calls", "PublicURL": "--public-url", "NotifyAllowCIDRs": "--notify-allow-cidr", "SlackAPI": "--slack-api", "SlackHooks": "--slack-hooks", "WebhookSecretGrace": "--webhook-secret-grace", "MetricsToken": "--metrics-token", "MetricsMaxLabelValues": "--metrics-max-label-values",
	"AuditExportNATS": "--audit-export-nats", "AuditExportNATSStream": "--audit-export-nats-stream", "AuditExportDir": "--audit-export-dir",
	"TimeZone": "--time-zone", "RunBudgetCents": "--run-budget-cents", "PprofAddr": "--pprof-addr", "Node": "--node", "LeaseMargin": "--lease-margin", "MaxHops": "--max-hops",
	"Heartbeat": "--heartbeat", "NodeDeadAfter": "--node-dead-after", "SweepEvery": "--sweep-every", "AsyncStaleAfter": "--async-stale-after",
	"Vault.Addr": "--vault-addr", "Vault.TokenFile": "--vault-token-file", "Vault.Namespace": "--vault-namespace",
	"Vault.CAFile": "--vault-ca-file", "Vault.CacheTTL": "--vault-cache-ttl",
	"ProviderWebhooks": "--provider-webhook", "ProviderWebhookRateLimit": "--provider-webhook-rate-limit",
	"OAuth": "--oauth-registration", "OAuth.DocumentAllowCIDRs": "--oauth-document-allow-cidr",
	"AnomalyWindow": "--anomaly-window", "AnomalyThreshold": "--anomaly-threshold",
	"Embeddings.URL": "--embeddings-url", "Embeddings.Model": "--embeddings-model", "Embeddings.KeyFile": "--embeddings-key-file", "Embeddings.Timeout": "--embeddings-timeout",
	"SearchPopularity": "--search-popularity", "CatalogPoll": "--catalog-poll",
}

// parseProviderWebhook reads one --provider-webhook, NAME=SCHEME or
// NAME=SCHEME:CENTS_PER_CREDIT, and the vendor's signing secret from the
// environment variable its name gives (server.ProviderSecretEnvPrefix):
// a secret is never a flag, which any user of the host may list.
func parseProviderWebhook(v string, getenv func(string) string) (server.ProviderWebhook, error) {
	name, scheme, ok := strings.Cut(v, "=")
	if !ok || name == "" || scheme == "" {
		return server.ProviderWebhook{}, fmt.Errorf("%q is not NAME=SCHEME", v)
	}
	h := server.ProviderWebhook{Provider: name, Scheme: scheme}
	if s, price, ok := strings.Cut(scheme, ":"); ok {
		cents, err := strconv.ParseInt(price, 10, 64)
		if err != nil || cents < 0 {
			return server.ProviderWebhook{}, fmt.Errorf("%q: the price of a credit is not a number of cents", v)
		}
		h.Scheme, h.CentsPerCredit = s, cents
	}
	env := server.ProviderSecretEnvPrefix + server.ProviderSecretEnv(name)
	h.Secret = toolplane.SecretString(getenv(env))
	if h.Secret == "" {
		return server.ProviderWebhook{}, fmt.Errorf("%s: $%s holds no signing secret", name, env)
	}
	return h, nil
}

// serveFlagOf answers the flag of a server.Config field, or the field's
// name when no flag sets it.
func serveFlagOf(field string) string {
	if f, ok := serveFlags[field]; ok {
		return f
	}
	return field
}

// stringList is a repeatable string flag.
type stringList []string

// retentionFlag is a duration that may also count in days (400d), the
// unit retention policies are written in.
type retentionFlag time.Duration

func (f *retentionFlag) String() string { return time.Duration(*f).String() }

// Type names the flag's value in the help.
func (f *retentionFlag) Type() string { return "duration" }

func (f *retentionFlag) Set(v string) error {
	d, err := parseRetention(v)
	if err != nil {
		return err
	}
	*f = retentionFlag(d)
	return nil
}

// parseRetention reads "400d" as 400 days, or anything time.ParseDuration
// reads; it refuses a negative length.
func parseRetention(v string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number of days (400d) or a duration (9000h)", v)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, fmt.Errorf("%q is not a number of days (400d) or a duration (9000h)", v)
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("%q: a retention is not negative", v)
	}
	return d, nil
}

func (l *stringList) String() string     { return strings.Join(*l, ", ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
func (l *stringList) Type() string       { return "stringList" }

// splitList answers the non-empty, trimmed items of a comma-separated
// flag value.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
