// Package signin signs people in to browser sessions: through the
// deployment's OpenID provider (authorization code with PKCE and a nonce,
// the ID token verified), or with their own API key pasted once into a
// form. A session is a random token in an HttpOnly cookie; the store keeps
// only the token's hash, with the person it stands for, and ends it when
// idle, at its absolute end, at sign-out, or (for a key's session) as soon
// as the key is revoked or expires.
//
// Pages that act for a signed-in person (the consent start of connections,
// a console) ask Session who is signed in, send the browser to SignInURL
// when nobody is, and check CheckForm on every state-changing POST: the
// request must come from the server's own origin and carry the session's
// CSRF token, which is derived from the session's secret token and so
// cannot be learned from the store or guessed by another site.
//
// The REST API never reads these cookies (it takes bearer credentials
// only), so a cookie sent along with a cross-site request to /v1 grants
// nothing there.
package signin

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/secret"
)

// ErrNotSignedIn: the request carries no session, or one that ended.
var ErrNotSignedIn = fmt.Errorf("not signed in: %w", toolplane.ErrUnauthenticated)

// ErrForged: a state-changing request did not come from this server's own
// pages (another origin, or no CSRF token of the session).
var ErrForged = fmt.Errorf("the request did not come from this server's own page: %w", toolplane.ErrForbidden)

// The defaults of a zero Config field.
const (
	// DefaultIdleTimeout ends a session nobody used for this long.
	DefaultIdleTimeout = 30 * time.Minute
	// DefaultMaxAge ends a session this long after sign-in, used or not.
	DefaultMaxAge = 12 * time.Hour
	// pendingTTL bounds a sign-in at the provider.
	pendingTTL = 10 * time.Minute
)

// Store is what sign-in keeps: sessions, the pending sign-ins at the
// provider (single-use, expiring states, as connections' authorizations
// keep theirs), and the credentials a pasted key is checked against.
type Store interface {
	toolplane.BrowserSessionStore
	InsertOAuthState(ctx context.Context, s *toolplane.OAuthState) error
	TakeOAuthState(ctx context.Context, id string, now time.Time) (*toolplane.OAuthState, error)
	apikey.Getter
}

// Gate authenticates a pasted key exactly as every door authenticates a
// bearer token (*door.Door): the same failure budgets, the same cache.
type Gate interface {
	Authenticate(ctx context.Context, authorization, client string, h http.Header) (door.Caller, error)
	// ClientAddr answers the client address a request's failures are
	// counted under, as the doors count them.
	ClientAddr(r *http.Request) string
}

// Config is what a Service is built from.
type Config struct {
	Store Store
	// Keys seal a pending sign-in's PKCE verifier and nonce at rest.
	Keys *secret.Keyring
	// Gate checks pasted keys; without it only the provider signs people
	// in.
	Gate Gate
	// PublicURL is where people reach the server (http://127.0.0.1:8080,
	// https://tp.example/toolplane): the routes, cookie paths and the
	// origin state-changing requests must come from are under it. Cookies
	// are Secure when it is https.
	PublicURL string
	// OIDC, when set, signs people in through the provider.
	OIDC *OIDC
	// Home is the path (under PublicURL's) a sign-in goes to when it
	// names no page to return to, and the signed-in page links to: the
	// console's, where one is served. Empty: the sign-in page itself.
	Home string
	// IdleTimeout and MaxAge end sessions; zero takes DefaultIdleTimeout
	// and DefaultMaxAge.
	IdleTimeout, MaxAge time.Duration
	Now                 func() time.Time
	Logger              *slog.Logger
}

// Service signs people in and answers who is signed in.
type Service struct {
	cfg    Config
	log    *slog.Logger
	base   *url.URL
	origin string
	cop    *http.CrossOriginProtection

	rpMu sync.Mutex
	rp   *relyingParty
}

// New answers the service cfg describes.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Keys == nil {
		return nil, errors.New("signin: Store and Keys are required")
	}
	base, err := url.Parse(cfg.PublicURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("signin: public URL %q is not an http(s) URL", cfg.PublicURL)
	}
	base.Path = strings.TrimSuffix(base.Path, "/")
	base.RawQuery, base.Fragment = "", ""
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OIDC != nil {
		if err := cfg.OIDC.check(); err != nil {
			return nil, err
		}
	}
	origin := base.Scheme + "://" + base.Host
	cop := http.NewCrossOriginProtection()
	// Behind a proxy the Host the server sees may not be the public one.
	if err := cop.AddTrustedOrigin(origin); err != nil {
		return nil, fmt.Errorf("signin: %w", err)
	}
	return &Service{cfg: cfg, log: cfg.Logger, base: base, origin: origin, cop: cop}, nil
}

func (s *Service) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

