package httpapi

import (
	"net/http"

	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/runs"
)

// getRun answers GET /v1/runs/{id}: one run of the caller's organization
// (its calls in order, approvals, uncertain actions, policy decisions and
// spend), to an auditor. Another organization's run is not found, as a
// missing one is.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request, c caller) {
	run, err := runs.New(s.Store).Get(r.Context(), r.PathValue("id"), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}
