package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/metrics"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/ratelimit/redisstore"
)

// The rate-limit stores Config.RateLimitStore names (besides a Redis URL).
const (
	RateLimitMemory   = "memory"
	RateLimitPostgres = "postgres"
)

// ErrRateLimitStore refuses a rate-limit store that is none of memory,
// postgres (on a PostgreSQL database) and a Redis URL.
var ErrRateLimitStore = errors.New(`the rate-limit store is "memory", "postgres" (when the database is PostgreSQL) or a redis:// URL`)

// rateLimitStore answers the rate-limit store setting v means on
// database: its default, or v checked, trimmed. Names and a URL's scheme
// are read without regard to case, as go-redis reads the scheme. An error
// names at most v's scheme, never v: a Redis URL may hold a password.
func rateLimitStore(v, database string) (string, error) {
	v = strings.TrimSpace(v)
	scheme, _, isURL := strings.Cut(v, "://")
	switch {
	case v == "" && backend.IsPostgres(database):
		return RateLimitPostgres, nil
	case v == "" || strings.EqualFold(v, RateLimitMemory):
		return RateLimitMemory, nil
	case strings.EqualFold(v, RateLimitPostgres):
		if !backend.IsPostgres(database) {
			return "", fmt.Errorf("%w; the database is SQLite, whose one node keeps its limits in memory", ErrRateLimitStore)
		}
		return RateLimitPostgres, nil
	case isURL && (strings.EqualFold(scheme, "redis") || strings.EqualFold(scheme, "rediss")):
		if _, err := redisstore.ParseURL(v); err != nil {
			return "", err
		}
		return v, nil
	case isURL && validScheme(scheme):
		return "", fmt.Errorf("%w, not a %s:// URL", ErrRateLimitStore, scheme)
	}
	return "", ErrRateLimitStore
}

// validScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, "+", "-" and "."), short enough to be one, so that an
// error may name it without repeating anything else of a value.
func validScheme(s string) bool {
	if s == "" || len(s) > 16 {
		return false
	}
	for i, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case i > 0 && ('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}

// rateLimits answers where the node keeps its rate limits: its memory, or
// the store its nodes share, each decision of which falls back to the
// node's own limit when the store does not answer (counted in m). A Redis
// that does not answer at start is logged, not fatal: limits are never on
// the correctness path.
func (s *Server) rateLimits(ctx context.Context, m *metrics.Metrics) (*ratelimit.Shared, error) {
	var store ratelimit.Store
	var name string
	switch v := s.cfg.RateLimitStore; v {
	case RateLimitMemory:
		return ratelimit.Local(), nil
	case RateLimitPostgres:
		store, name = s.b.RateLimits, "postgres"
	default:
		rs, err := redisstore.Open(v)
		if err != nil {
			return nil, err
		}
		s.closers = append(s.closers, func() { rs.Close() })
		ping, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := rs.Ping(ping); err != nil {
			s.log.Warn("the Redis rate-limit store does not answer; each node limits on its own until it does", "error", err)
		}
		store, name = rs, "redis"
	}
	return ratelimit.NewShared(store, ratelimit.SharedOptions{Name: name, Timeout: s.cfg.RateLimitTimeout, Log: s.log, FellBack: m.RateLimitFallback(name)}), nil
}
