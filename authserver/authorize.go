package authserver

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/signin"
)

// authRequest is an authorization request as checked: every field the
// consent form carries back, checked again on its POST.
type authRequest struct {
	client      *toolplane.OAuthClient
	redirectURI string
	// asked is the redirect_uri the request sent, empty when it named
	// none (a client with one): the token request must send the same.
	asked     string
	state     string
	challenge string
	resource  string
	// tools is the narrowing the client asked for (tool:<name> scopes);
	// nil for every tool.
	tools []string
}

// fields are the request parameters the consent form carries.
var fields = []string{"response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method", "scope", "resource"}

// requestError is a refusal of an authorization request: sent back to
// the client (RFC 6749 section 4.1.2.1) when the redirect URI is known
// good, shown on a page otherwise.
type requestError struct {
	code, description string
	redirect          bool
}

func (e *requestError) Error() string { return e.code + ": " + e.description }

// parse checks an authorization request. The client and its redirect URI
// are checked first: until they are, nothing is sent anywhere.
func (s *Server) parse(ctx context.Context, q url.Values) (*authRequest, *requestError) {
	for _, f := range fields {
		if len(q[f]) > 1 {
			return nil, &requestError{code: "invalid_request", description: "the parameter " + f + " is repeated"}
		}
	}
	c, err := s.client(ctx, q.Get("client_id"))
	if err != nil {
		if !errors.Is(err, ErrClient) {
			s.log.ErrorContext(ctx, "client not read", "err", err)
			return nil, &requestError{code: "temporarily_unavailable", description: "the client could not be read; try again"}
		}
		return nil, &requestError{code: "invalid_client", description: err.Error()}
	}
	req := &authRequest{client: c, redirectURI: q.Get("redirect_uri"), asked: q.Get("redirect_uri"), state: q.Get("state")}
	if req.redirectURI == "" && len(c.RedirectURIs) == 1 {
		req.redirectURI = c.RedirectURIs[0]
	}
	if !slices.Contains(c.RedirectURIs, req.redirectURI) {
		return nil, &requestError{code: "invalid_request", description: "redirect_uri is not one the client registered (compared exactly)"}
	}
	refuse := func(code, description string) (*authRequest, *requestError) {
		return req, &requestError{code: code, description: description, redirect: true}
	}
	if q.Get("response_type") != "code" {
		return refuse("unsupported_response_type", "response_type must be code")
	}
	req.challenge = q.Get("code_challenge")
	switch {
	case req.challenge == "":
		return refuse("invalid_request", "code_challenge is required (PKCE)")
	case q.Get("code_challenge_method") != "S256":
		return refuse("invalid_request", "code_challenge_method must be S256")
	case len(req.challenge) != 43:
		return refuse("invalid_request", "code_challenge is not an S256 challenge")
	}
	var ok bool
	if req.resource, ok = s.resource(q.Get("resource")); !ok {
		return refuse("invalid_target", "resource must be this server's /mcp, or /mcp/<upstream> of a governed server")
	}
	if req.tools, ok = parseScope(q.Get("scope")); !ok {
		return refuse("invalid_scope", "scopes are tools, or tool:<name> for each tool")
	}
	return req, nil
}

// parseScope answers the narrowing a scope asks for: nil for every tool
// ("tools", or no scope), the tools named by tool:<name> otherwise, each
// once. offline_access and openid are accepted and mean nothing more:
// refresh tokens are always issued, ID tokens never.
func parseScope(text string) ([]string, bool) {
	var tools []string
	for _, sc := range strings.Fields(text) {
		switch name, narrow := strings.CutPrefix(sc, ScopeToolPrefix); {
		case sc == ScopeTools, sc == "offline_access", sc == "openid":
		case narrow && name != "":
			if !slices.Contains(tools, name) {
				tools = append(tools, name)
			}
		default:
			return nil, false
		}
	}
	return tools, true
}

// fail answers a refused request: to the client, or on a page. It sends
// the browser back to the client only for a person signed in here: anyone
// may register a client naming any redirect URI, so an error redirected
// to anybody who follows a link would make this server an open redirector
// (RFC 9700 §4.11.2); before sign-in the error is shown here instead.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, req *authRequest, e *requestError) {
	if e.redirect && req != nil && s.hasSession(r) {
		s.back(w, r, req, url.Values{"error": {e.code}, "error_description": {e.description}})
		return
	}
	status := http.StatusBadRequest
	if e.code == "temporarily_unavailable" {
		status = http.StatusServiceUnavailable
	}
	s.render(w, status, consentView{Title: "This connection cannot be made", Message: e.description})
}

