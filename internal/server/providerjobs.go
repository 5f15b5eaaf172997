package server

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/journal"
	"github.com/toolplane/toolplane/providerjob"
	"github.com/toolplane/toolplane/ratelimit"
)

// The schemes a vendor signs its callbacks with (ProviderWebhook.Scheme).
const (
	// SchemeTimestamped: a timestamped HMAC-SHA256 header, t=…,v1=…, as
	// Stripe signs (providerjob.Timestamped).
	SchemeTimestamped = "timestamped"
	// SchemeBodySHA1: an HMAC-SHA1 of the raw body in X-Signature-SHA1,
	// as FullEnrich signs (providerjob.BodySigned).
	SchemeBodySHA1 = "body-sha1"
)

// ProviderSecretEnvPrefix is the prefix of the environment variable
// `toolplane serve` reads a vendor's webhook signing secret from: the
// vendor's name upper-cased, each character other than a letter or digit
// made "_" (TOOLPLANE_PROVIDER_SECRET_FULLENRICH).
const ProviderSecretEnvPrefix = "TOOLPLANE_PROVIDER_SECRET_"

// DefaultProviderWebhookRateLimit is how many vendor deliveries one client
// address may make a minute when Config.ProviderWebhookRateLimit is zero.
const DefaultProviderWebhookRateLimit = 600

// ProviderWebhook is one vendor whose callbacks the webhook route
// (POST /v1/webhooks/{provider}/{job_id}) accepts.
type ProviderWebhook struct {
	// Provider is the route's {provider} segment, and the name submit
	// tools reserve their jobs under.
	Provider string
	// Scheme is how the vendor signs: SchemeTimestamped or
	// SchemeBodySHA1.
	Scheme string
	// Secret is the vendor's signing secret, one for the deployment.
	// It is never logged or answered.
	Secret toolplane.SecretString
	// Header is the timestamped scheme's signature header; default
	// Stripe-Signature. Tolerance is how old (or early) a timestamped
	// delivery may be; default five minutes.
	Header    string
	Tolerance time.Duration
	// CentsPerCredit prices a credit a body-signed vendor reports.
	CentsPerCredit int64
}

// providerName is what a provider may be named: a path segment, and a
// part of a claim's tool name (webhook.<provider>).
var providerName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// adapters answers the webhook route's adapter of each vendor in hooks.
func adapters(hooks []ProviderWebhook) (map[string]providerjob.Adapter, error) {
	out := map[string]providerjob.Adapter{}
	const field = "ProviderWebhooks"
	for _, h := range hooks {
		switch {
		case !providerName.MatchString(h.Provider):
			return nil, &ConfigError{Field: field, Err: fmt.Errorf("provider %q is not a name (lower-case letters, digits, - and _)", h.Provider)}
		case out[h.Provider] != nil:
			return nil, &ConfigError{Field: field, Err: fmt.Errorf("provider %q is listed twice", h.Provider)}
		case h.Secret == "":
			return nil, &ConfigError{Field: field, Err: fmt.Errorf("provider %q has no signing secret (%s%s)", h.Provider, ProviderSecretEnvPrefix, ProviderSecretEnv(h.Provider))}
		case h.Tolerance < 0:
			return nil, &ConfigError{Field: field, Err: fmt.Errorf("tolerance %v %w", h.Tolerance, ErrNegative)}
		}
		switch h.Scheme {
		case SchemeTimestamped:
			out[h.Provider] = &providerjob.Timestamped{Name: h.Provider, Secret: h.Secret, Header: h.Header, Tolerance: h.Tolerance}
		case SchemeBodySHA1:
			out[h.Provider] = &providerjob.BodySigned{Name: h.Provider, Secret: h.Secret, CentsPerCredit: h.CentsPerCredit}
		default:
			return nil, &ConfigError{Field: field, Err: fmt.Errorf("scheme %q is not %s or %s", h.Scheme, SchemeTimestamped, SchemeBodySHA1)}
		}
	}
	return out, nil
}

// ProviderSecretEnv answers the suffix of the variable after
// ProviderSecretEnvPrefix that holds provider's signing secret.
func ProviderSecretEnv(provider string) string {
	b := []byte(provider)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}

// ProviderJobTools builds the tools compiled into a binary that submit
// and collect provider jobs, given the node's provider jobs service:
// their definitions and handler bindings, registered beside the others.
type ProviderJobTools func(jobs *providerjob.Service) ([]toolplane.Definition, []*handler.Binding, error)

// providerJobs builds the node's provider jobs service and registers the
// tools Config.ProviderJobTools makes over it.
func (s *Server) providerJobs(src *sources) error {
	jobs, err := providerjob.New(providerjob.Config{Store: s.b.Store, PublicURL: s.public, Logger: s.log})
	if err != nil {
		return &ConfigError{Field: "PublicURL", Err: err}
	}
	s.pj = jobs
	if s.cfg.ProviderJobTools == nil {
		return nil
	}
	defs, bs, err := s.cfg.ProviderJobTools(jobs)
	if err != nil {
		return fmt.Errorf("provider job tools: %w", err)
	}
	if err := src.handlers.Register(bs...); err != nil {
		return fmt.Errorf("provider job tools: %w", err)
	}
	src.defs = append(src.defs, defs...)
	return nil
}

// receiver answers the webhook route over the node's provider jobs.
func (s *Server) receiver(svc *services) (*providerjob.Receiver, error) {
	as, err := adapters(s.cfg.ProviderWebhooks)
	if err != nil {
		return nil, err
	}
	if s.pj == nil || s.runner == nil {
		return nil, errors.New("provider jobs: the service and the runner are built first")
	}
	rv := &providerjob.Receiver{Jobs: s.pj, Adapters: as, Journal: journal.New(s.b.Store, time.Now), Settler: s.runner,
		Dropped: svc.meters.WebhookDropped, Node: s.self, Log: s.log}
	rv.Proxies, _ = ratelimit.ParseProxies(s.cfg.TrustedProxies) // checked by withDefaults
	if limit := s.cfg.ProviderWebhookRateLimit; limit >= 0 {
		if limit == 0 {
			limit = DefaultProviderWebhookRateLimit
		}
		rv.Limiter = ratelimit.New(limit, time.Minute)
	}
	return rv, nil
}
