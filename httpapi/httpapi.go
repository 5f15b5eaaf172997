// Package httpapi is toolplane's REST API under /v1: invoking tools,
// answering approvals, reconciling uncertain actions, listing tools and the
// audit trail. Every request authenticates with an API key (Bearer); an
// agent's key grants tools, a person's key carries roles. Errors share one
// envelope: {"error": {code, message, field_path, retryable, request_id}}.
//
// The API is a door like any other: every call goes through the invoker,
// which decides it again, live.
package httpapi

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/anomaly"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/auditexport"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/ceiling"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/console"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/internal/jsondec"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/modelname"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/projection"
	"github.com/toolplane/toolplane/providerjob"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/rules"
	"github.com/toolplane/toolplane/semver"
	"github.com/toolplane/toolplane/signin"
	"github.com/toolplane/toolplane/signing"
	"github.com/toolplane/toolplane/slack"
	"github.com/toolplane/toolplane/spend"
	"github.com/toolplane/toolplane/upstream"
)

// Server serves the API. It is the REST form of the door layer: what
// every door does (authentication, rate limits, recording a key's use,
// what a key is shown, calls and the run budget) is Door's, shared with
// the other doors, so the server holds no setting of its own for it.
type Server struct {
	// Door is the door layer the server's requests go through, shared
	// with the other doors of the node; required. Its Invoker runs calls
	// and answers approvals and uncertain actions; its Authz, when set,
	// also serves the grants under /v1/grants, /v1/denies, /v1/bundles
	// and /v1/agents/{agent}/explain, so the grants a key is shown and
	// the grants an operator manages are one service.
	Door *door.Door
	// Store is the store the approvals, keys, audit trail and readiness
	// are read from.
	Store toolplane.Store
	// Log receives what callers are not told (a store that does not
	// answer, a platform fault); nil is slog.Default().
	Log *slog.Logger
	// Now is the clock approvals and keys' expiry are read by; nil is
	// time.Now.
	Now func() time.Time
	// ResourceMetadata, when set, is the URL of the server's OAuth
	// protected resource metadata (RFC 9728), which a 401's
	// WWW-Authenticate names (see apikey.Challenge).
	ResourceMetadata string
	// Metadata, when set, answers the OAuth protected resource metadata
	// routes (/.well-known/oauth-protected-resource and its /mcp
	// variants; see mcpserver.Server.ResourceMetadataHandler). Without it
	// they answer 404.
	Metadata http.Handler
	// Catalog, when set with Door.Authz, serves the registry's lifecycle
	// and the change log under /v1/registry and /v1/changes, and with it
	// the grant routes; without both they answer 404.
	Catalog *catalog.Service
	// PublicURL, when set, is where clients reach this server: the OpenAPI
	// document it serves names it as its server, so a client generated from
	// that document calls this server rather than the default address.
	PublicURL string
	// UpstreamSettings, when set, serves the runtime settings of upstream
	// tools under /v1/upstreams.
	UpstreamSettings *upstream.Settings
	// Connections, when set, serves the organization's connections under
	// /v1/connections and the authorization a person completes in a
	// browser to connect their own account; without it they answer 404.
	Connections *connection.Admin
	// Rules, when set, serves the organization's policy bundles under
	// /v1/policy (list, show, test, publish, shadow, rollback, disable,
	// explain); without it they answer 404.
	Rules *rules.Service
	// Notifications, when set, serves the organization's notification
	// channels under /v1/notifications/channels and the notifications
	// given up under /v1/notifications/dead-letters; without it they
	// answer 404.
	Notifications *notify.Service
	// Slack, when set, serves the links of Slack accounts to people under
	// /v1/slack/links; without it they answer 404.
	Slack *slack.Service
	// WebhookSecrets, when set, serves the organization's callback
	// signing secret under /v1/webhook-secret (its metadata, and its
	// rotation); without it they answer 404.
	WebhookSecrets *signing.Secrets
	// VendorCeilings, when set, serves the organization's vendor ceilings
	// under /v1/vendor-ceilings; without it they answer 404.
	VendorCeilings *ceiling.Service
	// Spend, when set, serves the organization's spend reports under
	// /v1/spend and its daily ceiling under /v1/spend/ceiling; without it
	// they answer 404.
	Spend *spend.Service
	// People tells who is signed in to the browser that opens a person's
	// authorization link (the start refuses anyone but the person it is
	// for); without it the start answers that nobody can sign in here.
	People People
	// Console, when set, is the path of the web console (under the public
	// URL's): a browser that opens / is sent there, and the index an API
	// client is answered at / links it.
	Console string
	// MaxBatch is how many calls a batch (POST /v1/invoke:batch) may
	// carry; zero or less is DefaultMaxBatch.
	MaxBatch int
	// Anomalies, when set, serves the organization's anomaly triage
	// items under /v1/anomalies (to auditors); without it they answer
	// 404.
	Anomalies *anomaly.Service
	// ProviderJobs, when set, serves the organization's unsettled provider
	// jobs under /v1/provider-jobs/unsettled; without it that answers 404.
	ProviderJobs *providerjob.Service
	// AuditKeys is the operator's audit signing keys, public halves only
	// served (at /.well-known/toolplane-audit-keys) and used to check the
	// chain's checkpoints at /v1/audit/verify; nil serves neither.
	// OAuth, when set, is the authorization server's administration under
	// /v1/oauth; nil answers 404 there.
	OAuth     OAuthAdmin
	AuditKeys *auditchain.KeySet
	// AuditExports, when set, answers GET /v1/audit/exports (each sink's
	// lag); without it the list of sinks is empty.
	AuditExports *auditexport.Exporters
	// AuditPurges, when set, answers /v1/audit/purges: dropping a range
	// of the trail on the word of two platform admins.
	AuditPurges *audit.Purges
	// AuditSinks, when set, answers /v1/audit/sinks: the sinks registered
	// in the store, listed and dropped.
	AuditSinks *audit.Sinks
	// Heartbeat is how often an idle event stream (an invocation's
	// events) sends a comment; zero or less is DefaultHeartbeat.
	Heartbeat time.Duration

	// document answers the OpenAPI document served: the embedded one, or
	// with a public URL a copy naming it, made on the first request for it
	// (0.6 MB that a node nobody asks for its document never holds).
	document func() ([]byte, error)
	// documented is set once the copy is made (for a test).
	documented atomic.Bool
	// keys and trail are the key service and the audit trail over Store,
	// built by Handler.
	keys  *apikey.Keys
	trail *audit.Trail
}

