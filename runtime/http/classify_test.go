package httpruntime_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolplane/toolplane"
)

// Claim fates a write call can leave in the journal.
const (
	released  = "released"  // no claim stored: nothing happened
	completed = "completed" // a stable answer every identical call gets
	held      = "uncertain" // held until a person reconciles it
)

// answer is what a test server does with each request: write a status,
// headers and body, or (status 0) drop the connection without answering.
type answer struct {
	status int
	body   string
	header map[string]string
}

func serve(t *testing.T, a answer) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if a.status == 0 {
			drop(w)
			return
		}
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// drop closes the request's connection with no answer: the request
// arrived, and its answer is lost.
func drop(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// Every row of the classification, against a real server, through the
// invoker: the code the model reads, whether the message is labelled the
// downstream's, what becomes of a write's claim, and how often the
// request was sent.
func TestClassificationOfEveryAnswer(t *testing.T) {
	t.Parallel()
	type row struct {
		name   string
		answer answer
		// read: with retry: safe; write: without an idempotency header.
		readCode, writeCode toolplane.Code // "" is a success
		readHits, writeHits int64
		writeClaim          string
		quoted              bool   // the message is the downstream's text
		message             string // the message holds this
	}
	msg := `{"message":"the widget is wrong"}`
	rows := []row{
		{name: "200 JSON", answer: answer{status: 200, body: `{"id":"w1"}`}, readHits: 1, writeHits: 1, writeClaim: completed},
		{name: "201 JSON", answer: answer{status: 201, body: `{"id":"w1"}`}, readHits: 1, writeHits: 1, writeClaim: completed},
		{name: "204 empty", answer: answer{status: 204}, readHits: 1, writeHits: 1, writeClaim: completed},
		{name: "200 not JSON", answer: answer{status: 200, body: "<html>ok</html>"}, readCode: toolplane.CodeInvalidOutput, writeCode: toolplane.CodeInvalidOutput, readHits: 1, writeHits: 1, writeClaim: completed},
		{name: "400", answer: answer{status: 400, body: msg}, readCode: toolplane.CodeInvalidInput, writeCode: toolplane.CodeInvalidInput, readHits: 1, writeHits: 1, writeClaim: completed, quoted: true, message: "HTTP 400: the widget is wrong"},
		{name: "422 error field", answer: answer{status: 422, body: `{"error":"amount too large"}`}, readCode: toolplane.CodeInvalidInput, writeCode: toolplane.CodeInvalidInput, readHits: 1, writeHits: 1, writeClaim: completed, quoted: true, message: "amount too large"},
		{name: "404 text", answer: answer{status: 404, body: "no such widget"}, readCode: toolplane.CodeNotFound, writeCode: toolplane.CodeNotFound, readHits: 1, writeHits: 1, writeClaim: completed, quoted: true, message: "no such widget"},
		{name: "410", answer: answer{status: 410, body: `{"error":{"message":"gone for good"}}`}, readCode: toolplane.CodeNotFound, writeCode: toolplane.CodeNotFound, readHits: 1, writeHits: 1, writeClaim: completed, quoted: true, message: "gone for good"},
		{name: "409", answer: answer{status: 409, body: msg}, readCode: toolplane.CodeConflict, writeCode: toolplane.CodeConflict, readHits: 1, writeHits: 1, writeClaim: completed, quoted: true, message: "the widget is wrong"},
		{name: "412", answer: answer{status: 412}, readCode: toolplane.CodeConflict, writeCode: toolplane.CodeConflict, readHits: 1, writeHits: 1, writeClaim: completed, quoted: true, message: "HTTP 412"},
		{name: "401", answer: answer{status: 401, body: msg}, readCode: toolplane.CodeUnavailable, writeCode: toolplane.CodeUnavailable, readHits: 1, writeHits: 1, writeClaim: released, quoted: true, message: "connection con_billing1"},
		{name: "403", answer: answer{status: 403}, readCode: toolplane.CodeUnavailable, writeCode: toolplane.CodeUnavailable, readHits: 1, writeHits: 1, writeClaim: released, quoted: true, message: "connection con_billing1"},
		{name: "408", answer: answer{status: 408}, readCode: toolplane.CodeRetryableUpstream, writeCode: toolplane.CodeRetryableUpstream, readHits: 3, writeHits: 1, writeClaim: released},
		{name: "429", answer: answer{status: 429, header: map[string]string{"Retry-After": "0"}}, readCode: toolplane.CodeRetryableUpstream, writeCode: toolplane.CodeRetryableUpstream, readHits: 3, writeHits: 1, writeClaim: released},
		{name: "418 other 4xx", answer: answer{status: 418, body: msg}, readCode: toolplane.CodeInvalidInput, writeCode: toolplane.CodeInvalidInput, readHits: 1, writeHits: 1, writeClaim: completed, quoted: true, message: "HTTP 418"},
		{name: "500", answer: answer{status: 500, body: msg}, readCode: toolplane.CodeRetryableUpstream, writeCode: toolplane.CodeUncertain, readHits: 3, writeHits: 1, writeClaim: held},
		{name: "502", answer: answer{status: 502}, readCode: toolplane.CodeRetryableUpstream, writeCode: toolplane.CodeUncertain, readHits: 3, writeHits: 1, writeClaim: held},
		{name: "503", answer: answer{status: 503}, readCode: toolplane.CodeRetryableUpstream, writeCode: toolplane.CodeUncertain, readHits: 3, writeHits: 1, writeClaim: held},
		{name: "501", answer: answer{status: 501}, readCode: toolplane.CodeUnavailable, writeCode: toolplane.CodeUnavailable, readHits: 1, writeHits: 1, writeClaim: released, quoted: true, message: "HTTP 501"},
		{name: "connection dropped after the request", answer: answer{status: 0}, readCode: toolplane.CodeRetryableUpstream, writeCode: toolplane.CodeUncertain, readHits: 3, writeHits: 1, writeClaim: held},
	}
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, effect := range []toolplane.Effect{toolplane.EffectRead, toolplane.EffectWrite} {
				srv, hits := serve(t, tt.answer)
				method, wantCode, wantHits := http.MethodGet, tt.readCode, tt.readHits
				if effect.Writes() {
					method, wantCode, wantHits = http.MethodPost, tt.writeCode, tt.writeHits
				}
				d := httpDef("billing.widget", effect, toolplane.HTTPBinding{Method: method, URL: srv.URL + "/v1/widgets/{id}"}, func(d *toolplane.Definition) {
					if !effect.Writes() {
						d.Retry = toolplane.RetrySafe
					}
				})
				e := newEnv(t, d)
				args := map[string]any{"id": "w1", "note": "hello"}
				r := e.call(t, d.Name, args)
				checkResult(t, string(effect), r, wantCode, tt.quoted, tt.message)
				if got := hits.Load(); got != wantHits {
					t.Errorf("%s: the server saw %d requests, want %d", effect, got, wantHits)
				}
				if effect.Writes() {
					checkClaim(t, e, d.Name, args, tt.writeClaim)
				}
			}
		})
	}
}

