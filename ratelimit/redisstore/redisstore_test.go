package redisstore_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
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

// proxy forwards connections from a loopback port to the test Redis,
// and can drop them all and stop listening, then listen again on the same
// port: Redis going away and coming back, without touching the real one.
type proxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target}
	p.up("127.0.0.1:0")
	t.Cleanup(p.down)
	return p
}

func (p *proxy) up(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, r)
			p.mu.Unlock()
			go func() { io.Copy(r, c); r.Close() }()
			go func() { io.Copy(c, r); c.Close() }()
		}
	}()
}

func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A Redis that goes away leaves decisions to the node's own limit; once it
// is back, the node decides on it again by itself.
func TestRedisGoneAndBack(t *testing.T) {
	t.Parallel()
	open(t) // skip without the test Redis
	target := os.Getenv(URLVariable)
	if target != "" {
		t.Skip("the proxy forwards to the default test Redis only")
	}
	p := newProxy(t, "127.0.0.1:6379")
	s, err := redisstore.Open("redis://" + p.addr + "/0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var fellBack atomic.Int64
	sh := ratelimit.NewShared(s, ratelimit.SharedOptions{Name: "redis", RetryAfter: 50 * time.Millisecond, Log: slog.New(slog.DiscardHandler), FellBack: func() { fellBack.Add(1) }})
	key := fmt.Sprintf("gone-and-back:%d", time.Now().UnixNano())
	l := sh.Limiter("test", 3, time.Hour)
	if d := l.Allow(key, time.Now()); !d.Allowed || d.Remaining != 2 || fellBack.Load() != 0 {
		t.Fatalf("with Redis up: %+v, %d fallbacks", d, fellBack.Load())
	}
	p.down()
	for range 3 {
		l.Allow(key, time.Now()) // the node's own budget: 3 of its own
	}
	if fellBack.Load() != 3 {
		t.Fatalf("with Redis gone: %d fallbacks, want 3", fellBack.Load())
	}
	p.up(p.addr)
	deadline := time.Now().Add(5 * time.Second)
	for {
		time.Sleep(60 * time.Millisecond)
		before := fellBack.Load()
		d := l.Allow(key, time.Now())
		if fellBack.Load() == before {
			// Redis decided again: its count of the key went on from
			// where it was, one spent before it went away.
			if !d.Allowed || d.Remaining != 1 {
				t.Fatalf("back on Redis: %+v, want the second of its 3", d)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the node never went back to Redis")
		}
	}
}