// People is the browser sign-in a page acting for a person relies on
// (*signin.Service).
type People interface {
	// Session answers who is signed in on r, or an error wrapping
	// toolplane.ErrUnauthenticated when nobody is.
	Session(r *http.Request) (*signin.Session, error)
	// SignInURL answers the sign-in page that sends the browser back to
	// returnTo once signed in.
	SignInURL(returnTo string) string
}

// caller is who a request authenticated as.
type caller struct {
	cred *toolplane.Credential
	// at is when the gate admitted the request (and charged its budget).
	at time.Time
}

// Handler answers the API's routes.
func (s *Server) Handler() http.Handler {
	if s.Door == nil {
		// A wiring bug, found when the server is built, not at its first
		// request.
		panic("httpapi: Server.Door is required")
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	s.keys = apikey.NewKeys(apikey.KeysConfig{Store: s.Store, Cache: s.Door.Keys, Now: s.Now})
	s.trail = audit.NewTrail(s.Store)
	s.document = func() ([]byte, error) { return openAPI, nil }
	if s.PublicURL != "" {
		s.document = sync.OnceValues(func() ([]byte, error) {
			s.documented.Store(true)
			// The embedded document is checked by a test: an error is a
			// build that broke it.
			return withServer(openAPI, s.PublicURL)
		})
	}
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		pattern := rt.path
		if pattern == "/" {
			// The index is / itself, not the catch-all below.
			pattern = "/{$}"
		}
		mux.Handle(rt.method+" "+pattern, rt.h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// This catch-all takes every method, so the mux never answers 405
		// itself: a known path asked with another method is told which
		// methods it takes.
		if allow := allowed(mux, r); allow != "" {
			w.Header().Set("Allow", allow)
			httperr.Send(w, r, httperr.MethodNotAllowed, r.URL.Path+" takes "+allow+", not "+r.Method, "")
			return
		}
		httperr.Send(w, r, httperr.NotFound, "no such route: "+r.Method+" "+r.URL.Path, "")
	})
	// The caller's trace context (traceparent) is every call's parent:
	// a call, a batch's calls, an asynchronous call run later.
	return s.Door.Traced("rest", mux)
}

// allowed answers the methods mux routes r's path for, other than to its
// catch-all, comma-separated; "" when none.
func allowed(mux *http.ServeMux, r *http.Request) string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
			out = append(out, m)
		}
	}
	return strings.Join(out, ", ")
}

// index answers /: a browser (one that asks for HTML) is sent to the
// console, where people start; an API client is answered where the API,
// the MCP endpoint and the OpenAPI document are, so neither meets a bare
// 404 at the server's own address.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	if s.Console != "" && acceptsHTML(r) {
		http.Redirect(w, r, s.link(s.Console), http.StatusSeeOther)
		return
	}
	links := map[string]string{"api": s.link("/v1"), "openapi": s.link("/v1/openapi.json"), "mcp": s.link("/mcp"), "health": s.link("/healthz")}
	if s.Console != "" {
		links["console"] = s.link(s.Console)
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": "toolplane", "links": links})
}

// acceptsHTML reports whether r asks for a page (a browser's navigation
// names text/html), not JSON.
func acceptsHTML(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		media, _, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(media), "text/html") {
			return true
		}
	}
	return false
}

// link answers path under the public URL, or path itself when none is
// set.
func (s *Server) link(path string) string {
	return strings.TrimRight(s.PublicURL, "/") + path
}

// route is one of the API's routes. The mux is built from this table, and
// a test checks the OpenAPI document against it, so the two cannot drift.
type route struct {
	method, path string
	h            http.Handler
}

//go:embed openapi.json
var openAPI []byte