// Session is a signed-in person as a page sees them.
type Session struct {
	// ID names the session; it opens nothing.
	ID string
	// Credential is the person: their organization, subject and roles, as
	// a service authorizes them.
	Credential *toolplane.Credential
	// Method is how they signed in (toolplane.SignInOIDC or SignInAPIKey).
	Method string
	// CSRF is the token every state-changing form of the session carries
	// (field CSRFField).
	CSRF string
	// SignedInAt is when the person signed in (the session's start): for
	// the OpenID provider's sign-in, the time the roles Credential holds
	// were read.
	SignedInAt time.Time
	ExpiresAt  time.Time
}

// CSRFField is the form field of the CSRF token.
const CSRFField = "csrf"

// The cookies. The session's reaches every page under the public URL's
// path (the sign-in routes, the consent start, a console); a pending
// sign-in's and the sign-in form's only the sign-in routes.
const (
	sessionCookie = "toolplane_session"
	pendingCookie = "toolplane_signin"
	formCookie    = "toolplane_signin_form"
)

// Session answers who is signed in on r, or ErrNotSignedIn. A session
// that ended (idle, past its absolute end, or made with a key no longer
// in force) is removed and answers ErrNotSignedIn; each use keeps an idle
// session alive. Other errors mean the store could not answer.
func (s *Service) Session(r *http.Request) (*Session, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 100 {
		return nil, ErrNotSignedIn
	}
	ctx, now := r.Context(), s.now()
	b, err := s.cfg.Store.FindBrowserSession(ctx, hashToken(c.Value))
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		return nil, ErrNotSignedIn
	case err != nil:
		return nil, fmt.Errorf("read session: %w", err)
	}
	if !now.Before(b.IdleUntil) || !now.Before(b.ExpiresAt) {
		s.end(ctx, b)
		return nil, ErrNotSignedIn
	}
	cred := &toolplane.Credential{ID: b.CredentialID, OrganizationID: b.OrganizationID, Kind: toolplane.CredentialPerson,
		Subject: b.Subject, Roles: b.Roles}
	if b.Method == toolplane.SignInAPIKey {
		// The key's roles as they are now, and none once it is revoked.
		key, err := apikey.InForce(ctx, s.cfg.Store, b.CredentialID, now)
		switch {
		case errors.Is(err, apikey.ErrInvalid):
			s.end(ctx, b)
			return nil, ErrNotSignedIn
		case err != nil:
			return nil, fmt.Errorf("check the session's key: %w", err)
		case key.Kind != toolplane.CredentialPerson || key.Subject != b.Subject || key.OrganizationID != b.OrganizationID:
			s.end(ctx, b)
			return nil, ErrNotSignedIn
		}
		cred = key
	}
	// Touched when a tenth of the idle time has passed since the last
	// touch: a page's every request does not write. A session whose idle
	// end reached its absolute end has nothing left to move.
	if until := now.Add(s.cfg.IdleTimeout); b.IdleUntil.Before(b.ExpiresAt) && until.Sub(b.IdleUntil) > s.cfg.IdleTimeout/10 {
		if err := s.cfg.Store.TouchBrowserSession(ctx, b.OrganizationID, b.ID, until); err != nil && !errors.Is(err, toolplane.ErrNotFound) {
			s.log.WarnContext(ctx, "session touch failed", "session", b.ID, "err", err)
		}
	}
	return &Session{ID: b.ID, Credential: cred, Method: b.Method, CSRF: csrfToken(c.Value), SignedInAt: b.CreatedAt, ExpiresAt: b.ExpiresAt}, nil
}

// end removes a session that ended.
func (s *Service) end(ctx context.Context, b *toolplane.BrowserSession) {
	if _, err := s.cfg.Store.DeleteBrowserSession(context.WithoutCancel(ctx), b.OrganizationID, b.ID); err != nil {
		s.log.WarnContext(ctx, "ended session not removed", "session", b.ID, "err", err)
	}
}

// CheckForm answers nil when the state-changing request r may act for
// sess: it comes from this server's origin (http.CrossOriginProtection
// with the public URL trusted) and carries the session's CSRF token in
// its form. Otherwise ErrForged.
func (s *Service) CheckForm(r *http.Request, sess *Session) error {
	if err := s.cop.Check(r); err != nil {
		return ErrForged
	}
	got := r.PostFormValue(CSRFField)
	if sess == nil || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRF)) != 1 {
		return ErrForged
	}
	return nil
}

// SignInURL answers the sign-in page that sends the browser back to
// returnTo (a path under the public URL, with its query) once signed in.
func (s *Service) SignInURL(returnTo string) string {
	return s.path(Path) + "?" + url.Values{"return": {returnTo}}.Encode()
}

// Path is where the sign-in routes are, under the public URL's path.
const Path = "/signin"

// path answers p under the public URL's path.
func (s *Service) path(p string) string { return s.base.Path + p }

