package upstream_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/upstream"
)

// logBuffer is where a captured slog handler writes: a buffer a test can
// read while the set still logs.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const urlSecret = "url-secret-0123456789"

// An upstream that cannot be reached is logged with its address, its
// secrets masked: the HTTP client masks a password in the errors it quotes
// the address in, but not a user name used as a token, a key in the path,
// nor the query.
func TestUnreachableUpstreamIsLoggedWithoutItsSecrets(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, rest, shown string }{
		{"user info and query", urlSecret + "@%s/mcp?token=" + urlSecret, "/mcp?token=[redacted]"},
		{"path", "%s/mcp/" + urlSecret + "/sse", "/mcp/[redacted]/sse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			rec := &logBuffer{}
			set, err := upstream.New([]upstream.Config{{Slug: "gone", URL: "http://" + fmt.Sprintf(tt.rest, addr)}},
				upstream.Options{Logger: slog.New(slog.NewTextHandler(rec, &slog.HandlerOptions{Level: slog.LevelDebug})), Version: "test"})
			if err != nil {
				t.Fatal(err)
			}
			reg, _, err := registry.Build(nil, registry.Options{Bindings: bindings{handler.NewRegistry(), set}})
			if err != nil {
				t.Fatal(err)
			}
			set.UseRegistry(reg)
			set.Start(context.Background(), 10*time.Second)
			defer set.Close()
			eventually(t, "the failed connection to be logged", func() bool { return strings.Contains(rec.text(), "upstream connection failed") })
			logs := rec.text()
			if strings.Contains(logs, urlSecret) {
				t.Errorf("the URL's secret was logged:\n%s", logs)
			}
			if !strings.Contains(logs, tt.shown) {
				t.Errorf("the log does not say which address failed:\n%s", logs)
			}
		})
	}
}

// dropCalls serves next, except that it drops the connection of any
// tools/call: the call was sent and its answer lost.
type dropCalls struct{ next http.Handler }

func (d dropCalls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if bytes.Contains(body, []byte(`"tools/call"`)) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	d.next.ServeHTTP(w, r)
}

// A call whose answer was lost ends uncertain, and the reason, which a
// model reads, quotes the transport's error: it must not quote the URL's
// secrets, wherever in the URL they are.
func TestCallErrorsDoNotCarryTheURLsSecrets(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, path, shown string }{
		// The URL was masked where the error was made; the message a
		// model reads goes through the boundary's redaction as well,
		// which names the query parameter's value redacted.
		{"query", "/mcp?api_key=" + urlSecret, "api_key=[redacted]"},
		{"path", "/mcp/" + urlSecret + "/sse?x=1", "/mcp/[redacted]/sse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := newWireServer(t)
			hs := httptest.NewServer(dropCalls{srv})
			t.Cleanup(hs.Close)
			set := startSet(t, upstream.Config{Slug: "wire", URL: hs.URL + tt.path})
			_, b, err := callBound(t, set, "wire", "odd", "", nil)
			if err == nil {
				t.Fatal("a dropped call answered no error")
			}
			if strings.Contains(err.Error(), urlSecret) {
				t.Errorf("the call's error quotes the URL's secret: %v", err)
			}
			o := b.Classify(err)
			if o.Kind != handler.Held {
				t.Fatalf("a lost answer ended %v, want held", o.Kind)
			}
			if strings.Contains(o.Reason, urlSecret) || !strings.Contains(o.Reason, tt.shown) {
				t.Errorf("the uncertain reason a model reads: %s", o.Reason)
			}
		})
	}
}
