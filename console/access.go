package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/signin"
)

func (c *Console) accessRoutes(mux *http.ServeMux) {
	mux.Handle("GET "+Path+"/access", c.page(c.accessPage))
	mux.Handle("POST "+Path+"/access", c.action(c.accessAction))
	mux.Handle("GET "+Path+"/access/explain", c.page(c.explainPage))
	mux.Handle("GET "+Path+"/access/keys", c.page(c.keysPage))
	mux.Handle("POST "+Path+"/access/keys", c.action(c.mintKey))
	mux.Handle("POST "+Path+"/access/keys/revoke", c.action(c.revokeKey))
}

// grants answers the grants service, or that this server serves none.
func (c *Console) grants() (*authz.Service, error) {
	if c.cfg.Authz == nil {
		return nil, fmt.Errorf("%w: grants are not enabled on this server", toolplane.ErrNotFound)
	}
	return c.cfg.Authz, nil
}

// keys answers the key service, or that this server serves none.
func (c *Console) keys() (*apikey.Keys, error) {
	if c.cfg.Keys == nil {
		return nil, fmt.Errorf("%w: API keys are not managed on this server", toolplane.ErrNotFound)
	}
	return c.cfg.Keys, nil
}

type accessPage struct {
	frame
	Grants  []toolplane.Grant
	Denies  []toolplane.Deny
	Bundles []toolplane.Bundle
	// Grant is set when the person may change grants and bundles
	// (authz.MayGrant), Deny when they may add and lift denies
	// (authz.MayDeny); the service decides again on each action.
	Grant, Deny  bool
	Action, CSRF string
}

func (c *Console) accessPage(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.grants()
	if err != nil {
		return err
	}
	v := accessPage{frame: c.frameFor(sess, "Access", "access"), Action: c.path("/access"), CSRF: sess.CSRF,
		Grant: authz.MayGrant(sess.Credential) == nil, Deny: authz.MayDeny(sess.Credential) == nil}
	if done := r.URL.Query().Get("done"); done != "" {
		v.Notice = "Done: the change is in force."
	}
	if v.Grants, err = svc.Grants(r.Context(), "", false, sess.Credential); err != nil {
		return err
	}
	if v.Denies, err = svc.Denies(r.Context(), sess.Credential); err != nil {
		return err
	}
	if v.Bundles, err = svc.Bundles(r.Context(), sess.Credential); err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "access", v)
	return nil
}

type explainPage struct {
	frame
	Agent string
	Lines []authz.Why
	Keys  []authz.AgentKey
	Asked bool
}

func (c *Console) explainPage(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.grants()
	if err != nil {
		return err
	}
	v := explainPage{frame: c.frameFor(sess, "Explain an agent's access", "access"), Agent: strings.TrimSpace(r.URL.Query().Get("agent"))}
	if v.Agent != "" {
		if err := toolplane.CheckLen("agent", v.Agent, toolplane.MaxRefLen); err != nil {
			return err
		}
		if v.Lines, err = svc.Explain(r.Context(), v.Agent, sess.Credential); err != nil {
			return err
		}
		if c.cfg.Credentials != nil {
			if v.Keys, err = authz.ExplainKeys(r.Context(), c.cfg.Credentials, v.Agent, c.cfg.Now(), sess.Credential); err != nil {
				return err
			}
		}
		v.Asked = true
	} else if err := authz.MayExplain(sess.Credential); err != nil {
		// The empty form too is shown only to whom the answer would be.
		return err
	}
	c.render(w, r, http.StatusOK, "explain", v)
	return nil
}

type keysPage struct {
	frame
	Items []toolplane.Credential
	Next  string
	// Manage is set when the person may mint and revoke keys
	// (apikey.MayManage); the service decides again on each action.
	Manage       bool
	Action, CSRF string
	Revoke       string
	Kinds        []toolplane.CredentialKind
	// Connected is the authorization server's page of the person's
	// connected OAuth clients ("" where none runs): it decides there.
	Connected string
}

