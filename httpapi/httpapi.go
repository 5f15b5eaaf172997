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
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/cursor"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/projection"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/upstream"
)

// Server serves the API.
type Server struct {
	Invoker  *invoke.Invoker
	Registry *registry.Registry
	Store    toolplane.Store
	Log      *slog.Logger
	Now      func() time.Time
	// Tokens, when set, verifies bearer tokens that are not API keys
	// (JWTs of a configured issuer).
	Tokens apikey.TokenVerifier
	// ResourceMetadata, when set, is the URL of the server's OAuth
	// protected resource metadata (RFC 9728), which a 401's
	// WWW-Authenticate names (see apikey.Challenge).
	ResourceMetadata string
	// Metadata, when set, answers the OAuth protected resource metadata
	// routes (/.well-known/oauth-protected-resource and its /mcp
	// variants; see mcpserver.Server.ResourceMetadataHandler). Without it
	// they answer 404.
	Metadata http.Handler
	// Limiter, when set, limits each key's requests on this node and
	// reports the limit in the X-RateLimit headers. Only requests that
	// authenticated as the key spend its budget.
	Limiter *ratelimit.Limiter
	// Failures, when set, limits failed authentications per client
	// address and per key id, apart from any key's own budget (see
	// apikey.Gate); one per node, shared with the MCP door.
	Failures *ratelimit.Failures
	// Keys, when set, remembers verified API keys across requests; one
	// per node, shared with the MCP door (see apikey.Cache).
	Keys *apikey.Cache
	// RunBudgetCents, when positive, caps every run's cost: a caller may
	// name a lower ceiling, never a higher one.
	RunBudgetCents int64
	// Catalog and Authz, when set, serve the registry's lifecycle and the
	// grants under /v1/registry, /v1/grants, /v1/denies and /v1/bundles.
	// Authz is also where the tools an agent is shown are read (see
	// door.Door.Shown); a call is decided by the invoker. Without it the
	// key's own tools are the grant.
	Catalog *catalog.Service
	Authz   *authz.Service
	// PublicURL, when set, is where clients reach this server: the OpenAPI
	// document it serves names it as its server, so a client generated from
	// that document calls this server rather than the default address.
	PublicURL string

	// document is the OpenAPI document served, built by Handler.
	document []byte
	// keys and trail are the key service and the audit trail over Store,
	// built by Handler.
	keys  *apikey.Keys
	trail *audit.Trail

	// UpstreamSettings, when set, serves the runtime settings of upstream
	// tools under /v1/upstreams.
	UpstreamSettings *upstream.Settings

	// Door, when set, is the door layer the server shares with the other
	// doors (authentication, rate limits, what a key is shown, calls); it
	// then takes the place of Tokens, Limiter, Failures, RunBudgetCents
	// and, for authentication, Keys (see door.Door). Without it the
	// server makes one of its own settings.
	Door *door.Door
}

// caller is who a request authenticated as.
type caller struct {
	cred *toolplane.Credential
	// at is when the gate admitted the request (and charged its budget).
	at time.Time
}

