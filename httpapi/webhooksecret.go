package httpapi

import (
	"net/http"

	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/signing"
)

// webhookSecretRoute answers 404 on a server that signs no callbacks.
func (s *Server) webhookSecretRoute(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, c caller) {
		if s.WebhookSecrets == nil {
			httperr.Send(w, r, httperr.NotFound, "this server signs no callbacks", "")
			return
		}
		h(w, r, c)
	})
}

// webhookSecretInfo is the answer of GET /v1/webhook-secret: when, never
// what.
type webhookSecretInfo struct {
	WebhookSecret *signing.Info `json:"webhook_secret"`
}

func (s *Server) getWebhookSecret(w http.ResponseWriter, r *http.Request, c caller) {
	info, err := s.WebhookSecrets.Info(r.Context(), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, webhookSecretInfo{WebhookSecret: info})
}

// rotatedSecret is the answer of POST /v1/webhook-secret:rotate: the one
// answer that carries the secret in clear.
type rotatedSecret struct {
	WebhookSecret signing.Info `json:"webhook_secret"`
	Secret        string       `json:"secret"`
	Message       string       `json:"message"`
}

func (s *Server) rotateWebhookSecret(w http.ResponseWriter, r *http.Request, c caller) {
	// The rotation takes no arguments; a body, if any, must be empty
	// JSON, so a client that meant something else is told.
	if r.ContentLength != 0 {
		var body struct{}
		if err := decodeBody(r, &body); err != nil {
			httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
			return
		}
	}
	rot, err := s.WebhookSecrets.Rotate(r.Context(), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, rotatedSecret{WebhookSecret: rot.Info, Secret: rot.Secret.Reveal(),
		Message: "store the secret now: it is shown only once; the previous one keeps signing until previous_valid_until"})
}