// secure reports whether cookies are Secure: the public URL is https.
// A server reached over plain http (loopback, a test, a first start)
// cannot set Secure cookies the browser would send back, so there they
// are not.
func (s *Service) secure() bool { return s.base.Scheme == "https" }

// home answers where a sign-in goes when it names no page to return to.
func (s *Service) home() string {
	if s.cfg.Home != "" {
		return s.path(s.cfg.Home)
	}
	return s.path(Path)
}

// returnPath answers the path the browser goes back to after sign-in:
// back when it is a path on this server, under its public path, and home
// (the console, or the sign-in page, which shows who is signed in)
// otherwise, so the parameter never redirects off the server.
func (s *Service) returnPath(back string) string {
	home := s.home()
	if back == "" || len(back) > 2048 || !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") || strings.ContainsAny(back, "\\\r\n\t") {
		return home
	}
	u, err := url.Parse(back)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return home
	}
	if s.base.Path != "" && u.Path != s.base.Path && !strings.HasPrefix(u.Path, s.base.Path+"/") {
		return home
	}
	return back
}

// newSession stores a session for cred and sets its cookie on w. A
// session the browser held already ends: a sign-in never leaves a second
// session behind in the same browser.
func (s *Service) newSession(w http.ResponseWriter, r *http.Request, cred *toolplane.Credential, method string, roles []string, notAfter time.Time) error {
	ctx := r.Context()
	if old, err := s.Session(r); err == nil {
		if _, err := s.cfg.Store.DeleteBrowserSession(ctx, old.Credential.OrganizationID, old.ID); err != nil {
			return fmt.Errorf("end the browser's earlier session: %w", err)
		}
	}
	token := rand.Text()
	now := s.now()
	expires := now.Add(s.cfg.MaxAge)
	if !notAfter.IsZero() && notAfter.Before(expires) {
		expires = notAfter
	}
	idle := now.Add(s.cfg.IdleTimeout)
	if idle.After(expires) {
		idle = expires
	}
	b := &toolplane.BrowserSession{
		ID: toolplane.NewID("bss_"), OrganizationID: cred.OrganizationID, TokenHash: hashToken(token),
		Subject: cred.Subject, Method: method, CredentialID: cred.ID, Roles: roles,
		CreatedAt: now, IdleUntil: idle, ExpiresAt: expires,
	}
	if err := s.cfg.Store.InsertBrowserSession(ctx, b); err != nil {
		return fmt.Errorf("store session: %w", err)
	}
	s.log.InfoContext(ctx, "signed in", "session", b.ID, "organization", b.OrganizationID, "subject", b.Subject, "method", method)
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: token, Path: s.path("/"), MaxAge: int(expires.Sub(now).Seconds()),
		HttpOnly: true, Secure: s.secure(), SameSite: http.SameSiteLaxMode,
	})
	return nil
}

// SignOut ends the session on r, if any, and forgets its cookie.
func (s *Service) SignOut(w http.ResponseWriter, r *http.Request, sess *Session) error {
	s.clear(w, sessionCookie, s.path("/"))
	if sess == nil {
		return nil
	}
	if _, err := s.cfg.Store.DeleteBrowserSession(r.Context(), sess.Credential.OrganizationID, sess.ID); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	s.log.InfoContext(r.Context(), "signed out", "session", sess.ID)
	return nil
}

// SignOutEverywhere ends every session of the person signed in on sess,
// in every browser, and forgets this browser's cookie.
func (s *Service) SignOutEverywhere(w http.ResponseWriter, r *http.Request, sess *Session) error {
	s.clear(w, sessionCookie, s.path("/"))
	c := sess.Credential
	n, err := s.cfg.Store.DeleteBrowserSessionsOf(r.Context(), c.OrganizationID, c.Subject)
	if err != nil {
		return fmt.Errorf("end sessions: %w", err)
	}
	s.log.InfoContext(r.Context(), "signed out everywhere", "session", sess.ID, "ended", n)
	return nil
}

// clear forgets cookie name at path.
func (s *Service) clear(w http.ResponseWriter, name, path string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: path, MaxAge: -1, HttpOnly: true, Secure: s.secure(), SameSite: http.SameSiteLaxMode})
}

// hashToken answers the stored form of a session token. The token is 256
// random bits, so a plain SHA-256 is enough: nothing is left to guess.
func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// csrfToken answers the CSRF token of the session whose token is token: a
// MAC under the session's own secret, so only its holder's pages know it,
// and it ends with the session.
func csrfToken(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("toolplane signin csrf"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Sweep removes sessions that ended, a bounded batch a time, and answers
// how many it removed.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	const batch = 500
	total := 0
	for {
		n, err := s.cfg.Store.DeleteExpiredBrowserSessions(ctx, s.now(), batch)
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
}
