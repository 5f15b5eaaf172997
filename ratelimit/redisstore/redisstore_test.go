package redisstore_test

import (
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/ratelimit/ratelimittest"
	"github.com/toolplane/toolplane/ratelimit/redisstore"
)

// URLVariable names the environment variable holding the test Redis's
// URL; unset, the tests use redis://127.0.0.1:6379/0.
const URLVariable = "TOOLPLANE_TEST_REDIS"

// open answers a store on the test Redis, or skips t when none answers.
func open(t testing.TB) *redisstore.Store {
	t.Helper()
	url := os.Getenv(URLVariable)
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	s, err := redisstore.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Ping(t.Context()); err != nil {
		t.Skipf("no Redis at %s (set %s): %v", url, URLVariable, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	s := open(t)
	ratelimittest.Run(t, func(*testing.T) ratelimit.Store { return s })
}

// With Redis unreachable (a port nobody listens on), a node limits on its
// own: never open, each such decision counted, and quickly.
func TestUnreachableRedisFallsBackToTheNodesLimit(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // closed: connections are refused
	s, err := redisstore.Open("redis://" + addr + "/0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var fellBack atomic.Int64
	sh := ratelimit.NewShared(s, ratelimit.SharedOptions{Name: "redis", Log: slog.New(slog.DiscardHandler), FellBack: func() { fellBack.Add(1) }})
	l := sh.Limiter("key", 2, time.Hour)
	start := time.Now()
	var allowed int
	for range 5 {
		if l.Allow("k", time.Now()).Allowed {
			allowed++
		}
	}
	if allowed != 2 || fellBack.Load() != 5 {
		t.Fatalf("admitted %d and fell back %d times, want 2 and 5", allowed, fellBack.Load())
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("5 decisions on an unreachable Redis took %v", took)
	}
}
