// Package redisstore is a ratelimit.Store on Redis, for a cluster whose
// operator would rather keep its rate limits off the database
// (`serve --rate-limit-store redis://host:port/db`). Each decision is one
// Lua script, atomic in Redis, deciding on Redis's own clock (TIME), so the
// nodes' clocks never matter. A key is a hash of two fields, its TAT and
// its retry budget's, in microseconds, expiring when both budgets are
// whole again.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolplane/toolplane/ratelimit"
)

// Prefix is put before every key the store writes.
const Prefix = "toolplane:ratelimit:"

// Store keeps rate limits on one Redis. It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	prefix string
}

var _ ratelimit.Store = (*Store)(nil)

// ErrURL refuses a store address that is not a redis:// or rediss:// URL.
var ErrURL = errors.New("a Redis rate-limit store is a URL redis://[user:password@]host:port/db (or rediss:// for TLS)")

// Open answers a store on the Redis url names, with a client of its own
// that fails fast: a rate limit is never worth waiting for (ratelimit.Shared
// decides on the node's own limit instead). The caller closes it.
func Open(url string) (*Store, error) {
	opt, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	opt.ContextTimeoutEnabled = true // a decision's deadline bounds its I/O
	opt.MaxRetries = -1              // the fallback is the retry
	opt.DialTimeout = time.Second
	opt.DialerRetries = 1
	return New(redis.NewClient(opt), Prefix), nil
}

// ParseURL reads a store address: redis://[user:password@]host:port/db, or
// rediss:// for TLS. Its error never repeats the address, which may hold a
// password.
func ParseURL(url string) (*redis.Options, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, ErrURL
	}
	return opt, nil
}

// New answers a store on client, every key put under prefix.
func New(client redis.UniversalClient, prefix string) *Store {
	return &Store{client: client, prefix: prefix}
}

// Close closes the store's client.
func (s *Store) Close() error { return s.client.Close() }

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error { return s.client.Ping(ctx).Err() }

// lib is what both scripts share: Redis's clock in microseconds, and the
// key's expiry once both its TATs are past.
const lib = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local v = redis.call('HMGET', KEYS[1], 't', 'r')
local tat, retry = tonumber(v[1]) or now, tonumber(v[2]) or now
if tat < now then tat = now end
if retry < now then retry = now end
local function keep(tat, retry)
	redis.call('HSET', KEYS[1], 't', tat, 'r', retry)
	redis.call('PEXPIRE', KEYS[1], math.floor((math.max(tat, retry) - now) / 1000) + 1)
end
`

// take is GCRA: the key's TAT, pushed an interval later, may lie at most a
// window ahead of now; a refusal leaves it as it was. It answers whether
// the request was admitted, and how far (microseconds) the TAT is ahead.
var take = redis.NewScript(lib + `
local next = tat + interval
if next - now > window then return {0, tat - now} end
keep(next, retry)
return {1, next - now}
`)

// repeat moves one counted request of a key to its retry budget, when it
// has one counted and room in its retry budget.
var repeat = redis.NewScript(lib + `
if tat <= now then return 0 end
retry = retry + interval
if retry - now > window then return 0 end
keep(math.max(tat - interval, now), retry)
return 1
`)

func micros(d time.Duration) int64 { return d.Microseconds() }

// Take decides one request of key under q (ratelimit.Store).
func (s *Store) Take(ctx context.Context, key string, q ratelimit.Quota, _ time.Time) (ratelimit.State, error) {
	v, err := take.Run(ctx, s.client, []string{s.prefix + key}, micros(q.Interval()), micros(q.Window)).Int64Slice()
	if err != nil {
		return ratelimit.State{}, fmt.Errorf("take a rate-limit decision on redis: %w", err)
	}
	if len(v) != 2 {
		return ratelimit.State{}, fmt.Errorf("take a rate-limit decision on redis: the script answered %d values", len(v))
	}
	return ratelimit.State{Allowed: v[0] == 1, Ahead: time.Duration(v[1]) * time.Microsecond}, nil
}

// Repeat moves one request of key to its retry budget (ratelimit.Store).
func (s *Store) Repeat(ctx context.Context, key string, q ratelimit.Quota, _ time.Time) (bool, error) {
	n, err := repeat.Run(ctx, s.client, []string{s.prefix + key}, micros(q.Interval()), micros(q.Window)).Int64()
	if err != nil {
		return false, fmt.Errorf("move a request to its retry budget on redis: %w", err)
	}
	return n == 1, nil
}
