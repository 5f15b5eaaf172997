package httpapi

import (
	"net/http"

	"github.com/toolplane/toolplane/httperr"
)

// listUnsettledJobs answers the caller's organization's provider jobs
// their vendor ended and whose cost is not yet counted (a meter outage
// the settlement is still retrying, or gave up to the sweep).
func (s *Server) listUnsettledJobs(w http.ResponseWriter, r *http.Request, c caller) {
	if s.ProviderJobs == nil {
		httperr.Send(w, r, httperr.NotFound, "this server runs no provider jobs", "")
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	js, err := s.ProviderJobs.ListUnsettled(r.Context(), c.cred, limit)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	items := make([]map[string]any, len(js))
	for i, j := range js {
		items[i] = map[string]any{"job_id": j.ID, "provider": j.Provider, "provider_job_id": j.ProviderJobID, "state": j.State,
			"tool": j.Tool, "run_id": j.RunID, "root_run_id": j.RootRunID, "cost_cents": j.CostCents, "units": j.Units, "ended_at": j.TerminalAt}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}
