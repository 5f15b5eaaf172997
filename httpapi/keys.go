package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"path"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
)

// keyView is a credential as the API shows it: never its hash.
type keyView struct {
	ID         string                   `json:"id"`
	Kind       toolplane.CredentialKind `json:"kind"`
	Subject    string                   `json:"subject"`
	Roles      []string                 `json:"roles,omitempty"`
	Tools      []string                 `json:"tools,omitempty"`
	Label      string                   `json:"label,omitempty"`
	CreatedAt  time.Time                `json:"created_at"`
	CreatedBy  string                   `json:"created_by,omitempty"`
	ExpiresAt  *time.Time               `json:"expires_at,omitempty"`
	RevokedAt  *time.Time               `json:"revoked_at,omitempty"`
	LastUsedAt *time.Time               `json:"last_used_at,omitempty"`
}

func opt(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func keyOf(c *toolplane.Credential) keyView {
	return keyView{ID: c.ID, Kind: c.Kind, Subject: c.Subject, Roles: c.Roles, Tools: c.Tools, Label: c.Label,
		CreatedAt: c.CreatedAt, CreatedBy: c.CreatedBy, ExpiresAt: opt(c.ExpiresAt), RevokedAt: opt(c.RevokedAt), LastUsedAt: opt(c.LastUsedAt)}
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request, c caller) {
	if !c.hasRole(RolePlatformAdmin) {
		s.forbidRole(w, r, c, "creating keys needs the platform_admin role")
		return
	}
	var body struct {
		Kind      toolplane.CredentialKind `json:"kind"`
		Subject   string                   `json:"subject"`
		Roles     []string                 `json:"roles"`
		Tools     []string                 `json:"tools"`
		Label     string                   `json:"label"`
		ExpiresAt time.Time                `json:"expires_at"`
	}
	if err := decodeBody(r, &body); err != nil {
		s.fail(w, r, http.StatusBadRequest, "invalid_request", err.Error(), "")
		return
	}
	switch {
	case body.Kind != toolplane.CredentialAgent && body.Kind != toolplane.CredentialPerson:
		s.fail(w, r, http.StatusBadRequest, "invalid_request", `kind must be "agent" or "person"`, "/kind")
		return
	case body.Subject == "":
		s.fail(w, r, http.StatusBadRequest, "invalid_request", "subject names the agent identity or the person", "/subject")
		return
	case body.Kind == toolplane.CredentialAgent && (len(body.Roles) > 1 || len(body.Roles) == 1 && body.Roles[0] != toolplane.RoleActForUsers):
		s.fail(w, r, http.StatusBadRequest, "invalid_request", "an agent's key carries tools, and no role but "+toolplane.RoleActForUsers, "/roles")
		return
	case body.Kind == toolplane.CredentialPerson && len(body.Tools) > 0:
		s.fail(w, r, http.StatusBadRequest, "invalid_request", "a person's key carries roles, not tools", "/tools")
		return
	}
	checks := []error{toolplane.CheckLen("subject", body.Subject, toolplane.MaxRefLen), toolplane.CheckLen("label", body.Label, toolplane.MaxRefLen)}
	for i, v := range body.Roles {
		checks = append(checks, toolplane.CheckLen(fmt.Sprintf("roles[%d]", i), v, toolplane.MaxRefLen))
	}
	for i, v := range body.Tools {
		checks = append(checks, toolplane.CheckLen(fmt.Sprintf("tools[%d]", i), v, toolplane.MaxNameLen))
	}
	if !s.bounded(w, r, checks...) {
		return
	}
	for i, p := range body.Tools {
		// A pattern that cannot match would narrow the key to nothing,
		// silently: refuse it where it is written.
		if _, err := path.Match(p, ""); err != nil || p == "" {
			s.fail(w, r, http.StatusBadRequest, "invalid_request", fmt.Sprintf("tools[%d] %q is not a tool name or glob pattern", i, p), fmt.Sprintf("/tools/%d", i))
			return
		}
	}
	id, secret, err := apikey.New(body.Kind)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "internal_error", "the key could not be minted", "")
		return
	}
	cred := &toolplane.Credential{ID: id, OrganizationID: c.cred.OrganizationID, Kind: body.Kind, Subject: body.Subject,
		Roles: body.Roles, Tools: body.Tools, Hash: apikey.Hash(secret), Label: body.Label, CreatedAt: s.Now(),
		ExpiresAt: body.ExpiresAt, CreatedBy: c.cred.Subject}
	if err := s.Store.InsertCredential(r.Context(), cred); err != nil {
		s.Log.ErrorContext(r.Context(), "credential insert failed", "err", err)
		s.fail(w, r, http.StatusBadRequest, "invalid_request", "the key could not be stored; check that roles, tools and subject are plain text", "")
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"key": apikey.Key(id, secret), "credential": keyOf(cred),
		"message": "store the key now: it is shown only once"})
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, c caller) {
	if !c.hasRole(RolePlatformAdmin, RoleAuditor) {
		s.forbidRole(w, r, c, "listing keys needs the platform_admin or auditor role")
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "invalid_request", err.Error(), "limit")
		return
	}
	cs, next, err := s.Store.ListCredentials(r.Context(), c.cred.OrganizationID, r.URL.Query().Get("cursor"), limit)
	if err != nil {
		s.listFail(w, r, "keys", err)
		return
	}
	items := make([]keyView, len(cs))
	for i := range cs {
		items[i] = keyOf(&cs[i])
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, c caller) {
	if !c.hasRole(RolePlatformAdmin) {
		s.forbidRole(w, r, c, "revoking keys needs the platform_admin role")
		return
	}
	if !s.bounded(w, r, toolplane.CheckLen("key id", r.PathValue("id"), toolplane.MaxRefLen)) {
		return
	}
	cred, err := s.Store.GetCredential(r.Context(), r.PathValue("id"))
	if errors.Is(err, toolplane.ErrNotFound) || (err == nil && cred.OrganizationID != c.cred.OrganizationID) {
		s.fail(w, r, http.StatusNotFound, "not_found", "no key "+r.PathValue("id"), "")
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "unavailable", "credentials cannot be read right now", "")
		return
	}
	if cred.RevokedAt.IsZero() {
		cred.RevokedAt = s.Now()
		ok, err := s.Store.UpdateCredential(r.Context(), cred)
		if err != nil || !ok {
			s.fail(w, r, http.StatusConflict, "conflict", "the key changed meanwhile; try again", "")
			return
		}
	}
	// This node refuses the key from now on; other nodes within the
	// cache's time to live.
	s.Keys.Forget(cred.ID)
	writeJSON(w, http.StatusOK, map[string]any{"credential": keyOf(cred)})
}