func (s *Server) routes() []route {
	return []route{
		{"GET", "/", http.HandlerFunc(s.index)},
		{"GET", "/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })},
		{"GET", "/readyz", http.HandlerFunc(s.ready)},
		{"GET", "/v1/openapi.json", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			doc, err := s.document()
			if err != nil {
				s.Log.ErrorContext(r.Context(), "the embedded OpenAPI document", "err", err)
				httperr.Send(w, r, httperr.Internal, "the API's document could not be made", "")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write(doc)
		})},
		{"GET", "/.well-known/oauth-protected-resource", http.HandlerFunc(s.metadata)},
		{"GET", "/.well-known/oauth-protected-resource/mcp", http.HandlerFunc(s.metadata)},
		{"GET", "/.well-known/oauth-protected-resource/mcp/{slug}", http.HandlerFunc(s.metadata)},
		{"GET", "/v1/tools", s.auth(s.listTools)},
		{"GET", "/v1/tools/search", s.auth(s.searchTools)},
		{"GET", "/v1/tools/{name}", s.auth(s.getTool)},
		{"GET", "/v1/tools/{name}/dependencies", s.auth(s.toolDependencies)},
		{"POST", "/v1/tools/{name}/invoke", s.auth(s.invoke)},
		{"POST", "/v1/invoke:batch", s.auth(s.invokeBatch)},
		{"GET", "/v1/invocations/{id}", s.auth(s.getInvocation)},
		{"POST", "/v1/invocations/{id}/cancel", s.auth(s.cancelInvocation)},
		{"GET", "/v1/invocations/{id}/events", s.auth(s.invocationEvents)},
		{"GET", "/v1/approvals", s.auth(s.listApprovals)},
		{"GET", "/v1/approvals/{id}", s.auth(s.getApproval)},
		{"POST", "/v1/approvals/{id}/{decision}", s.auth(s.resolve)},
		{"GET", "/v1/uncertain", s.auth(s.listUncertain)},
		{"GET", "/v1/provider-jobs/unsettled", s.auth(s.listUnsettledJobs)},
		{"GET", "/v1/provider-jobs/{id}", s.auth(s.getProviderJob)},
		{"POST", "/v1/uncertain/reconcile", s.auth(s.reconcile)},
		{"GET", "/v1/audit/events", s.auth(s.listAudit)},
		{"GET", "/v1/audit/events/{id}", s.auth(s.getAudit)},
		{"GET", "/v1/audit/verify", s.auth(s.verifyAudit)},
		{"GET", "/.well-known/toolplane-audit-keys", http.HandlerFunc(s.auditKeys)},
		{"GET", "/v1/audit/reports/{name}", s.auth(s.auditReport)},
		{"GET", "/v1/audit/subjects/{person}/export", s.auth(s.exportSubject)},
		{"GET", "/v1/audit/exports", s.auth(s.auditExports)},
		{"GET", "/v1/audit/purges", s.purgeRoute(s.listPurges)},
		{"POST", "/v1/audit/purges", s.purgeRoute(s.proposePurge)},
		{"POST", "/v1/audit/purges/{id}/confirm", s.purgeRoute(s.confirmPurge)},
		{"POST", "/v1/audit/purges/{id}/resume", s.purgeRoute(s.resumePurge)},
		{"GET", "/v1/audit/sinks", s.sinkRoute(s.listSinks)},
		{"DELETE", "/v1/audit/sinks/{name}", s.sinkRoute(s.dropSink)},
		{"POST", "/v1/keys", s.auth(s.createKey)},
		{"GET", "/v1/keys", s.auth(s.listKeys)},
		{"PATCH", "/v1/keys/{id}", s.auth(s.updateKey)},
		{"POST", "/v1/keys/{id}/revoke", s.auth(s.revokeKey)},
		{"POST", "/v1/registry/tools", s.registryRoute(s.publish)},
		{"GET", "/v1/registry/tools", s.registryRoute(s.listVersions)},
		{"GET", "/v1/registry/tools/{name}/versions/{version}", s.registryRoute(s.getVersion)},
		{"POST", "/v1/registry/tools/{name}/versions/{version}/{action}", s.registryRoute(s.versionAction)},
		{"POST", "/v1/registry/reviews", s.registryRoute(s.reviewMany)},
		{"POST", "/v1/registry/diff", s.registryRoute(s.diff)},
		{"POST", "/v1/grants", s.registryRoute(s.addGrant)},
		{"GET", "/v1/grants", s.registryRoute(s.listGrants)},
		{"POST", "/v1/grants/{id}/revoke", s.registryRoute(s.revokeGrant)},
		{"GET", "/v1/agents/{agent}/explain", s.registryRoute(s.explain)},
		{"POST", "/v1/denies", s.registryRoute(s.addDeny)},
		{"GET", "/v1/denies", s.registryRoute(s.listDenies)},
		{"DELETE", "/v1/denies/{id}", s.registryRoute(s.liftDeny)},
		{"PUT", "/v1/bundles/{name}", s.registryRoute(s.putBundle)},
		{"GET", "/v1/bundles", s.registryRoute(s.listBundles)},
		{"GET", "/v1/changes", s.registryRoute(s.listChanges)},
		{"POST", "/v1/notifications/channels", s.notificationRoute(s.createChannel)},
		{"GET", "/v1/notifications/channels", s.notificationRoute(s.listChannels)},
		{"GET", "/v1/notifications/channels/{id}", s.notificationRoute(s.getChannel)},
		{"DELETE", "/v1/notifications/channels/{id}", s.notificationRoute(s.deleteChannel)},
		{"GET", "/v1/notifications/dead-letters", s.notificationRoute(s.listDeadLetters)},
		{"POST", "/v1/slack/links", s.slackRoute(s.linkSlack)},
		{"GET", "/v1/slack/links", s.slackRoute(s.listSlackLinks)},
		{"DELETE", "/v1/slack/links/{team}/{user}", s.slackRoute(s.unlinkSlack)},
		{"GET", "/v1/webhook-secret", s.webhookSecretRoute(s.getWebhookSecret)},
		{"POST", "/v1/webhook-secret:rotate", s.webhookSecretRoute(s.rotateWebhookSecret)},
		{"GET", "/v1/oauth/clients", s.authServerRoute(s.listOAuthClients)},
		{"POST", "/v1/oauth/clients:revoke", s.authServerRoute(s.revokeOAuthClient)},
		{"POST", "/v1/oauth/clients:set-agent", s.authServerRoute(s.setOAuthClientAgent)},
		{"GET", "/v1/oauth/consents", s.authServerRoute(s.listOAuthConsents)},
		{"POST", "/v1/oauth/consents/{id}/revoke", s.authServerRoute(s.revokeOAuthConsent)},
		{"POST", "/v1/oauth/signing-key:rotate", s.authServerRoute(s.rotateOAuthKey)},
		{"GET", "/v1/anomalies", s.anomalyRoute(s.listAnomalies)},
		{"GET", "/v1/anomalies/{id}", s.anomalyRoute(s.getAnomaly)},
		{"POST", "/v1/anomalies/{id}/acknowledge", s.anomalyRoute(s.acknowledgeAnomaly)},
		{"GET", "/v1/vendor-ceilings", s.vendorCeilingRoute(s.listVendorCeilings)},
		{"GET", "/v1/vendor-ceilings/{provider}", s.vendorCeilingRoute(s.getVendorCeiling)},
		{"PUT", "/v1/vendor-ceilings/{provider}", s.vendorCeilingRoute(s.putVendorCeiling)},
		{"DELETE", "/v1/vendor-ceilings/{provider}", s.vendorCeilingRoute(s.deleteVendorCeiling)},
		{"GET", "/v1/spend", s.spendRoute(s.spendReport)},
		{"GET", "/v1/spend/ceiling", s.spendRoute(s.getSpendCeiling)},
		{"PUT", "/v1/spend/ceiling", s.spendRoute(s.putSpendCeiling)},
		{"DELETE", "/v1/spend/ceiling", s.spendRoute(s.deleteSpendCeiling)},
		{"POST", "/v1/connections", s.connectionRoute(s.createConnection)},
		{"GET", "/v1/connections", s.connectionRoute(s.listConnections)},
		{"GET", "/v1/connections/{id}", s.connectionRoute(s.getConnection)},
		{"POST", "/v1/connections/{id}/revoke", s.connectionRoute(s.revokeConnection)},
		{"POST", "/v1/connections/{id}/authorize", s.connectionRoute(s.authorizeConnection)},
		// The browser's routes carry no API key: see oauthRoute.
		{"GET", connection.StartPath, s.oauthRoute(s.oauthStart)},
		{"GET", connection.CallbackPath, s.oauthRoute(s.oauthCallback)},
		{"GET", "/v1/upstreams", s.upstreamRoute(s.listUpstreams)},
		{"GET", "/v1/upstreams/{slug}/tools/{tool}/settings", s.upstreamRoute(s.getUpstreamSettings)},
		{"PUT", "/v1/upstreams/{slug}/tools/{tool}/settings", s.upstreamRoute(s.putUpstreamSettings)},
		{"DELETE", "/v1/upstreams/{slug}/tools/{tool}/settings", s.upstreamRoute(s.resetUpstreamSettings)},
		{"GET", "/v1/policy/bundles", s.policyRoute(s.listPolicyBundles)},
		{"POST", "/v1/policy/bundles", s.policyRoute(s.publishPolicyBundle)},
		{"GET", "/v1/policy/bundles/{version}", s.policyRoute(s.getPolicyBundle)},
		{"POST", "/v1/policy/bundles/{version}/rollback", s.policyRoute(s.rollbackPolicyBundle)},
		{"POST", "/v1/policy/test", s.policyRoute(s.testPolicyBundle)},
		{"POST", "/v1/policy/shadow", s.policyRoute(s.shadowPolicyBundle)},
		{"POST", "/v1/policy/disable", s.policyRoute(s.disablePolicy)},
		{"POST", "/v1/policy/explain", s.policyRoute(s.explainPolicy)},
		{"GET", "/v1/runs/{id}", s.auth(s.getRun)},
	}
}

