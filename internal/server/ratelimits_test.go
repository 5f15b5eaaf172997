package server

import (
	"context"
	"errors"
	"github.com/toolplane/toolplane/internal/syncbuf"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/ratelimit/redisstore"
)

// serveNode runs a demo node on database, its files in dir, until the
// test ends, and answers its base URL.
func serveNode(t *testing.T, cfg Config, database, dir string) string {
	t.Helper()
	cfg.Addr, cfg.Database, cfg.DataDir, cfg.Demo = "127.0.0.1:0", database, dir, true
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return "http://" + s.Addr()
}

// A key's --rate-limit holds across three nodes sharing the rate-limit
// store, PostgreSQL (the default on it) or Redis: the key is admitted its
// limit between them, not three times it, and each refusal says when to
// come back.
func TestKeyRateLimitHoldsAcrossNodes(t *testing.T) {
	t.Parallel()
	pgtest.DSN(t)
	for _, store := range []string{"", "redis://127.0.0.1:6379/0"} {
		name := "postgres"
		if store != "" {
			name = "redis"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.SchemaDSN(t, pgtest.DSN(t))
			logs := &syncbuf.Buffer{}
			// A generous timeout: this test is about the shared count, not
			// the fallback (see ratelimit's tests), on a busy machine.
			cfg := Config{RateLimit: 6, RateLimitStore: store, RateLimitTimeout: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))}
			defer func() {
				if t.Failed() {
					t.Log(logs.String())
				}
			}()
			var bases []string
			first := t.TempDir()
			for i := range 3 {
				dir := first
				if i > 0 {
					dir = t.TempDir()
				}
				bases = append(bases, serveNode(t, cfg, dsn, dir))
			}
			agent := readCreds(t, first)["TOOLPLANE_DEMO_AGENT_KEY"]
			if agent == "" {
				t.Fatal("first start wrote no agent key")
			}
			admitted := 0
			for i := range 18 {
				req, _ := http.NewRequest("GET", bases[i%3]+"/v1/tools", nil)
				req.Header.Set("Authorization", "Bearer "+agent)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					admitted++
				case http.StatusTooManyRequests:
					if resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-RateLimit-Limit") != "6" || resp.Header.Get("X-RateLimit-Remaining") != "0" {
						t.Fatalf("a refusal's headers: %v", resp.Header)
					}
				default:
					t.Fatalf("request %d: %d", i, resp.StatusCode)
				}
			}
			// One interval (10 s) may pass while the nodes are asked.
			if admitted < 6 || admitted > 7 {
				t.Fatalf("3 nodes admitted %d of 18 requests of a key of 6 a minute, want 6", admitted)
			}
		})
	}
}

// A rate-limit store that cannot be used is named before anything opens.
func TestRateLimitStoreSetting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v, database, want string
		err               error
	}{
		{"", "toolplane.db", RateLimitMemory, nil},
		{"", "postgres://db/x", RateLimitPostgres, nil},
		{"memory", "postgres://db/x", RateLimitMemory, nil},
		{"postgres", "toolplane.db", "", ErrRateLimitStore},
		{"redis://127.0.0.1:6379/2", "toolplane.db", "redis://127.0.0.1:6379/2", nil},
		{"redis://127.0.0.1:6379/notadb", "toolplane.db", "", redisstore.ErrURL},
		{"etcd://127.0.0.1:2379", "toolplane.db", "", ErrRateLimitStore},
		// A scheme is read as go-redis reads it, a value trimmed.
		{"REDIS://:hunter2@10.0.0.5:6379/0", "toolplane.db", "REDIS://:hunter2@10.0.0.5:6379/0", nil},
		{" redis://:hunter2@10.0.0.5:6379/0\n", "toolplane.db", "redis://:hunter2@10.0.0.5:6379/0", nil},
		{"Rediss://10.0.0.5:6380/1", "toolplane.db", "Rediss://10.0.0.5:6380/1", nil},
		{" Memory ", "postgres://db/x", RateLimitMemory, nil},
		{"POSTGRES", "postgres://db/x", RateLimitPostgres, nil},
		// An error never repeats a value, which may hold a password.
		{"redis:/:hunter2@10.0.0.5:6379/0", "toolplane.db", "", ErrRateLimitStore},
		{"etcd://root:hunter2@10.0.0.5:2379", "toolplane.db", "", ErrRateLimitStore},
		{"hunter2 redis://10.0.0.5:6379/0", "toolplane.db", "", ErrRateLimitStore},
		{"redis://:hunter2@10.0.0.5:notaport/0", "toolplane.db", "", redisstore.ErrURL},
	}
	for _, tt := range tests {
		got, err := rateLimitStore(tt.v, tt.database)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("rateLimitStore(%q, %q) = %q, %v; want %q, %v", tt.v, tt.database, got, err, tt.want, tt.err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("rateLimitStore(%q): the error repeats the password: %v", tt.v, err)
		}
	}
	if _, err := rateLimitStore("etcd://root:hunter2@10.0.0.5:2379", "toolplane.db"); err == nil || !strings.Contains(err.Error(), "etcd://") {
		t.Errorf("the error does not name the scheme it refuses: %v", err)
	}
	_, err := New(context.Background(), Config{Addr: "127.0.0.1:0", Database: filepath.Join(t.TempDir(), "toolplane.db"), RateLimitStore: "postgres"})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "RateLimitStore" || !strings.Contains(err.Error(), "SQLite") {
		t.Fatalf("New with postgres limits on SQLite: %v", err)
	}
}