// Handler answers the API's routes.
func (s *Server) Handler() http.Handler {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	s.keys = apikey.NewKeys(apikey.KeysConfig{Store: s.Store, Cache: s.Keys, Now: s.Now})
	s.trail = audit.NewTrail(s.Store)
	s.document = openAPI
	if s.PublicURL != "" {
		doc, err := withServer(openAPI, s.PublicURL)
		if err != nil {
			// The embedded document is checked by a test; this is a build
			// that broke it.
			panic(fmt.Sprintf("httpapi: the embedded OpenAPI document: %v", err))
		}
		s.document = doc
	}
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.Handle(rt.method+" "+rt.path, rt.h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// This catch-all takes every method, so the mux never answers 405
		// itself: a known path asked with another method is told which
		// methods it takes.
		if allow := allowed(mux, r); allow != "" {
			w.Header().Set("Allow", allow)
			s.fail(w, r, http.StatusMethodNotAllowed, "method_not_allowed", r.URL.Path+" takes "+allow+", not "+r.Method, "")
			return
		}
		s.fail(w, r, http.StatusNotFound, "not_found", "no such route: "+r.Method+" "+r.URL.Path, "")
	})
	return mux
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
		{"GET", "/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })},
		{"GET", "/readyz", http.HandlerFunc(s.ready)},
		{"GET", "/v1/openapi.json", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(s.document)
		})},
		{"GET", "/.well-known/oauth-protected-resource", http.HandlerFunc(s.metadata)},
		{"GET", "/.well-known/oauth-protected-resource/mcp", http.HandlerFunc(s.metadata)},
		{"GET", "/.well-known/oauth-protected-resource/mcp/{slug}", http.HandlerFunc(s.metadata)},
		{"GET", "/v1/tools", s.auth(s.listTools)},
		{"GET", "/v1/tools/{name}", s.auth(s.getTool)},
		{"POST", "/v1/tools/{name}/invoke", s.auth(s.invoke)},
		{"GET", "/v1/approvals", s.auth(s.listApprovals)},
		{"GET", "/v1/approvals/{id}", s.auth(s.getApproval)},
		{"POST", "/v1/approvals/{id}/{decision}", s.auth(s.resolve)},
		{"GET", "/v1/uncertain", s.auth(s.listUncertain)},
		{"POST", "/v1/uncertain/reconcile", s.auth(s.reconcile)},
		{"GET", "/v1/audit/events", s.auth(s.listAudit)},
		{"POST", "/v1/keys", s.auth(s.createKey)},
		{"GET", "/v1/keys", s.auth(s.listKeys)},
		{"POST", "/v1/keys/{id}/revoke", s.auth(s.revokeKey)},
		{"POST", "/v1/registry/tools", s.registryRoute(s.publish)},
		{"GET", "/v1/registry/tools", s.registryRoute(s.listVersions)},
		{"GET", "/v1/registry/tools/{name}/versions/{version}", s.registryRoute(s.getVersion)},
		{"POST", "/v1/registry/tools/{name}/versions/{version}/{action}", s.registryRoute(s.versionAction)},
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
		{"GET", "/v1/upstreams/{slug}/tools/{tool}/settings", s.upstreamRoute(s.getUpstreamSettings)},
		{"PUT", "/v1/upstreams/{slug}/tools/{tool}/settings", s.upstreamRoute(s.putUpstreamSettings)},
		{"DELETE", "/v1/upstreams/{slug}/tools/{tool}/settings", s.upstreamRoute(s.resetUpstreamSettings)},
	}
}

// metadata answers a protected resource metadata route through Metadata.
func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	if s.Metadata == nil {
		s.fail(w, r, http.StatusNotFound, "not_found", "this server has no OAuth protected resource metadata", "")
		return
	}
	s.Metadata.ServeHTTP(w, r)
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if _, _, err := s.Store.ListAudit(r.Context(), "readyz", toolplane.AuditFilter{}, "", 1); err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "unavailable", "the database does not answer", "")
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
		c, err := s.door().Authenticate(r.Context(), r.Header.Get("Authorization"), ratelimit.ClientAddr(r), w.Header())
		var refused *door.Refusal
		switch {
		case errors.As(err, &refused) && refused.Kind == door.Unauthenticated:
			w.Header().Set("WWW-Authenticate", apikey.Challenge(s.ResourceMetadata, refused.Presented))
			msg := refused.Message
			if !refused.Presented {
				msg = "send an API key as Authorization: Bearer <key>"
			}
			s.fail(w, r, http.StatusUnauthorized, "unauthenticated", msg, "")
			return
		case errors.As(err, &refused) && refused.Kind == door.RateLimited:
			s.fail(w, r, http.StatusTooManyRequests, "rate_limited", refused.Message, "")
			return
		case err != nil:
			s.fail(w, r, http.StatusServiceUnavailable, "unavailable", "credentials cannot be checked right now", "")
			return
		}
		h(w, r, caller{cred: c.Credential, at: c.At})
	})
}

// door answers the door layer this server's requests go through: Door
// when set, otherwise one made of this server's own settings.
func (s *Server) door() *door.Door {
	if s.Door != nil {
		return s.Door
	}
	return &door.Door{Invoker: s.Invoker, Registry: s.Registry, Store: s.Store, Tokens: s.Tokens, Keys: s.Keys, Limiter: s.Limiter,
		Failures: s.Failures, Authz: s.Authz, RunBudgetCents: s.RunBudgetCents, Log: s.Log, Now: s.Now}
}

// bounded answers 400 invalid_request for the first of checks (from
// toolplane.CheckLen) that failed, naming its field, and reports whether
// none did: an identifier past its bound is refused before it is looked up
// or written anywhere.
func (s *Server) bounded(w http.ResponseWriter, r *http.Request, checks ...error) bool {
	for _, err := range checks {
		var tooLong *toolplane.TooLongError
		if errors.As(err, &tooLong) {
			s.fail(w, r, http.StatusBadRequest, "invalid_request", tooLong.Error(), tooLong.Field)
			return false
		}
	}
	return true
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, code, msg, field string) {
	httperr.Write(w, r, status, code, msg, field)
}

