package httpapi

import (
	"net/http"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/httperr"
)

// anomalyRoute answers 404 on a server without the anomaly triage (off).
func (s *Server) anomalyRoute(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, c caller) {
		if s.Anomalies == nil {
			httperr.Send(w, r, httperr.NotFound, "this server runs no anomaly triage", "")
			return
		}
		h(w, r, c)
	})
}

// listAnomalies answers the organization's triage items, newest first,
// filtered by status (open, acknowledged; none: every item), a page after
// the cursor.
func (s *Server) listAnomalies(w http.ResponseWriter, r *http.Request, c caller) {
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	q := r.URL.Query()
	items, next, err := s.Anomalies.List(r.Context(), toolplane.AnomalyStatus(q.Get("status")), q.Get("cursor"), limit, c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	if items == nil {
		items = []toolplane.Anomaly{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

// getAnomaly answers one of the organization's triage items.
func (s *Server) getAnomaly(w http.ResponseWriter, r *http.Request, c caller) {
	a, err := s.Anomalies.Get(r.Context(), r.PathValue("id"), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// acknowledgeAnomaly marks an item acknowledged by the caller and answers
// it; an item acknowledged already is answered as it stands.
func (s *Server) acknowledgeAnomaly(w http.ResponseWriter, r *http.Request, c caller) {
	a, err := s.Anomalies.Acknowledge(r.Context(), r.PathValue("id"), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}
