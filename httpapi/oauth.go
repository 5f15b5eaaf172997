package httpapi

import (
	"context"
	"net/http"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authserver"
	"github.com/toolplane/toolplane/httperr"
)

// OAuthAdmin is the authorization server's administration
// (*authserver.Server): its clients, people's consents, its signing key.
// Each method authorizes the caller itself.
type OAuthAdmin interface {
	Clients(ctx context.Context, by *toolplane.Credential) ([]authserver.ClientView, error)
	RevokeClient(ctx context.Context, by *toolplane.Credential, clientID string) (int, error)
	SetClientAgent(ctx context.Context, by *toolplane.Credential, clientID, agent string) error
	Consents(ctx context.Context, by *toolplane.Credential, subject string) ([]authserver.ConsentView, error)
	RevokeConsent(ctx context.Context, by *toolplane.Credential, id string) error
	RotateSigningKey(ctx context.Context, by *toolplane.Credential) (string, error)
}

// authServerRoute answers 404 on a server without an authorization server.
func (s *Server) authServerRoute(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, c caller) {
		if s.OAuth == nil {
			httperr.Send(w, r, httperr.NotFound, "this server runs no OAuth authorization server", "")
			return
		}
		h(w, r, c)
	})
}

func (s *Server) listOAuthClients(w http.ResponseWriter, r *http.Request, c caller) {
	list, err := s.OAuth.Clients(r.Context(), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"clients": list})
}

// clientRequest names a client in a body: client ids are URLs, which a
// path cannot carry.
type clientRequest struct {
	ClientID string `json:"client_id"`
	AgentID  string `json:"agent_id"`
}

func (s *Server) clientBody(w http.ResponseWriter, r *http.Request) (clientRequest, bool) {
	var body clientRequest
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return body, false
	}
	if body.ClientID == "" {
		httperr.Send(w, r, httperr.InvalidRequest, "client_id is required", "client_id")
		return body, false
	}
	return body, true
}

func (s *Server) revokeOAuthClient(w http.ResponseWriter, r *http.Request, c caller) {
	body, ok := s.clientBody(w, r)
	if !ok {
		return
	}
	n, err := s.OAuth.RevokeClient(r.Context(), c.cred, body.ClientID)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"client_id": body.ClientID, "consents_revoked": n})
}

func (s *Server) setOAuthClientAgent(w http.ResponseWriter, r *http.Request, c caller) {
	body, ok := s.clientBody(w, r)
	if !ok {
		return
	}
	if err := s.OAuth.SetClientAgent(r.Context(), c.cred, body.ClientID, body.AgentID); err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"client_id": body.ClientID, "agent_id": body.AgentID})
}

func (s *Server) listOAuthConsents(w http.ResponseWriter, r *http.Request, c caller) {
	list, err := s.OAuth.Consents(r.Context(), c.cred, r.URL.Query().Get("subject"))
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"consents": list})
}

func (s *Server) revokeOAuthConsent(w http.ResponseWriter, r *http.Request, c caller) {
	if err := s.OAuth.RevokeConsent(r.Context(), c.cred, r.PathValue("id")); err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": r.PathValue("id"), "revoked": true})
}

func (s *Server) rotateOAuthKey(w http.ResponseWriter, r *http.Request, c caller) {
	id, err := s.OAuth.RotateSigningKey(r.Context(), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"key_id": id})
}