func (c *Console) keysPage(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.keys()
	if err != nil {
		return err
	}
	cs, next, err := svc.List(r.Context(), r.URL.Query().Get("cursor"), pageSize, sess.Credential)
	if err != nil {
		return err
	}
	v := keysPage{frame: c.frameFor(sess, "API keys", "access"), Items: cs, Action: c.path("/access/keys"),
		Revoke: c.path("/access/keys/revoke"), CSRF: sess.CSRF, Manage: apikey.MayManage(sess.Credential, "minting keys") == nil,
		Kinds: []toolplane.CredentialKind{toolplane.CredentialAgent, toolplane.CredentialPerson}, Connected: c.cfg.ConnectedClients}
	if next != "" {
		v.Next = c.path("/access/keys") + "?" + url.Values{"cursor": {next}}.Encode()
	}
	if id := r.URL.Query().Get("revoked"); id != "" {
		v.Notice = "The key " + id + " is revoked."
	}
	c.render(w, r, http.StatusOK, "keys", v)
	return nil
}

// mintedPage shows a new key's secret, once: the answer to the form's
// POST, never a page that can be opened again (the console sends no-store
// on every answer, and nothing keeps the secret).
type mintedPage struct {
	frame
	Key  string
	Cred *toolplane.Credential
}

// list reads a form field of comma- or line-separated names.
func list(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (c *Console) mintKey(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.keys()
	if err != nil {
		return err
	}
	k := apikey.NewKey{Kind: toolplane.CredentialKind(r.PostFormValue("kind")), Subject: strings.TrimSpace(r.PostFormValue("subject")),
		Roles: list(r.PostFormValue("roles")), Tools: list(r.PostFormValue("tools")), Label: strings.TrimSpace(r.PostFormValue("label"))}
	if s := r.PostFormValue("expires"); s != "" {
		if k.ExpiresAt, err = time.Parse(timeForm, s); err != nil {
			return fmt.Errorf("%w: the expiry is a date and time, YYYY-MM-DDTHH:MM (UTC)", toolplane.ErrInvalid)
		}
	}
	key, cred, err := svc.Create(r.Context(), k, sess.Credential)
	if err != nil {
		return err
	}
	v := mintedPage{frame: c.frameFor(sess, "Key minted", "access"), Key: key, Cred: cred}
	v.Notice = "Copy the key now: it is shown only on this page, once, and cannot be shown again."
	c.render(w, r, http.StatusCreated, "key-minted", v)
	return nil
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.keys()
	if err != nil {
		return err
	}
	cred, err := svc.Revoke(r.Context(), r.PostFormValue("id"), sess.Credential)
	if err != nil {
		return err
	}
	http.Redirect(w, r, c.path("/access/keys")+"?"+url.Values{"revoked": {cred.ID}}.Encode(), http.StatusSeeOther)
	return nil
}

// accessAction changes grants, denies and bundles, each through the
// grants service, which decides who may.
func (c *Console) accessAction(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.grants()
	if err != nil {
		return err
	}
	ctx, by, field := r.Context(), sess.Credential, func(name string) string { return strings.TrimSpace(r.PostFormValue(name)) }
	switch r.PostFormValue("action") {
	case "grant":
		g := &toolplane.Grant{AgentID: field("agent"), UserID: field("user"), Group: field("group"), Pattern: field("pattern"),
			Bundle: field("bundle"), TenantScope: list(r.PostFormValue("tenants"))}
		if s := field("expires"); s != "" {
			if g.ExpiresAt, err = time.Parse(timeForm, s); err != nil {
				return fmt.Errorf("%w: the expiry is a date and time, YYYY-MM-DDTHH:MM (UTC)", toolplane.ErrInvalid)
			}
		}
		err = svc.AddGrant(ctx, g, by)
	case "revoke-grant":
		err = svc.RevokeGrant(ctx, field("id"), by)
	case "deny":
		err = svc.AddDeny(ctx, &toolplane.Deny{AgentID: field("agent"), Pattern: field("pattern"), Reason: field("reason")}, by)
	case "lift-deny":
		err = svc.LiftDeny(ctx, field("id"), by)
	case "bundle":
		err = svc.PutBundle(ctx, &toolplane.Bundle{Name: field("name"), Refs: list(r.PostFormValue("refs"))}, by)
	default:
		return fmt.Errorf("%w: the action is grant, revoke-grant, deny, lift-deny or bundle", toolplane.ErrInvalid)
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, c.path("/access")+"?done=1", http.StatusSeeOther)
	return nil
}
