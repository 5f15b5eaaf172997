package server

import (
	"time"

	"github.com/toolplane/toolplane/console"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/signin"
)

// signIn builds the browser sign-in of people: by their own API key,
// checked through the doors' gate, always; through the issuer bearer
// JWTs come from, when a client id for it is configured. Sessions that
// ended are swept in the background.
func (s *Server) signIn(doors *door.Door, keys *secret.Keyring) (*signin.Service, error) {
	cfg := s.cfg
	var provider *signin.OIDC
	if cfg.SignInClientID != "" {
		provider = &signin.OIDC{Issuer: cfg.JWTIssuer, ClientID: cfg.SignInClientID, ClientSecret: cfg.SignInClientSecret,
			Claims: signInClaims(cfg), DefaultOrganization: DefaultOrganization}
	}
	people, err := signin.New(signin.Config{Store: s.b.Store, Keys: keys, Gate: doors, PublicURL: s.public, OIDC: provider,
		Home: console.Path, IdleTimeout: cfg.SessionIdleTimeout, MaxAge: cfg.SessionMaxAge, Logger: s.log})
	if err != nil {
		return nil, &ConfigError{Field: "PublicURL", Err: err}
	}
	s.loops.Go(func() { sweepEvery(s.bg, sessionSweepEvery, people.Sweep, s.log, "ended browser sessions not removed") })
	return people, nil
}

// sessionSweepEvery is how often each node removes ended browser
// sessions. An ended session is refused when presented anyway; the sweep
// keeps the table from growing with sessions nobody signed out of.
const sessionSweepEvery = 5 * time.Minute

// signInClaims answers the ID token claims a browser sign-in reads: those
// SignInClaims names, and for the groups, when it names none, the claim
// bearer tokens' groups are read from (JWTClaims.Groups, which serve's
// --jwt-groups-claim sets). A person is then in the same groups in the
// console as in the grants and approval routes of their tokens. Roles are
// not taken over: JWTClaims.Roles names the identity provider's roles a
// delegated token carries, not toolplane's.
func signInClaims(cfg Config) signin.Claims {
	c := cfg.SignInClaims
	if c.Groups == "" {
		c.Groups = cfg.JWTClaims.Groups
	}
	return c
}
