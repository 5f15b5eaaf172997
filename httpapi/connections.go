package httpapi

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/httperr"
)

// connectionRoute answers 404 on a server without the connections
// service.
func (s *Server) connectionRoute(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, c caller) {
		if s.Connections == nil {
			httperr.Send(w, r, httperr.NotFound, "this server keeps no connections", "")
			return
		}
		h(w, r, c)
	})
}

// connectionFail answers a connection operation's failure: a connection
// the service refuses at the field at fault, anything else by its kind.
func (s *Server) connectionFail(w http.ResponseWriter, r *http.Request, err error) {
	var invalid *connection.InvalidError
	if errors.As(err, &invalid) {
		httperr.Send(w, r, httperr.InvalidRequest, invalid.Error(), invalid.Field)
		return
	}
	httperr.Fail(w, r, s.Log, err)
}

// secretsBody is a new connection's secret material as a request carries
// it: plain strings, turned into toolplane.Secrets at once, which never
// render their value. The tokens of an OAuth grant are not among them:
// only a provider issues those.
type secretsBody struct {
	Token        string `json:"token"`
	Username     string `json:"username"`
	Password     string `json:"password"`
	DSN          string `json:"dsn"`
	ClientSecret string `json:"client_secret"`
}

// createConnectionBody is the body of POST /v1/connections.
type createConnectionBody struct {
	Name     string                     `json:"name"`
	Provider string                     `json:"provider"`
	Kind     toolplane.ConnectionKind   `json:"kind"`
	Config   toolplane.ConnectionConfig `json:"config"`
	Scope    toolplane.ConnectionScope  `json:"scope"`
	Secrets  secretsBody                `json:"secrets"`
}

func (s *Server) createConnection(w http.ResponseWriter, r *http.Request, c caller) {
	var body createConnectionBody
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	in := connection.Input{Name: body.Name, Provider: body.Provider, Kind: body.Kind, Config: body.Config, Scope: body.Scope,
		Secrets: toolplane.Secrets{
			Token: toolplane.SecretString(body.Secrets.Token), Username: toolplane.SecretString(body.Secrets.Username),
			Password: toolplane.SecretString(body.Secrets.Password), DSN: toolplane.SecretString(body.Secrets.DSN),
			ClientSecret: toolplane.SecretString(body.Secrets.ClientSecret),
		}}
	conn, err := s.Connections.Create(r.Context(), c.cred, in)
	if err != nil {
		s.connectionFail(w, r, err)
		return
	}
	answer := map[string]any{"connection": conn}
	if warn := connection.Warnings(conn); len(warn) > 0 {
		answer["warnings"] = warn
	}
	writeJSON(w, http.StatusCreated, answer)
}

// connectionStates are the states a listing may be narrowed to.
var connectionStates = []toolplane.ConnectionState{toolplane.ConnectionActive, toolplane.ConnectionNeedsReauth, toolplane.ConnectionRevoked}

func (s *Server) listConnections(w http.ResponseWriter, r *http.Request, c caller) {
	q := r.URL.Query()
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	f := toolplane.ConnectionFilter{Provider: q.Get("provider"), UserID: q.Get("user_id"), State: toolplane.ConnectionState(q.Get("state"))}
	if f.State != "" && !slices.Contains(connectionStates, f.State) {
		httperr.Send(w, r, httperr.InvalidRequest, "state must be active, needs_reauth or revoked", "state")
		return
	}
	if s.refused(w, r, toolplane.CheckLen("provider", f.Provider, toolplane.MaxRefLen), toolplane.CheckLen("user_id", f.UserID, toolplane.MaxRefLen)) {
		return
	}
	cs, next, err := s.Connections.List(r.Context(), c.cred, f, q.Get("cursor"), limit)
	if err != nil {
		s.connectionFail(w, r, err)
		return
	}
	if cs == nil {
		cs = []toolplane.Connection{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": cs, "next_cursor": next})
}

func (s *Server) getConnection(w http.ResponseWriter, r *http.Request, c caller) {
	id := r.PathValue("id")
	if s.refused(w, r, toolplane.CheckLen("connection id", id, toolplane.MaxRefLen)) {
		return
	}
	conn, err := s.Connections.Get(r.Context(), c.cred, id)
	if err != nil {
		s.connectionFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"connection": conn})
}

func (s *Server) revokeConnection(w http.ResponseWriter, r *http.Request, c caller) {
	id := r.PathValue("id")
	if s.refused(w, r, toolplane.CheckLen("connection id", id, toolplane.MaxRefLen)) {
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
	if s.refused(w, r, toolplane.CheckLen("reason", body.Reason, toolplane.MaxReasonLen)) {
		return
	}
	conn, err := s.Connections.Revoke(r.Context(), c.cred, id, body.Reason)
	if err != nil {
		s.connectionFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"connection": conn})
}

func (s *Server) authorizeConnection(w http.ResponseWriter, r *http.Request, c caller) {
	id := r.PathValue("id")
	if s.refused(w, r, toolplane.CheckLen("connection id", id, toolplane.MaxRefLen)) {
		return
	}
	link, err := s.Connections.Authorize(r.Context(), c.cred, id)
	if err != nil {
		s.connectionFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"authorization_url": link})
}

// The authorization a person completes in a browser: the start link sends
// the browser to the provider and gives it a nonce in this cookie, which
// the callback must find, so a callback URL completed in another browser
// (stolen, or replayed) is refused. The cookie lives as long as an
// authorization may take.
const (
	oauthCookie       = "toolplane_oauth"
	oauthCookieMaxAge = 600
)

