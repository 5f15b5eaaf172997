package signin

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httperr"
)

//go:embed assets
var assets embed.FS

var page = template.Must(template.ParseFS(assets, "assets/page.html"))

// view is what the page shows.
type view struct {
	Title, Message string
	Assets         string
	// Session, when set, is the person signed in, with the sign-out form
	// posting to Out.
	Session *Session
	Out     string
	// Home links the signed-in page to where people go next (the
	// console), when the server serves one.
	Home string
	// SignIn shows the ways to sign in: the provider's link, the key
	// form.
	SignIn   bool
	Provider string
	KeyForm  *keyForm
}

type keyForm struct {
	Action, CSRF, Return string
}

// Handler answers the sign-in routes: the page (GET /signin), the
// provider's start and callback, the key form's POST, sign-out, and the
// page's stylesheet. Like the API's, they are served at /signin and
// reached at the public URL's path: a proxy serving the server under a
// path strips it, and the links, cookies and redirects the pages make
// name it.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path, s.index)
	mux.HandleFunc("GET "+Path+"/start", s.start)
	mux.HandleFunc("GET "+Path+"/callback", s.callback)
	mux.HandleFunc("POST "+Path+"/key", s.key)
	mux.HandleFunc("POST "+Path+"/out", s.out)
	sub, _ := fs.Sub(assets, "assets")
	mux.Handle("GET "+Path+"/assets/signin.css", http.StripPrefix(Path+"/assets/", http.FileServerFS(sub)))
	return pageHeaders(mux)
}

// pageHeaders sets what every sign-in answer carries: nobody caches it,
// no other site frames it, and it runs no script at all.
func pageHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Cache-Control", "no-store")
		hd.Set("Content-Security-Policy", CSP)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		// same-origin, not no-referrer: a browser told no-referrer sends
		// "Origin: null" with a form's POST, which the origin check must
		// refuse.
		hd.Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// CSP is the Content-Security-Policy of every sign-in page: no script,
// the stylesheet from the server itself, forms posting only to it, and
// no framing. A console built on sign-in serves its pages under the same.
const CSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (s *Service) render(w http.ResponseWriter, status int, v view) {
	v.Assets = s.path(Path + "/assets")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := page.Execute(w, v); err != nil {
		s.log.Warn("sign-in page not rendered", "err", err)
	}
}

func (s *Service) index(w http.ResponseWriter, r *http.Request) {
	back := s.returnPath(r.URL.Query().Get("return"))
	sess, err := s.Session(r)
	switch {
	case err == nil && r.URL.Query().Has("return"):
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	case err == nil:
		v := view{Title: "Signed in", Session: sess, Out: s.path(Path + "/out")}
		if s.cfg.Home != "" {
			v.Home = s.home()
		}
		s.render(w, http.StatusOK, v)
		return
	case !errors.Is(err, ErrNotSignedIn):
		s.fail(w, r, err)
		return
	}
	s.signInPage(w, r, http.StatusOK, "", back)
}

// signInPage shows the ways to sign in, going back to back after.
func (s *Service) signInPage(w http.ResponseWriter, r *http.Request, status int, message, back string) {
	v := view{Title: "Sign in", Message: message, SignIn: true}
	if s.cfg.OIDC != nil {
		v.Provider = s.path(Path+"/start") + "?return=" + url.QueryEscape(back)
	}
	if s.cfg.Gate != nil {
		// The key form's CSRF token is a cookie's double: a page of
		// another site can neither read the cookie nor set the field.
		token := rand.Text()
		http.SetCookie(w, &http.Cookie{Name: formCookie, Value: token, Path: s.path(Path), MaxAge: int(pendingTTL.Seconds()),
			HttpOnly: true, Secure: s.secure(), SameSite: http.SameSiteStrictMode})
		v.KeyForm = &keyForm{Action: s.path(Path + "/key"), CSRF: token, Return: back}
	}
	if v.Provider == "" && v.KeyForm == nil {
		v.Message = "This server offers no way to sign in."
	}
	s.render(w, status, v)
}

func (s *Service) start(w http.ResponseWriter, r *http.Request) {
	back := s.returnPath(r.URL.Query().Get("return"))
	if s.cfg.OIDC == nil {
		s.signInPage(w, r, http.StatusNotFound, "This server signs nobody in through a provider.", back)
		return
	}
	link, browser, err := s.startOIDC(r.Context(), back)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: pendingCookie, Value: browser, Path: s.path(Path), MaxAge: int(pendingTTL.Seconds()),
		HttpOnly: true, Secure: s.secure(), SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, link, http.StatusFound)
}

