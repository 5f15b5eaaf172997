// Package door is what every door of toolplane does (the REST API, the MCP
// endpoint, and any door to come, such as a web console), written once:
// authenticating a request's bearer token and applying the rate limits,
// recording a key's use, deciding which tools a credential is shown,
// building the invocation of a call from what the caller sent, calling the
// invoker and turning its outcome into a door-neutral answer.
//
// A door only translates: it reads its protocol's form of a request into
// the values here, and renders the refusals and answers here in its
// protocol's form. No door matches grants for a call: a call is decided
// once, by the invoker's policy step, on the principal the invoker itself
// computes from the credential (invoke.Config.Principals). So a new door
// adds no rule, and no rule differs between doors.
package door

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/async"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
)

// Door holds what the doors of one server share. It is a plain value, built
// once at wiring (or by a door from its own settings); its methods never
// change it, so one Door serves every request concurrently.
type Door struct {
	// Invoker runs every call (Call).
	Invoker *invoke.Invoker
	// Registry is the catalogue the tools shown are read from.
	Registry *registry.Registry
	// Store finds API keys; when it can also record a key's last use
	// (TouchCredential), Authenticate records it, at most once per key per
	// Keys' touch interval.
	Store apikey.Getter
	// Tokens, when set, verifies bearer tokens that are not API keys
	// (JWTs of a configured issuer).
	Tokens apikey.TokenVerifier
	// Keys, when set, remembers verified API keys across requests; one
	// per node, shared by the doors (see apikey.Cache).
	Keys *apikey.Cache
	// Limiter, when set, limits each key's requests on this node, whichever
	// door they come by. Only requests that authenticated as the key spend
	// its budget.
	Limiter *ratelimit.Limiter
	// Failures, when set, limits failed authentications per client
	// address, apart from any key's own budget (see apikey.Gate).
	Failures *ratelimit.Failures
	// Proxies are the reverse proxies whose X-Forwarded-For names the
	// client address failures are counted under (see ClientAddr); nil
	// trusts none.
	Proxies *ratelimit.Proxies
	// CertProxies are the TLS-terminating proxies whose
	// X-Forwarded-Client-Cert header names the client's certificate (see
	// AuthenticateRequest); nil trusts none.
	CertProxies *ratelimit.Proxies
	// Authz, when set, is where an agent identity's grants are read for
	// what it is shown: the tools they allow (at the versions they pin)
	// that its key admits. Without it a key's own tools are its grant.
	// What a call may do is decided by the invoker, not here: where this
	// is set, the invoker reads the same grants (invoke.Config.Principals
	// an authz.Principals over this service), or it would decide calls on
	// the keys' own tools.
	Authz *authz.Service
	// Async, when set, accepts calls to run later (Submit), reads and
	// cancels them; without it every call runs in its request.
	Async *async.Service
	// Discovery, when set, is the node's search index (Search,
	// Dependencies), searched over what Shown answers.
	Discovery *discovery.Index
	// RunBudgetCents, when positive, caps every run's cost: a caller may
	// name a lower ceiling, never a higher one.
	RunBudgetCents int64
	// Log receives what the doors' callers are not told (a store that
	// does not answer, a platform fault); nil is slog.Default().
	Log *slog.Logger
	// Now is the clock requests are admitted by; nil is time.Now.
	Now func() time.Time
	// Certificates, when set, authenticates agents by their TLS client
	// certificate (see AuthenticateRequest); a forwarded certificate
	// counts only from one of Proxies.
	Certificates CertificateAuthenticator
	// Tracer, when set, opens the doors' spans: a request's (Traced),
	// its authentication's, an MCP call's own (TraceMeta). Nil records
	// none; a caller's trace context is still taken and handed on.
	Tracer trace.Tracer
}

func (d *Door) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Door) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.Default()
}

// Bearer answers the token an Authorization header value carries: the
// scheme "Bearer", matched without regard to case (RFC 6750 §2.1, RFC 9110
// §11.1), then the token, with space around either ignored. A value of
// another scheme, without a token, or with more than one answers false.
func Bearer(authorization string) (string, bool) {
	v := strings.TrimSpace(authorization)
	i := strings.IndexAny(v, " \t")
	if i < 0 {
		return "", false
	}
	scheme, token := v[:i], strings.TrimLeft(v[i:], " \t")
	if !strings.EqualFold(scheme, "bearer") || token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}

