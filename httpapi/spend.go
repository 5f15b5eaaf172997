package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/spend"
)

// spendRoute answers 404 on a server without the spend service.
func (s *Server) spendRoute(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, c caller) {
		if s.Spend == nil {
			httperr.Send(w, r, httperr.NotFound, "this server keeps no spend reports", "")
			return
		}
		h(w, r, c)
	})
}

// spendFail answers a spend operation's failure: a request out of form at
// the field at fault, anything else by its kind.
func (s *Server) spendFail(w http.ResponseWriter, r *http.Request, err error) {
	var invalid *spend.InvalidError
	if errors.As(err, &invalid) {
		httperr.Send(w, r, httperr.InvalidRequest, invalid.Error(), invalid.Field)
		return
	}
	httperr.Fail(w, r, s.Log, err)
}

// spendReport answers GET /v1/spend?from=&to=&by=agent|tool|day.
func (s *Server) spendReport(w http.ResponseWriter, r *http.Request, c caller) {
	q := spend.Query{By: toolplane.SpendBy(r.URL.Query().Get("by"))}
	for _, f := range []struct {
		name string
		at   *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		v := r.URL.Query().Get(f.name)
		if v == "" {
			continue
		}
		t, err := parseSpendTime(v)
		if err != nil {
			httperr.Send(w, r, httperr.InvalidRequest, f.name+" must be an RFC 3339 time or a date (YYYY-MM-DD, midnight UTC)", f.name)
			return
		}
		*f.at = t
	}
	rep, err := s.Spend.Report(r.Context(), c.cred, q)
	if err != nil {
		s.spendFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// parseSpendTime reads an RFC 3339 time, or a date as midnight UTC.
func parseSpendTime(v string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339Nano, v)
}

func (s *Server) getSpendCeiling(w http.ResponseWriter, r *http.Request, c caller) {
	st, err := s.Spend.Ceiling(r.Context(), c.cred)
	if err != nil {
		s.spendFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) putSpendCeiling(w http.ResponseWriter, r *http.Request, c caller) {
	var body struct {
		DailyCents int64 `json:"daily_cents"`
	}
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	st, err := s.Spend.SetCeiling(r.Context(), c.cred, body.DailyCents)
	if err != nil {
		s.spendFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) deleteSpendCeiling(w http.ResponseWriter, r *http.Request, c caller) {
	if err := s.Spend.DeleteCeiling(r.Context(), c.cred); err != nil {
		s.spendFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true})
}
