package upstream_test

import (
	"bytes"
	"context"
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

func TestMaskURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"https://mcp.example.com/mcp", "https://mcp.example.com/mcp"},
		{"https://mcp.example.com/mcp?token=abc123", "https://mcp.example.com/mcp?token=xxxxx"},
		{"https://h/mcp?key=k1&sig=s%2F2&v=2", "https://h/mcp?key=xxxxx&sig=xxxxx&v=xxxxx"},
		{"https://user:pass@h/mcp", "https://xxxxx:xxxxx@h/mcp"},
		{"https://ghp_token@h/mcp?flag", "https://xxxxx@h/mcp?flag"},
		{"http://127.0.0.1:8080/a/b?code=zz#frag", "http://127.0.0.1:8080/a/b?code=xxxxx#frag"},
		{"://not a url", "xxxxx"},
	}
	for _, tt := range tests {
		if got := upstream.MaskURL(tt.in); got != tt.want {
			t.Errorf("MaskURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

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
// the address in, but not a user name used as a token, nor the query.
func TestUnreachableUpstreamIsLoggedWithoutItsSecrets(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	rec := &logBuffer{}
	set, err := upstream.New([]upstream.Config{{Slug: "gone", URL: "http://" + urlSecret + "@" + addr + "/mcp?token=" + urlSecret}},
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
	if !strings.Contains(logs, "/mcp?token=xxxxx") {
		t.Errorf("the log does not say which address failed:\n%s", logs)
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
// secrets.
func TestCallErrorsDoNotCarryTheURLsSecrets(t *testing.T) {
	t.Parallel()
	srv, _ := newWireServer(t)
	hs := httptest.NewServer(dropCalls{srv})
	t.Cleanup(hs.Close)
	set := startSet(t, upstream.Config{Slug: "wire", URL: hs.URL + "/mcp?api_key=" + urlSecret})
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
	// The URL was masked where the error was made; the message a model
	// reads goes through the boundary's redaction as well, which names the
	// query parameter's value redacted.
	if strings.Contains(o.Reason, urlSecret) || !strings.Contains(o.Reason, "api_key=[redacted]") {
		t.Errorf("the uncertain reason a model reads: %s", o.Reason)
	}
}