// Caller is who a request authenticated as.
type Caller struct {
	Credential *toolplane.Credential
	// At is when the gate admitted the request (and charged its budget).
	At time.Time
}

// RefusalKind says which class of refusal a request met before it reached
// its route: each door renders a class in its own form (a status, a
// challenge, a message).
type RefusalKind int

// The refusal classes.
const (
	// Unauthenticated: no bearer token, or one that does not authenticate.
	// A door answers 401 with a Bearer challenge (apikey.Challenge).
	Unauthenticated RefusalKind = iota + 1
	// RateLimited: over the failed authentications' budget or the key's
	// own (Refusal.Failures says which). A door answers 429.
	RateLimited
	// CredentialsUnavailable: the token could not be checked (the store
	// did not answer). A door answers 503.
	CredentialsUnavailable
)

// Refusal is a request refused before its route ran.
type Refusal struct {
	Kind RefusalKind
	// Presented is set for Unauthenticated when a token was presented and
	// did not authenticate (the challenge then says invalid_token); unset,
	// no bearer token was sent at all.
	Presented bool
	// Certificate is set for Unauthenticated when what was refused is a
	// client certificate, not a bearer token; Message says why.
	Certificate bool
	// Failures is set for RateLimited when the budget spent is that of
	// failed authentications, not the key's own.
	Failures bool
	// Message is what any door may tell the caller: what the token was
	// taken for, never which check failed; why a client certificate was
	// refused (Certificate); or which budget was spent. It is empty for a
	// request that sent no credential (each door says how to send one in
	// its own words) and for CredentialsUnavailable.
	Message string
	// Err is the cause of CredentialsUnavailable, already logged.
	Err error
}

func (r *Refusal) Error() string {
	switch {
	case r.Message != "":
		return r.Message
	case r.Kind == CredentialsUnavailable:
		return "credentials cannot be checked right now"
	}
	return "no bearer token was sent"
}

// Unwrap answers the cause of CredentialsUnavailable.
func (r *Refusal) Unwrap() error { return r.Err }

// toucher records a key's last use (the stores do; a test's may not).
type toucher interface {
	TouchCredential(ctx context.Context, org, id string, at time.Time) error
}

// ClientAddr answers the client address of r that failed authentications
// are counted under: its connection's peer, or, when that is one of the
// trusted Proxies, the client their X-Forwarded-For names (see
// ratelimit.Proxies.ClientAddr). Every door passes it to Authenticate.
func (d *Door) ClientAddr(r *http.Request) string {
	return d.Proxies.ClientAddr(r)
}

// Authenticate admits a request whose Authorization header value is
// authorization, from the client address client (ClientAddr),
// through the gate every door shares (apikey.Gate): one bearer rule, the
// failure and per-key limits, the key cache. The rate-limit decision is
// written to h (the X-RateLimit headers) whenever a limit applied, refused
// or not. An admitted API key's use is recorded (at most once per the
// cache's touch interval). Its error is always a *Refusal.
func (d *Door) Authenticate(ctx context.Context, authorization, client string, h http.Header) (Caller, error) {
	if d.Tracer != nil && trace.SpanFromContext(ctx).IsRecording() {
		return d.traceAuthenticate(ctx, func(ctx context.Context) (Caller, error) { return d.authenticate(ctx, authorization, client, h) })
	}
	return d.authenticate(ctx, authorization, client, h)
}

