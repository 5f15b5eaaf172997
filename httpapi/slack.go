package httpapi

import (
	"net/http"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/httperr"
)

// slackRoute answers 404 on a server without Slack's links.
func (s *Server) slackRoute(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, c caller) {
		if s.Slack == nil {
			httperr.Send(w, r, httperr.NotFound, "this server decides nothing from Slack", "")
			return
		}
		h(w, r, c)
	})
}

func (s *Server) linkSlack(w http.ResponseWriter, r *http.Request, c caller) {
	var body struct {
		Code string `json:"code"`
	}
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	l, err := s.Slack.Link(r.Context(), body.Code, c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"link": l})
}

func (s *Server) listSlackLinks(w http.ResponseWriter, r *http.Request, c caller) {
	ls, err := s.Slack.Links(r.Context(), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": ls})
}

func (s *Server) unlinkSlack(w http.ResponseWriter, r *http.Request, c caller) {
	team, user := r.PathValue("team"), r.PathValue("user")
	if s.refused(w, r, toolplane.CheckLen("team", team, toolplane.MaxRefLen)) || s.refused(w, r, toolplane.CheckLen("user", user, toolplane.MaxRefLen)) {
		return
	}
	if err := s.Slack.Unlink(r.Context(), team, user, c.cred); err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true})
}
