package main_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/webhook"
)

// asyncRecord is what one asynchronous action went through, beside its
// keyRecord: its submissions, the invocation they named, and where the
// agent last read it.
type asyncRecord struct {
	// invocation is the id the first 202 named; later 202s must name it
	// again (existing), and any other id is a second invocation of one
	// key (forked).
	invocation string
	forked     []string
	// existing counts the 202s answered existing:true: the retries of a
	// submission whose first answer was lost, or read again.
	existing int
	callback bool // submitted with the test's callback URL
	cancel   bool // the agent asked to cancel it once accepted
	// status and code are the terminal state the agent read (status ""
	// when it read none: abandoned, unanswered, or answered at submit).
	status toolplane.AsyncStatus
	code   string
	// notFound counts reads of the accepted invocation answered 404.
	notFound int
}

// asyncDoor submits the counting tool's writes as asynchronous calls over
// REST, with the action's id as the idempotency key, and polls each until
// it ends: a long-poll (?wait) through the round-robin proxy, so the read
// lands on any node, whichever runs the call.
type asyncDoor struct {
	base, key, tool string
	client          *http.Client
	// callbackURL, when set, is named by a share of the submissions
	// (callbackRate).
	callbackURL  string
	callbackRate float64
	cancelRate   float64
}

// asyncView is the part of the API's view of an asynchronous call the
// agents read.
type asyncView struct {
	ID       string                `json:"id"`
	Status   toolplane.AsyncStatus `json:"status"`
	Existing bool                  `json:"existing"`
	Code     string                `json:"code"`
	Result   json.RawMessage       `json:"result"`
}

// act submits action rec until it is accepted (or answered at once, when
// the submission is refused before it is accepted), then reads it until it
// ends. A dropped connection under any request is an interruption: the
// agent abandons the action at abandonRate (a crashed agent: only the
// platform still moves its call), or tries again, the submission with the
// same key.
func (d *asyncDoor) act(rec *keyRecord, abandonRate float64, answerBy time.Time) {
	ar := &asyncRecord{callback: d.callbackURL != "" && rand.Float64() < d.callbackRate}
	rec.async = ar
	interrupted := func(code, detail string) bool {
		rec.retries[code]++
		rec.lastRetry = code + ": " + detail
		if rec.interrupted.IsZero() {
			rec.interrupted = time.Now()
		}
		if rand.Float64() < abandonRate {
			rec.abandoned = true
			return true
		}
		return false
	}
	pause := func() { time.Sleep(50*time.Millisecond + rand.N(100*time.Millisecond)) }

	// Submit until accepted.
	for ar.invocation == "" {
		if time.Now().After(answerBy) {
			rec.unanswered = true
			return
		}
		body := map[string]any{"arguments": map[string]any{"id": rec.id}, "idempotency_key": rec.id, "mode": "async"}
		if ar.callback {
			body["callback_url"] = d.callbackURL
		}
		status, raw, err := d.do(http.MethodPost, "/v1/tools/"+d.tool+"/invoke", body, 20*time.Second)
		rec.attempts++
		if err != nil {
			if interrupted("transport", err.Error()) {
				return
			}
			pause()
			continue
		}
		if status == http.StatusAccepted {
			var v asyncView
			if err := json.Unmarshal(raw, &v); err != nil || v.ID == "" {
				rec.final, rec.code, rec.answered = answerFailed, "unreadable", time.Now()
				rec.lastRetry = string(raw)
				return
			}
			if v.Existing {
				ar.existing++
			}
			ar.invocation = v.ID
			break
		}
		// Answered in the request: refused before it was accepted (a node
		// still ingesting the upstream, a rate limit, a fault), as a
		// synchronous call is answered.
		var env chaosEnvelope
		if err := json.Unmarshal(raw, &env); err != nil {
			if status >= 500 {
				rec.retries[http.StatusText(status)]++
				pause()
				continue
			}
			rec.final, rec.code, rec.answered, rec.lastRetry = answerFailed, "unreadable", time.Now(), string(raw)
			return
		}
		a := classify(env, raw)
		if a.kind != answerRetry {
			rec.final, rec.code, rec.answered = a.kind, a.code, time.Now()
			return
		}
		rec.retries[a.code]++
		rec.lastRetry = a.code + ": " + a.detail
		pause()
	}

	// Some callers change their mind at once: the call ends cancelled if
	// no worker took it yet, or when its handler stops, unless it ended
	// first (a write whose request was out is held uncertain).
	if rand.Float64() < d.cancelRate {
		ar.cancel = true
		for range 5 {
			if _, _, err := d.do(http.MethodPost, "/v1/invocations/"+ar.invocation+"/cancel", nil, 10*time.Second); err == nil {
				break
			}
			pause()
		}
	}

	// Submitting again under the same key must name the same invocation,
	// existing: a client that lost the 202 may do exactly this.
	if rand.Float64() < 0.2 {
		body := map[string]any{"arguments": map[string]any{"id": rec.id}, "idempotency_key": rec.id, "mode": "async"}
		if ar.callback {
			body["callback_url"] = d.callbackURL
		}
		if status, raw, err := d.do(http.MethodPost, "/v1/tools/"+d.tool+"/invoke", body, 20*time.Second); err == nil && status == http.StatusAccepted {
			var v asyncView
			if json.Unmarshal(raw, &v) == nil {
				ar.existing++
				if v.ID != ar.invocation || !v.Existing {
					ar.forked = append(ar.forked, fmt.Sprintf("%s (existing %v)", v.ID, v.Existing))
				}
			}
		}
	}

	// Read until it ends.
	for {
		if time.Now().After(answerBy) {
			rec.unanswered = true
			return
		}
		status, raw, err := d.do(http.MethodGet, "/v1/invocations/"+ar.invocation+"?wait=15s", nil, 25*time.Second)
		if err != nil {
			if interrupted("transport", err.Error()) {
				return
			}
			pause()
			continue
		}
		var v asyncView
		switch {
		case status == http.StatusNotFound:
			ar.notFound++
			rec.retries["not_found"]++
			rec.lastRetry = "not_found: " + string(raw)
			pause()
			continue
		case status != http.StatusOK || json.Unmarshal(raw, &v) != nil:
			rec.retries[http.StatusText(status)]++
			rec.lastRetry = fmt.Sprintf("%d: %s", status, raw)
			pause()
			continue
		case !v.Status.Terminal():
			continue
		}
		ar.status, ar.code, rec.answered = v.Status, v.Code, time.Now()
		rec.final, rec.code = asyncAnswer(v)
		return
	}
}