// metadata answers a protected resource metadata route through Metadata.
func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	if s.Metadata == nil {
		httperr.Send(w, r, httperr.NotFound, "this server has no OAuth protected resource metadata", "")
		return
	}
	s.Metadata.ServeHTTP(w, r)
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if _, _, err := s.Store.ListAudit(r.Context(), "readyz", toolplane.AuditFilter{}, "", 1); err != nil {
		httperr.Send(w, r, httperr.Unavailable, "the database does not answer", "")
		return
	}
	w.Write([]byte("ok\n"))
}

// auth authenticates the request's bearer token through the door layer
// every door shares (door.Door.Authenticate) before h runs, and answers
// its refusals in the API's envelope.
func (s *Server) auth(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What an authenticated route answers depends on the key (the tools
		// it is shown, the approvals of its organization): no cache, shared
		// or not, may keep it and hand it to another.
		w.Header().Set("Cache-Control", "private, no-store")
		c, err := s.Door.AuthenticateRequest(r, w.Header())
		if err == nil {
			// Asked first: errors.As's target would be allocated on every
			// request, refused or not.
			h(w, r, caller{cred: c.Credential, at: c.At})
			return
		}
		var refusal *door.Refusal
		switch {
		case errors.As(err, &refusal) && refusal.Kind == door.Unauthenticated:
			w.Header().Set("WWW-Authenticate", apikey.Challenge(s.ResourceMetadata, refusal.Presented))
			msg := refusal.Message
			if msg == "" {
				msg = "send an API key as Authorization: Bearer <key>"
			}
			httperr.Send(w, r, httperr.Unauthenticated, msg, "")
			return
		case errors.As(err, &refusal) && refusal.Kind == door.RateLimited:
			httperr.Send(w, r, httperr.RateLimited, refusal.Message, "")
			return
		default:
			httperr.Send(w, r, httperr.Unavailable, "credentials cannot be checked right now", "")
		}
	})
}

// outOfScope answers, and reports, a call to tools outside the consent of
// the OAuth access token c was admitted with (door.Scope): 403 with an
// insufficient_scope challenge naming the scope to ask the person for, so
// an OAuth client steps up instead of failing for good.
func (s *Server) outOfScope(w http.ResponseWriter, r *http.Request, c caller, tools ...string) bool {
	err := door.Scope(c.cred, tools...)
	if err == nil {
		return false
	}
	var scope *door.ScopeError
	errors.As(err, &scope)
	w.Header().Set("WWW-Authenticate", apikey.InsufficientScope(s.ResourceMetadata, scope.Scope(), "the token's consent does not cover this call"))
	httperr.Send(w, r, httperr.Denied, err.Error(), "")
	return true
}

