package httpapi

import (
	"net/http"
	"time"

	"github.com/toolplane/toolplane/httperr"
)

// purgeRoute answers 404 when the server has no purge service (no audit
// chain or no signing key), else h.
func (s *Server) purgeRoute(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, c caller) {
		if s.AuditPurges == nil {
			httperr.Send(w, r, httperr.NotFound, "this server does not purge its audit trail (no audit chain or signing key)", "")
			return
		}
		h(w, r, c)
	})
}

// sinkRoute answers 404 when the server has no sinks' management.
func (s *Server) sinkRoute(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, c caller) {
		if s.AuditSinks == nil {
			httperr.Send(w, r, httperr.NotFound, "this server's store exports no audit trail", "")
			return
		}
		h(w, r, c)
	})
}

// proposePurge files a proposal to drop the organization's audit events
// created before the body's time; another platform admin confirms it.
func (s *Server) proposePurge(w http.ResponseWriter, r *http.Request, c caller) {
	var body struct {
		Before time.Time `json:"before"`
	}
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	if body.Before.IsZero() {
		httperr.Send(w, r, httperr.InvalidRequest, "before is the time (RFC 3339) the events to drop were all created before", "before")
		return
	}
	p, err := s.AuditPurges.Propose(r.Context(), body.Before, c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"purge": p})
}

// listPurges answers the organization's purge proposals, newest first.
func (s *Server) listPurges(w http.ResponseWriter, r *http.Request, c caller) {
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	list, err := s.AuditPurges.List(r.Context(), limit, c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"purges": list})
}

// confirmPurge confirms a proposal, by another platform admin than its
// proposer, and drops the range.
func (s *Server) confirmPurge(w http.ResponseWriter, r *http.Request, c caller) {
	res, err := s.AuditPurges.Confirm(r.Context(), r.PathValue("id"), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// resumePurge finishes a confirmed purge whose drop did not finish.
func (s *Server) resumePurge(w http.ResponseWriter, r *http.Request, c caller) {
	res, err := s.AuditPurges.Resume(r.Context(), r.PathValue("id"), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// listSinks answers the sinks registered in the store, with what waits
// for each of the organization's events.
func (s *Server) listSinks(w http.ResponseWriter, r *http.Request, c caller) {
	list, err := s.AuditSinks.List(r.Context(), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sinks": list})
}

// dropSink stops exporting to a sink and deletes what waits for it.
func (s *Server) dropSink(w http.ResponseWriter, r *http.Request, c caller) {
	if err := s.AuditSinks.Drop(r.Context(), r.PathValue("name"), c.cred); err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
