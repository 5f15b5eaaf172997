package apikey

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/ratelimit"
)

// LimitedError refuses a request for its rate; Decision says when the
// caller may try again. Failures tells which budget was spent: the failed
// authentications of the caller's address (true), or the authenticated
// credential's own requests (false).
type LimitedError struct {
	Decision ratelimit.Decision
	Failures bool
}

func (e *LimitedError) Error() string {
	if e.Failures {
		return "too many failed authentications; retry after the reset"
	}
	return "this key made too many requests; slow down and retry after the reset"
}

// RefusedError refuses a bearer token that did not authenticate. Its
// message says what the token was taken for (an API key, or, where the
// deployment also accepts JWTs, either), which the caller knows already,
// and never which check failed (an unknown id, a wrong secret, a revoked
// or expired key, a signature, issuer, audience or expiry), so probing
// tokens teaches nothing. Every door answers it in these words.
type RefusedError struct {
	// Key: the token has the API key prefix, so it was read as a key only.
	Key bool
	// JWTs: the deployment accepts JWTs of its configured issuer too.
	JWTs bool
}

func (e *RefusedError) Error() string {
	switch {
	case e.Key:
		return "the API key is not valid"
	case e.JWTs:
		return "the bearer token is neither a valid API key nor a valid JWT of the configured issuer"
	}
	return "the bearer token is not a valid API key"
}

// Unwrap makes a refusal a toolplane.ErrUnauthenticated.
func (e *RefusedError) Unwrap() error { return toolplane.ErrUnauthenticated }

// refused answers the refusal of token.
func (g Gate) refused(token string) *RefusedError {
	return &RefusedError{Key: strings.HasPrefix(token, Prefix), JWTs: g.Tokens != nil}
}

// Gate is what every door (REST, MCP) runs before anything else: it
// authenticates a bearer token and applies the rate limits, in the one
// order that keeps a key's holder out of reach of anyone who only knows
// the key's id.
//
//  1. A key the node verified within the cache's TTL is recognised at once
//     (a digest compared in constant time).
//  2. Otherwise, an API key is refused before it is checked when its
//     client address has spent its failure budget and its key id already
//     failed from that address (ratelimit.Failures.Blocked): so a flood
//     from one address costs its budget of Argon2id runs per window, and
//     then one per live key id it names. Anything else is checked,
//     whatever others sent from the same address: a JWT costs no Argon2id
//     run, and a key id that did not fail there costs at most one, so a
//     holder sharing an address (a NAT) with a flooder is not locked out.
//  3. The credential is checked. A failure is counted against the client
//     address (Failures); past its budget the caller is told to slow down
//     (LimitedError) instead of that the key is not valid.
//  4. A credential that authenticated spends its own budget (Limiter).
//
// So the per-key budget is spent only by its holder, and wrong secrets for
// a key's id, however many, limit only the addresses that sent them. The
// one credential a flood can hold back is an API key that is not cached,
// presented under the id the flood named from the flooding address itself.
type Gate struct {
	Authenticator
	// Limiter, when set, limits each authenticated credential's requests.
	Limiter *ratelimit.Limiter
	// Failures, when set, limits failed authentications per client
	// address.
	Failures *ratelimit.Failures
}

// Admit answers the credential token authenticates, for a request from the
// client address client (ratelimit.ClientAddr) at now, and the rate-limit
// decision the door reports in its headers (zero when no limit applied).
// Its errors: a *RefusedError, which wraps toolplane.ErrUnauthenticated
// (the token is not valid), a *LimitedError (over a budget), or
// ErrUnavailable.
func (g Gate) Admit(ctx context.Context, token, client string, now time.Time) (*toolplane.Credential, ratelimit.Decision, error) {
	cred, ok := g.Cache.Cached(token, now)
	if !ok {
		if g.Failures != nil {
			if d, blocked := g.Failures.Blocked(client, keyID(token), now); blocked {
				return nil, d, &LimitedError{Decision: d, Failures: true}
			}
		}
		var err error
		cred, err = g.Authenticate(ctx, token, now)
		switch {
		case errors.Is(err, toolplane.ErrUnauthenticated):
			if g.Failures == nil {
				return nil, ratelimit.Decision{}, g.refused(token)
			}
			if d := g.Failures.Fail(client, keyID(token), now); !d.Allowed {
				return nil, d, &LimitedError{Decision: d, Failures: true}
			}
			return nil, ratelimit.Decision{}, g.refused(token)
		case err != nil:
			return nil, ratelimit.Decision{}, err
		}
	}
	if g.Limiter == nil {
		return cred, ratelimit.Decision{}, nil
	}
	d := g.Limiter.Allow(cred.ID, now)
	if !d.Allowed {
		return nil, d, &LimitedError{Decision: d}
	}
	return cred, d, nil
}

// keyID answers the key id token names, or "" for a token that is not a
// well-formed API key (a JWT, junk): the id its failures are marked with at
// the client's address.
func keyID(token string) string {
	id, _, err := Parse(token)
	if err != nil {
		return ""
	}
	return id
}

// Repeated settles the cost of a request of cred, admitted at now, whose
// answer repeated a call already answered (invoke.Repeated: a stored
// result replayed, an action left uncertain, a call still in flight): it
// is charged to the key's retry budget instead of its request budget. So
// a client that retries its writes after a crash, a reconnect or a lost
// answer, as it must, keeps its budget for new work; the retries
// themselves are bounded by the retry budget (see ratelimit.Limiter.Repeated).
// Every door calls it for every such answer; it is the one place the rule
// lives.
func (g Gate) Repeated(cred *toolplane.Credential, now time.Time) {
	if g.Limiter == nil || cred == nil {
		return
	}
	g.Limiter.Repeated(cred.ID, now)
}

// Realm is the protection space every door names in its challenges.
const Realm = "toolplane"

// Challenge answers the WWW-Authenticate value of a door's 401 (RFC 6750
// §3): a Bearer challenge in Realm; with metadata (the URL of the
// resource's OAuth protected resource metadata, RFC 9728 §5.1, set only
// where that document names an authorization server) a client can find
// where to get a token; with refused (a token was presented and did not
// authenticate) error="invalid_token", so a client tells a bad token from
// a missing one. A missing token gets no error code (RFC 6750 §3.1).
func Challenge(metadata string, refused bool) string {
	c := `Bearer realm="` + Realm + `"`
	if metadata != "" {
		c += `, resource_metadata="` + metadata + `"`
	}
	if refused {
		c += `, error="invalid_token"`
	}
	return c
}

// InsufficientScope answers the WWW-Authenticate value of a door's 403 to
// an OAuth access token whose consent does not cover the call (RFC 6750
// §3.1, the MCP authorization spec's step-up): error="insufficient_scope"
// and the scope to ask for (space-separated scopes), with the resource's
// metadata URL when there is one, so a client asks the person for that
// scope and retries.
func InsufficientScope(metadata, scope, description string) string {
	c := `Bearer realm="` + Realm + `", error="insufficient_scope", scope="` + scope + `"`
	if metadata != "" {
		c += `, resource_metadata="` + metadata + `"`
	}
	if description != "" {
		c += `, error_description="` + strings.NewReplacer(`"`, `'`, `\`, `/`).Replace(description) + `"`
	}
	return c
}