// hasSession reports whether r comes from a person signed in here.
func (s *Server) hasSession(r *http.Request) bool {
	sess, err := s.cfg.People.Session(r)
	return err == nil && sess != nil
}

// back sends the browser to the client's redirect URI with v, the state
// and the issuer (RFC 9207).
func (s *Server) back(w http.ResponseWriter, r *http.Request, req *authRequest, v url.Values) {
	u, _ := url.Parse(req.redirectURI)
	q := u.Query()
	for k, vs := range v {
		q[k] = vs
	}
	if req.state != "" {
		q.Set("state", req.state)
	}
	q.Set("iss", s.cfg.Issuer)
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// authorize answers GET /oauth/authorize: the consent page, after sign-in.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	req, e := s.parse(ctx, r.URL.Query())
	if e != nil {
		s.fail(w, r, req, e)
		return
	}
	sess, err := s.cfg.People.Session(r)
	if errors.Is(err, signin.ErrNotSignedIn) {
		http.Redirect(w, r, s.cfg.People.SignInURL(s.base.Path+Path+"/authorize?"+r.URL.RawQuery), http.StatusSeeOther)
		return
	}
	if err != nil {
		s.log.ErrorContext(ctx, "session not read", "err", err)
		s.render(w, http.StatusServiceUnavailable, consentView{Title: "Try again", Message: "Who is signed in cannot be read now."})
		return
	}
	if s.staleSession(w, sess, s.cfg.Now()) {
		return
	}
	view, e := s.consentView(ctx, req, sess, r.URL.Query())
	if e != nil {
		s.fail(w, r, req, e)
		return
	}
	s.render(w, http.StatusOK, *view)
}

// agent answers the agent identity the client acts as in org, or a
// refusal when the organization revoked the client.
func (s *Server) agent(ctx context.Context, org, clientID string) (string, *requestError) {
	set, err := s.cfg.Store.GetOAuthClientSetting(ctx, org, clientID)
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		return s.cfg.Agent, nil
	case err != nil:
		s.log.ErrorContext(ctx, "client setting not read", "err", err)
		return "", &requestError{code: "temporarily_unavailable", description: "try again", redirect: true}
	case !set.RevokedAt.IsZero():
		return "", &requestError{code: "access_denied", description: "this organization revoked the client", redirect: true}
	case set.AgentID != "":
		return set.AgentID, nil
	}
	return s.cfg.Agent, nil
}

// offered answers the tools the person is offered: those the agent may
// call for them, within the client's narrowing.
func (s *Server) offered(ctx context.Context, sess *signin.Session, agent string, req *authRequest) ([]string, error) {
	if s.cfg.Tools == nil {
		return req.tools, nil
	}
	p := sess.Credential
	shown, err := s.cfg.Tools(ctx, &toolplane.Credential{ID: "oauth:consent", OrganizationID: p.OrganizationID, Kind: toolplane.CredentialAgent,
		Subject: agent, ActsFor: p.Subject, User: &toolplane.User{Roles: p.Roles}})
	if err != nil {
		return nil, err
	}
	shown = slices.Clone(shown)
	if req.tools != nil {
		shown = slices.DeleteFunc(shown, func(t string) bool { return !slices.Contains(req.tools, t) })
	}
	slices.Sort(shown)
	return slices.Compact(shown), nil
}

// lifetimes are the consent lengths offered, capped by the operator's.
var lifetimes = []struct {
	label string
	d     time.Duration
}{{"one hour", time.Hour}, {"one day", 24 * time.Hour}, {"30 days", 30 * 24 * time.Hour}, {"90 days", 90 * 24 * time.Hour}, {"one year", 365 * 24 * time.Hour}}

type lifetime struct {
	Label    string
	Seconds  int64
	Selected bool
}

func (s *Server) lifetimes() []lifetime {
	var out []lifetime
	for _, l := range lifetimes {
		if l.d <= s.cfg.ConsentTTL {
			out = append(out, lifetime{Label: l.label, Seconds: int64(l.d / time.Second)})
		}
	}
	if len(out) == 0 || time.Duration(out[len(out)-1].Seconds)*time.Second != s.cfg.ConsentTTL {
		out = append(out, lifetime{Label: s.cfg.ConsentTTL.String(), Seconds: int64(s.cfg.ConsentTTL / time.Second)})
	}
	out[len(out)-1].Selected = true
	return out
}

