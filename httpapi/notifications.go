package httpapi

import (
	"net/http"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/notify"
)

// notificationRoute answers 404 on a server without the notifications
// service.
func (s *Server) notificationRoute(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, c caller) {
		if s.Notifications == nil {
			httperr.Send(w, r, httperr.NotFound, "this server sends no notifications", "")
			return
		}
		h(w, r, c)
	})
}

// channelBody is the body of POST /v1/notifications/channels. Its secrets
// are plain strings, turned into secret values at once, which never
// render.
type channelBody struct {
	Name      string                  `json:"name"`
	Group     string                  `json:"group"`
	Kind      toolplane.ChannelKind   `json:"kind"`
	Config    toolplane.ChannelConfig `json:"config"`
	Secondary string                  `json:"secondary"`
	Secrets   struct {
		HMACKey  string `json:"hmac_key"`
		SlackURL string `json:"slack_url"`
		Password string `json:"password"`
		SlackBot string `json:"slack_bot_token"`
		SlackSig string `json:"slack_signing_secret"`
	} `json:"secrets"`
}

func (s *Server) createChannel(w http.ResponseWriter, r *http.Request, c caller) {
	var body channelBody
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	ch, err := s.Notifications.Create(r.Context(), notifyChannel(body), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"channel": ch})
}

func (s *Server) listChannels(w http.ResponseWriter, r *http.Request, c caller) {
	cs, err := s.Notifications.List(r.Context(), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": cs})
}

func (s *Server) getChannel(w http.ResponseWriter, r *http.Request, c caller) {
	id := r.PathValue("id")
	if s.refused(w, r, toolplane.CheckLen("channel id", id, toolplane.MaxRefLen)) {
		return
	}
	ch, err := s.Notifications.Get(r.Context(), id, c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"channel": ch})
}

func (s *Server) deleteChannel(w http.ResponseWriter, r *http.Request, c caller) {
	id := r.PathValue("id")
	if s.refused(w, r, toolplane.CheckLen("channel id", id, toolplane.MaxRefLen)) {
		return
	}
	if err := s.Notifications.Delete(r.Context(), id, c.cred); err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
}

func (s *Server) listDeadLetters(w http.ResponseWriter, r *http.Request, c caller) {
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	ds, err := s.Notifications.DeadLetters(r.Context(), limit, c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	if ds == nil {
		ds = []toolplane.NotificationDelivery{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": ds})
}

// notifyChannel answers the channel a request body asks for.
func notifyChannel(b channelBody) notify.NewChannel {
	return notify.NewChannel{Name: b.Name, Group: b.Group, Kind: b.Kind, Config: b.Config, Secondary: b.Secondary,
		Secrets: toolplane.ChannelSecrets{HMACKey: toolplane.SecretString(b.Secrets.HMACKey),
			SlackURL: toolplane.SecretString(b.Secrets.SlackURL), Password: toolplane.SecretString(b.Secrets.Password),
			SlackBotToken: toolplane.SecretString(b.Secrets.SlackBot), SlackSigningSecret: toolplane.SecretString(b.Secrets.SlackSig)}}
}
