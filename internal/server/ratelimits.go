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
// database: its default, or v checked.
func rateLimitStore(v, database string) (string, error) {
	switch {
	case v == "" && backend.IsPostgres(database):
		return RateLimitPostgres, nil
	case v == "" || v == RateLimitMemory:
		return RateLimitMemory, nil
	case v == RateLimitPostgres:
		if !backend.IsPostgres(database) {
			return "", fmt.Errorf("%w; the database is SQLite, whose one node keeps its limits in memory", ErrRateLimitStore)
		}
		return v, nil
	case strings.HasPrefix(v, "redis://") || strings.HasPrefix(v, "rediss://"):
		if _, err := redisstore.ParseURL(v); err != nil {
			return "", err
		}
		return v, nil
	}
	return "", fmt.Errorf("%w, not %q", ErrRateLimitStore, v)
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