// refused answers the first of errs that is a refusal every route
// answers alike: a service's (*toolplane.DeniedError, 403 in the service's
// words; any other toolplane.ErrForbidden) or an identifier past its bound
// (a *toolplane.TooLongError from toolplane.CheckLen, 400 at its field),
// and reports whether one was. A handler may ask a service's rule
// (approval.MayRead, ...) and check its identifiers before it reads the
// request, so that a caller who may not use the route is told so before
// their limit, id or body is judged, and an identifier past its bound is
// refused before it is looked up; the service asks again.
func (s *Server) refused(w http.ResponseWriter, r *http.Request, errs ...error) bool {
	for _, err := range errs {
		var (
			d       *toolplane.DeniedError
			tooLong *toolplane.TooLongError
		)
		if errors.As(err, &d) || errors.Is(err, toolplane.ErrForbidden) || errors.As(err, &tooLong) {
			httperr.Fail(w, r, s.Log, err)
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) { httperr.WriteJSON(w, status, v) }

// maxBody bounds a request body.
const maxBody = 1 << 20

// bodyDecoders decode request bodies strictly (an unknown field is
// refused) with numbers kept exact, reusing their decoders from one
// request to the next.
var bodyDecoders = jsondec.New(jsondec.Options{UseNumber: true, DisallowUnknownFields: true})

func decodeBody(r *http.Request, v any) error {
	if err := bodyDecoders.Decode(http.MaxBytesReader(nil, r.Body, maxBody), v); err != nil {
		return fmt.Errorf("the request body is not valid: %v", err)
	}
	return nil
}

func limitOf(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, fmt.Errorf("limit must be 1 to 1000")
	}
	return n, nil
}

// toolView is a tool as the API lists it.
type toolView struct {
	Name         string                `json:"name"`
	ModelName    string                `json:"model_name"`
	Version      string                `json:"version"`
	SchemaHash   string                `json:"schema_hash"`
	Description  string                `json:"description"`
	Effect       toolplane.Effect      `json:"effect"`
	Annotations  toolplane.Annotations `json:"annotations"`
	InputSchema  json.RawMessage       `json:"input_schema"`
	OutputSchema json.RawMessage       `json:"output_schema"`
	Deprecated   *deprecatedView       `json:"deprecated,omitempty"`
}

// deprecatedView tells an agent that the version it is shown is
// deprecated: until when it may be called, and what replaces it, by
// platform and model-facing name.
type deprecatedView struct {
	SunsetAt             *time.Time `json:"sunset_at,omitempty"`
	Replacement          string     `json:"replacement,omitempty"`
	ReplacementModelName string     `json:"replacement_model_name,omitempty"`
}

// view answers a tool as an agent is shown it; the description is the
// model-facing one, which says when the version is deprecated.
func view(t *registry.Tool, shown func(name string) bool) toolView {
	d := &t.Def
	v := toolView{Name: d.Name, ModelName: t.Model, Version: d.Version, SchemaHash: d.SchemaHash, Description: t.ModelDescriptionFor(shown), Effect: d.Effect,
		Annotations: d.Annotations, InputSchema: projection.InputSchema(d), OutputSchema: projection.OutputSchema(d)}
	if t.State == toolplane.StateDeprecated {
		v.Deprecated = &deprecatedView{SunsetAt: opt(t.SunsetAt)}
		// A replacement the caller may not call is not named.
		if name, _ := t.ReplacementRef(); name != "" && (name == d.Name || shown == nil || shown(name)) {
			v.Deprecated.Replacement = t.Replacement
			v.Deprecated.ReplacementModelName = modelname.Derive(name)
		}
	}
	return v
}

func (s *Server) listTools(w http.ResponseWriter, r *http.Request, c caller) {
	ts, err := s.Door.Shown(r.Context(), c.cred, r.URL.Query().Get("tenant_id"))
	if err != nil {
		s.Log.ErrorContext(r.Context(), "grants could not be read", "err", err)
		httperr.Send(w, r, httperr.Unavailable, "grants cannot be read right now", "")
		return
	}
	names := make(map[string]bool, len(ts))
	for _, t := range ts {
		names[t.Def.Name] = true
	}
	items := make([]toolView, 0, len(ts))
	for _, t := range ts {
		items = append(items, view(t, func(name string) bool { return names[name] }))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) getTool(w http.ResponseWriter, r *http.Request, c caller) {
	t, err := s.Door.ShownTool(r.Context(), c.cred, r.URL.Query().Get("tenant_id"), r.PathValue("name"))
	if err != nil {
		s.Log.ErrorContext(r.Context(), "grants could not be read", "err", err)
		httperr.Send(w, r, httperr.Unavailable, "grants cannot be read right now", "")
		return
	}
	if t == nil {
		httperr.Send(w, r, httperr.NotFound, "no tool named "+r.PathValue("name"), "")
		return
	}
	// What the caller may call, asked once a name: the replacement and
	// the dependencies of what it is shown name nothing else.
	tenant := r.URL.Query().Get("tenant_id")
	known := map[string]bool{}
	shown := func(name string) bool {
		v, ok := known[name]
		if !ok {
			u, err := s.Door.ShownTool(r.Context(), c.cred, tenant, name)
			v = err == nil && u != nil
			known[name] = v
		}
		return v
	}
	tv := view(t, shown)
	out := map[string]any{"tool": tv, "mcp": projection.ShownFor(t, shown)}
	var deps []toolplane.Dependency
	for _, dep := range t.Def.Dependencies {
		if name, _ := semver.SplitRef(dep.Tool); shown(name) {
			deps = append(deps, dep)
		}
	}
	if len(deps) > 0 {
		out["dependencies"] = deps
	}
	if tv.Deprecated != nil {
		out["deprecated"] = tv.Deprecated
	}
	if h := s.health(c.cred.OrganizationID, t.Def.Name); h != nil {
		out["health"] = h
	}
	writeJSON(w, http.StatusOK, out)
}

// approvalMessage says what a caller whose call waits for approval id does
// next. The approved call runs by itself; the identical call repeated in
// the same run (same run_id, or same idempotency_key) answers its result
// without naming the approval, and only a call from another run names it
// in authorized_by.
func approvalMessage(id string) string {
	return "the call waits for a person's approval (" + id + "); nothing was done yet. Once it is approved the call runs by itself: " +
		"call again with the same arguments and the same run_id (or idempotency_key) to get its result, with no authorized_by needed; " +
		"a call from another run names the approval in authorized_by"
}

// invokeRequest is the body of an invocation.
type invokeRequest struct {
	Arguments      json.RawMessage `json:"arguments"`
	RunID          string          `json:"run_id"`
	StepPath       string          `json:"step_path"`
	IdempotencyKey string          `json:"idempotency_key"`
	AuthorizedBy   string          `json:"authorized_by"`
	// OnBehalfOf names the person the call acts for; only a key holding
	// the act_for_users role may name one.
	OnBehalfOf string `json:"on_behalf_of"`
	TenantID   string `json:"tenant_id"`
	// MaxCostCents is the run tree's cost ceiling; a metered call past it
	// answers budget_exhausted. The server's own ceiling, when lower, wins.
	MaxCostCents int64 `json:"max_cost_cents"`
	// Contracts freeze what the run was shown: tool name to the
	// schema_hash it listed. A call on a tool whose contract changed since
	// answers tool_changed instead of running a call shaped for the old.
	Contracts map[string]string `json:"contracts"`
	// Mode "async" asks for the call to run later: it is answered 202
	// with the invocation to poll. A tool whose definition runs async
	// always does; "sync" or empty runs the others in the request.
	Mode toolplane.Mode `json:"mode"`
	// CallbackURL, when set, receives the result, signed, once the call
	// ends; naming one asks for the call to run later.
	CallbackURL string `json:"callback_url"`
	// TimeoutMS is how long, in milliseconds, the caller gives the call;
	// the Request-Timeout header says the same in seconds, and the
	// tighter wins. Neither loosens the tool's own timeout.
	TimeoutMS *float64 `json:"timeout_ms"`
	// RemainingHops is how many tool-to-tool hops the caller gives the
	// call (a tool calling back passes what its call had left); capped
	// by the platform's maximum, which absent means.
	RemainingHops *int `json:"remaining_hops"`
}

func (s *Server) invoke(w http.ResponseWriter, r *http.Request, c caller) {
	read := s.Door.Clock()
	if err := door.CallsTools(c.cred); err != nil {
		// Before the body is read: whatever it holds, this key calls nothing.
		httperr.Send(w, r, httperr.Denied, err.Error(), "")
		return
	}
	var body invokeRequest
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	if err := body.checkMode(); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "mode")
		return
	}
	call := body.call(r.PathValue("name"))
	if s.outOfScope(w, r, c, call.Tool) {
		return
	}
	header, err := requestTimeout(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "Request-Timeout")
		return
	}
	if field, err := body.traffic(&call, header, read); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), field)
		return
	}
	streamed := acceptsEvents(r)
	call.Async = call.Async || streamed || preferAsync(r.Header)
	a := s.Door.Call(r.Context(), door.Caller{Credential: c.cred, At: c.at}, call)
	if streamed && a.Kind == door.Accepted {
		// A streamed call is an asynchronous one whose events this
		// response carries; a call answered now (refused, say) is
		// answered as any other.
		s.streamEvents(w, r, c, a.Async, 0, true)
		return
	}
	s.answerOf(r, "", a).write(w)
}