func (s *Service) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if s.cfg.OIDC == nil {
		s.signInPage(w, r, http.StatusNotFound, "This server signs nobody in through a provider.", s.returnPath(""))
		return
	}
	if e := q.Get("error"); e != "" {
		s.signInPage(w, r, http.StatusBadRequest, "The provider did not sign you in: "+bound(e), s.returnPath(""))
		return
	}
	state := q.Get("state")
	c, err := r.Cookie(pendingCookie)
	if state == "" || len(state) > toolplane.MaxRefLen || err != nil || c.Value == "" {
		// Refused before the state is taken: the browser that started
		// the sign-in may still complete it.
		s.signInPage(w, r, http.StatusBadRequest, "This browser did not start this sign-in (or it took too long); sign in again.", s.returnPath(""))
		return
	}
	s.clear(w, pendingCookie, s.path(Path))
	cred, back, err := s.finishOIDC(r.Context(), state, q.Get("code"), c.Value)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.newSession(w, r, cred, toolplane.SignInOIDC, cred.Roles, time.Time{}); err != nil {
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, s.returnPath(back), http.StatusSeeOther)
}

func (s *Service) key(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	back := s.returnPath(r.PostFormValue("return"))
	c, err := r.Cookie(formCookie)
	got := r.PostFormValue(CSRFField)
	if s.cop.Check(r) != nil || err != nil || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(c.Value)) != 1 {
		s.render(w, http.StatusForbidden, view{Title: "Not signed in", Message: "This form did not come from this server's sign-in page; open the page again."})
		return
	}
	if s.cfg.Gate == nil {
		s.signInPage(w, r, http.StatusNotFound, "This server takes no keys at sign-in.", back)
		return
	}
	key := strings.TrimSpace(r.PostFormValue("key"))
	if !strings.HasPrefix(key, apikey.Prefix) {
		// A bearer JWT would outlive nothing: a session must not outlast
		// what it was made from, and a token's end is not kept.
		s.signInPage(w, r, http.StatusUnauthorized, "That is not a toolplane API key.", back)
		return
	}
	caller, err := s.cfg.Gate.Authenticate(r.Context(), "Bearer "+key, s.cfg.Gate.ClientAddr(r), w.Header())
	var refused *door.Refusal
	switch {
	case errors.As(err, &refused) && refused.Kind == door.RateLimited:
		s.signInPage(w, r, http.StatusTooManyRequests, refused.Error(), back)
		return
	case errors.As(err, &refused) && refused.Kind == door.Unauthenticated:
		s.signInPage(w, r, http.StatusUnauthorized, "The API key is not valid.", back)
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	cred := caller.Credential
	if cred.Kind != toolplane.CredentialPerson {
		s.signInPage(w, r, http.StatusForbidden, "That key is an agent's; a person signs in with their own key.", back)
		return
	}
	s.clear(w, formCookie, s.path(Path))
	if err := s.newSession(w, r, cred, toolplane.SignInAPIKey, nil, cred.ExpiresAt); err != nil {
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

func (s *Service) out(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	// Another site's form arrives without the session's cookie (it is
	// SameSite), so it looks signed out; the origin is checked first, or
	// answering it would clear the cookie and sign the person out.
	if s.cop.Check(r) != nil {
		s.render(w, http.StatusForbidden, view{Title: "Not signed out", Message: "The sign-out did not come from this server's own page; sign out from it."})
		return
	}
	sess, err := s.Session(r)
	switch {
	case errors.Is(err, ErrNotSignedIn):
		s.clear(w, sessionCookie, s.path("/"))
		s.signInPage(w, r, http.StatusOK, "You are signed out.", s.returnPath(""))
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	if err := s.CheckForm(r, sess); err != nil {
		s.render(w, http.StatusForbidden, view{Title: "Still signed in", Message: "The sign-out did not come from this server's own page; sign out from it."})
		return
	}
	end := s.SignOut
	if r.PostFormValue("everywhere") != "" {
		end = s.SignOutEverywhere
	}
	if err := end(w, r, sess); err != nil {
		s.fail(w, r, err)
		return
	}
	s.signInPage(w, r, http.StatusOK, "You are signed out.", s.returnPath(""))
}

// fail answers err as a page: the person's own mistake (a request not
// valid, ErrState among them, or a credential that is not) in its words at
// its status from httperr's table, anything else as the server's fault,
// logged and named by nothing of its cause.
func (s *Service) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch p, ok := httperr.Classify(err); {
	case ok && (p.Code == httperr.InvalidRequest || p.Code == httperr.Unauthenticated):
		s.signInPage(w, r, p.Code.Status(), bound(err.Error()), s.returnPath(""))
	default:
		s.log.ErrorContext(r.Context(), "sign-in failed", "path", r.URL.Path, "err", err)
		s.render(w, http.StatusInternalServerError, view{Title: "Not signed in", Message: "Signing in failed on the server. Try again later."})
	}
}

// bound keeps text a page quotes (a provider's error, a refusal) to a
// line of printable characters, cut at a rune.
func bound(s string) string {
	const max = 300
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, s)
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