// asyncAnswer reads an ended call as the answer kinds of the other doors:
// succeeded is ok (or replayed, when its result says the journal answered
// it), uncertain is uncertain, and failed or cancelled is a definite
// failure.
func asyncAnswer(v asyncView) (answerKind, string) {
	switch v.Status {
	case toolplane.AsyncSucceeded:
		var env chaosEnvelope
		if json.Unmarshal(v.Result, &env) == nil && env.Meta.Replayed {
			return answerReplayed, ""
		}
		return answerOK, ""
	case toolplane.AsyncUncertain:
		return answerUncertain, string(toolplane.CodeUncertain)
	case toolplane.AsyncCancelled:
		return answerFailed, "cancelled"
	}
	return answerFailed, v.Code
}

// do sends one request through the proxy and answers its status and body;
// an error is a dropped connection (or a body cut short).
func (d *asyncDoor) do(method, path string, body any, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+d.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, raw, nil
}

// callbackDelivery is one callback the receiver acted on.
type callbackDelivery struct {
	delivery string // X-Toolplane-Delivery
	status   toolplane.AsyncStatus
	result   string
}

// callbackReceiver is one cluster's callback endpoint, in the test process
// (never killed), as a careful receiver writes it: it checks every
// delivery with the shipped verifier (webhook.Verifier) under the
// organization's secret, acts on a delivery once, and acknowledges a
// replay of one it acted on (the same delivery id, sent again after a
// node died between the post and its record) without acting again. It
// refuses a share of deliveries with 503 before reading them, so
// deliveries are retried too.
type callbackReceiver struct {
	URL string

	mu       sync.Mutex
	verifier *webhook.Verifier
	acted    map[string][]callbackDelivery // by invocation id
	replays  map[string]int                // by invocation id
	refused  int
	// rejected counts deliveries the verifier refused, by check
	// (malformed, stale, signature); unreadable those whose body is not a
	// callback.
	rejected   map[string]int
	unreadable int
}

// refuseRate is the share of deliveries the receiver answers 503.
const refuseRate = 0.1

