package async_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/async"
	"github.com/toolplane/toolplane/internal/syncbuf"
)

// take answers the log lines logs was written since the last take.
func take(logs *syncbuf.Buffer) []string {
	s := strings.TrimSpace(logs.Take())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// warnings answers the records at Warn among lines (JSON records).
func warnings(t *testing.T, lines []string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["level"] == "WARN" {
			out = append(out, m)
		}
	}
	return out
}

// A failed delivery attempt is seen where the API reads the call and in
// the log at Warn, once per attempt: the attempt counted, why it failed
// in words built from the failure's kind, when the next is due, and the
// receiver's host, never its URL's query or credentials (a receiver may
// put a token there). A delivery that succeeds clears the error.
func TestAFailedCallbackAttemptIsRecordedAndLogged(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		var failing atomic.Bool
		failing.Store(true)
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if failing.Load() {
				http.Error(w, "down for SECRET maintenance", http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		defer recv.Close()
		// A port nothing listens on: the connection is refused.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := l.Addr().String()
		l.Close()

		var logs syncbuf.Buffer
		log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		r := newRig(t, s, async.Config{Signer: signer{}, AllowCIDRs: []string{"127.0.0.1/32"}, Log: log, Resolver: noSuchHost{}})
		recvHost := strings.TrimPrefix(recv.URL, "http://")

		cases := []struct {
			name, url, host, reason string
		}{
			{"an answer of 500", recv.URL + "/cb?token=SECRET", recvHost, "HTTP status 500"},
			{"a refused connection", "http://" + closed + "/cb?token=SECRET", closed, "connection refused"},
			{"a name that does not resolve", "https://hooks.example.com/toolplane?token=SECRET", "hooks.example.com", "DNS failure: no such host"},
			// Refused at submission; stored by an older binary, or by hand.
			{"a URL with credentials", "http://user:pass@" + closed + "/cb?token=SECRET#SECRET", closed, "connection refused"},
		}
		for _, tc := range cases {
			id := endedWithCallback(t, s, tc.url)
			take(&logs)

			before := time.Now()
			err := r.svc.Deliver(t.Context(), "org-1", id, async.Attempt{N: 1, Retry: 5 * time.Second})
			if err == nil {
				t.Fatalf("%s: the attempt answered no error", tc.name)
			}
			got := r.get(t, "org-1", id)
			if got.CallbackState != toolplane.CallbackPending || got.CallbackAttempts != 1 || !strings.Contains(got.CallbackError, tc.reason) {
				t.Fatalf("%s: after one failed attempt: state %q, attempts %d, error %q; want pending, 1, %q",
					tc.name, got.CallbackState, got.CallbackAttempts, got.CallbackError, tc.reason)
			}
			if next := got.CallbackNextAt; next.Before(before.Add(5*time.Second-time.Millisecond)) || next.After(time.Now().Add(5*time.Second)) {
				t.Errorf("%s: next attempt at %s, want 5s after the attempt (%s)", tc.name, next, before)
			}
			ws := warnings(t, take(&logs))
			if len(ws) != 1 {
				t.Fatalf("%s: %d warnings logged, want one: %v", tc.name, len(ws), ws)
			}
			w := ws[0]
			if w["call"] != id || w["organization"] != "org-1" || w["attempt"] != float64(1) || w["host"] != tc.host || !strings.Contains(w["reason"].(string), tc.reason) {
				t.Errorf("%s: the warning %v", tc.name, w)
			}
			for _, what := range []string{err.Error(), got.CallbackError, mustJSON(t, w)} {
				for _, secret := range []string{"SECRET", "token", "pass", "user"} {
					if strings.Contains(what, secret) {
						t.Errorf("%s: %q shows %q of the callback URL", tc.name, what, secret)
					}
				}
			}
		}

		// The receiver answers: delivered, and the error of the attempts
		// before is cleared (the attempts stay counted).
		id := endedWithCallback(t, s, recv.URL+"/cb?token=SECRET")
		if err := r.svc.Deliver(t.Context(), "org-1", id, async.Attempt{N: 1, Retry: time.Second}); err == nil {
			t.Fatal("the attempt answered no error")
		}
		failing.Store(false)
		take(&logs)
		if err := r.svc.Deliver(t.Context(), "org-1", id, async.Attempt{N: 2, Retry: 2 * time.Second}); err != nil {
			t.Fatal(err)
		}
		got := r.get(t, "org-1", id)
		if got.CallbackState != toolplane.CallbackDelivered || got.CallbackAttempts != 2 || got.CallbackError != "" || !got.CallbackNextAt.IsZero() {
			t.Fatalf("delivered after a failure: state %q, attempts %d, error %q, next %s", got.CallbackState, got.CallbackAttempts, got.CallbackError, got.CallbackNextAt)
		}
		if ws := warnings(t, take(&logs)); len(ws) != 0 {
			t.Errorf("a delivery logged warnings: %v", ws)
		}
	})
}

