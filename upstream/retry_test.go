package upstream_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/upstream"
)

// A remote server that refuses a tools/call for rate, with a Retry-After,
// ends the attempt as a transient failure that made no effect and carries
// the wait, which the invoker's retry loop honours for a read whose retry
// is safe; the next attempt is answered. A call the server may have run
// and not answered is transient too, but may have acted: the invoker
// never sends a remote write twice (its binding declares no keyed
// downstream).
func TestRemoteCallReportsRetryAfterToTheRetryLoop(t *testing.T) {
	t.Parallel()
	var refuse atomic.Int32
	refuse.Store(1)
	next := sdkHandler(t, true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if strings.Contains(string(body), `"tools/call"`) && refuse.Add(-1) >= 0 {
				w.Header().Set("Retry-After", "2")
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return
			}
		}
		next.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	set := startSet(t, upstream.Config{Slug: "up", URL: srv.URL})
	_, b, err := callBound(t, set, "up", "peek", "", map[string]any{})
	if err == nil {
		t.Fatal("the refused call answered")
	}
	o := b.Classify(err)
	if o.Kind != handler.Release || !o.Retry || o.After != 2*time.Second {
		t.Fatalf("outcome kind %v retry %v after %v, want released, transient, after 2s", o.Kind, o.Retry, o.After)
	}
	if b.KeyedDownstream() || b.TransactionalAttempts() {
		t.Fatal("a remote binding declares its writes safe to send twice")
	}
	if _, _, err := callBound(t, set, "up", "peek", "", map[string]any{}); err != nil {
		t.Fatalf("the next attempt: %v", err)
	}
}