// consentView is what the consent page shows.
type consentView struct {
	Title, Message string
	Assets         string
	Action         string
	Client         string
	ClientID       string
	Document       bool
	RedirectHost   string
	Person, Org    string
	Agent          string
	Resource       string
	Tools          []string
	Narrowed       bool
	Lifetimes      []lifetime
	Hidden         []hidden
	CSRF           string
	Form           bool
	// redirectOrigin is where the form's answer is redirected: the
	// page's form-action must admit it, since browsers apply form-action
	// to a form's redirects too, and would otherwise stop the code on its
	// way to the client.
	redirectOrigin string
}

type hidden struct{ Name, Value string }

func (s *Server) consentView(ctx context.Context, req *authRequest, sess *signin.Session, q url.Values) (*consentView, *requestError) {
	agent, e := s.agent(ctx, sess.Credential.OrganizationID, req.client.ID)
	if e != nil {
		return nil, e
	}
	tools, err := s.offered(ctx, sess, agent, req)
	if err != nil {
		s.log.ErrorContext(ctx, "tools not read for consent", "err", err)
		return nil, &requestError{code: "temporarily_unavailable", description: "try again", redirect: true}
	}
	ru, _ := url.Parse(req.redirectURI)
	v := &consentView{Title: "Connect " + name(req.client), Client: name(req.client), ClientID: req.client.ID,
		Document: req.client.Source == toolplane.OAuthClientDocument, RedirectHost: ru.Host,
		Person: sess.Credential.Subject, Org: sess.Credential.OrganizationID, Agent: agent, Resource: req.resource,
		Tools: tools, Narrowed: req.tools != nil, Lifetimes: s.lifetimes(), CSRF: sess.CSRF, Form: true,
		Action: s.base.Path + Path + "/authorize", redirectOrigin: cspOrigin(ru)}
	for _, f := range fields {
		if q.Has(f) {
			v.Hidden = append(v.Hidden, hidden{f, q.Get(f)})
		}
	}
	return v, nil
}

func name(c *toolplane.OAuthClient) string {
	if c.Name != "" {
		return c.Name
	}
	return c.ID
}

// consent answers the consent form's POST: a grant and a code sent to the
// client, or access_denied.
func (s *Server) consent(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
	if err := r.ParseForm(); err != nil {
		s.render(w, http.StatusBadRequest, consentView{Title: "This connection cannot be made", Message: "The form could not be read."})
		return
	}
	sess, err := s.cfg.People.Session(r)
	if err != nil {
		s.render(w, http.StatusUnauthorized, consentView{Title: "Not signed in", Message: "Sign in again and reconnect the client."})
		return
	}
	if err := s.cfg.People.CheckForm(r, sess); err != nil {
		s.render(w, http.StatusForbidden, consentView{Title: "This connection cannot be made", Message: "This form did not come from this server's own page."})
		return
	}
	q := url.Values{}
	for _, f := range fields {
		if r.PostForm.Has(f) {
			q[f] = r.PostForm[f]
		}
	}
	req, e := s.parse(ctx, q)
	if e != nil {
		s.fail(w, r, req, e)
		return
	}
	if r.PostFormValue("decision") != "allow" {
		s.back(w, r, req, url.Values{"error": {"access_denied"}, "error_description": {"the person declined"}})
		return
	}
	person := sess.Credential
	now := s.cfg.Now()
	if s.staleSession(w, sess, now) {
		return
	}
	agent, e := s.agent(ctx, person.OrganizationID, req.client.ID)
	if e != nil {
		s.fail(w, r, req, e)
		return
	}
	offered, err := s.offered(ctx, sess, agent, req)
	if err != nil {
		s.log.ErrorContext(ctx, "tools not read for consent", "err", err)
		s.fail(w, r, req, &requestError{code: "temporarily_unavailable", description: "try again", redirect: true})
		return
	}
	// Ticking none keeps the client's narrowing (or every tool); ticking
	// some narrows to those of them offered.
	var tools []string
	narrowed := req.tools != nil
	if narrowed {
		tools = offered
	}
	if ticked := r.PostForm["tool"]; len(ticked) > 0 {
		tools = slices.DeleteFunc(slices.Clone(ticked), func(t string) bool { return !slices.Contains(offered, t) })
		narrowed = true
	}
	if narrowed && len(tools) == 0 {
		s.fail(w, r, req, &requestError{code: "invalid_scope", description: "none of the tools asked for or ticked may be called for this person", redirect: true})
		return
	}
	life := s.cfg.ConsentTTL
	if secs, err := strconv.ParseInt(r.PostFormValue("lifetime"), 10, 64); err == nil && secs > 0 && time.Duration(secs)*time.Second < life {
		life = time.Duration(secs) * time.Second
	}
	g := &toolplane.OAuthGrant{OrganizationID: person.OrganizationID, ID: toolplane.NewID("oag_"), ClientID: req.client.ID,
		Subject: person.Subject, Roles: person.Roles, PersonKey: personKey(sess), SignedInAt: signedIn(sess, now), AgentID: agent, Tools: tools,
		Resource: req.resource, CreatedAt: now, ExpiresAt: now.Add(life)}
	if e := s.keepDocument(ctx, req.client); e != nil {
		s.fail(w, r, req, e)
		return
	}
	code := rand.Text() + rand.Text()
	// One transaction: a consent is never left without the code that
	// would have used it, nor without its audit event, and is stored only
	// while its client is registered and not revoked (checked above too,
	// but an admin's revocation or the sweep may have come since).
	err = s.cfg.Store.InsertOAuthConsent(ctx, g, &toolplane.OAuthCode{Hash: hash(code), OrganizationID: g.OrganizationID, GrantID: g.ID,
		ClientID: g.ClientID, RedirectURI: req.asked, Challenge: req.challenge, ExpiresAt: now.Add(s.cfg.CodeTTL)},
		s.event(person, "consented", g.ID, "client "+g.ClientID+" as agent "+agent+" for "+scope(tools)+" on "+g.Resource))
	if errors.Is(err, toolplane.ErrOAuthClientGone) {
		s.fail(w, r, req, &requestError{code: "access_denied", description: "this organization revoked the client, or it is no longer registered", redirect: true})
		return
	}
	if err != nil {
		s.log.ErrorContext(ctx, "consent not stored", "err", err)
		s.fail(w, r, req, &requestError{code: "temporarily_unavailable", description: "try again", redirect: true})
		return
	}
	s.back(w, r, req, url.Values{"code": {code}})
}