// call answers the call body asks for of the tool named.
func (body *invokeRequest) call(name string) door.Call {
	return door.Call{
		Tool: name, Arguments: body.Arguments, Source: toolplane.SourceREST,
		RunID: body.RunID, StepPath: body.StepPath, IdempotencyKey: body.IdempotencyKey, AuthorizedBy: body.AuthorizedBy,
		OnBehalfOf: body.OnBehalfOf, TenantID: body.TenantID, Contracts: body.Contracts, MaxCostCents: body.MaxCostCents,
		Async: body.Mode == toolplane.ModeAsync, CallbackURL: body.CallbackURL,
	}
}

// requestTimeout answers the time r's Request-Timeout header gives its
// calls, every one of them on a batch: none (zero) when it is absent.
func requestTimeout(r *http.Request) (time.Duration, error) {
	v := r.Header.Get("Request-Timeout")
	if v == "" {
		return 0, nil
	}
	t, err := door.ParseTimeoutSeconds(v)
	if err != nil {
		return 0, fmt.Errorf("the Request-Timeout header: %w", err)
	}
	return t, nil
}

// traffic sets on call what body says of its time and hops: its timeout,
// the tighter of timeout_ms and header (the request's Request-Timeout,
// zero when none), counted from read, when the door read the request. It
// answers the field at fault when body's is not valid.
func (body *invokeRequest) traffic(call *door.Call, header time.Duration, read time.Time) (string, error) {
	if body.TimeoutMS != nil {
		t, err := door.TimeoutMillis(*body.TimeoutMS)
		if err != nil {
			return "timeout_ms", fmt.Errorf("timeout_ms: %w", err)
		}
		call.Timeout = t
	}
	call.Timeout = door.Tighter(call.Timeout, header)
	call.ReadAt = read
	if body.RemainingHops != nil {
		call.Hops, call.HopsAsked = *body.RemainingHops, true
	}
	return "", nil
}

// checkMode refuses a mode that is neither sync nor async.
func (body *invokeRequest) checkMode() error {
	switch body.Mode {
	case "", toolplane.ModeSync, toolplane.ModeAsync:
		return nil
	}
	return fmt.Errorf("mode is sync or async, not %q", body.Mode)
}

// preferAsync reports whether h asks for an asynchronous answer (RFC 7240
// Prefer: respond-async).
func preferAsync(h http.Header) bool {
	for _, v := range h.Values("Prefer") {
		for _, p := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(p), "respond-async") {
				return true
			}
		}
	}
	return false
}

// callAnswer is how the REST door answers one call: alone as the answer
// to its request, or as one of a batch's results.
type callAnswer struct {
	status int
	// retryAfter is how many seconds to wait before calling again; 0 when
	// the answer says none.
	retryAfter int
	// result is the result's JSON as the boundary rendered it, written as
	// it is; nil when the answer is not a result. It is kept apart from
	// body because a json.RawMessage put in an interface is a copy of its
	// slice header on the heap, one allocation of every answer.
	result []byte
	// body is the approval to wait for, the accepted call, or the error
	// envelope, when result is nil.
	body any
	// location, when set, is the status URL of a call accepted to run
	// later.
	location string
}

// answerOf answers how the door's answer a to a call of r is told. An
// error envelope carries requestID, or r's own id when it is "".
func (s *Server) answerOf(r *http.Request, requestID string, a door.Answer) callAnswer {
	problem := func(code httperr.Code, msg, field string) callAnswer {
		if requestID == "" {
			requestID = httperr.RequestID(r)
		}
		return callAnswer{status: code.Status(), body: httperr.Problem{Code: code, Message: msg, Field: field}.Envelope(requestID)}
	}
	switch a.Kind {
	case door.Invalid:
		return problem(httperr.InvalidRequest, a.Message, a.Field)
	case door.Denied:
		return problem(httperr.Denied, a.Message, a.Field)
	case door.ApprovalRequired:
		ar := a.Approval
		body := map[string]any{"approval": map[string]any{"id": ar.ID, "expires_at": ar.ExpiresAt, "preview": ar.Preview},
			"message": approvalMessage(ar.ID)}
		if s.PublicURL != "" {
			// Where a person opens it: its page in the console.
			body["approval"].(map[string]any)["url"] = console.ApprovalURL(s.PublicURL, ar.ID)
		}
		if ar.Ignored != "" {
			// The authorized_by sent did not authorize the call: say why.
			body["authorized_by_ignored"] = ar.Ignored
		}
		return callAnswer{status: http.StatusAccepted, body: body}
	case door.InFlight:
		if a.RetryAfter > 0 {
			ans := problem(httperr.InFlight, a.Message, "")
			ans.retryAfter = door.RetryAfterSeconds(a.RetryAfter)
			return ans
		}
		return problem(httperr.InFlight, "an identical call is running; try again shortly", "")
	case door.Unavailable:
		return problem(httperr.Unavailable, "grants cannot be read right now", "")
	case door.Fault:
		return problem(httperr.Internal, "the platform could not complete this call", "")
	case door.Accepted:
		return callAnswer{status: http.StatusAccepted, body: s.asyncView(a.Async, a.Existing), location: s.statusPath(a.Async.ID)}
	}
	ans := callAnswer{status: http.StatusOK, result: boundary.Render(a.Result)}
	if e := a.Result.Error; e != nil && e.RetryAfter > 0 {
		// A refusal that knows when the call can succeed (a breaker, a
		// cap) says so where HTTP clients look, beside the result's field.
		ans.retryAfter = e.RetryAfter
	}
	return ans
}

