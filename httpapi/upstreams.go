package httpapi

import (
	"errors"
	"net/http"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/upstream"
)

// upstreamRoute answers 404 on a server without upstream settings (no
// upstreams configured, or no store to keep them).
func (s *Server) upstreamRoute(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, c caller) {
		if s.UpstreamSettings == nil {
			s.fail(w, r, http.StatusNotFound, "not_found", "this server serves no upstream MCP servers", "")
			return
		}
		h(w, r, c)
	})
}

// upstreamFail answers an error of the upstream settings service.
func (s *Server) upstreamFail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, upstream.ErrForbidden):
		s.fail(w, r, http.StatusForbidden, "denied", err.Error(), "")
	case errors.Is(err, upstream.ErrConfig):
		s.fail(w, r, http.StatusBadRequest, "invalid_request", err.Error(), "")
	case errors.Is(err, toolplane.ErrNotFound):
		s.fail(w, r, http.StatusNotFound, "not_found", err.Error(), "")
	default:
		s.Log.ErrorContext(r.Context(), "upstream settings operation failed", "err", err)
		s.fail(w, r, http.StatusInternalServerError, "internal_error", "the operation could not be completed", "")
	}
}

func (s *Server) getUpstreamSettings(w http.ResponseWriter, r *http.Request, c caller) {
	st, err := s.UpstreamSettings.Get(r.Context(), c.cred, r.PathValue("slug"), r.PathValue("tool"))
	if err != nil {
		s.upstreamFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// putUpstreamSettings stores the tool's settings: the fields of the
// upstreams file's relaxation, replacing the file's for this tool.
func (s *Server) putUpstreamSettings(w http.ResponseWriter, r *http.Request, c caller) {
	var body upstream.Relax
	if err := decodeBody(r, &body); err != nil {
		s.fail(w, r, http.StatusBadRequest, "invalid_request", err.Error(), "")
		return
	}
	st, err := s.UpstreamSettings.Put(r.Context(), c.cred, r.PathValue("slug"), r.PathValue("tool"), body)
	if err != nil {
		s.upstreamFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) resetUpstreamSettings(w http.ResponseWriter, r *http.Request, c caller) {
	st, err := s.UpstreamSettings.Reset(r.Context(), c.cred, r.PathValue("slug"), r.PathValue("tool"))
	if err != nil {
		s.upstreamFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
