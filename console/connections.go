package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/signin"
)

func (c *Console) connectionRoutes(mux *http.ServeMux) {
	mux.Handle("GET "+Path+"/connections", c.page(c.connectionList))
	mux.Handle("GET "+Path+"/connections/{id}", c.page(c.connectionPage))
	mux.Handle("POST "+Path+"/connections/{id}/authorize", c.action(c.authorizeConnection))
	mux.Handle("POST "+Path+"/connections/{id}/revoke", c.action(c.revokeConnection))
}

// connections answers the connections service, or that this server keeps
// no connections.
func (c *Console) connections() (*connection.Admin, error) {
	if c.cfg.Connections == nil {
		return nil, fmt.Errorf("%w: this server keeps no connections", toolplane.ErrNotFound)
	}
	return c.cfg.Connections, nil
}

// mayConnections answers nil when the connections' page would answer by:
// this server keeps connections and the service lets by list them. A
// navigation asks it before it offers the section.
func (c *Console) mayConnections(by *toolplane.Credential) error {
	if _, err := c.connections(); err != nil {
		return err
	}
	return connection.MayList(by)
}

// connectionView is a connection as a page shows it: its settings that
// are not secret, and its health in a word. Nothing of its secret is
// here, nor where Vault keeps it: only that Vault does.
type connectionView struct {
	ID, Name, Provider string
	Kind               toolplane.ConnectionKind
	// Status is healthy, needs re-authorization, revoked or expired;
	// Class is its style.
	Status, Class string
	Reason        string
	// Person is the person whose account an authorization-code
	// connection holds ("" for the organization's shared ones); Owner
	// who created it.
	Person, Owner string
	// Created and Updated are when it was created and last changed (a
	// consent, a token refreshed, a revocation); Until when its access
	// token expires.
	Created, Updated, Revoked, Until time.Time
	// Scopes are the OAuth scopes the provider granted, Requested those
	// the connection asks for.
	Scopes, Requested []string
	// Vault says the secret is kept in Vault rather than sealed here.
	Vault bool
	// Settings are the remaining non-secret settings, in order.
	Settings []setting
	// Tools, Agents and MaxAmount narrow which calls may use it.
	Tools, Agents []string
	MaxAmount     string
}

// setting is one labelled line of a connection's settings.
type setting struct{ Label, Value string }

// view answers what a page shows of cn.
func (c *Console) view(cn *toolplane.Connection) connectionView {
	v := connectionView{ID: cn.ID, Name: cn.Name, Provider: cn.Provider, Kind: cn.Kind, Reason: cn.Reason, Person: cn.UserID, Owner: cn.Owner,
		Created: cn.CreatedAt, Updated: cn.UpdatedAt, Revoked: cn.RevokedAt, Until: cn.TokenExpiresAt,
		Scopes: cn.Scopes, Requested: cn.Config.RequestScope, Vault: cn.Config.Vault != nil,
		Tools: cn.Scope.Tools, Agents: cn.Scope.Agents}
	switch {
	case cn.State == toolplane.ConnectionRevoked:
		v.Status, v.Class = "revoked", "state-revoked"
	case cn.State == toolplane.ConnectionNeedsReauth:
		v.Status, v.Class = "needs re-authorization", "state-reauth"
	case cn.Kind != toolplane.ConnectionStatic && !cn.TokenExpiresAt.IsZero() && !cn.TokenExpiresAt.After(c.cfg.Now()):
		// The access token lapsed; the broker renews it at the next call
		// that needs it, so the connection is not refused for it.
		v.Status, v.Class = "expired", "state-expired"
	default:
		v.Status, v.Class = "healthy", "state-ok"
	}
	if cn.Scope.MaxAmountCentsPerCall > 0 {
		v.MaxAmount = cents(cn.Scope.MaxAmountCentsPerCall)
	}
	add := func(label, value string) {
		if value != "" {
			v.Settings = append(v.Settings, setting{label, value})
		}
	}
	cfg := cn.Config
	add("Authentication", cfg.Auth)
	add("Header", cfg.Header)
	add("Base URL", redacted(cfg.BaseURL))
	add("Database", cfg.Driver)
	if cfg.AllowPrivilegedRole {
		add("Database role", "privileged role allowed by its creator")
	}
	add("Issuer", redacted(cfg.Issuer))
	add("Authorization endpoint", redacted(cfg.AuthorizeURL))
	add("Token endpoint", redacted(cfg.TokenURL))
	add("Client ID", cfg.ClientID)
	add("Application", cfg.App)
	add("Resource", redacted(cfg.Resource))
	for _, h := range cfg.Egress.Hosts {
		add("Egress host", h)
	}
	for _, r := range cfg.Egress.AllowCIDRs {
		add("Allowed range", r)
	}
	return v
}

// redacted answers a URL with what may be a secret in it (user info,
// token-like path segments and query values) hidden.
func redacted(raw string) string {
	if raw == "" {
		return ""
	}
	return boundary.RedactURL(raw)
}