func writeJSON(w http.ResponseWriter, status int, v any) { httperr.WriteJSON(w, status, v) }

// listFail answers a list's failure: a cursor the store could not decode
// is the caller's mistake (400 at cursor); anything else — a database
// outage included — is the platform's, logged and answered 500 without
// its details, so an outage is neither hidden as a bad request nor
// described to the caller.
func (s *Server) listFail(w http.ResponseWriter, r *http.Request, what string, err error) {
	if errors.Is(err, cursor.ErrMalformed) {
		s.fail(w, r, http.StatusBadRequest, "invalid_request", "the cursor is not valid", "cursor")
		return
	}
	s.Log.ErrorContext(r.Context(), "list failed", "list", what, "err", err)
	s.fail(w, r, http.StatusInternalServerError, "internal_error", "the list could not be read", "")
}

// maxBody bounds a request body.
const maxBody = 1 << 20

func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
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
}

func view(t *registry.Tool) toolView {
	d := &t.Def
	return toolView{Name: d.Name, ModelName: t.Model, Version: d.Version, SchemaHash: d.SchemaHash, Description: d.Description, Effect: d.Effect,
		Annotations: d.Annotations, InputSchema: projection.InputSchema(d), OutputSchema: projection.OutputSchema(d)}
}

func (s *Server) listTools(w http.ResponseWriter, r *http.Request, c caller) {
	ts, err := s.door().Shown(r.Context(), c.cred, r.URL.Query().Get("tenant_id"))
	if err != nil {
		s.Log.ErrorContext(r.Context(), "grants could not be read", "err", err)
		s.fail(w, r, http.StatusServiceUnavailable, "unavailable", "grants cannot be read right now", "")
		return
	}
	items := make([]toolView, 0, len(ts))
	for _, t := range ts {
		items = append(items, view(t))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) getTool(w http.ResponseWriter, r *http.Request, c caller) {
	t, err := s.door().ShownTool(r.Context(), c.cred, r.URL.Query().Get("tenant_id"), r.PathValue("name"))
	if err != nil {
		s.Log.ErrorContext(r.Context(), "grants could not be read", "err", err)
		s.fail(w, r, http.StatusServiceUnavailable, "unavailable", "grants cannot be read right now", "")
		return
	}
	if t == nil {
		s.fail(w, r, http.StatusNotFound, "not_found", "no tool named "+r.PathValue("name"), "")
		return
	}
	out := map[string]any{"tool": view(t), "mcp": projection.MCP(&t.Def)}
	if len(t.Def.Dependencies) > 0 {
		out["dependencies"] = t.Def.Dependencies
	}
	if t.State == toolplane.StateDeprecated {
		out["deprecated"] = map[string]any{"sunset_at": opt(t.SunsetAt), "replacement": t.Replacement}
	}
	writeJSON(w, http.StatusOK, out)
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
}

func (s *Server) invoke(w http.ResponseWriter, r *http.Request, c caller) {
	if err := door.CallsTools(c.cred); err != nil {
		// Before the body is read: whatever it holds, this key calls nothing.
		s.fail(w, r, http.StatusForbidden, "denied", err.Error(), "")
		return
	}
	var body invokeRequest
	if err := decodeBody(r, &body); err != nil {
		s.fail(w, r, http.StatusBadRequest, "invalid_request", err.Error(), "")
		return
	}
	name := r.PathValue("name")
	a := s.door().Call(r.Context(), door.Caller{Credential: c.cred, At: c.at}, door.Call{
		Tool: name, Arguments: body.Arguments, Source: toolplane.SourceREST,
		RunID: body.RunID, StepPath: body.StepPath, IdempotencyKey: body.IdempotencyKey, AuthorizedBy: body.AuthorizedBy,
		OnBehalfOf: body.OnBehalfOf, TenantID: body.TenantID, Contracts: body.Contracts, MaxCostCents: body.MaxCostCents,
	})
	switch a.Kind {
	case door.Invalid:
		s.fail(w, r, http.StatusBadRequest, "invalid_request", a.Message, a.Field)
	case door.Denied:
		s.fail(w, r, http.StatusForbidden, "denied", a.Message, a.Field)
	case door.ApprovalRequired:
		ar := a.Approval
		body := map[string]any{"approval": map[string]any{"id": ar.ID, "expires_at": ar.ExpiresAt, "preview": ar.Preview},
			"message": "the call waits for a person's approval; call again with the same arguments (and authorized_by) once it is answered"}
		if ar.Ignored != "" {
			// The authorized_by sent did not authorize the call: say why.
			body["authorized_by_ignored"] = ar.Ignored
		}
		writeJSON(w, http.StatusAccepted, body)
	case door.InFlight:
		msg := "an identical call is running; try again shortly"
		if a.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(door.RetryAfterSeconds(a.RetryAfter)))
			msg = a.Message
		}
		s.fail(w, r, http.StatusConflict, "in_flight", msg, "")
	case door.Unavailable:
		s.fail(w, r, http.StatusServiceUnavailable, "unavailable", "grants cannot be read right now", "")
	case door.Fault:
		s.fail(w, r, http.StatusInternalServerError, "internal_error", "the platform could not complete this call", "")
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(boundary.Render(a.Result))
		w.Write([]byte("\n"))
	}
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, c caller) {
	if s.denied(w, r, approval.MayRead(c.cred, "listing approvals")) {
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "invalid_request", err.Error(), "limit")
		return
	}
	status := toolplane.ApprovalStatus(r.URL.Query().Get("status"))
	if status == "" {
		status = toolplane.ApprovalPending
	}
	as, next, err := s.approvals().List(r.Context(), status, r.URL.Query().Get("cursor"), limit, c.cred)
	if err != nil {
		if !s.denied(w, r, err) {
			s.listFail(w, r, "approvals", err)
		}
		return
	}
	items := make([]map[string]any, len(as))
	for i, a := range as {
		items[i] = approvalView(a)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

// approvals answers the approval service approvals are read through.
func (s *Server) approvals() *approval.Service {
	if a := s.Invoker.Approvals(); a != nil {
		return a
	}
	// An invoker wired without approvals files none; reading the store
	// still answers what there is, under the same rules.
	return approval.New(approval.Config{Store: s.Store, Now: s.Now})
}

// approvalView is an approval as the API shows it: redacted by
// approval.Shown, the same in the list and alone.
func approvalView(a toolplane.Approval) map[string]any {
	a = approval.Shown(a)
	return map[string]any{"id": a.ID, "tool": a.Tool, "run_id": a.RunID, "status": a.Status, "preview": a.Preview,
		"arguments": json.RawMessage(a.Arguments), "approver_group": a.ApproverGroup, "expires_at": a.ExpiresAt, "created_at": a.CreatedAt}
}

// getApproval answers one approval of the caller's organization, to whom
// the list would show it; another organization's id is not found.
func (s *Server) getApproval(w http.ResponseWriter, r *http.Request, c caller) {
	id := r.PathValue("id")
	if s.denied(w, r, approval.MayRead(c.cred, "reading approvals")) {
		return
	}
	if !s.bounded(w, r, toolplane.CheckLen("approval id", id, toolplane.MaxRefLen)) {
		return
	}
	a, err := s.approvals().Get(r.Context(), id, c.cred)
	switch {
	case s.denied(w, r, err):
	case errors.Is(err, toolplane.ErrNotFound):
		s.fail(w, r, http.StatusNotFound, "not_found", "no approval "+id, "")
	case err != nil:
		s.Log.ErrorContext(r.Context(), "approval lookup failed", "err", err)
		s.fail(w, r, http.StatusInternalServerError, "internal_error", "the approval could not be read", "")
	default:
		writeJSON(w, http.StatusOK, approvalView(*a))
	}
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request, c caller) {
	decision := r.PathValue("decision")
	if decision != "approve" && decision != "reject" {
		s.fail(w, r, http.StatusNotFound, "not_found", "use /approve or /reject", "")
		return
	}
	if s.denied(w, r, approval.MayAnswer(c.cred)) {
		return
	}
	if !s.bounded(w, r, toolplane.CheckLen("approval id", r.PathValue("id"), toolplane.MaxRefLen)) {
		return
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if r.ContentLength != 0 {
		if err := decodeBody(r, &body); err != nil {
			s.fail(w, r, http.StatusBadRequest, "invalid_request", err.Error(), "")
			return
		}
	}
	a, err := s.Invoker.Resolve(r.Context(), r.PathValue("id"), approval.Decision{Approve: decision == "approve", Reason: body.Reason}, c.cred)
	switch {
	case s.denied(w, r, err):
	case errors.Is(err, toolplane.ErrNotFound):
		s.fail(w, r, http.StatusNotFound, "not_found", "no approval "+r.PathValue("id"), "")
	case errors.Is(err, approval.ErrNotPending), errors.Is(err, approval.ErrExpired), errors.Is(err, approval.ErrStale), errors.Is(err, approval.ErrTampered):
		s.fail(w, r, http.StatusConflict, "conflict", err.Error(), "")
	case err != nil:
		s.Log.ErrorContext(r.Context(), "approval resolution fault", "err", err)
		s.fail(w, r, http.StatusInternalServerError, "internal_error", "the approval could not be recorded", "")
	default:
		writeJSON(w, http.StatusOK, map[string]any{"id": a.ID, "status": a.Status, "resolved_by": a.ResolvedBy, "resolved_at": a.ResolvedAt})
	}
}

func (s *Server) listUncertain(w http.ResponseWriter, r *http.Request, c caller) {
	if s.denied(w, r, invoke.MayListUncertain(c.cred)) {
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "invalid_request", err.Error(), "limit")
		return
	}
	cs, next, err := s.Invoker.Uncertain(r.Context(), r.URL.Query().Get("cursor"), limit, c.cred)
	if err != nil {
		if !s.denied(w, r, err) {
			s.listFail(w, r, "uncertain", err)
		}
		return
	}
	items := make([]map[string]any, len(cs))
	for i, cl := range cs {
		items[i] = map[string]any{"tool": cl.Tool, "key": cl.Key, "run_id": cl.RunID, "reason": cl.Reason, "owner": cl.Owner,
			"arguments": json.RawMessage(boundary.RedactJSON(cl.Arguments)), "since": cl.UpdatedAt}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

func (s *Server) reconcile(w http.ResponseWriter, r *http.Request, c caller) {
	if s.denied(w, r, invoke.MayReconcile(c.cred)) {
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
		s.fail(w, r, http.StatusBadRequest, "invalid_request", err.Error(), "")
		return
	}
	if !s.bounded(w, r, toolplane.CheckLen("tool", body.Tool, toolplane.MaxNameLen), toolplane.CheckLen("key", body.Key, toolplane.MaxRunLen)) {
		return
	}
	rec := invoke.Reconciliation{Failure: body.Failure, Unconfirmed: body.Unconfirmed}
	if len(body.Output) > 0 {
		out, refusal := registry.DecodeArguments(body.Output)
		if refusal != nil {
			s.fail(w, r, http.StatusBadRequest, "invalid_request", "output is not valid JSON", "output")
			return
		}
		rec.Output = out
	}
	res, err := s.Invoker.Reconcile(r.Context(), body.Tool, body.Key, rec, c.cred)
	switch {
	case s.denied(w, r, err):
	case errors.Is(err, invoke.ErrBadReconciliation):
		s.fail(w, r, http.StatusBadRequest, "invalid_request", err.Error(), "")
	case errors.Is(err, toolplane.ErrNotFound):
		s.fail(w, r, http.StatusNotFound, "not_found", "no such uncertain action", "")
	case err != nil:
		s.Log.ErrorContext(r.Context(), "reconciliation refused", "err", err)
		s.fail(w, r, http.StatusConflict, "conflict", "the action is not uncertain (it was settled already), or it changed meanwhile", "")
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Write(boundary.Render(res))
		w.Write([]byte("\n"))
	}
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request, c caller) {
	if s.denied(w, r, audit.MayRead(c.cred)) {
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "invalid_request", err.Error(), "limit")
		return
	}
	q := r.URL.Query()
	f := toolplane.AuditFilter{RunID: q.Get("run_id"), AgentID: q.Get("agent_id"), Tool: q.Get("tool"), Outcome: q.Get("outcome")}
	evs, next, err := s.trail.List(r.Context(), f, q.Get("cursor"), limit, c.cred)
	if err != nil {
		if !s.denied(w, r, err) {
			s.listFail(w, r, "audit", err)
		}
		return
	}
	if evs == nil {
		evs = []toolplane.AuditEvent{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": evs, "next_cursor": next})
}

// denied answers 403 denied when err is a service's refusal
// (*toolplane.DeniedError), in the service's words, and reports whether it
// was: the rules are the services', the door only says what they said.
// A handler may ask a service's rule (approval.MayRead, ...) before it
// reads the request, so that a caller who may not use the route is told so
// before their limit, id or body is judged; the service asks it again.
func (s *Server) denied(w http.ResponseWriter, r *http.Request, err error) bool {
	var d *toolplane.DeniedError
	if !errors.As(err, &d) {
		return false
	}
	s.fail(w, r, http.StatusForbidden, "denied", d.Why, "")
	return true
}

// forbidRole answers 403 to c, whose key lacks the role msg says the
// route needs, in the words every service's refusal uses
// (toolplane.Refuse).
func (s *Server) forbidRole(w http.ResponseWriter, r *http.Request, c caller, msg string) {
	s.fail(w, r, http.StatusForbidden, "denied", toolplane.Refuse(c.cred, nil, msg).Why, "")
}