// A request that never left (the dial was refused) did nothing: the
// model reads unavailable with the reason, and a write's claim is
// released so the call can run again.
func TestNotSentIsUnavailableAndReleased(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, effect := range []toolplane.Effect{toolplane.EffectRead, toolplane.EffectWrite} {
		d := httpDef("billing.widget", effect, toolplane.HTTPBinding{Method: http.MethodPost, URL: "http://" + addr + "/v1/widgets"}, func(d *toolplane.Definition) {
			if !effect.Writes() {
				d.Retry = toolplane.RetrySafe
			}
		})
		e := newEnv(t, d)
		args := map[string]any{"note": "hello"}
		r := e.call(t, d.Name, args)
		checkResult(t, string(effect), r, toolplane.CodeUnavailable, true, "was not sent")
		if effect.Writes() {
			checkClaim(t, e, d.Name, args, released)
		}
	}
}

func checkResult(t *testing.T, what string, r toolplane.Result, want toolplane.Code, quoted bool, message string) {
	t.Helper()
	raw, _ := json.Marshal(r)
	if strings.Contains(string(raw), token) {
		t.Errorf("%s: the result holds the connection's token: %s", what, raw)
	}
	if want == "" {
		if !r.OK {
			t.Errorf("%s: result %s, want a success", what, raw)
		}
		if !r.Meta.Untrusted {
			t.Errorf("%s: the downstream's answer is not labelled untrusted", what)
		}
		return
	}
	if r.OK || r.Error == nil || r.Error.Code != want {
		t.Errorf("%s: result %s, want %s", what, raw, want)
		return
	}
	if quoted && !r.Meta.Untrusted {
		t.Errorf("%s: %q quotes the downstream and is not labelled untrusted", what, r.Error.Message)
	}
	if !strings.Contains(r.Error.Message, message) {
		t.Errorf("%s: message %q does not say %q", what, r.Error.Message, message)
	}
}

func checkClaim(t *testing.T, e *env, tool string, args map[string]any, want string) {
	t.Helper()
	c := e.claim(t, tool, args)
	got := released
	if c != nil {
		got = string(c.Status)
	}
	if got != want {
		t.Errorf("the write's claim is %s, want %s", got, want)
	}
}
