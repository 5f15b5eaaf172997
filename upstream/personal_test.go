package upstream

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
)

// sessionLog is what a server saw of sessions: the bearer each session was
// opened with, and which sessions were ended (a DELETE).
type sessionLog struct {
	mu     sync.Mutex
	opened map[string]string // session id -> Authorization
	ended  map[string]bool
}

func (l *sessionLog) endedWith(auth string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for id, a := range l.opened {
		if a == auth && l.ended[id] {
			n++
		}
	}
	return n
}

// tokenServer runs an SDK server that records, per session, the bearer it
// was opened with and whether it was ended.
func tokenServer(t *testing.T) (string, *sessionLog) {
	t.Helper()
	l := &sessionLog{opened: map[string]string{}, ended: map[string]bool{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			l.mu.Lock()
			l.ended[r.Header.Get("Mcp-Session-Id")] = true
			l.mu.Unlock()
		}
		h.ServeHTTP(w, r)
		if id := w.Header().Get("Mcp-Session-Id"); id != "" && r.Header.Get("Mcp-Session-Id") == "" {
			l.mu.Lock()
			l.opened[id] = r.Header.Get("Authorization")
			l.mu.Unlock()
		}
	}))
	t.Cleanup(hs.Close)
	return hs.URL, l
}

// Each connection's token has its own session: the same token reuses it,
// a renewed token closes it and opens another, and beyond the bound the
// least recently used is closed.
func TestSessionsPerToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	endpoint, l := tokenServer(t)
	set, err := New([]Config{{Slug: "up", URL: endpoint, Connection: "notes"}}, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	u := set.ups["up"]
	t.Cleanup(u.personal.closeAll)
	use := func(conn, token string) *mcp.ClientSession {
		t.Helper()
		// The test server is on loopback, which rules must allow.
		c := &toolplane.Connection{ID: conn, Config: toolplane.ConnectionConfig{
			Egress: toolplane.EgressRules{Hosts: []string{"127.0.0.1"}, AllowCIDRs: []string{"127.0.0.1/32"}}}}
		s, err := u.personal.acquire(ctx, u, c, token)
		if err != nil {
			t.Fatalf("acquire %s: %v", conn, err)
		}
		u.personal.release(s)
		return s.cs
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}

	a := use("con_sam", "token-a")
	if again := use("con_sam", "token-a"); again != a {
		t.Fatal("the same token opened a second session")
	}
	if ada := use("con_ada", "token-ada"); ada == a {
		t.Fatal("two connections share a session")
	}
	if b := use("con_sam", "token-b"); b == a {
		t.Fatal("a renewed token reused the old token's session")
	}
	eventually("the old token's session to end", func() bool { return l.endedWith("Bearer token-a") == 1 })
	if n := u.personal.len(); n != 2 {
		t.Fatalf("%d sessions kept, want 2", n)
	}

	for i := range maxPersonal {
		use("con_"+strconv.Itoa(i), "token-"+strconv.Itoa(i))
	}
	if n := u.personal.len(); n != maxPersonal {
		t.Fatalf("%d sessions kept, want the bound %d", n, maxPersonal)
	}
	eventually("the least recently used sessions to end", func() bool {
		return l.endedWith("Bearer token-ada") == 1 && l.endedWith("Bearer token-b") == 1
	})
}