// authenticate is Authenticate, without its span.
func (d *Door) authenticate(ctx context.Context, authorization, client string, h http.Header) (Caller, error) {
	token, ok := Bearer(authorization)
	if !ok {
		return Caller{}, &Refusal{Kind: Unauthenticated}
	}
	now := d.now()
	gate := apikey.Gate{Authenticator: apikey.Authenticator{Store: d.Store, Tokens: d.Tokens, Cache: d.Keys},
		Limiter: d.Limiter, Failures: d.Failures}
	cred, dec, err := gate.Admit(ctx, token, client, now)
	if dec.Limit > 0 {
		dec.Header(h, now)
	}
	if err != nil {
		return Caller{}, d.refusal(ctx, err)
	}
	if t, ok := d.Store.(toucher); ok && strings.HasPrefix(cred.ID, apikey.Prefix) && d.Keys.TouchDue(cred.ID, now) {
		// Recorded even when the caller goes away: the key was used.
		if err := t.TouchCredential(context.WithoutCancel(ctx), cred.OrganizationID, cred.ID, now); err != nil {
			d.log().WarnContext(ctx, "credential touch failed", "err", err)
		}
	}
	return Caller{Credential: cred, At: now}, nil
}

// Spend charges one more call to the budget of a key whose request
// Authenticate already admitted as c: a request that carries several calls
// (a batch) spends what as many requests would, so no door lets a key run
// past its per-call budget by packing its calls together. The decision is
// written to h as Authenticate writes it. It answers the caller to make
// the call as (admitted now), or a *Refusal of kind RateLimited; without
// a Limiter every call is admitted.
func (d *Door) Spend(ctx context.Context, c Caller, h http.Header) (Caller, error) {
	now := d.now()
	if d.Limiter == nil {
		return Caller{Credential: c.Credential, At: now}, nil
	}
	dec := d.Limiter.Allow(c.Credential.ID, now)
	if dec.Limit > 0 {
		dec.Header(h, now)
	}
	if !dec.Allowed {
		return c, d.refusal(ctx, &apikey.LimitedError{Decision: dec})
	}
	return Caller{Credential: c.Credential, At: now}, nil
}

// refusal answers the Refusal of a key the gate did not admit. It is apart
// from Authenticate so that the targets errors.As needs, which escape, are
// allocated only for a key refused, not for every key admitted.
func (d *Door) refusal(ctx context.Context, err error) *Refusal {
	var (
		limited *apikey.LimitedError
		refused *apikey.RefusedError
	)
	switch {
	case errors.As(err, &limited):
		return &Refusal{Kind: RateLimited, Failures: limited.Failures, Message: limited.Error()}
	case errors.As(err, &refused):
		// What was presented, not why it failed.
		return &Refusal{Kind: Unauthenticated, Presented: true, Message: refused.Error()}
	}
	d.log().ErrorContext(ctx, "credential lookup failed", "err", err)
	return &Refusal{Kind: CredentialsUnavailable, Err: err}
}

// CertificateAuthenticator authenticates a request by its TLS client
// certificate (package clientcert): the connection's, or, when forwarded
// is set, the one a trusted proxy forwarded. It answers an error wrapping
// toolplane.ErrUnauthenticated for a certificate that does not
// authenticate, whose message says why, and NoCertificate's error when
// the request carries none.
type CertificateAuthenticator interface {
	Authenticate(r *http.Request, forwarded bool, now time.Time) (*toolplane.Credential, error)
	NoCertificate(err error) bool
}

// AuthenticateRequest admits r as Authenticate does, with one more way
// in: a request with no Authorization header at all and a client
// certificate (Certificates set) authenticates as the agent the
// certificate maps to. A bearer token, when sent, decides alone, as
// without certificates: a client that holds both chooses by sending the
// token or not, and a token that does not authenticate is refused even
// when a good certificate came with it. A forwarded certificate counts
// only when the connection's peer is one of CertProxies and brought no
// certificate of its own. Its error is always
// a *Refusal.
func (d *Door) AuthenticateRequest(r *http.Request, h http.Header) (Caller, error) {
	authorization := r.Header.Get("Authorization")
	if authorization != "" || d.Certificates == nil {
		return d.Authenticate(r.Context(), authorization, d.ClientAddr(r), h)
	}
	now := d.now()
	// A forwarded certificate counts from a proxy trusted to forward one,
	// and never over a connection that brought its own.
	forwarded := d.CertProxies.TrustsPeer(r) && (r.TLS == nil || len(r.TLS.PeerCertificates) == 0)
	cred, err := d.Certificates.Authenticate(r, forwarded, now)
	switch {
	case err != nil && d.Certificates.NoCertificate(err):
		return d.Authenticate(r.Context(), authorization, d.ClientAddr(r), h)
	case errors.Is(err, toolplane.ErrUnauthenticated):
		client := d.ClientAddr(r)
		if d.Failures != nil {
			if dec := d.Failures.Fail(client, "", now); !dec.Allowed {
				return Caller{}, d.refusal(r.Context(), &apikey.LimitedError{Decision: dec, Failures: true})
			}
		}
		return Caller{}, &Refusal{Kind: Unauthenticated, Certificate: true, Message: err.Error()}
	case err != nil:
		return Caller{}, d.refusal(r.Context(), err)
	}
	if d.Limiter != nil {
		dec := d.Limiter.Allow(cred.ID, now)
		dec.Header(h, now)
		if !dec.Allowed {
			return Caller{}, d.refusal(r.Context(), &apikey.LimitedError{Decision: dec})
		}
	}
	return Caller{Credential: cred, At: now}, nil
}