type connectionsPage struct {
	frame
	Items []connectionView
	// State is the state the list is narrowed to ("" for all), States
	// the tabs.
	State  string
	States []toolplane.ConnectionState
	Next   string
}

// connectionList shows the connections the signed-in person may see
// (every one of the organization to an administrator or an auditor, a
// person's own otherwise: the service decides), newest last.
func (c *Console) connectionList(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.connections()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	states := []toolplane.ConnectionState{toolplane.ConnectionActive, toolplane.ConnectionNeedsReauth, toolplane.ConnectionRevoked}
	state := toolplane.ConnectionState(q.Get("state"))
	if state != "" && !slices.Contains(states, state) {
		return fmt.Errorf("%w: state must be active, needs_reauth or revoked", toolplane.ErrInvalid)
	}
	if err := toolplane.CheckLen("cursor", q.Get("cursor"), toolplane.MaxRefLen); err != nil {
		return err
	}
	cs, next, err := svc.List(r.Context(), sess.Credential, toolplane.ConnectionFilter{State: state}, q.Get("cursor"), pageSize)
	if err != nil {
		return err
	}
	v := connectionsPage{frame: c.frameFor(sess, "Connections", "connections"), State: string(state), States: states}
	for i := range cs {
		v.Items = append(v.Items, c.view(&cs[i]))
	}
	if next != "" {
		v.Next = c.path("/connections") + "?" + url.Values{"state": {string(state)}, "cursor": {next}}.Encode()
	}
	c.render(w, r, http.StatusOK, "connections", v)
	return nil
}

type connectionPage struct {
	frame
	C connectionView
	// Consent is the label of the consent button ("" when the person
	// cannot consent on this connection); Revoke whether the revocation
	// form is offered.
	Consent      string
	Revoke       bool
	Action, CSRF string
}

// connectionOf answers the connections' service and the connection the
// request's path names, as the person may see it (one they may not is not
// found, as one that does not exist).
func (c *Console) connectionOf(r *http.Request, sess *signin.Session) (*connection.Admin, *toolplane.Connection, error) {
	svc, err := c.connections()
	if err != nil {
		return nil, nil, err
	}
	id := r.PathValue("id")
	if err := toolplane.CheckLen("connection id", id, toolplane.MaxRefLen); err != nil {
		return nil, nil, err
	}
	cn, err := svc.Get(r.Context(), sess.Credential, id)
	if err != nil {
		return nil, nil, err
	}
	return svc, cn, nil
}

// connectionPage shows one connection the person may see; one they may
// not is not found, as one that does not exist.
func (c *Console) connectionPage(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	_, cn, err := c.connectionOf(r, sess)
	if err != nil {
		return err
	}
	v := connectionPage{frame: c.frameFor(sess, "Connection "+cn.Name, "connections"), C: c.view(cn),
		Revoke: connection.MayRevoke(sess.Credential, cn), Action: c.path("/connections/" + url.PathEscape(cn.ID)), CSRF: sess.CSRF}
	switch app := connection.ConsentApp(sess.Credential, cn); {
	case app == "":
	case app == cn.ID:
		v.Consent = "Connect my account"
	default:
		v.Consent = "Re-authorize"
	}
	switch r.URL.Query().Get("done") {
	case "revoked":
		v.Notice = "Revoked: no call uses this connection any more, on any node."
	}
	c.render(w, r, http.StatusOK, "connection", v)
	return nil
}

// authorizeConnection starts the OAuth authorization through which the
// signed-in person connects or renews their own account on the
// connection, as `toolplane connections authorize` does, and sends the
// browser to its start, which sends it on to the provider.
func (c *Console) authorizeConnection(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, cn, err := c.connectionOf(r, sess)
	if err != nil {
		return err
	}
	app := connection.ConsentApp(sess.Credential, cn)
	if app == "" {
		return toolplane.Refuse(sess.Credential, connection.ErrNotAuthorized,
			"only the person whose account a connection holds authorizes it again, and only an OAuth authorization-code connection is authorized")
	}
	link, err := svc.Authorize(r.Context(), sess.Credential, app)
	if err != nil {
		return err
	}
	http.Redirect(w, r, link, http.StatusSeeOther)
	return nil
}

// revokeConnection revokes the connection for the signed-in person, as
// the service allows.
func (c *Console) revokeConnection(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.connections()
	if err != nil {
		return err
	}
	id, reason := r.PathValue("id"), r.PostFormValue("reason")
	if err := toolplane.CheckLen("connection id", id, toolplane.MaxRefLen); err != nil {
		return err
	}
	if err := toolplane.CheckLen("reason", reason, toolplane.MaxReasonLen); err != nil {
		return err
	}
	if _, err := svc.Revoke(r.Context(), sess.Credential, id, reason); err != nil {
		return err
	}
	http.Redirect(w, r, c.path("/connections/"+url.PathEscape(id))+"?done=revoked", http.StatusSeeOther)
	return nil
}