// An attempt the node cuts (River stopping its job: the context cancelled
// with a cause) is not the receiver's failure: nothing is recorded or
// logged, the last attempt does not expire the callback, and the cause is
// answered, so River hands the attempt back.
func TestAnAttemptTheNodeCutIsNotRecorded(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		held := make(chan struct{}, 1)
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Read whole, so the server notices the client leave.
			io.Copy(io.Discard, r.Body)
			held <- struct{}{}
			<-r.Context().Done()
		}))
		defer recv.Close()
		var logs syncbuf.Buffer
		log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		r := newRig(t, s, async.Config{Signer: signer{}, AllowCIDRs: []string{"127.0.0.1/32"}, Log: log})
		stop := errors.New("the node stops")
		for _, last := range []bool{false, true} {
			id := endedWithCallback(t, s, recv.URL+"/cb?token=SECRET")
			ctx, cancel := context.WithCancelCause(t.Context())
			go func() {
				<-held
				cancel(stop)
			}()
			err := r.svc.Deliver(ctx, "org-1", id, async.Attempt{N: 3, Last: last, Retry: time.Minute})
			if !errors.Is(err, stop) || strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("last %v: Deliver answered %v, want the stop's cause", last, err)
			}
			got := r.get(t, "org-1", id)
			if got.CallbackState != toolplane.CallbackPending || got.CallbackAttempts != 0 || got.CallbackError != "" || !got.CallbackNextAt.IsZero() {
				t.Fatalf("last %v: after a cut attempt: state %q, attempts %d, error %q, next %s; want it untouched",
					last, got.CallbackState, got.CallbackAttempts, got.CallbackError, got.CallbackNextAt)
			}
			if ws := warnings(t, take(&logs)); len(ws) != 0 {
				t.Errorf("last %v: a cut attempt logged %v", last, ws)
			}
		}
	})
}

// endedWithCallback stores a call of org-1 that ended with its callback
// to url due, as one submitted with it stands once it ended; Submit
// refuses a URL with credentials, which a call stored otherwise may
// still carry.
func endedWithCallback(t *testing.T, s toolplane.Store, url string) string {
	t.Helper()
	now := time.Now()
	c := &toolplane.AsyncCall{OrganizationID: "org-1", ID: toolplane.NewID("inv_"), Tool: "crm.read", AgentID: "agent-1",
		Arguments: []byte(`{}`), Invocation: []byte(`{}`), Status: toolplane.AsyncSucceeded, Result: []byte(`{"ok":true}`),
		CallbackURL: url, CallbackState: toolplane.CallbackPending, CreatedAt: now, UpdatedAt: now, StartedAt: now, EndedAt: now}
	if err := s.InsertAsyncCall(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// noSuchHost resolves no name, as a resolver that finds none.
type noSuchHost struct{}

func (noSuchHost) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Reason words a failure by its kind alone, whatever its text quotes.
func TestReasonIsTheFailuresKind(t *testing.T) {
	t.Parallel()
	const raw = "https://user:pass@hooks.example.com/cb?token=SECRET"
	wrap := func(err error) error { return &url.Error{Op: "Post", URL: raw, Err: err} }
	for _, tc := range []struct {
		err  error
		want string
	}{
		{wrap(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), "connection refused"},
		{wrap(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), "connection reset"},
		{wrap(fmt.Errorf("egress: resolve hooks.example.com: %w", &net.DNSError{Err: "no such host", Name: "hooks.example.com", IsNotFound: true})), "DNS failure: no such host"},
		{wrap(&net.DNSError{Err: "i/o timeout", Name: "hooks.example.com", IsTimeout: true}), "DNS failure: timeout"},
		{wrap(context.DeadlineExceeded), "timeout"},
		{wrap(&tls.CertificateVerificationError{Err: errors.New("x509: unknown authority " + raw)}), "TLS failure: certificate not trusted"},
		{wrap(io.EOF), "connection closed before an answer"},
		{wrap(errors.New("something else about " + raw)), "connection failed"},
	} {
		if got := async.Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