// ScopeError refuses a call to tools outside what an OAuth access token
// was consented for (Credential.ClientID set, its Tools the narrowing):
// the client may ask the person for them (step-up), so each door answers
// 403 with an insufficient_scope challenge naming the scope to ask for
// (apikey.InsufficientScope), not a refusal to retry as it stands.
type ScopeError struct {
	// Tools are the platform names of the tools outside the narrowing.
	Tools []string
}

func (e *ScopeError) Error() string {
	return "this token was not granted " + strings.Join(e.Tools, ", ") + "; ask the person to consent to the scope " + e.Scope()
}

// Scope answers the scopes to ask for, space-separated (RFC 6750 §3).
func (e *ScopeError) Scope() string {
	s := make([]string, len(e.Tools))
	for i, t := range e.Tools {
		s[i] = ScopeToolPrefix + t
	}
	return strings.Join(s, " ")
}

// ScopeToolPrefix begins the OAuth scope that narrows a token to one tool
// ("tool:payments.refund_order"); the scope "tools" is every tool the
// person may call.
const ScopeToolPrefix = "tool:"

// Scope answers a *ScopeError when cred is an OAuth access token of this
// server's authorization server whose consent does not cover every one of
// tools (platform names); nil otherwise. An API key's narrowing, a
// certificate's or another issuer's token's is not a scope a client can
// step up: a call outside it is decided, and refused, as before.
func Scope(cred *toolplane.Credential, tools ...string) error {
	if cred == nil || cred.ClientID == "" {
		return nil
	}
	var out []string
	for _, t := range tools {
		// A name a scope cannot carry (RFC 6749 §3.3: no space, quote or
		// backslash) is no tool; the invoker refuses it.
		if !cred.Admits(t) && !slices.Contains(out, t) && !strings.ContainsFunc(t, notScopeChar) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &ScopeError{Tools: out}
}

// notScopeChar reports whether r may not appear in a scope token.
func notScopeChar(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || r > '~' }

// NotAgentError refuses a call made with a key that is not an agent's:
// tools are called by agents, a person's key is for running the platform.
type NotAgentError struct {
	Kind toolplane.CredentialKind
}

func (e *NotAgentError) Error() string {
	return "tools are called with an agent's key; this is a " + string(e.Kind) + "'s key"
}

// CallsTools refuses (a *NotAgentError) a credential that may not call
// tools: only an agent's may.
func CallsTools(cred *toolplane.Credential) error {
	if cred.Kind != toolplane.CredentialAgent {
		return &NotAgentError{Kind: cred.Kind}
	}
	return nil
}

// Shown answers the tools cred is shown now, each at the version it would
// be given: a person sees the organization's catalogue; an agent the tools
// its identity's grants allow (denies applied; for tenant, when grants are
// scoped to tenants) that its key admits, each at the newest version within
// the range its grant pins. Without a grant service an agent's key's own
// tools are its grant. Showing is not allowing: every call is decided
// again by the invoker.
func (d *Door) Shown(ctx context.Context, cred *toolplane.Credential, tenant string) ([]*registry.Tool, error) {
	org := cred.OrganizationID
	all := d.Registry.Tools(org)
	switch cred.Kind {
	case toolplane.CredentialPerson:
		return all, nil
	case toolplane.CredentialAgent:
	default:
		return nil, nil
	}
	var pins map[string]string
	if d.Authz != nil {
		var err error
		if pins, err = d.Authz.Pins(ctx, org, cred.Subject, tenant); err != nil {
			return nil, err
		}
	}
	out := make([]*registry.Tool, 0, len(all))
	for _, t := range all {
		rng, ok := d.shows(cred, pins, t.Def.Name)
		if !ok {
			continue
		}
		if rng != "" {
			if t, ok = d.Registry.Resolve(org, t.Def.Name, rng); !ok {
				continue
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// ShownTool is Shown for the one tool named, without walking the
// catalogue: nil when cred is not shown it.
func (d *Door) ShownTool(ctx context.Context, cred *toolplane.Credential, tenant, name string) (*registry.Tool, error) {
	org := cred.OrganizationID
	switch cred.Kind {
	case toolplane.CredentialPerson:
		t, _ := d.Registry.Get(org, name)
		return t, nil
	case toolplane.CredentialAgent:
	default:
		return nil, nil
	}
	var pins map[string]string
	if d.Authz != nil {
		rng, granted, err := d.Authz.Pin(ctx, org, cred.Subject, tenant, name)
		if err != nil || !granted {
			return nil, err
		}
		pins = map[string]string{name: rng}
	}
	rng, ok := d.shows(cred, pins, name)
	if !ok {
		return nil, nil
	}
	t, _ := d.Registry.Resolve(org, name, rng)
	return t, nil
}

// shows reports whether an agent's cred is shown the tool named, and the
// range its grant pins: pins (what the grants allow) holds it and the key
// admits it; without a grant service, the key's own tools name it.
func (d *Door) shows(cred *toolplane.Credential, pins map[string]string, name string) (string, bool) {
	if d.Authz == nil {
		return "", cred.Grants(name)
	}
	rng, granted := pins[name]
	return rng, granted && cred.Admits(name)
}

// Call is one tool call as a door read it, before the platform adds who
// made it.
type Call struct {
	// Tool is the tool's platform name.
	Tool string
	// Arguments are the model's arguments as JSON text; none is {}.
	Arguments json.RawMessage
	// Source names the door.
	Source toolplane.Source
	// RunID, StepPath, IdempotencyKey and AuthorizedBy are as in
	// toolplane.Invocation.
	RunID, StepPath, IdempotencyKey, AuthorizedBy string
	// OnBehalfOf names the person the call acts for; only a key holding
	// the act_for_users role may name one.
	OnBehalfOf string
	// TenantID is the tenant the call acts for.
	TenantID string
	// Contracts freeze what the run was shown (tool name to schema_hash).
	Contracts map[string]string
	// MaxCostCents is the ceiling the caller asks for the run tree; the
	// server's own (Door.RunBudgetCents), when lower, wins.
	MaxCostCents int64
	// SessionRun is set when RunID is the door's session rather than a
	// run the caller named (see toolplane.Invocation.SessionRun).
	SessionRun bool
	// Async asks for the call to run later (answered Accepted); a tool
	// whose definition runs async always does.
	Async bool
	// CallbackURL, when set, receives an asynchronous call's result,
	// signed; naming one asks for the call to run later.
	CallbackURL string
	// Timeout, when positive, is how long the caller gives the call, from
	// when the door read it (ReadAt): relative, so that no clock but this
	// node's is read. It never loosens the tool's own timeout.
	Timeout time.Duration
	// ReadAt is when the door read the request carrying the call, on the
	// door's clock (Door.Clock); zero is when the invocation is made.
	// Calls read together (a batch's, made one after the other) share it,
	// so a later call's Timeout counts the time the earlier ones took.
	ReadAt time.Time
	// Hops, when HopsAsked, is how many tool-to-tool hops the caller
	// gives the call (toolplane.Invocation.Hops): a tool calling back
	// into the platform passes what its call had left. The platform's
	// maximum caps it; unasked, a call starts at the maximum.
	Hops      int
	HopsAsked bool
}

// Invocation answers the invocation of call made by cred: who calls (the
// agent, its key), for which run and step, under which ceiling. The
// principal carries only the identity: what the key and the grants allow
// is the invoker's to compute, at the call.
func (d *Door) Invocation(cred *toolplane.Credential, call Call) *toolplane.Invocation {
	user, claims := call.OnBehalfOf, (*toolplane.User)(nil)
	if cred.ActsFor != "" {
		// A token issued to the agent for a person: that person, with
		// what their identity provider says of them.
		user, claims = cred.ActsFor, cred.User
	}
	return &toolplane.Invocation{
		OrganizationID: cred.OrganizationID, UserID: user, User: claims, AgentAttributes: cred.Attributes, AgentRoles: cred.Roles,
		RunID: call.RunID, AgentID: cred.Subject,
		CredentialID: cred.ID, Credential: cred, TenantID: call.TenantID, StepPath: call.StepPath,
		Principal: toolplane.Principal{ID: cred.Subject}, Contracts: call.Contracts,
		Ceilings: toolplane.Ceilings{MaxCostCents: toolplane.CostCeiling(call.MaxCostCents, d.RunBudgetCents)},
		Source:   call.Source, AuthorizedBy: call.AuthorizedBy, IdempotencyKey: call.IdempotencyKey,
		SessionRun: call.SessionRun, Deadline: d.deadline(call), Hops: d.hops(call),
	}
}

// Clock answers the time on the door's clock (Door.Now), as a door stamps
// a request it reads (Call.ReadAt).
func (d *Door) Clock() time.Time { return d.now() }

// deadline answers when call (given no timeout when not positive) is out
// of time, read on this node's clock from when its request was read.
func (d *Door) deadline(call Call) time.Time {
	if call.Timeout <= 0 {
		return time.Time{}
	}
	from := call.ReadAt
	if from.IsZero() {
		from = d.now()
	}
	return from.Add(call.Timeout)
}

// hops answers the hops a call starts with: what its caller asked, capped
// by the platform's maximum, or the maximum (see Call.Hops). The invoker
// caps it again.
func (d *Door) hops(call Call) int {
	most := invoke.DefaultMaxHops
	if d.Invoker != nil {
		most = d.Invoker.MaxHops()
	}
	if !call.HopsAsked {
		return most
	}
	return min(call.Hops, most)
}

// AnswerKind says which kind of answer a call got.
type AnswerKind int

// The kinds of answer.
const (
	// Answered: the invoker answered a result (a success, or a refusal
	// with its stable code, which the model reads): Answer.Result.
	Answered AnswerKind = iota
	// ApprovalRequired: the call waits for a person: Answer.Approval.
	ApprovalRequired
	// InFlight: an identical call is running; the caller retries after
	// Answer.RetryAfter (zero when unknown). Answer.Message says more when
	// set.
	InFlight
	// Invalid: the request itself is malformed (an identifier past its
	// bound, a write without a run or key): Answer.Field names what,
	// Answer.Message says why. Nothing was run.
	Invalid
	// Denied: the caller may not make this call at all (a person's key, a
	// person named without act_for_users): Answer.Message, Answer.Field.
	Denied
	// Unavailable: the caller's grants could not be read; the call was
	// not decided. Retrying later may succeed.
	Unavailable
	// Fault: the platform could not complete the call (already logged);
	// the caller must not treat it as an answer.
	Fault
	// Accepted: the call was accepted to run later: Answer.Async.
	Accepted
)

// Answer is the door-neutral answer to a call.
type Answer struct {
	Kind     AnswerKind
	Result   toolplane.Result
	Approval *invoke.ApprovalRequired
	// RetryAfter is how long an InFlight caller waits before calling again.
	RetryAfter time.Duration
	// Message and Field describe InFlight, Invalid and Denied.
	Message, Field string
	// Err is the cause of Unavailable and Fault.
	Err error
	// Async is the call accepted to run later (Accepted); Existing says it
	// was accepted before, by an identical request.
	Async    *toolplane.AsyncCall
	Existing bool
}

// Call runs call for the caller c through the invoker and answers the
// outcome; a call that runs later (it asks to, or its tool runs async) is
// accepted instead (Accepted), or answered now when it would be refused. A retry of an answered call (invoke.Repeated) is charged to the
// key's retry budget, whichever door it came by.
func (d *Door) Call(ctx context.Context, c Caller, call Call) Answer {
	cred := c.Credential
	if refused := callerRefusal(cred, call); refused != nil {
		return *refused
	}
	if call.Async || call.CallbackURL != "" || d.Asynchronous(cred, call.Tool) {
		return d.submit(ctx, c, call)
	}
	raw := call.Arguments
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	res, err := d.Invoker.InvokeJSON(ctx, call.Tool, raw, d.Invocation(cred, call))
	if invoke.Repeated(res, err) {
		// A retry of an answered call: charged to the retry budget.
		d.spendRetry(c)
	}
	return d.answer(ctx, call.Tool, res, err)
}

// spendRetry charges a retry of an answered call to the caller's retry
// budget rather than its request budget.
func (d *Door) spendRetry(c Caller) { apikey.Gate{Limiter: d.Limiter}.Repeated(c.Credential, c.At) }

// callerRefusal answers why cred may not make call at all, before it is
// decided: a key that calls no tools, or a person named who is not the
// caller's to name; nil when it may.
func callerRefusal(cred *toolplane.Credential, call Call) *Answer {
	if err := CallsTools(cred); err != nil {
		return &Answer{Kind: Denied, Message: err.Error()}
	}
	if call.OnBehalfOf != "" && cred.ActsFor != "" && call.OnBehalfOf != cred.ActsFor {
		// The token already names the person; another is not the
		// caller's to choose.
		return &Answer{Kind: Denied, Field: "on_behalf_of", Message: "this token acts for " + cred.ActsFor + " and only for them; call without on_behalf_of, or with theirs"}
	}
	if call.OnBehalfOf != "" && cred.ActsFor == "" && !cred.ActsForUsers() {
		// Refused rather than ignored: a caller that named a person would
		// otherwise believe the call was recorded as made for them.
		return &Answer{Kind: Denied, Field: "on_behalf_of", Message: "on_behalf_of names the person a call acts for, which only a key allowed to act for users (role " +
			toolplane.RoleActForUsers + ") may do; call without it, as the agent alone"}
	}
	return nil
}

// answer maps the invoker's outcome to an Answer.
func (d *Door) answer(ctx context.Context, tool string, res toolplane.Result, err error) Answer {
	if err == nil {
		return Answer{Kind: Answered, Result: res}
	}
	var (
		ar       *invoke.ApprovalRequired
		tooLong  *toolplane.TooLongError
		needsRun *invoke.RunRequiredError
		inFlight *invoke.InFlightError
	)
	switch {
	case errors.As(err, &tooLong):
		return Answer{Kind: Invalid, Field: tooLong.Field, Message: tooLong.Error()}
	case errors.As(err, &needsRun):
		return Answer{Kind: Invalid, Field: needsRun.Field(), Message: needsRun.Error()}
	case errors.As(err, &ar):
		return Answer{Kind: ApprovalRequired, Approval: ar}
	case errors.As(err, &inFlight):
		return Answer{Kind: InFlight, RetryAfter: inFlight.RetryAfter(), Message: inFlight.Message()}
	case errors.Is(err, invoke.ErrInFlight):
		return Answer{Kind: InFlight}
	case errors.Is(err, invoke.ErrPrincipalUnavailable):
		d.log().ErrorContext(ctx, "grants could not be read", "tool", tool, "err", err)
		return Answer{Kind: Unavailable, Err: err}
	}
	d.log().ErrorContext(ctx, "tool call fault", "tool", tool, "err", err)
	return Answer{Kind: Fault, Err: err}
}

// RetryAfterSeconds answers a wait in whole seconds, rounded up, as the
// Retry-After header and the doors' retry hints carry it.
func RetryAfterSeconds(wait time.Duration) int {
	return int((wait + time.Second - 1) / time.Second)
}
