package authserver

import (
	_ "embed"
	"errors"
	"html/template"
	"net/http"

	"github.com/toolplane/toolplane/signin"
)

//go:embed connected.html
var connectedPage string

var connected = template.Must(template.New("connected").Parse(connectedPage))

// connectedView is the page of a person's connected clients.
type connectedView struct {
	Assets   string
	Action   string
	CSRF     string
	Person   string
	Message  string
	Consents []ConsentView
}

// connectedClients answers GET /oauth/consents: the signed-in person's
// consents, each standing one with a button that revokes it.
func (s *Server) connectedClients(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.signedIn(w, r)
	if !ok {
		return
	}
	s.renderConnected(w, r, sess, "")
}

func (s *Server) renderConnected(w http.ResponseWriter, r *http.Request, sess *signin.Session, message string) {
	list, err := s.Consents(r.Context(), sess.Credential, "")
	if err != nil {
		s.log.ErrorContext(r.Context(), "consents not read", "err", err)
		s.render(w, http.StatusServiceUnavailable, consentView{Title: "Try again", Message: "Your connected clients cannot be read now."})
		return
	}
	standing := list[:0]
	for _, c := range list {
		if c.RevokedAt == nil && c.ExpiresAt.After(s.cfg.Now()) {
			standing = append(standing, c)
		}
	}
	v := connectedView{Assets: s.base.Path + signin.Path + "/assets", Action: s.base.Path + Path + "/consents/revoke", CSRF: sess.CSRF,
		Person: sess.Credential.Subject, Message: message, Consents: standing}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := connected.Execute(w, v); err != nil {
		s.log.Warn("connected clients page not rendered", "err", err)
	}
}

// revokeConnected answers the page's POST: the consent named is revoked.
func (s *Server) revokeConnected(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
	sess, ok := s.signedIn(w, r)
	if !ok {
		return
	}
	if err := s.cfg.People.CheckForm(r, sess); err != nil {
		s.render(w, http.StatusForbidden, consentView{Title: "Not revoked", Message: "This form did not come from this server's own page."})
		return
	}
	message := "Revoked: the client's next call is refused."
	if err := s.RevokeConsent(r.Context(), sess.Credential, r.PostFormValue("id")); err != nil {
		message = "That consent could not be revoked; it may be gone already."
	}
	s.renderConnected(w, r, sess, message)
}

// signedIn answers the session on r, or sends the browser to sign in.
func (s *Server) signedIn(w http.ResponseWriter, r *http.Request) (*signin.Session, bool) {
	sess, err := s.cfg.People.Session(r)
	switch {
	case errors.Is(err, signin.ErrNotSignedIn):
		http.Redirect(w, r, s.cfg.People.SignInURL(s.base.Path+Path+"/consents"), http.StatusSeeOther)
		return nil, false
	case err != nil:
		s.log.ErrorContext(r.Context(), "session not read", "err", err)
		s.render(w, http.StatusServiceUnavailable, consentView{Title: "Try again", Message: "Who is signed in cannot be read now."})
		return nil, false
	}
	return sess, true
}
