package httpapi

import (
	"net/http"

	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/upstream"
)

// upstreamRoute answers 404 on a server without upstream settings (no
// upstreams configured, or no store to keep them).
func (s *Server) upstreamRoute(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, c caller) {
		if s.UpstreamSettings == nil {
			httperr.Send(w, r, httperr.NotFound, "this server serves no upstream MCP servers", "")
			return
		}
		h(w, r, c)
	})
}

// listUpstreams answers the upstream MCP servers the deployment fronts, to
// its operator.
func (s *Server) listUpstreams(w http.ResponseWriter, r *http.Request, c caller) {
	ups, err := s.UpstreamSettings.List(c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": ups})
}

func (s *Server) getUpstreamSettings(w http.ResponseWriter, r *http.Request, c caller) {
	st, err := s.UpstreamSettings.Get(r.Context(), c.cred, r.PathValue("slug"), r.PathValue("tool"))
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// putUpstreamSettings stores the tool's settings: the fields of the
// upstreams file's relaxation, replacing the file's for this tool.
func (s *Server) putUpstreamSettings(w http.ResponseWriter, r *http.Request, c caller) {
	var body upstream.Relax
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	st, err := s.UpstreamSettings.Put(r.Context(), c.cred, r.PathValue("slug"), r.PathValue("tool"), body)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) resetUpstreamSettings(w http.ResponseWriter, r *http.Request, c caller) {
	st, err := s.UpstreamSettings.Reset(r.Context(), c.cred, r.PathValue("slug"), r.PathValue("tool"))
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
