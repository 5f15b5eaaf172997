package redisstore_test

import (
	"os"
	"testing"

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
