package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/compat"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/toolfile"
)

// versionView is a published version as the API shows it.
type versionView struct {
	Name          string                  `json:"name"`
	Version       string                  `json:"version"`
	State         toolplane.VersionState  `json:"state"`
	Owner         string                  `json:"owner"`
	SchemaHash    string                  `json:"schema_hash"`
	ReviewReasons []string                `json:"review_reasons,omitempty"`
	PublishedBy   string                  `json:"published_by"`
	PublishedAt   *time.Time              `json:"published_at,omitempty"`
	ReviewedBy    string                  `json:"reviewed_by,omitempty"`
	ReviewedAt    *time.Time              `json:"reviewed_at,omitempty"`
	ReviewNote    string                  `json:"review_note,omitempty"`
	SunsetAt      *time.Time              `json:"sunset_at,omitempty"`
	Replacement   string                  `json:"replacement,omitempty"`
	Note          string                  `json:"deprecation_note,omitempty"`
	RetireBlocked string                  `json:"retire_blocked,omitempty"`
	Source        toolplane.VersionSource `json:"source"`
	Upstream      string                  `json:"upstream,omitempty"`
	Definition    json.RawMessage         `json:"definition,omitempty"`
	Dependencies  []toolplane.Dependency  `json:"dependencies,omitempty"`
	Compatibility *compatView             `json:"compatibility,omitempty"`
}

type compatView struct {
	Required string   `json:"required_bump"`
	Changes  []string `json:"changes"`
}

func versionOf(v *toolplane.ToolVersion, withDefinition bool) versionView {
	out := versionView{Name: v.Name, Version: v.Version, State: v.State, Owner: v.Owner, SchemaHash: v.SchemaHash,
		ReviewReasons: v.ReviewReasons, PublishedBy: v.PublishedBy, PublishedAt: opt(v.PublishedAt), ReviewedBy: v.ReviewedBy,
		ReviewedAt: opt(v.ReviewedAt), ReviewNote: v.ReviewNote, SunsetAt: opt(v.SunsetAt), Replacement: v.Replacement,
		Note: v.DeprecationNote, RetireBlocked: v.RetireBlocked, Source: v.Source, Upstream: v.Upstream}
	var d toolplane.Definition
	if json.Unmarshal(v.Definition, &d) == nil {
		out.Dependencies = d.Dependencies
	}
	if withDefinition {
		out.Definition = v.Definition
	}
	return out
}

// registryFail answers an error of the catalogue or grants services: the
// refusals only they make (a definition failing registration, a version
// bump below its changes) with their own codes, every other by its kind
// (httperr.Fail: a lifecycle transition is invalid_transition there), so a
// store failure is a logged 500, never a refusal.
func (s *Server) registryFail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		ce      *registry.CheckError
		cv      *compat.Violation
		tooLong *toolplane.TooLongError
	)
	switch {
	case errors.Is(err, toolplane.ErrForbidden), errors.As(err, &tooLong):
		// Refused, or refused at one field, whatever else it says.
	case errors.As(err, &ce):
		lines := make([]string, len(ce.Problems))
		for i, p := range ce.Problems {
			lines[i] = p.String()
		}
		field := ""
		if len(ce.Problems) > 0 {
			field = ce.Problems[0].Field
		}
		httperr.Send(w, r, httperr.InvalidRequest, "the definition fails registration: "+strings.Join(lines, "; "), field)
		return
	case errors.As(err, &cv):
		httperr.Send(w, r, httperr.Incompatible, cv.Error(), "version")
		return
	}
	httperr.Fail(w, r, s.Log, err)
}