//go:embed consent.html
var consentPage string

var page = template.Must(template.New("consent").Parse(consentPage))

// pageHeaders sets what the consent page carries: sign-in's CSP (no
// script at all), no caching, no framing.
func pageHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Cache-Control", "no-store")
		hd.Set("Content-Security-Policy", signin.CSP)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// cspOrigin answers u's origin as a CSP source expression, or "" when
// it holds anything a source expression may not (a validated redirect
// URI never does).
func cspOrigin(u *url.URL) string {
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	for _, c := range u.Host {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-:[]", c)) {
			return ""
		}
	}
	return u.Scheme + "://" + u.Host
}

func (s *Server) render(w http.ResponseWriter, status int, v consentView) {
	if v.redirectOrigin != "" {
		w.Header().Set("Content-Security-Policy", strings.Replace(signin.CSP, "form-action 'self'", "form-action 'self' "+v.redirectOrigin, 1))
	}
	v.Assets = s.base.Path + signin.Path + "/assets"
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := page.Execute(w, v); err != nil {
		s.log.Warn("consent page not rendered", "err", err)
	}
}

// personKey answers the API key a session signed in with, or "" for the
// OpenID provider's sign-in (whose roles are the provider's at sign-in).
func personKey(sess *signin.Session) string {
	if sess.Method == toolplane.SignInAPIKey {
		return sess.Credential.ID
	}
	return ""
}

// staleSession answers a page telling the person to sign in again, and
// true, when sess signed in through the OpenID provider longer ago than
// the bound: the consent's code could not even be exchanged. It happens
// only when sessions outlive the bound (serve --session-max-age above
// --oauth-oidc-max-age).
func (s *Server) staleSession(w http.ResponseWriter, sess *signin.Session, now time.Time) bool {
	if !s.stale(&toolplane.OAuthGrant{PersonKey: personKey(sess), SignedInAt: signedIn(sess, now)}, now) {
		return false
	}
	s.render(w, http.StatusForbidden, consentView{Title: "Sign in again",
		Message: "Your sign-in is older than this server lets a connection rest on. Sign out, sign in again, and reconnect the client."})
	return true
}

// signedIn answers when the person of sess signed in: the session's start.
// A session that does not say (signin's always does) counts from now, the
// consent itself, so the bound still ends what it gives.
func signedIn(sess *signin.Session, now time.Time) time.Time {
	if sess.SignedInAt.IsZero() || sess.SignedInAt.After(now) {
		return now
	}
	return sess.SignedInAt
}