// oauthPage is what the browser shows: one message, every value escaped.
var oauthPage = template.Must(template.New("oauth").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body>
<h1>{{.Title}}</h1>
<p>{{.Message}}</p>
</body>
</html>
`))

// oauthRoute answers a route the browser opens: it carries no API key
// (the start link's state and the browser's cookie are what authorize it),
// and its answers are pages nobody caches and no other site frames.
func (s *Server) oauthRoute(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Cache-Control", "no-store")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		if s.Connections == nil {
			s.page(w, httperr.NotFound.Status(), "Not found", "This server keeps no connections.")
			return
		}
		h(w, r)
	})
}

// page answers a page of status with title and message.
func (s *Server) page(w http.ResponseWriter, status int, title, message string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = oauthPage.Execute(w, struct{ Title, Message string }{title, message})
}

// failPage answers err as a page: a refusal (a used or expired link, a
// revoked application) by its kind and in its words, anything else as the
// platform's fault, logged and named by nothing of its cause.
func (s *Server) failPage(w http.ResponseWriter, r *http.Request, err error) {
	p, ok := httperr.Classify(err)
	if !ok {
		s.Log.ErrorContext(r.Context(), "authorization failed", "path", r.URL.Path, "err", err)
		s.page(w, httperr.Internal.Status(), "Not connected", "The authorization could not be completed. Try again later.")
		return
	}
	s.page(w, p.Code.Status(), "Not connected", bound(p.Message))
}

// cookiePath is where the browser sends the nonce: the authorization's
// two routes only, under the public URL's path when it has one.
func (s *Server) cookiePath() string {
	return s.publicPath() + "/v1/connections/oauth"
}

// publicPath answers the public URL's path, "" at its root: where a proxy
// serves the routes this server answers at /.
func (s *Server) publicPath() string {
	if u, err := url.Parse(s.PublicURL); err == nil && s.PublicURL != "" {
		return strings.TrimSuffix(u.Path, "/")
	}
	return ""
}

// secureCookie reports whether the browser reaches the server over
// https: directly, or through a proxy the public URL names.
func (s *Server) secureCookie(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(strings.ToLower(s.PublicURL), "https://")
}

func (s *Server) oauthStart(w http.ResponseWriter, r *http.Request) {
	state := r.URL.Query().Get("state")
	if state == "" || len(state) > toolplane.MaxRefLen {
		s.page(w, httperr.InvalidRequest.Status(), "Not connected", "This authorization link is not complete; ask for a new one.")
		return
	}
	if s.People == nil {
		s.page(w, http.StatusServiceUnavailable, "Not connected", "This server signs nobody in, so nobody can start an authorization here.")
		return
	}
	// Only the person the link is for may open it: whoever opens it is
	// asked to sign in first, and comes back to the same link after.
	sess, err := s.People.Session(r)
	switch {
	case errors.Is(err, toolplane.ErrUnauthenticated):
		http.Redirect(w, r, s.People.SignInURL(s.publicPath()+r.URL.RequestURI()), http.StatusSeeOther)
		return
	case err != nil:
		s.failPage(w, r, err)
		return
	}
	link, nonce, err := s.Connections.Start(r.Context(), sess.Credential, state)
	if errors.Is(err, connection.ErrNotYours) {
		s.page(w, http.StatusForbidden, "Not your authorization",
			"You are signed in as "+bound(sess.Credential.Subject)+", and this authorization link is for another person. "+
				"Nothing was connected. Sign out and sign in as the person it is for, or ask for a link of your own.")
		return
	}
	if err != nil {
		s.failPage(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: oauthCookie, Value: nonce, Path: s.cookiePath(), MaxAge: oauthCookieMaxAge,
		HttpOnly: true, Secure: s.secureCookie(r), SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, link, http.StatusFound)
}

func (s *Server) oauthCallback(w http.ResponseWriter, r *http.Request) {
	// Whatever the answer, the nonce has served: the browser forgets it.
	http.SetCookie(w, &http.Cookie{
		Name: oauthCookie, Value: "", Path: s.cookiePath(), MaxAge: -1,
		HttpOnly: true, Secure: s.secureCookie(r), SameSite: http.SameSiteLaxMode,
	})
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		msg := "The provider did not authorize the connection: " + bound(e)
		if d := q.Get("error_description"); d != "" {
			msg += " (" + bound(d) + ")"
		}
		s.page(w, httperr.InvalidRequest.Status(), "Not connected", msg)
		return
	}
	if state := q.Get("state"); state == "" || len(state) > toolplane.MaxRefLen {
		s.page(w, httperr.InvalidRequest.Status(), "Not connected", "The provider's answer names no authorization; start again.")
		return
	}
	cookie, err := r.Cookie(oauthCookie)
	if err != nil || cookie.Value == "" {
		// Refused before the state is taken: the browser that started the
		// authorization may still complete it.
		s.page(w, httperr.InvalidRequest.Status(), "Not connected",
			"This browser did not start this authorization (or its cookie expired); open the authorization link again in this browser.")
		return
	}
	conn, err := s.Connections.Callback(r.Context(), q, cookie.Value)
	if err != nil {
		s.failPage(w, r, err)
		return
	}
	s.page(w, http.StatusOK, "Connected", "Connected "+conn.Provider+" for "+conn.UserID+". You can close this window.")
}

// maxShown bounds what a page quotes of text it does not control: a
// provider's error, an error's message.
const maxShown = 300

// bound keeps s to maxShown bytes of printable text, cut at a rune.
func bound(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, s)
	if len(s) <= maxShown {
		return s
	}
	cut := maxShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
