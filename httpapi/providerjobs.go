package httpapi

import (
	"net/http"
	"time"

	"github.com/toolplane/toolplane"
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
	for i := range js {
		items[i] = jobView(&js[i])
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

// jobView is how the API shows a provider job: never its result, which
// its collect tool answers within the call's bounds.
func jobView(j *toolplane.ProviderJob) map[string]any {
	v := map[string]any{"job_id": j.ID, "provider": j.Provider, "provider_job_id": j.ProviderJobID, "state": j.State,
		"tool": j.Tool, "run_id": j.RunID, "root_run_id": j.RootRunID, "cost_cents": j.CostCents, "units": j.Units,
		"settled": j.UsageID != "", "created_at": j.CreatedAt}
	if !j.TerminalAt.IsZero() {
		v["ended_at"] = j.TerminalAt
	}
	return v
}

// getProviderJob answers one of the organization's provider jobs, or with
// ?wait=30s (at most 60 s) once it ended or the wait ran out: a job whose
// vendor called back before the wait began ends it at once.
func (s *Server) getProviderJob(w http.ResponseWriter, r *http.Request, c caller) {
	if s.ProviderJobs == nil {
		httperr.Send(w, r, httperr.NotFound, "this server runs no provider jobs", "")
		return
	}
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > maxWait {
			httperr.Send(w, r, httperr.InvalidRequest, "wait is a duration from 0s to 60s, such as 30s", "wait")
			return
		}
		wait = d
	}
	j, err := s.ProviderJobs.Watch(r.Context(), c.cred, r.PathValue("id"), wait)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, jobView(j))
}
