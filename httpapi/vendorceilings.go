package httpapi

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/ceiling"
	"github.com/toolplane/toolplane/httperr"
)

// vendorCeilingRoute answers 404 on a server without the vendor ceilings
// service.
func (s *Server) vendorCeilingRoute(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, c caller) {
		if s.VendorCeilings == nil {
			httperr.Send(w, r, httperr.NotFound, "this server keeps no vendor ceilings", "")
			return
		}
		h(w, r, c)
	})
}

// vendorCeilingFail answers a ceiling operation's failure: a ceiling out
// of form at the field at fault, one whose arithmetic exceeds its account
// limit with every lane's product named, anything else by its kind.
func (s *Server) vendorCeilingFail(w http.ResponseWriter, r *http.Request, err error) {
	var invalid *ceiling.InvalidError
	if errors.As(err, &invalid) {
		httperr.Send(w, r, httperr.InvalidRequest, invalid.Error(), invalid.Field)
		return
	}
	httperr.Fail(w, r, s.Log, err)
}

// vendorCeilingAnswer is a ceiling as the API shows it: the record, its
// arithmetic, and what the administrator should know of it.
func vendorCeilingAnswer(v *ceiling.View) map[string]any {
	answer := map[string]any{"vendor_ceiling": v}
	if warn := ceiling.Warnings(v.Arithmetic); len(warn) > 0 {
		answer["warnings"] = warn
	}
	return answer
}

func (s *Server) listVendorCeilings(w http.ResponseWriter, r *http.Request, c caller) {
	vs, err := s.VendorCeilings.List(r.Context(), c.cred)
	if err != nil {
		s.vendorCeilingFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": vs})
}

func (s *Server) getVendorCeiling(w http.ResponseWriter, r *http.Request, c caller) {
	provider := r.PathValue("provider")
	if s.refused(w, r, toolplane.CheckLen("provider", provider, toolplane.MaxRefLen)) {
		return
	}
	v, err := s.VendorCeilings.Get(r.Context(), c.cred, provider)
	if err != nil {
		s.vendorCeilingFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, vendorCeilingAnswer(v))
}

func (s *Server) putVendorCeiling(w http.ResponseWriter, r *http.Request, c caller) {
	provider := r.PathValue("provider")
	if s.refused(w, r, toolplane.CheckLen("provider", provider, toolplane.MaxRefLen)) {
		return
	}
	var body ceiling.Input
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	v, err := s.VendorCeilings.Set(r.Context(), c.cred, provider, body)
	if err != nil {
		s.vendorCeilingFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, vendorCeilingAnswer(v))
}

func (s *Server) deleteVendorCeiling(w http.ResponseWriter, r *http.Request, c caller) {
	provider := r.PathValue("provider")
	if s.refused(w, r, toolplane.CheckLen("provider", provider, toolplane.MaxRefLen)) {
		return
	}
	var version int64
	if v := r.URL.Query().Get("version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			httperr.Send(w, r, httperr.InvalidRequest, "version must be a positive integer", "version")
			return
		}
		version = n
	}
	if err := s.VendorCeilings.Delete(r.Context(), c.cred, provider, version); err != nil {
		s.vendorCeilingFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"provider": provider, "deleted": true})
}