// write answers the request with ans alone.
func (ans callAnswer) write(w http.ResponseWriter) {
	if ans.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ans.retryAfter))
	}
	if ans.location != "" {
		w.Header().Set("Location", ans.location)
	}
	if ans.result == nil {
		writeJSON(w, ans.status, ans.body)
		return
	}
	// A result is written as rendered, not encoded again.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ans.status)
	w.Write(ans.result)
	w.Write(newline)
}

// payload answers what ans says as one value to encode: the result's
// JSON as rendered, or the body.
func (ans callAnswer) payload() any {
	if ans.result != nil {
		return json.RawMessage(ans.result)
	}
	return ans.body
}

// newline ends a result written as rendered, as json.Encoder ends what it
// encodes; made once, since a conversion at the call would be a copy on
// the heap per answer.
var newline = []byte("\n")

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, c caller) {
	if s.refused(w, r, approval.MayRead(c.cred, "listing approvals")) {
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	status := toolplane.ApprovalStatus(r.URL.Query().Get("status"))
	if status == "" {
		status = toolplane.ApprovalPending
	}
	as, next, err := s.approvals().List(r.Context(), status, r.URL.Query().Get("cursor"), limit, c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	items := make([]map[string]any, len(as))
	for i, a := range as {
		items[i] = s.approvalView(a)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

// approvals answers the approval service approvals are read through.
func (s *Server) approvals() *approval.Service {
	if a := s.Door.Invoker.Approvals(); a != nil {
		return a
	}
	// An invoker wired without approvals files none; reading the store
	// still answers what there is, under the same rules.
	return approval.New(approval.Config{Store: s.Store, Now: s.Now})
}

// approvalView is an approval as the API shows it: redacted by
// approval.ShownWith, with the values its tool's input schema marks
// x-sensitive, the same in the list and alone (and in the console).
func (s *Server) approvalView(a toolplane.Approval) map[string]any {
	a = approval.ShownWith(a, s.Door.Registry.Sensitive(a.OrganizationID, a.Tool, a.ToolVersion))
	v := map[string]any{"id": a.ID, "tool": a.Tool, "run_id": a.RunID, "status": a.Status, "preview": a.Preview,
		"arguments": json.RawMessage(a.Arguments), "approver_group": a.ApproverGroup, "expires_at": a.ExpiresAt, "created_at": a.CreatedAt,
		"rule": a.Rule, "approvers": max(a.Approvers, 1), "approver": a.Approver, "approved_by": nonNilNames(a.ApprovedBy)}
	// Who answered, when and why, once answered: a decision from Slack
	// says so in its reason, as the console shows it.
	if !a.ResolvedAt.IsZero() {
		v["resolved_at"] = a.ResolvedAt
	}
	if a.ResolvedBy != "" {
		v["resolved_by"] = a.ResolvedBy
	}
	if a.Reason != "" {
		v["reason"] = a.Reason
	}
	return v
}

// getApproval answers one approval of the caller's organization, to whom
// the list would show it; another organization's id is not found.
func (s *Server) getApproval(w http.ResponseWriter, r *http.Request, c caller) {
	id := r.PathValue("id")
	if s.refused(w, r, approval.MayRead(c.cred, "reading approvals")) {
		return
	}
	if s.refused(w, r, toolplane.CheckLen("approval id", id, toolplane.MaxRefLen)) {
		return
	}
	a, err := s.approvals().Get(r.Context(), id, c.cred)
	switch {
	case s.refused(w, r, err):
	case errors.Is(err, toolplane.ErrNotFound):
		httperr.Send(w, r, httperr.NotFound, "no approval "+id, "")
	case err != nil:
		s.Log.ErrorContext(r.Context(), "approval lookup failed", "err", err)
		httperr.Send(w, r, httperr.Internal, "the approval could not be read", "")
	default:
		view := s.approvalView(*a)
		after, err := s.Door.Invoker.Aftermath(r.Context(), a, c.cred)
		if err != nil {
			s.Log.ErrorContext(r.Context(), "approval outcome lookup failed", "approval", a.ID, "err", err)
			httperr.Send(w, r, httperr.Internal, "what became of the approved call could not be read", "")
			return
		}
		if after != nil {
			view["outcome"] = aftermathView(after)
		}
		writeJSON(w, http.StatusOK, view)
	}
}

// aftermathView is what became of an approved call as the API shows it:
// its state, the refusal's code and message (the agent's words, or why it
// is uncertain), who reconciled it, and the audit event of the call that
// ran with where to read it.
func aftermathView(a *invoke.Aftermath) map[string]any {
	out := map[string]any{"state": a.State}
	if a.Code != "" {
		out["code"] = a.Code
	}
	if a.Message != "" {
		out["message"] = a.Message
		out["untrusted"] = a.Untrusted
	}
	if a.ReconciledBy != "" {
		out["reconciled_by"] = a.ReconciledBy
	}
	if a.AuditID != "" {
		out["audit_event_id"] = a.AuditID
		out["audit_event"] = "/v1/audit/events/" + url.PathEscape(a.AuditID)
		out["at"] = a.At
	}
	return out
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request, c caller) {
	decision := r.PathValue("decision")
	if decision != "approve" && decision != "reject" {
		httperr.Send(w, r, httperr.NotFound, "use /approve or /reject", "")
		return
	}
	if s.refused(w, r, approval.MayAnswer(c.cred)) {
		return
	}
	if s.refused(w, r, toolplane.CheckLen("approval id", r.PathValue("id"), toolplane.MaxRefLen)) {
		return
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if r.ContentLength != 0 {
		if err := decodeBody(r, &body); err != nil {
			httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
			return
		}
	}
	a, err := s.Door.Invoker.Resolve(r.Context(), r.PathValue("id"), approval.Decision{Approve: decision == "approve", Reason: body.Reason}, c.cred)
	switch p, refusal := httperr.Classify(err); {
	case s.refused(w, r, err):
	case errors.Is(err, toolplane.ErrNotFound):
		httperr.Send(w, r, httperr.NotFound, "no approval "+r.PathValue("id"), "")
	case refusal:
		// Not pending, expired, tampered with, or its tool changed: each
		// a conflict, answered by its kind.
		httperr.Send(w, r, p.Code, p.Message, p.Field)
	case err != nil:
		s.Log.ErrorContext(r.Context(), "approval resolution fault", "err", err)
		httperr.Send(w, r, httperr.Internal, "the approval could not be recorded", "")
	default:
		writeJSON(w, http.StatusOK, map[string]any{"id": a.ID, "status": a.Status, "resolved_by": a.ResolvedBy, "resolved_at": a.ResolvedAt})
	}
}

func (s *Server) listUncertain(w http.ResponseWriter, r *http.Request, c caller) {
	if s.refused(w, r, invoke.MayListUncertain(c.cred)) {
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	cs, next, err := s.Door.Invoker.Uncertain(r.Context(), r.URL.Query().Get("cursor"), limit, c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	items := make([]map[string]any, len(cs))
	for i, cl := range cs {
		items[i] = map[string]any{"tool": cl.Tool, "key": cl.Key, "run_id": cl.RunID, "reason": cl.Reason, "owner": cl.Owner,
			"arguments": json.RawMessage(approval.ShownArguments(cl.Arguments, s.Door.Registry.Sensitive(cl.OrganizationID, cl.Tool, ""))), "since": cl.UpdatedAt}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

func (s *Server) reconcile(w http.ResponseWriter, r *http.Request, c caller) {
	if s.refused(w, r, invoke.MayReconcile(c.cred)) {
		return
	}
	var body struct {
		Tool        string          `json:"tool"`
		Key         string          `json:"key"`
		Output      json.RawMessage `json:"output"`
		Failure     *invoke.Failure `json:"failure"`
		Unconfirmed string          `json:"unconfirmed"`
	}
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	if s.refused(w, r, toolplane.CheckLen("tool", body.Tool, toolplane.MaxNameLen), toolplane.CheckLen("key", body.Key, toolplane.MaxRunLen)) {
		return
	}
	rec := invoke.Reconciliation{Failure: body.Failure, Unconfirmed: body.Unconfirmed}
	if len(body.Output) > 0 {
		out, refusal := registry.DecodeArguments(body.Output)
		if refusal != nil {
			httperr.Send(w, r, httperr.InvalidRequest, "output is not valid JSON", "output")
			return
		}
		rec.Output = out
	}
	res, err := s.Door.Invoker.Reconcile(r.Context(), body.Tool, body.Key, rec, c.cred)
	switch {
	case s.refused(w, r, err):
	case errors.Is(err, toolplane.ErrNotFound):
		httperr.Send(w, r, httperr.NotFound, "no such uncertain action", "")
	case errors.Is(err, toolplane.ErrConflict):
		// journal.ErrNotUncertain, or the claim changed under the settling.
		httperr.Send(w, r, httperr.Conflict, "the action is not uncertain (it was settled already), or it changed meanwhile", "")
	case err != nil:
		// A reconciliation refused (invoke.ErrBadReconciliation) is
		// answered by its kind; anything else (the store not answering)
		// is the platform's.
		httperr.Fail(w, r, s.Log, err)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Write(boundary.Render(res))
		w.Write([]byte("\n"))
	}
}

// verifyAudit answers the verification of the caller's organization's
// audit chain, from and to being sequence numbers (absent: the whole
// chain). A broken chain is a 200 whose report names the break.
func (s *Server) verifyAudit(w http.ResponseWriter, r *http.Request, c caller) {
	chain, ok := s.Store.(toolplane.AuditChainStore)
	if s.AuditKeys == nil || !ok {
		httperr.Send(w, r, httperr.NotFound, "this server does not verify its audit chain", "")
		return
	}
	var bounds [2]int64
	for i, name := range []string{"from", "to"} {
		if v := r.URL.Query().Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				httperr.Send(w, r, httperr.InvalidRequest, name+" is a sequence number of the chain (a whole number from 1)", name)
				return
			}
			bounds[i] = n
		}
	}
	rep, err := audit.NewVerifier(chain, s.AuditKeys).Verify(r.Context(), bounds[0], bounds[1], c.cred)
	if s.refused(w, r, err) {
		return
	}
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// auditKeys publishes the operator's audit public keys: whoever holds
// them can check a checkpoint's signature, with no account here.
func (s *Server) auditKeys(w http.ResponseWriter, r *http.Request) {
	if s.AuditKeys == nil {
		httperr.Send(w, r, httperr.NotFound, "this server publishes no audit keys", "")
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, s.AuditKeys.Public())
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request, c caller) {
	if s.refused(w, r, audit.MayRead(c.cred)) {
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	q := r.URL.Query()
	f, err := auditFilterOf(q)
	if sendBadQuery(w, r, err) {
		return
	}
	evs, next, err := s.trail.List(r.Context(), f, q.Get("cursor"), limit, c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	if evs == nil {
		evs = []toolplane.AuditEvent{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": evs, "next_cursor": next})
}

func (s *Server) getAudit(w http.ResponseWriter, r *http.Request, c caller) {
	ev, err := s.trail.Get(r.Context(), r.PathValue("id"), c.cred)
	if s.refused(w, r, err) {
		return
	}
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, ev)
}

// nonNilNames answers list, or an empty list for nil, so a JSON answer
// holds [] rather than null.
func nonNilNames(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}
