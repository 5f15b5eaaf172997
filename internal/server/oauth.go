package server

import (
	"context"
	"net/http"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authserver"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/egress"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/signin"
)

// OAuthConfig is the server's own OAuth authorization server (package
// authserver), on unless Off.
type OAuthConfig struct {
	// Off serves no authorization server: API keys and the operator's
	// JWTs only.
	Off bool
	// Registration is open (default), allowlist or off.
	Registration string
	// RedirectAllow are the redirect URIs registrations and client
	// metadata documents may name under allowlist ("*" at the end: a
	// prefix).
	RedirectAllow []string
	// Agent is the agent identity clients act as where an admin set none
	// for the client; default authserver.DefaultAgent.
	Agent string
	// AccessTTL, RefreshTTL and ConsentTTL bound the tokens and the
	// consents; zero takes the authserver defaults.
	AccessTTL, RefreshTTL, ConsentTTL time.Duration
	// DocumentAllowCIDRs are private ranges client metadata documents may
	// be fetched from (none: public addresses only).
	DocumentAllowCIDRs []string
	// RegistrationsPerHour bounds registrations per client address;
	// zero takes authserver.DefaultRegistrationsPH.
	RegistrationsPerHour int
	// MaxClients bounds the clients the server holds, registered and
	// metadata documents' alike; zero takes authserver.DefaultMaxClients,
	// negative: no bound.
	MaxClients int
	// OIDCMaxAge bounds how old the OpenID provider's sign-in behind a
	// consent may be for its tokens to be refreshed and honoured; zero takes
	// authserver.DefaultOIDCMaxAge, negative: no bound.
	OIDCMaxAge time.Duration
}

// oauthSweepEvery is how often each node removes expired codes and
// refresh tokens; oauthKeep how long past their end they stay, so a late
// replay still finds (and revokes) what it would have reused.
// oauthUnusedClient is how long a registered client nobody consented to
// is kept: a client that registers and never brings a person to consent
// in a week is swept, making room under OAuthConfig.MaxClients. A client
// that comes back after answers invalid_client and registers again.
const (
	oauthSweepEvery   = 10 * time.Minute
	oauthKeep         = 24 * time.Hour
	oauthUnusedClient = 7 * 24 * time.Hour
)

// authServer answers the authorization server, or nil when it is off,
// and chains its verifier before the doors' other bearer tokens.
func (s *Server) authServer(gate *door.Door, svc *services, people *signin.Service) (*authserver.Server, error) {
	cfg := s.cfg.OAuth
	if cfg.Off {
		return nil, nil
	}
	st, ok := s.b.Store.(authserver.Store)
	if !ok {
		s.log.Warn("the store keeps no OAuth state: the authorization server is off")
		return nil, nil
	}
	docs, err := egress.Compile(toolplane.EgressRules{AllowCIDRs: cfg.DocumentAllowCIDRs}, egress.AnyHost())
	if err != nil {
		return nil, &ConfigError{Field: "OAuth.DocumentAllowCIDRs", Err: err}
	}
	as, err := authserver.New(authserver.Config{Store: st, Keys: svc.keys, Issuer: s.public, People: people,
		Tools: func(ctx context.Context, cred *toolplane.Credential) ([]string, error) {
			tools, err := gate.Shown(ctx, cred, "")
			names := make([]string, len(tools))
			for i, t := range tools {
				names[i] = t.Def.Name
			}
			return names, err
		},
		Upstreams: svc.upstreams.Slugs, Agent: cfg.Agent, Registration: cfg.Registration, RedirectAllow: cfg.RedirectAllow,
		RegistrationsPerHour: cfg.RegistrationsPerHour, MaxClients: cfg.MaxClients, OIDCMaxAge: cfg.OIDCMaxAge, Operator: DefaultOrganization, Limits: s.limits, ClientAddr: gate.ClientAddr, Egress: docs,
		AccessTTL: cfg.AccessTTL, RefreshTTL: cfg.RefreshTTL, ConsentTTL: cfg.ConsentTTL, Logger: s.log})
	if err != nil {
		return nil, &ConfigError{Field: "OAuth", Err: err}
	}
	gate.Tokens = authserver.Chain{Own: as.Verifier(), Next: gate.Tokens}
	// The verifier keeps the consents it found in force while it is told
	// of their changes; without the watch every call reads the store.
	s.loops.Go(func() {
		if err := as.Watch(s.bg); err != nil && s.bg.Err() == nil {
			s.log.Error("OAuth consents are read from the store on every call", "err", err)
		}
	})
	s.loops.Go(func() {
		sweepEvery(s.bg, oauthSweepEvery, func(ctx context.Context) (int, error) {
			return st.DeleteOAuthExpired(ctx, time.Now().Add(-oauthKeep), 1000)
		}, s.log, "expired OAuth codes and refresh tokens not removed")
	})
	s.loops.Go(func() {
		sweepEvery(s.bg, oauthSweepEvery, func(ctx context.Context) (int, error) {
			return st.DeleteUnusedOAuthClients(ctx, time.Now().Add(-oauthUnusedClient), 1000)
		}, s.log, "unused OAuth clients not removed")
	})
	return as, nil
}

// forResource answers h with the resource its requests are for on their
// context: an access token authenticates only at the resource it was
// issued for.
func forResource(resource string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(authserver.WithResource(r.Context(), resource)))
	})
}

// oauthAdmin answers as as the API's OAuthAdmin: nil (not a typed nil)
// when there is none.
func oauthAdmin(as *authserver.Server) httpapi.OAuthAdmin {
	if as == nil {
		return nil
	}
	return as
}

// consentInForce answers the live principal's check of a call made under
// an OAuth consent (authserver.ConsentInForce), or nil when the store
// keeps none.
func (s *Server) consentInForce() func(ctx context.Context, org, credentialID string, now time.Time) (bool, error) {
	st, ok := s.b.Store.(authserver.Store)
	if !ok {
		return nil
	}
	return func(ctx context.Context, org, credentialID string, now time.Time) (bool, error) {
		return authserver.ConsentInForce(ctx, st, org, credentialID, s.cfg.OAuth.OIDCMaxAge, now)
	}
}