func newCallbackReceiver(t *testing.T) *callbackReceiver {
	t.Helper()
	r := &callbackReceiver{acted: map[string][]callbackDelivery{}, replays: map[string]int{}, rejected: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL + "/callback"
	return r
}

// useSecret makes the receiver verify deliveries under secret.
func (r *callbackReceiver) useSecret(t *testing.T, secret string) {
	t.Helper()
	v, err := webhook.NewVerifier(webhook.Config{Secrets: [][]byte{[]byte(secret)}})
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.verifier = v
	r.mu.Unlock()
}

func (r *callbackReceiver) serve(w http.ResponseWriter, req *http.Request) {
	raw, err := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if rand.Float64() < refuseRate {
		r.refused++
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if r.verifier == nil {
		r.rejected["no_secret"]++
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var body struct {
		ID     string                `json:"id"`
		Status toolplane.AsyncStatus `json:"status"`
		Result json.RawMessage       `json:"result"`
	}
	if err != nil || json.Unmarshal(raw, &body) != nil || body.ID == "" {
		r.unreadable++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	switch err := r.verifier.Verify(req.Context(), req.Header, raw); {
	case errors.Is(err, webhook.ErrReplay):
		r.replays[body.ID]++
		w.WriteHeader(http.StatusOK)
		return
	case err != nil:
		r.rejected[webhook.CheckName(err)]++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	r.acted[body.ID] = append(r.acted[body.ID], callbackDelivery{
		delivery: req.Header.Get(webhook.HeaderDelivery), status: body.Status, result: string(body.Result)})
	r.mu.Unlock()
	// Acted on, and answered a moment later: a SIGKILL of the posting
	// node lands, often enough, between the two, and the delivery is
	// posted again by another node.
	time.Sleep(time.Duration(20+rand.IntN(150)) * time.Millisecond)
	r.mu.Lock()
	w.WriteHeader(http.StatusNoContent)
}

// receiverFigures is what a receiver saw.
type receiverFigures struct {
	acted               map[string][]callbackDelivery
	replays             map[string]int
	refused, unreadable int
	rejected            map[string]int
}

// Figures answers a copy of what the receiver saw.
func (r *callbackReceiver) Figures() receiverFigures {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := receiverFigures{acted: map[string][]callbackDelivery{}, replays: maps.Clone(r.replays), refused: r.refused,
		unreadable: r.unreadable, rejected: maps.Clone(r.rejected)}
	for id, ds := range r.acted {
		f.acted[id] = slices.Clone(ds)
	}
	return f
}

// rotateCallbackSecret makes a new callback signing secret for the
// organization of the node at addr, as its administrator, and answers it.
func rotateCallbackSecret(t *testing.T, addr, admin string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/webhook-secret:rotate", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Secret string `json:"secret"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil || out.Secret == "" {
		t.Fatalf("POST /v1/webhook-secret:rotate: %d %s", resp.StatusCode, raw)
	}
	return out.Secret
}

// callbacksAccepted reports whether the node at addr accepts a callback
// URL on an asynchronous call, or why not (a build that cannot sign
// callbacks refuses them with 400 at callback_url). It asks about a tool
// that does not exist, so nothing is accepted either way.
func callbacksAccepted(t *testing.T, addr, key, callbackURL string) (bool, string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"arguments": map[string]any{"id": "probe"}, "idempotency_key": "probe", "mode": "async", "callback_url": callbackURL})
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/tools/mcp."+chaosSlug+".no_such_tool/invoke", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct {
		Error struct {
			Message   string `json:"message"`
			FieldPath string `json:"field_path"`
		} `json:"error"`
	}
	if resp.StatusCode == http.StatusBadRequest && json.Unmarshal(raw, &env) == nil && env.Error.FieldPath == "callback_url" {
		return false, env.Error.Message
	}
	return true, ""
}

// asyncRow is an asynchronous call of the counting tool as its store
// holds it.
type asyncRow struct {
	id, action, cluster string
	status              toolplane.AsyncStatus
	code                string
	result              []byte
	callbackURL         string
	callbackState       toolplane.CallbackState
	callbackAttempts    int
}

// asyncRows reads every asynchronous call of the counting tool from the
// PostgreSQL schema and the SQLite file, by the action (the id argument)
// it was submitted for.
func asyncRows(ctx context.Context, pg *pgxpool.Pool, sq *sql.DB) (map[string][]asyncRow, error) {
	const q = `SELECT id, arguments, status, code, result, callback_url, callback_state, callback_attempts FROM async_calls WHERE tool = '` + chaosPlatform + `'`
	out := map[string][]asyncRow{}
	add := func(cluster string, id string, args, result []byte, status, code, url, state string, attempts int64) error {
		var a struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return fmt.Errorf("async call %s: arguments %q: %w", id, args, err)
		}
		out[a.ID] = append(out[a.ID], asyncRow{id: id, action: a.ID, cluster: cluster, status: toolplane.AsyncStatus(status), code: code, result: result,
			callbackURL: url, callbackState: toolplane.CallbackState(state), callbackAttempts: int(attempts)})
		return nil
	}
	rows, err := pg.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id, status, code, url, state string
		var args, result []byte
		var attempts int64
		if err := rows.Scan(&id, &args, &status, &code, &result, &url, &state, &attempts); err != nil {
			rows.Close()
			return nil, err
		}
		if err := add("postgres", id, args, result, status, code, url, state, attempts); err != nil {
			rows.Close()
			return nil, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	srows, err := sq.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer srows.Close()
	for srows.Next() {
		var id, status, code, url, state string
		var args, result []byte
		var attempts int64
		if err := srows.Scan(&id, &args, &status, &code, &result, &url, &state, &attempts); err != nil {
			return nil, err
		}
		if err := add("sqlite", id, args, result, status, code, url, state, attempts); err != nil {
			return nil, err
		}
	}
	return out, srows.Err()
}

// callbackTally is what the callbacks of one cluster's calls came to.
type callbackTally struct {
	named, delivered, expired, pending int
	// acted are the deliveries the receiver acted on; replays those it
	// acknowledged as repeats of a delivery it acted on (the same
	// delivery id).
	acted, replays, maxAttempts int
}

// judgeCallbacks holds what a cluster's receiver saw to that cluster's
// asynchronous calls as stored once the settle time is over: every call
// that named the callback URL has it delivered (acted on once) or
// expired, never pending; every delivery acted on is of an ended call,
// with its state and result; a call is acted on at most once (a repeat
// carries the delivery id already acted on, and is refused as a replay);
// and nothing reaches the receiver for a call that did not name it. It
// answers the figures and the broken rules.
func judgeCallbacks(cluster string, byAction map[string][]asyncRow, f receiverFigures) (*callbackTally, []string) {
	var violations []string
	tl := &callbackTally{}
	rows := map[string]*asyncRow{}
	for _, rs := range byAction {
		for i := range rs {
			if rs[i].cluster == cluster {
				rows[rs[i].id] = &rs[i]
			}
		}
	}
	for _, row := range rows {
		if row.callbackURL == "" {
			continue
		}
		tl.named++
		tl.maxAttempts = max(tl.maxAttempts, row.callbackAttempts)
		ds := f.acted[row.id]
		tl.acted += len(ds)
		tl.replays += f.replays[row.id]
		switch row.callbackState {
		case toolplane.CallbackDelivered:
			tl.delivered++
			if len(ds) == 0 {
				violations = append(violations, fmt.Sprintf("callback: %s (%s over %s): recorded delivered after %d attempt(s), never acted on",
					row.action, row.id, cluster, row.callbackAttempts))
			}
		case toolplane.CallbackExpired:
			tl.expired++
		default:
			tl.pending++
			violations = append(violations, fmt.Sprintf("callback: %s (%s over %s): callback %q after %d attempt(s) once the settle time was over, call %s",
				row.action, row.id, cluster, row.callbackState, row.callbackAttempts, row.status))
		}
		if len(ds) > 1 {
			var ids []string
			for _, d := range ds {
				ids = append(ids, d.delivery)
			}
			violations = append(violations, fmt.Sprintf("callback_twice: %s (%s over %s): acted on %d times, delivery ids %v", row.action, row.id, cluster, len(ds), ids))
		}
		for _, d := range ds {
			if d.status != row.status || !sameJSON(d.result, string(row.result)) {
				violations = append(violations, fmt.Sprintf("callback_mismatch: %s (%s over %s): delivery %s says %s %s, the call is %s %s",
					row.action, row.id, cluster, d.delivery, d.status, d.result, row.status, row.result))
			}
		}
	}
	for id, ds := range f.acted {
		row := rows[id]
		if row == nil || row.callbackURL == "" {
			violations = append(violations, fmt.Sprintf("callback_stray: %d delivery(ies) over %s for %s, which no stored call that named the callback URL is", len(ds), cluster, id))
			continue
		}
		for _, d := range ds {
			if !d.status.Terminal() {
				violations = append(violations, fmt.Sprintf("callback_mismatch: %s (%s over %s): delivery %s of a call %s, not ended", row.action, id, cluster, d.delivery, d.status))
			}
		}
	}
	for check, n := range f.rejected {
		violations = append(violations, fmt.Sprintf("callback_unverified: %d delivery(ies) over %s refused by the verifier (%s)", n, cluster, check))
	}
	if f.unreadable > 0 {
		violations = append(violations, fmt.Sprintf("callback_unreadable: %d delivery(ies) over %s are not a callback", f.unreadable, cluster))
	}
	return tl, violations
}

// sameJSON reports whether a and b are the same JSON value (or both
// empty).
func sameJSON(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	return reflect.DeepEqual(x, y)
}
