package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/httperr"
)

// The search routes sit beside GET /v1/tools/{name}. The mux prefers the
// literal /v1/tools/search to the pattern, so the search always answers
// there; no tool is shadowed by it, since a platform name is always
// namespace.verb (a dot in it) and "search" has none.

// searchTools answers GET /v1/tools/search: the tools the key may call
// that best match the query (door.Door.Search). What the key may not call
// is never a candidate, so nothing of it shows in the matches, the total
// or the answer's timing.
func (s *Server) searchTools(w http.ResponseWriter, r *http.Request, c caller) {
	q, field, err := searchQuery(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), field)
		return
	}
	res, err := s.Door.Search(r.Context(), c.cred, r.URL.Query().Get("tenant_id"), q)
	if err != nil {
		s.answerShownError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// searchQuery reads a search's query parameters; field names the one at
// fault when the query cannot be read. The values themselves (an effect,
// a state, a version range, how many tags) are judged by the search,
// which says which one it refuses.
func searchQuery(r *http.Request) (q discovery.Query, field string, err error) {
	v := r.URL.Query()
	q = discovery.Query{Text: v.Get("q"), Tags: v["tag"], Effect: toolplane.Effect(v.Get("effect")), Owner: v.Get("owner"),
		State: toolplane.VersionState(v.Get("state")), Versions: v.Get("version"), Classification: v.Get("classification")}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > discovery.MaxLimit {
			return q, "limit", fmt.Errorf("limit %q: give a whole number from 1 to %d", clipParam(l), discovery.MaxLimit)
		}
		q.Limit = n
	}
	return q, "", nil
}

// toolDependencies answers GET /v1/tools/{name}/dependencies: the graph
// around a tool the key may call, walked through those it may call only.
// A tool the key may not call answers exactly as one that does not exist.
func (s *Server) toolDependencies(w http.ResponseWriter, r *http.Request, c caller) {
	name := r.PathValue("name")
	g, err := s.Door.Dependencies(r.Context(), c.cred, r.URL.Query().Get("tenant_id"), name)
	if errors.Is(err, toolplane.ErrNotFound) {
		// The words getTool answers a tool it does not show with, the
		// same whether the tool exists or not.
		httperr.Send(w, r, httperr.NotFound, "no tool named "+name, "")
		return
	}
	if err != nil {
		s.answerShownError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

// answerShownError answers an error of a read over what a key is shown:
// a refusal of the request in its own words, and anything else as the
// grants not being readable (a store that does not answer), as listing
// the tools answers it.
func (s *Server) answerShownError(w http.ResponseWriter, r *http.Request, err error) {
	if _, ok := httperr.Classify(err); ok {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	s.Log.ErrorContext(r.Context(), "grants could not be read", "err", err)
	httperr.Send(w, r, httperr.Unavailable, "grants cannot be read right now", "")
}

// clipParam bounds a parameter an error quotes back.
func clipParam(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