// publish stores a new version from a definition file: YAML
// (application/x-yaml) or JSON, in either definition form. A caller who
// can publish nothing is refused before the body is read.
func (s *Server) publish(w http.ResponseWriter, r *http.Request, c caller) {
	if err := catalog.MayPublish(c.cred); err != nil {
		s.registryFail(w, r, err)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, "the body could not be read: "+err.Error(), "")
		return
	}
	ext := ".json"
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); strings.Contains(mt, "yaml") {
		ext = ".yaml"
	}
	d, _, err := toolfile.Parse(data, ext)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	pub, err := s.Catalog.Publish(r.Context(), d, c.cred)
	if err != nil {
		s.registryFail(w, r, err)
		return
	}
	out := versionOf(pub.Version, false)
	if pub.Report != nil {
		cv := &compatView{Required: pub.Report.Required.String()}
		for _, ch := range pub.Report.Changes {
			cv.Changes = append(cv.Changes, ch.String())
		}
		out.Compatibility = cv
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listVersions(w http.ResponseWriter, r *http.Request, c caller) {
	if err := catalog.MayRead(c.cred); err != nil {
		s.registryFail(w, r, err)
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	q := r.URL.Query()
	f := toolplane.VersionFilter{Name: q.Get("name"), Owner: q.Get("owner")}
	for _, st := range q["state"] {
		f.States = append(f.States, toolplane.VersionState(st))
	}
	vs, next, err := s.Catalog.List(r.Context(), f, q.Get("cursor"), limit, c.cred)
	if err != nil {
		s.registryFail(w, r, err)
		return
	}
	items := make([]versionView, len(vs))
	for i := range vs {
		items[i] = versionOf(&vs[i], false)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request, c caller) {
	v, err := s.Catalog.Get(r.Context(), r.PathValue("name"), r.PathValue("version"), c.cred)
	if err != nil {
		s.registryFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, versionOf(v, true))
}

// versionAction moves a version through its lifecycle: approve, reject,
// submit, deprecate, retire. A caller who can change no version is refused
// before the body is read.
func (s *Server) versionAction(w http.ResponseWriter, r *http.Request, c caller) {
	if err := catalog.MayChange(c.cred); err != nil {
		s.registryFail(w, r, err)
		return
	}
	var body struct {
		Note        string    `json:"note"`
		SunsetAt    time.Time `json:"sunset_at"`
		Replacement string    `json:"replacement"`
	}
	if r.ContentLength != 0 {
		if err := decodeBody(r, &body); err != nil {
			httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
			return
		}
	}
	ctx, name, version := r.Context(), r.PathValue("name"), r.PathValue("version")
	var (
		v   *toolplane.ToolVersion
		err error
	)
	switch r.PathValue("action") {
	case "approve":
		v, err = s.Catalog.Review(ctx, name, version, true, body.Note, c.cred)
	case "reject":
		v, err = s.Catalog.Review(ctx, name, version, false, body.Note, c.cred)
	case "submit":
		v, err = s.Catalog.Submit(ctx, name, version, body.Note, c.cred)
	case "deprecate":
		v, err = s.Catalog.Deprecate(ctx, name, version, body.SunsetAt, body.Replacement, body.Note, c.cred)
	case "retire":
		v, err = s.Catalog.Retire(ctx, name, version, body.Note, c.cred)
	default:
		httperr.Send(w, r, httperr.NotFound, "the action is one of approve, reject, submit, deprecate, retire", "action")
		return
	}
	if err != nil {
		s.registryFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, versionOf(v, false))
}

// reviewMany decides a set of versions in review at once: those listed,
// or every one a publisher published or a connection brought. Each
// version is decided, refused and recorded on its own; the answer lists
// each outcome, 200 even when some were refused (the request was done;
// its items say what became of each).
func (s *Server) reviewMany(w http.ResponseWriter, r *http.Request, c caller) {
	if err := catalog.MayChange(c.cred); err != nil {
		s.registryFail(w, r, err)
		return
	}
	var body struct {
		Decision string `json:"decision"`
		Note     string `json:"note"`
		Versions []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"versions"`
		PublishedBy string `json:"published_by"`
		Connection  string `json:"connection"`
	}
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	if body.Decision != "approve" && body.Decision != "reject" {
		httperr.Send(w, r, httperr.InvalidRequest, "decision is approve or reject", "decision")
		return
	}
	sel := catalog.Selection{PublishedBy: body.PublishedBy, Connection: body.Connection}
	for _, v := range body.Versions {
		sel.Versions = append(sel.Versions, catalog.Ref{Name: v.Name, Version: v.Version})
	}
	ds, err := s.Catalog.ReviewMany(r.Context(), sel, body.Decision == "approve", body.Note, c.cred)
	if err != nil && ds == nil {
		s.registryFail(w, r, err)
		return
	}
	if err != nil {
		// Every decision is stored; only this node's registry lags until
		// its next refresh.
		s.Log.WarnContext(r.Context(), "catalogue refresh after a bulk review failed", "err", err)
	}
	done := "approved"
	if body.Decision == "reject" {
		done = "rejected"
	}
	items := make([]map[string]any, len(ds))
	decided := 0
	for i, d := range ds {
		item := map[string]any{"name": d.Name, "version": d.Ref.Version}
		if d.Err == nil {
			decided++
			item["outcome"], item["state"] = done, d.Result.State
		} else {
			item["outcome"], item["error"] = "refused", s.itemError(r, d.Err)
		}
		items[i] = item
	}
	writeJSON(w, http.StatusOK, map[string]any{"decision": body.Decision, "decided": decided, "refused": len(ds) - decided, "items": items})
}

// itemError answers one item's refusal as the error envelope's detail
// would carry it: a refusal by its code and message, a platform fault
// logged and answered without its cause.
func (s *Server) itemError(r *http.Request, err error) map[string]any {
	if p, ok := httperr.Classify(err); ok {
		return map[string]any{"code": p.Code, "message": p.Message}
	}
	s.Log.ErrorContext(r.Context(), "bulk review item failed", "err", err)
	return map[string]any{"code": httperr.Internal, "message": "the decision could not be made; try this version again"}
}

// diff answers the compatibility report between two definitions: a tool
// author's aid, answered to the people who read the catalogue.
func (s *Server) diff(w http.ResponseWriter, r *http.Request, c caller) {
	if err := catalog.MayRead(c.cred); err != nil {
		s.registryFail(w, r, err)
		return
	}
	var body struct {
		From json.RawMessage `json:"from"`
		To   json.RawMessage `json:"to"`
	}
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	from, _, err := toolfile.Parse(body.From, ".json")
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, "from: "+err.Error(), "from")
		return
	}
	to, _, err := toolfile.Parse(body.To, ".json")
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, "to: "+err.Error(), "to")
		return
	}
	cmp, err := catalog.Compare(&from, &to, c.cred)
	if err != nil {
		s.registryFail(w, r, err)
		return
	}
	out := map[string]any{"required_bump": cmp.Required.String(), "changes": cmp.Changes}
	if cmp.Refused != "" {
		out["refused"] = cmp.Refused
	}
	writeJSON(w, http.StatusOK, out)
}

// grantView is a grant as the API shows it.
type grantView struct {
	ID          string     `json:"id"`
	AgentID     string     `json:"agent_id,omitempty"`
	UserID      string     `json:"user_id,omitempty"`
	Group       string     `json:"group,omitempty"`
	Pattern     string     `json:"pattern,omitempty"`
	Bundle      string     `json:"bundle,omitempty"`
	TenantScope []string   `json:"tenant_scope,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	GrantedBy   string     `json:"granted_by"`
	CreatedAt   time.Time  `json:"created_at"`
	RevokedAt   *time.Time `json:"revoked_at,omitempty"`
	RevokedBy   string     `json:"revoked_by,omitempty"`
}

func grantOf(g *toolplane.Grant) grantView {
	return grantView{ID: g.ID, AgentID: g.AgentID, UserID: g.UserID, Group: g.Group, Pattern: g.Pattern, Bundle: g.Bundle, TenantScope: g.TenantScope,
		ExpiresAt: opt(g.ExpiresAt), GrantedBy: g.GrantedBy, CreatedAt: g.CreatedAt, RevokedAt: opt(g.RevokedAt), RevokedBy: g.RevokedBy}
}

func (s *Server) addGrant(w http.ResponseWriter, r *http.Request, c caller) {
	if err := authz.MayGrant(c.cred); err != nil {
		s.registryFail(w, r, err)
		return
	}
	var body struct {
		AgentID     string    `json:"agent_id"`
		UserID      string    `json:"user_id"`
		Group       string    `json:"group"`
		Pattern     string    `json:"pattern"`
		Bundle      string    `json:"bundle"`
		TenantScope []string  `json:"tenant_scope"`
		ExpiresAt   time.Time `json:"expires_at"`
	}
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	g := &toolplane.Grant{AgentID: body.AgentID, UserID: body.UserID, Group: body.Group, Pattern: body.Pattern, Bundle: body.Bundle, TenantScope: body.TenantScope, ExpiresAt: body.ExpiresAt}
	if err := s.Door.Authz.AddGrant(r.Context(), g, c.cred); err != nil {
		s.registryFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, grantOf(g))
}

func (s *Server) listGrants(w http.ResponseWriter, r *http.Request, c caller) {
	all, err := s.Door.Authz.Grants(r.Context(), r.URL.Query().Get("agent_id"), r.URL.Query().Get("revoked") == "true", c.cred)
	if err != nil {
		s.registryFail(w, r, err)
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	gs, next, err := page(r, all, limit, func(g toolplane.Grant) string { return g.ID })
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	items := make([]grantView, len(gs))
	for i := range gs {
		items[i] = grantOf(&gs[i])
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request, c caller) {
	if err := s.Door.Authz.RevokeGrant(r.Context(), r.PathValue("id"), c.cred); err != nil {
		s.registryFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": r.PathValue("id"), "revoked": true})
}

func (s *Server) explain(w http.ResponseWriter, r *http.Request, c caller) {
	ctx, agent := r.Context(), r.PathValue("agent")
	lines, err := s.Door.Authz.Explain(ctx, agent, c.cred)
	if err != nil {
		s.registryFail(w, r, err)
		return
	}
	// Each live key of the agent narrows what it may call below the
	// grants (or not, when it lists no tools): the answer names them, so
	// "why can this key not call X" is answered here too.
	keys, err := authz.ExplainKeys(ctx, s.Store, agent, s.Now(), c.cred)
	if err != nil {
		s.registryFail(w, r, err)
		return
	}
	if lines == nil {
		lines = []authz.Why{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"agent_id": agent, "tools": lines, "keys": keys})
}

func (s *Server) addDeny(w http.ResponseWriter, r *http.Request, c caller) {
	if err := authz.MayDeny(c.cred); err != nil {
		s.registryFail(w, r, err)
		return
	}
	var body struct {
		AgentID string `json:"agent_id"`
		Pattern string `json:"pattern"`
		Reason  string `json:"reason"`
	}
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	d := &toolplane.Deny{AgentID: body.AgentID, Pattern: body.Pattern, Reason: body.Reason}
	if err := s.Door.Authz.AddDeny(r.Context(), d, c.cred); err != nil {
		s.registryFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"id": d.ID, "agent_id": d.AgentID, "pattern": d.Pattern, "reason": d.Reason,
		"created_by": d.CreatedBy, "created_at": d.CreatedAt})
}

func (s *Server) listDenies(w http.ResponseWriter, r *http.Request, c caller) {
	all, err := s.Door.Authz.Denies(r.Context(), c.cred)
	if err != nil {
		s.registryFail(w, r, err)
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	ds, next, err := page(r, all, limit, func(d toolplane.Deny) string { return d.ID })
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	items := make([]map[string]any, len(ds))
	for i, d := range ds {
		items[i] = map[string]any{"id": d.ID, "agent_id": d.AgentID, "pattern": d.Pattern, "reason": d.Reason, "created_by": d.CreatedBy, "created_at": d.CreatedAt}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

func (s *Server) liftDeny(w http.ResponseWriter, r *http.Request, c caller) {
	if err := s.Door.Authz.LiftDeny(r.Context(), r.PathValue("id"), c.cred); err != nil {
		s.registryFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": r.PathValue("id"), "lifted": true})
}

func (s *Server) putBundle(w http.ResponseWriter, r *http.Request, c caller) {
	if err := authz.MayGrant(c.cred); err != nil {
		s.registryFail(w, r, err)
		return
	}
	var body struct {
		Refs []string `json:"refs"`
	}
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	b := &toolplane.Bundle{Name: r.PathValue("name"), Refs: body.Refs}
	if err := s.Door.Authz.PutBundle(r.Context(), b, c.cred); err != nil {
		s.registryFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": b.Name, "refs": b.Refs, "created_by": b.CreatedBy, "updated_at": b.UpdatedAt})
}

func (s *Server) listBundles(w http.ResponseWriter, r *http.Request, c caller) {
	all, err := s.Door.Authz.Bundles(r.Context(), c.cred)
	if err != nil {
		s.registryFail(w, r, err)
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	bs, next, err := page(r, all, limit, func(b toolplane.Bundle) string { return b.Name })
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	items := make([]map[string]any, len(bs))
	for i, b := range bs {
		items[i] = map[string]any{"name": b.Name, "refs": b.Refs, "created_by": b.CreatedBy, "created_at": b.CreatedAt, "updated_at": b.UpdatedAt}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

func (s *Server) listChanges(w http.ResponseWriter, r *http.Request, c caller) {
	if err := catalog.MayReadChanges(c.cred); err != nil {
		// Before the limit is judged: this caller reads no change log.
		s.registryFail(w, r, err)
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	q := r.URL.Query()
	cs, next, err := s.Catalog.Changes(r.Context(), q.Get("kind"), q.Get("subject"), q.Get("cursor"), limit, c.cred)
	if err != nil {
		s.registryFail(w, r, err)
		return
	}
	items := make([]map[string]any, len(cs))
	for i, ch := range cs {
		items[i] = map[string]any{"id": ch.ID, "kind": ch.Kind, "subject": ch.Subject, "actor": ch.Actor, "detail": json.RawMessage(orNull(ch.Detail)), "created_at": ch.CreatedAt}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

// page answers the items after the cursor (the last key of the page
// before), at most limit of them, and the next cursor ("" at the end); a
// cursor that is no item's key is a toolplane.ErrBadCursor. Grants,
// denies and bundles are listed whole by the store, an organization's
// worth; the API pages them like every other list.
func page[T any](r *http.Request, items []T, limit int, key func(T) string) ([]T, string, error) {
	if after := r.URL.Query().Get("cursor"); after != "" {
		i := 0
		for i < len(items) && key(items[i]) != after {
			i++
		}
		if i == len(items) {
			return nil, "", fmt.Errorf("%w: no item has the key %q", toolplane.ErrBadCursor, after)
		}
		items = items[i+1:]
	}
	if len(items) <= limit {
		return items, "", nil
	}
	return items[:limit], key(items[limit-1]), nil
}

func orNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

// registryRoute answers 404 on a server without the registry services.
func (s *Server) registryRoute(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, c caller) {
		if s.Catalog == nil || s.Door.Authz == nil {
			httperr.Send(w, r, httperr.NotFound, fmt.Sprintf("%s is not enabled on this server", r.URL.Path), "")
			return
		}
		h(w, r, c)
	})
}
