package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/httperr"
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
	Attributes map[string]any           `json:"attributes,omitempty"`
	Listing    toolplane.ToolListing    `json:"listing,omitempty"`
	ListingTop int                      `json:"listing_top,omitempty"`
}

func opt(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func keyOf(c *toolplane.Credential) keyView {
	return keyView{ID: c.ID, Kind: c.Kind, Subject: c.Subject, Roles: c.Roles, Tools: c.Tools, Label: c.Label,
		CreatedAt: c.CreatedAt, CreatedBy: c.CreatedBy, ExpiresAt: opt(c.ExpiresAt), RevokedAt: opt(c.RevokedAt), LastUsedAt: opt(c.LastUsedAt), Attributes: c.Attributes,
		Listing: c.Listing, ListingTop: c.ListingTop}
}

// keysFail answers a key operation's failure: a request it cannot mint
// at the part at fault, any other error by its kind (httperr.Fail: the
// service's refusal, a conflict); a store that did not take the key is
// the platform's fault, logged and answered 500, never a 400 that would
// send the caller to look for a mistake of theirs.
func (s *Server) keysFail(w http.ResponseWriter, r *http.Request, err error) {
	var invalid *apikey.InvalidError
	if errors.As(err, &invalid) {
		httperr.Send(w, r, httperr.InvalidRequest, invalid.Why, invalid.Field)
		return
	}
	httperr.Fail(w, r, s.Log, err)
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request, c caller) {
	if s.refused(w, r, apikey.MayManage(c.cred, "creating keys")) {
		return
	}
	var body struct {
		Kind       toolplane.CredentialKind `json:"kind"`
		Subject    string                   `json:"subject"`
		Roles      []string                 `json:"roles"`
		Tools      []string                 `json:"tools"`
		Label      string                   `json:"label"`
		ExpiresAt  time.Time                `json:"expires_at"`
		Attributes map[string]string        `json:"attributes"`
		Listing    toolplane.ToolListing    `json:"listing"`
		ListingTop int                      `json:"listing_top"`
	}
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	key, cred, err := s.keys.Create(r.Context(), apikey.NewKey{Kind: body.Kind, Subject: body.Subject, Roles: body.Roles,
		Tools: body.Tools, Label: body.Label, ExpiresAt: body.ExpiresAt, Attributes: body.Attributes,
		Listing: body.Listing, ListingTop: body.ListingTop}, c.cred)
	if err != nil {
		s.keysFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"key": key, "credential": keyOf(cred),
		"message": "store the key now: it is shown only once"})
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, c caller) {
	if s.refused(w, r, apikey.MayList(c.cred)) {
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	cs, next, err := s.keys.List(r.Context(), r.URL.Query().Get("cursor"), limit, c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	items := make([]keyView, len(cs))
	for i := range cs {
		items[i] = keyOf(&cs[i])
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, c caller) {
	cred, err := s.keys.Revoke(r.Context(), r.PathValue("id"), c.cred)
	switch {
	case s.refused(w, r, err):
	case errors.Is(err, toolplane.ErrNotFound):
		httperr.Send(w, r, httperr.NotFound, "no key "+r.PathValue("id"), "")
	case errors.Is(err, apikey.ErrChanged):
		httperr.Send(w, r, httperr.Conflict, "the key changed meanwhile; try again", "")
	case err != nil:
		s.Log.ErrorContext(r.Context(), "credential lookup failed", "err", err)
		httperr.Send(w, r, httperr.Unavailable, "credentials cannot be read right now", "")
	default:
		writeJSON(w, http.StatusOK, map[string]any{"credential": keyOf(cred)})
	}
}

// updateKey changes how /mcp lists an agent key's tools: the one change to
// a key besides its revocation.
func (s *Server) updateKey(w http.ResponseWriter, r *http.Request, c caller) {
	if s.refused(w, r, apikey.MayManage(c.cred, "changing keys")) {
		return
	}
	var body struct {
		Listing    *toolplane.ToolListing `json:"listing"`
		ListingTop int                    `json:"listing_top"`
	}
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	if body.Listing == nil {
		httperr.Send(w, r, httperr.InvalidRequest, `listing is required: "full", "meta" or "hybrid"`, "/listing")
		return
	}
	cred, err := s.keys.SetListing(r.Context(), r.PathValue("id"), *body.Listing, body.ListingTop, c.cred)
	switch {
	case s.refused(w, r, err):
	case errors.Is(err, toolplane.ErrNotFound):
		httperr.Send(w, r, httperr.NotFound, "no key "+r.PathValue("id"), "")
	case errors.Is(err, apikey.ErrChanged):
		httperr.Send(w, r, httperr.Conflict, "the key changed meanwhile; try again", "")
	case err != nil:
		s.keysFail(w, r, err)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"credential": keyOf(cred)})
	}
}
