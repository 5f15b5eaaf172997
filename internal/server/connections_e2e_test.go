package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	_ "modernc.org/sqlite"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/postgres/pgtest"
)

// The end-to-end tests of connections: a whole server in this process,
// tools bound to HTTP requests and SQL statements, connections created
// over REST with distinctive secrets planted in them, calls over both
// doors that succeed and fail every way a downstream can make them fail,
// and then every surface the server exposes or writes scanned for the
// secrets in every form they could take.

// traffic records every answer a client of the server received: status
// line, headers and body, whichever door it came through.
type traffic struct {
	mu   sync.Mutex
	seen []string
}

func (tr *traffic) add(what string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.seen = append(tr.seen, what)
}

func (tr *traffic) all() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.seen...)
}

// recorder is a RoundTripper that presents a key and records what the
// server answered, body included, as the client reads it.
type recorder struct {
	key string
	tr  *traffic
}

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "%s %s -> %s\n", req.Method, req.URL.Path, resp.Status)
	resp.Header.Write(&head)
	r.tr.add(head.String())
	resp.Body = &teeBody{rc: resp.Body, tr: r.tr, what: req.Method + " " + req.URL.Path}
	return resp, nil
}

// teeBody records a body as it is read, and what was read when it closes.
type teeBody struct {
	rc   io.ReadCloser
	tr   *traffic
	what string
	mu   sync.Mutex
	got  bytes.Buffer
	done bool
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.mu.Lock()
	b.got.Write(p[:n])
	b.mu.Unlock()
	if err != nil {
		b.flush()
	}
	return n, err
}

func (b *teeBody) Close() error {
	b.flush()
	return b.rc.Close()
}

func (b *teeBody) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.done = true
	b.tr.add(b.what + " body: " + b.got.String())
}

// planted answers a distinctive secret value: nothing else the test sees
// could hold it by chance.
func planted(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + "-PLANTED-" + hex.EncodeToString(b)
}

// needle is one form a secret could leak in, named for the report.
type needle struct{ name, value string }

// formsOf answers the forms of a secret value a leak could take: itself,
// URL-encoded (query and path), and base64.
func formsOf(name, v string) []needle {
	out := []needle{{name, v}}
	for _, f := range []struct{ how, v string }{
		{"query-escaped", url.QueryEscape(v)},
		{"path-escaped", url.PathEscape(v)},
		{"base64", base64.StdEncoding.EncodeToString([]byte(v))},
		{"base64url", base64.RawURLEncoding.EncodeToString([]byte(v))},
	} {
		if f.v != v {
			out = append(out, needle{name + " " + f.how, f.v})
		}
	}
	return out
}

// ordersAPI is the downstream: a small JSON API behind a bearer token
// (and a basic-auth ledger) that misbehaves on request. Its failures
// quote the request's credential back, as a careless service does.
type ordersAPI struct {
	url           string
	token         string
	user, pass    string
	requests      atomic.Int64 // refund requests received
	effects       atomic.Int64 // refunds made
	mu            sync.Mutex
	byKey         map[string]string // idempotency key -> refund id
	keysSeen      []string
	slowed        chan struct{}
	gets          atomic.Int64
	authorization atomic.Value // the last Authorization header seen
}

func newOrdersAPI(t *testing.T, token, user, pass string) *ordersAPI {
	t.Helper()
	a := &ordersAPI{token: token, user: user, pass: pass, byKey: map[string]string{}, slowed: make(chan struct{}, 8)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", a.getOrder)
	mux.HandleFunc("POST /orders/{id}/refunds", a.refund)
	mux.HandleFunc("GET /ledger/{id}", a.ledger)
	a.url = serveLoopback(t, mux)
	return a
}

// echo is what a careless downstream quotes back of a request: the
// Authorization header as sent, and what it decodes to.
func (a *ordersAPI) echo(r *http.Request) string {
	h := r.Header.Get("Authorization")
	s := "you sent Authorization: " + h
	if raw, ok := strings.CutPrefix(h, "Basic "); ok {
		if dec, err := base64.StdEncoding.DecodeString(raw); err == nil {
			user, pass, _ := strings.Cut(string(dec), ":")
			s += fmt.Sprintf(" (user %s, password %s, login %s)", user, pass, url.QueryEscape(user)+":"+url.QueryEscape(pass))
		}
	}
	if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
		s += " (token " + url.QueryEscape(tok) + ")"
	}
	return s
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (a *ordersAPI) getOrder(w http.ResponseWriter, r *http.Request) {
	a.gets.Add(1)
	a.authorization.Store(r.Header.Get("Authorization"))
	w.Header().Set("X-Echo", a.echo(r))
	if r.Header.Get("Authorization") != "Bearer "+a.token {
		reply(w, http.StatusUnauthorized, map[string]string{"message": "bad credential: " + a.echo(r)})
		return
	}
	switch id := r.PathValue("id"); id {
	case "echo-ok":
		// A success whose body carries the credential, in a value and as
		// a key.
		reply(w, http.StatusOK, map[string]any{"id": id, "status": "delivered", "debug": a.echo(r),
			r.Header.Get("Authorization"): "seen"})
	case "echo-400":
		reply(w, http.StatusBadRequest, map[string]string{"message": "malformed request; " + a.echo(r)})
	case "echo-401":
		reply(w, http.StatusUnauthorized, map[string]string{"error": "token rejected; " + a.echo(r)})
	case "echo-404":
		http.Error(w, "no such order; "+a.echo(r), http.StatusNotFound)
	case "echo-500":
		http.Error(w, "internal error while handling "+a.echo(r), http.StatusInternalServerError)
	case "slow":
		select {
		case a.slowed <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		reply(w, http.StatusOK, map[string]any{"id": id, "status": "late"})
	default:
		reply(w, http.StatusOK, map[string]any{"id": id, "customer": "Ada Lovelace", "status": "delivered", "total_cents": 4999})
	}
}

func (a *ordersAPI) ledger(w http.ResponseWriter, r *http.Request) {
	user, pass, ok := r.BasicAuth()
	if !ok || user != a.user || pass != a.pass {
		reply(w, http.StatusUnauthorized, map[string]string{"message": "bad login; " + a.echo(r)})
		return
	}
	if r.PathValue("id") == "echo-403" {
		reply(w, http.StatusForbidden, map[string]string{"message": "not yours; " + a.echo(r)})
		return
	}
	if r.PathValue("id") == "echo-422" {
		reply(w, http.StatusUnprocessableEntity, map[string]string{"message": "cannot; " + a.echo(r)})
		return
	}
	reply(w, http.StatusOK, map[string]any{"id": r.PathValue("id"), "balance_cents": 1200, "note": a.echo(r)})
}

// refund makes one refund per idempotency key (or per request, without
// one). For order "hangup" it makes the refund and hangs up before
// answering: the effect happened, its answer is lost.
func (a *ordersAPI) refund(w http.ResponseWriter, r *http.Request) {
	a.requests.Add(1)
	if r.Header.Get("Authorization") != "Bearer "+a.token {
		reply(w, http.StatusUnauthorized, map[string]string{"message": "bad credential: " + a.echo(r)})
		return
	}
	key := r.Header.Get("Idempotency-Key")
	a.mu.Lock()
	a.keysSeen = append(a.keysSeen, key)
	id, done := a.byKey[key]
	if !done || key == "" {
		id = fmt.Sprintf("re_%d", a.effects.Add(1))
		if key != "" {
			a.byKey[key] = id
		}
	}
	a.mu.Unlock()
	if r.PathValue("id") == "hangup" && !done {
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("the test server cannot hang up")
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if r.PathValue("id") == "echo-500" {
		http.Error(w, "refund failed for "+a.echo(r), http.StatusInternalServerError)
		return
	}
	reply(w, http.StatusCreated, map[string]any{"refund_id": id, "order_id": r.PathValue("id")})
}

// toolFile is one tool definition file of the tools directory.
func toolFile(t *testing.T, dir, name string, def map[string]any) {
	t.Helper()
	raw, err := json.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// httpTool answers an HTTP tool's definition.
func httpTool(name, effect, provider string, binding map[string]any) map[string]any {
	d := map[string]any{
		"name": name, "version": "1.0.0", "description": "A tool of the end-to-end test: " + name + ".",
		"kind": "internal", "effect": effect, "connection": provider, "timeout": "3s", "owner": "shop",
		"binding":       map[string]any{"http": binding},
		"input_schema":  map[string]any{"type": "object", "additionalProperties": false, "required": []string{"id"}, "properties": map[string]any{"id": map[string]any{"type": "string"}, "connection_id": map[string]any{"type": "string"}, "amount_cents": map[string]any{"type": "integer"}}},
		"output_schema": map[string]any{"type": "object"},
	}
	if effect != "read" {
		d["repeatable"] = false
	}
	return d
}

// e2e is a whole server, its downstream, and what the test planted and
// saw.
type e2e struct {
	s      *Server
	cfg    Config
	base   string
	admin  string
	agent  string
	api    *ordersAPI
	log    *syncbuf.Buffer
	seen   *traffic
	stop   context.CancelFunc
	ran    chan error
	sqlDir string
	// token, user and pass are the planted secrets of the orders and
	// ledger connections; pgPass the PostgreSQL connection's password,
	// when one runs.
	token, user, pass, pgPass string
	pgDSN                     string
	// conns are the connections created, by provider.
	conns map[string]string
	// spans records every span the server ends.
	spans *tracetest.SpanRecorder
}

// startE2E starts a server over a fresh SQLite database with the test's
// tools, creates its connections over REST, and grants an agent the tools.
func startE2E(t *testing.T) *e2e {
	t.Helper()
	dir := t.TempDir()
	e := &e2e{log: &syncbuf.Buffer{}, seen: &traffic{}, ran: make(chan error, 1), conns: map[string]string{}, spans: tracetest.NewSpanRecorder(),
		token: planted("tok"), user: "ledger-bot", pass: planted("pw/x+y=z"), sqlDir: filepath.Join(dir, "sql")}
	e.api = newOrdersAPI(t, e.token, e.user, e.pass)

	// The SQL tool's database, in the organization's own directory under
	// the one SQLite connections may use.
	orgDir := filepath.Join(e.sqlDir, DefaultOrganization)
	if err := os.MkdirAll(orgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	shop, err := sql.Open("sqlite", filepath.Join(orgDir, "shop.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shop.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, customer TEXT NOT NULL, status TEXT NOT NULL, total_cents INTEGER NOT NULL);
		INSERT INTO orders VALUES ('ord_1', 'Ada Lovelace', 'delivered', 4999), ('ord_2', 'Grace Hopper', 'shipped', 12900)`); err != nil {
		t.Fatal(err)
	}
	shop.Close()

	tools := filepath.Join(dir, "tools")
	if err := os.MkdirAll(tools, 0o700); err != nil {
		t.Fatal(err)
	}
	toolFile(t, tools, "get_order", httpTool("shop.get_order", "read", "orders", map[string]any{"method": "GET", "url": e.api.url + "/orders/{id}"}))
	toolFile(t, tools, "refund", httpTool("shop.refund", "write", "orders", map[string]any{"method": "POST", "url": e.api.url + "/orders/{id}/refunds", "idempotency_header": "Idempotency-Key"}))
	toolFile(t, tools, "refund_once", httpTool("shop.refund_once", "write", "orders", map[string]any{"method": "POST", "url": e.api.url + "/orders/{id}/refunds"}))
	toolFile(t, tools, "lookup", httpTool("shop.lookup", "read", "orders", map[string]any{"method": "GET", "url": e.api.url + "/orders/{id}", "query": map[string]any{"trace": "{id}"}, "headers": map[string]any{"X-Order": "{id}"}}))
	toolFile(t, tools, "metadata", httpTool("shop.metadata", "read", "orders", map[string]any{"method": "GET", "url": "http://169.254.169.254/latest/meta-data/{id}"}))
	toolFile(t, tools, "elsewhere", httpTool("shop.elsewhere", "read", "orders", map[string]any{"method": "GET", "url": "http://localhost.invalid:1/orders/{id}"}))
	toolFile(t, tools, "balance", httpTool("shop.balance", "read", "ledger", map[string]any{"method": "GET", "url": e.api.url + "/ledger/{id}"}))
	toolFile(t, tools, "by_name", httpTool("shop.by_name", "read", "named", map[string]any{"method": "GET", "url": strings.Replace(e.api.url, "127.0.0.1", "localhost", 1) + "/orders/{id}"}))
	toolFile(t, tools, "ship", httpTool("shop.ship", "read", "shipping", map[string]any{"method": "GET", "url": e.api.url + "/orders/{id}"}))
	toolFile(t, tools, "find_orders", map[string]any{
		"name": "shop.find_orders", "version": "1.0.0", "description": "Find orders in a status.", "kind": "internal", "effect": "read",
		"connection": "shopdb", "owner": "shop", "timeout": "2s",
		"binding":       map[string]any{"sql": map[string]any{"statement": "SELECT id, customer, status, total_cents FROM orders WHERE status = :status ORDER BY id", "max_rows": 20}},
		"input_schema":  map[string]any{"type": "object", "additionalProperties": false, "required": []string{"status"}, "properties": map[string]any{"status": map[string]any{"type": "string"}}},
		"output_schema": map[string]any{"type": "object"},
	})
	toolFile(t, tools, "pg_now", map[string]any{
		"name": "shop.pg_now", "version": "1.0.0", "description": "Ask the PostgreSQL database a question.", "kind": "internal", "effect": "read",
		"connection": "pgdb", "owner": "shop", "timeout": "2s",
		"binding":       map[string]any{"sql": map[string]any{"statement": "SELECT :status::text AS said, current_user AS who", "max_rows": 5}},
		"input_schema":  map[string]any{"type": "object", "additionalProperties": false, "required": []string{"status"}, "properties": map[string]any{"status": map[string]any{"type": "string"}}},
		"output_schema": map[string]any{"type": "object"},
	})
	toolFile(t, tools, "pg_missing", map[string]any{
		"name": "shop.pg_missing", "version": "1.0.0", "description": "Read a table that is not there.", "kind": "internal", "effect": "read",
		"connection": "pgdb", "owner": "shop", "timeout": "2s",
		"binding":       map[string]any{"sql": map[string]any{"statement": "SELECT * FROM no_such_table WHERE id = :status", "max_rows": 5}},
		"input_schema":  map[string]any{"type": "object", "additionalProperties": false, "required": []string{"status"}, "properties": map[string]any{"status": map[string]any{"type": "string"}}},
		"output_schema": map[string]any{"type": "object"},
	})

	e.cfg = Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db"), ToolsDir: tools, SQLiteDir: e.sqlDir,
		Logger:         slog.New(slog.NewJSONHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans)),
		// The sweep decides lost claims quickly, so a held call is
		// observed held, not merely in flight.
		SweepEvery: 200 * time.Millisecond, LeaseMargin: 500 * time.Millisecond}
	e.start(t, dir)
	e.agent = e.mintKey(t, e.admin, `{"kind":"agent","subject":"shop-agent","label":"e2e agent"}`)
	e.must(t, "POST", "/v1/grants", e.admin, `{"agent_id":"shop-agent","pattern":"shop.*"}`, http.StatusCreated)

	loopback := toolplane.EgressRules{Hosts: []string{"127.0.0.1"}, AllowCIDRs: []string{"127.0.0.0/8"}}
	e.createConnection(t, e.admin, map[string]any{"name": "orders-main", "provider": "orders", "kind": "static",
		"config": map[string]any{"auth": "bearer", "egress": loopback}, "secrets": map[string]any{"token": e.token}})
	e.createConnection(t, e.admin, map[string]any{"name": "ledger-main", "provider": "ledger", "kind": "static",
		"config": map[string]any{"auth": "basic", "egress": loopback}, "secrets": map[string]any{"username": e.user, "password": e.pass}})
	// A connection whose rules allow a host name but no range its
	// address is in: the release admits the host, and the dialer refuses
	// the address it resolves to.
	e.createConnection(t, e.admin, map[string]any{"name": "named-main", "provider": "named", "kind": "static",
		"config":  map[string]any{"auth": "header", "header": "X-Api-Key", "egress": map[string]any{"hosts": []string{"localhost"}}},
		"secrets": map[string]any{"token": e.token}})
	e.createConnection(t, e.admin, map[string]any{"name": "shop-db", "provider": "shopdb", "kind": "static",
		"config": map[string]any{"driver": "sqlite"}, "secrets": map[string]any{"dsn": "shop.db"}})
	if dsn, ok := pgtest.LookupDSN(); ok {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		// The connection logs in as a least-privilege role, as the README
		// tells: a superuser is refused (TestPrivilegedSQLConnectionOverREST).
		e.pgPass = planted("pg/pw+x")
		u.User = url.UserPassword(leastPrivilegeRole(t, dsn), e.pgPass)
		e.pgDSN = u.String()
		e.createConnection(t, e.admin, map[string]any{"name": "pg-main", "provider": "pgdb", "kind": "static",
			"config": map[string]any{"driver": "postgres", "egress": loopback}, "secrets": map[string]any{"dsn": e.pgDSN}})
	}
	return e
}

// leastPrivilegeRole creates a PostgreSQL role of a unique name on dsn's
// server that may log in and nothing more, dropped when t ends, and
// answers its name.
func leastPrivilegeRole(t *testing.T, dsn string) string {
	t.Helper()
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := "tp_" + strings.ToLower(rand.Text()[:12])
	if _, err := admin.Exec(`CREATE ROLE ` + name + ` LOGIN`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, name)
		if _, err := admin.Exec(`DROP ROLE ` + name); err != nil {
			t.Errorf("drop role %s: %v", name, err)
		}
	})
	return name
}

// shutdown stops the server, once, and waits for Run.
func (e *e2e) shutdown(t *testing.T) {
	t.Helper()
	if e.stop == nil {
		return
	}
	e.stop()
	e.stop = nil
	select {
	case err := <-e.ran:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Error("Run did not return")
	}
}

// do sends a REST request with key and answers the status and the body,
// recording the answer.
func (e *e2e) do(t *testing.T, method, path, key, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Transport: recorder{key: key, tr: e.seen}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(raw)
}

// must is do that fails the test on any other status.
func (e *e2e) must(t *testing.T, method, path, key, body string, want int) map[string]any {
	t.Helper()
	status, got := e.do(t, method, path, key, body)
	if status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, status, got, want)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(got), &m); err != nil {
		t.Fatalf("%s %s: %v in %s", method, path, err, got)
	}
	return m
}

// mintKey creates a key over REST and answers it.
func (e *e2e) mintKey(t *testing.T, by, body string) string {
	t.Helper()
	k, _ := e.must(t, "POST", "/v1/keys", by, body, http.StatusCreated)["key"].(string)
	if k == "" {
		t.Fatal("the key was not answered")
	}
	return k
}

// createConnection creates a connection over REST and records its ID.
func (e *e2e) createConnection(t *testing.T, by string, body map[string]any) string {
	t.Helper()
	raw, _ := json.Marshal(body)
	m := e.must(t, "POST", "/v1/connections", by, string(raw), http.StatusCreated)
	id, _ := m["connection"].(map[string]any)["id"].(string)
	if id == "" {
		t.Fatalf("no connection id in %v", m)
	}
	e.conns[body["provider"].(string)] = id
	return id
}

// result is a call's answer over REST, as the envelope reads.
type result struct {
	status int
	raw    string
	OK     bool           `json:"ok"`
	Data   map[string]any `json:"data"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// code answers the result's error code, "ok" for a success.
func (r result) code() string {
	switch {
	case r.OK:
		return "ok"
	case r.Error != nil:
		return r.Error.Code
	}
	return fmt.Sprintf("http %d", r.status)
}

// call invokes tool over REST with key.
func (e *e2e) call(t *testing.T, key, tool string, args map[string]any, run, idem string) result {
	t.Helper()
	body := map[string]any{"arguments": args, "run_id": run}
	if idem != "" {
		body["idempotency_key"] = idem
	}
	raw, _ := json.Marshal(body)
	status, got := e.do(t, "POST", "/v1/tools/"+tool+"/invoke", key, string(raw))
	r := result{status: status, raw: got}
	if err := json.Unmarshal([]byte(got), &r); err != nil {
		t.Fatalf("%s: %v in %s", tool, err, got)
	}
	return r
}

// mcpSession opens an MCP session as key, every answer recorded.
func (e *e2e) mcpSession(t *testing.T, key string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.base + "/mcp",
		HTTPClient: &http.Client{Transport: recorder{key: key, tr: e.seen}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("MCP initialize: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpCall calls a tool over MCP and answers its result's text.
func mcpCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	return mcpCallMeta(t, cs, tool, args, nil)
}

// mcpCallMeta is mcpCall with the call's _meta (a run, an idempotency
// key).
func mcpCallMeta(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, meta mcp.Meta) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: strings.ReplaceAll(tool, ".", "_"), Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("MCP %s: %v", tool, err)
	}
	raw, _ := json.Marshal(res)
	return string(raw), res.IsError
}

// auditEvents reads every audit event over REST, page by page.
func (e *e2e) auditEvents(t *testing.T, key string) []toolplane.AuditEvent {
	t.Helper()
	var all []toolplane.AuditEvent
	cursor := ""
	for {
		path := "/v1/audit/events?limit=50"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		status, got := e.do(t, "GET", path, key, "")
		if status != http.StatusOK {
			t.Fatalf("audit: %d %s", status, got)
		}
		var page struct {
			Items      []toolplane.AuditEvent `json:"items"`
			NextCursor string                 `json:"next_cursor"`
		}
		if err := json.Unmarshal([]byte(got), &page); err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}

// changes reads the whole change log over REST, page by page, and answers
// the bodies read.
func (e *e2e) changes(t *testing.T, key string) []string {
	t.Helper()
	var pages []string
	cursor := ""
	for {
		path := "/v1/changes?limit=50"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		status, got := e.do(t, "GET", path, key, "")
		if status != http.StatusOK {
			t.Fatalf("changes: %d %s", status, got)
		}
		pages = append(pages, got)
		var page struct {
			NextCursor string `json:"next_cursor"`
		}
		json.Unmarshal([]byte(got), &page)
		if page.NextCursor == "" {
			return pages
		}
		cursor = page.NextCursor
	}
}

// waitAudit waits until the audit trail, read over REST with key,
// satisfies done, and answers it (as it last was, when it never does).
func (e *e2e) waitAudit(t *testing.T, key string, done func([]toolplane.AuditEvent) bool) []toolplane.AuditEvent {
	t.Helper()
	return awaitAudit(t, func() []toolplane.AuditEvent { return e.auditEvents(t, key) }, done)
}

// hasRuns reports whether events hold an event of each run, of the tool
// runs names for it.
func hasRuns(events []toolplane.AuditEvent, runs map[string]string) bool {
	for run, tool := range runs {
		if !slices.ContainsFunc(events, func(ev toolplane.AuditEvent) bool { return ev.RunID == run && ev.Tool == tool }) {
			return false
		}
	}
	return true
}

// dbTexts answers every value of every row of every table of the SQLite
// file, as text, named table.column, the sealed connection secrets among
// them.
func dbTexts(t *testing.T, path string) map[string][]string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	out := map[string][]string{}
	for _, table := range tables {
		rs, err := db.Query(`SELECT * FROM "` + strings.ReplaceAll(table, `"`, `""`) + `"`)
		if err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		cols, _ := rs.Columns()
		for rs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				t.Fatalf("read %s: %v", table, err)
			}
			for i, v := range vals {
				var s string
				switch x := v.(type) {
				case []byte:
					s = string(x)
				case string:
					s = x
				case nil:
					continue
				default:
					s = fmt.Sprint(x)
				}
				out[table+"."+cols[i]] = append(out[table+"."+cols[i]], s)
			}
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		rs.Close()
	}
	return out
}

// mintInOrg stores an admin key of another organization, as an operator
// provisioning an organization does (no route mints one across
// organizations).
func (e *e2e) mintInOrg(t *testing.T, org, subject string) string {
	t.Helper()
	id, sec, err := apikey.New(toolplane.CredentialPerson)
	if err != nil {
		t.Fatal(err)
	}
	c := &toolplane.Credential{ID: id, OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: subject,
		Roles: []string{toolplane.RolePlatformAdmin}, Hash: apikey.Hash(sec), Label: "e2e " + org, CreatedAt: time.Now(), CreatedBy: "e2e"}
	if err := e.s.b.Store.InsertCredential(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return apikey.Key(id, sec)
}

// leaks answers where, in texts named by where, any needle occurs.
func leaks(needles []needle, where string, texts ...string) []string {
	var found []string
	for _, s := range texts {
		for _, n := range needles {
			if n.value != "" && strings.Contains(s, n.value) {
				i := strings.Index(s, n.value)
				lo, hi := max(0, i-120), min(len(s), i+len(n.value)+60)
				found = append(found, fmt.Sprintf("%s holds the %s: …%s…", where, n.name, s[lo:hi]))
			}
		}
	}
	return found
}

// needles answers every form of every planted secret.
func (e *e2e) needles() []needle {
	ns := formsOf("bearer token", e.token)
	ns = append(ns, formsOf("basic password", e.pass)...)
	ns = append(ns, needle{"basic credential", base64.StdEncoding.EncodeToString([]byte(e.user + ":" + e.pass))})
	if e.pgPass != "" {
		ns = append(ns, formsOf("PostgreSQL password", e.pgPass)...)
		ns = append(ns, needle{"PostgreSQL DSN", e.pgDSN})
	}
	return ns
}

// No planted secret reaches anything the server answers, logs, measures,
// audits or stores in clear, whatever the calls did: succeeded, failed
// downstream (echoing the credential), timed out, were refused by the
// egress rules, carried bad arguments, or ran while their connection was
// revoked.
func TestConnectionSecretsLeakNowhere(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	orders := e.conns["orders"]
	type call struct {
		tool string
		args map[string]any
		want string // the REST outcome
		// released: the broker released the connection (the audit event
		// names it).
		released bool
	}
	calls := []call{
		{"shop.get_order", map[string]any{"id": "ord_1"}, "ok", true},
		{"shop.get_order", map[string]any{"id": "echo-ok"}, "ok", true},
		{"shop.get_order", map[string]any{"id": "echo-400"}, "invalid_input", true},
		{"shop.get_order", map[string]any{"id": "echo-401"}, "unavailable", true},
		{"shop.get_order", map[string]any{"id": "echo-404"}, "not_found", true},
		{"shop.get_order", map[string]any{"id": "echo-500"}, "retryable_upstream", true},
		{"shop.get_order", map[string]any{"id": "slow"}, "timeout", true},
		{"shop.get_order", map[string]any{"id": "ord_1", "connection_id": orders}, "ok", true},
		{"shop.get_order", map[string]any{"id": "ord_1", "connection_id": "con_x\r\nAuthorization: Bearer " + e.token}, "connection_required", false},
		{"shop.refund", map[string]any{"id": "echo-500", "amount_cents": 100}, "uncertain", true},
		{"shop.metadata", map[string]any{"id": "iam"}, "denied", false},
		{"shop.elsewhere", map[string]any{"id": "ord_1"}, "denied", false},
		{"shop.by_name", map[string]any{"id": "ord_1"}, "unavailable", true},
		{"shop.lookup", map[string]any{"id": "ord_1\r\nX-Injected: " + e.token}, "invalid_input", true},
		{"shop.lookup", map[string]any{"id": "ord_1"}, "ok", true},
		{"shop.balance", map[string]any{"id": "acct_1"}, "ok", true},
		{"shop.balance", map[string]any{"id": "echo-403"}, "unavailable", true},
		{"shop.balance", map[string]any{"id": "echo-422"}, "invalid_input", true},
		{"shop.find_orders", map[string]any{"status": "delivered"}, "ok", true},
		{"shop.find_orders", map[string]any{"status": "x\r\n" + e.token}, "ok", true},
	}
	if e.pgPass != "" {
		calls = append(calls,
			call{"shop.pg_now", map[string]any{"status": "hello"}, "ok", true},
			call{"shop.pg_missing", map[string]any{"status": "x"}, "", true})
	}
	for i, c := range calls {
		r := e.call(t, e.agent, c.tool, c.args, fmt.Sprintf("run-%d", i), "")
		if c.want != "" && r.code() != c.want {
			t.Errorf("%s %v over REST: %s, want %s: %s", c.tool, c.args["id"], r.code(), c.want, r.raw)
		}
	}
	// The same calls over MCP, in one session.
	cs := e.mcpSession(t, e.agent)
	for _, c := range calls {
		text, isErr := mcpCall(t, cs, c.tool, c.args)
		if c.want == "ok" && isErr {
			t.Errorf("%s %v over MCP failed: %s", c.tool, c.args["id"], text)
		}
	}

	// The connection is revoked while a call through it is under way: the
	// call in hand ends as it ends, and the next one is refused.
	slow := make(chan result, 1)
	go func() {
		// Off the test's goroutine: no t method is called here.
		status, got, err := sendRecorded(e, "/v1/tools/shop.get_order/invoke", e.agent, `{"arguments":{"id":"slow"},"run_id":"run-revoke"}`)
		var r result
		r.status, r.raw = status, got
		if err == nil {
			json.Unmarshal([]byte(got), &r)
		}
		slow <- r
	}()
	select {
	case <-e.api.slowed:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow call never reached the API")
	}
	e.must(t, "POST", "/v1/connections/"+orders+"/revoke", e.admin, `{"reason":"rotated"}`, http.StatusOK)
	<-slow
	if r := e.call(t, e.agent, "shop.get_order", map[string]any{"id": "ord_1"}, "run-after-revoke", ""); r.code() != "connection_revoked" {
		t.Errorf("a call after the revocation: %s, want connection_revoked: %s", r.code(), r.raw)
	}
	if text, isErr := mcpCall(t, cs, "shop.get_order", map[string]any{"id": "ord_1"}); !isErr || !strings.Contains(text, "connection_revoked") {
		t.Errorf("an MCP call after the revocation: %s", text)
	}

	// The audit events are written off the call's path: wait for them
	// all (two doors, and the two calls after the revocation).
	// A count alone is reached early when the trail holds other events:
	// each REST call's run is waited for too.
	runs := map[string]string{"run-revoke": "shop.get_order", "run-after-revoke": "shop.get_order"}
	for i, c := range calls {
		runs[fmt.Sprintf("run-%d", i)] = c.tool
	}
	events := e.waitAudit(t, e.admin, func(evs []toolplane.AuditEvent) bool {
		return len(evs) >= 2*len(calls)+3 && hasRuns(evs, runs)
	})
	if len(events) < 2*len(calls)+3 || !hasRuns(events, runs) {
		t.Errorf("%d audit events for %d calls, not all of the REST calls' runs among them", len(events), 2*len(calls)+3)
	}
	// The REST calls' events name the connection released, and only
	// then.
	for i, c := range calls {
		for _, ev := range events {
			if ev.RunID == fmt.Sprintf("run-%d", i) && ev.Tool == c.tool && (ev.ConnectionID != "") != c.released {
				t.Errorf("%s %v: audited with connection %q; released: %t", c.tool, c.args, ev.ConnectionID, c.released)
			}
		}
	}

	// Everything the server shows.
	surfaces := map[string][]string{}
	_, metricsText := e.do(t, "GET", "/metrics", "", "")
	surfaces["GET /metrics"] = []string{metricsText}
	_, list := e.do(t, "GET", "/v1/connections", e.admin, "")
	surfaces["GET /v1/connections"] = []string{list}
	for _, id := range e.conns {
		_, got := e.do(t, "GET", "/v1/connections/"+id, e.admin, "")
		surfaces["GET /v1/connections/"+id] = []string{got}
	}
	surfaces["GET /v1/changes"] = e.changes(t, e.admin)
	raw, _ := json.Marshal(events)
	surfaces["GET /v1/audit/events"] = []string{string(raw)}
	_, uncertain := e.do(t, "GET", "/v1/uncertain", e.admin, "")
	surfaces["GET /v1/uncertain"] = []string{uncertain}
	cs.Close()

	e.shutdown(t)
	surfaces["the server's log"] = []string{e.log.String()}
	surfaces["every answer a client received"] = e.seen.all()
	spans := spanTexts(e.spans.Ended())
	surfaces["the spans"] = spans
	needles := e.needles()
	var found []string
	for where, texts := range surfaces {
		found = append(found, leaks(needles, where, texts...)...)
	}
	for col, texts := range dbTexts(t, e.cfg.Database) {
		found = append(found, leaks(needles, "the database's "+col, texts...)...)
	}
	for _, f := range found {
		t.Error(f)
	}
	// The scan can find what it looks for: the downstream did receive
	// the secret, and the log and answers are not empty.
	if got, _ := e.api.authorization.Load().(string); got != "Bearer "+e.token {
		t.Errorf("the downstream saw Authorization %q; the scan would prove nothing", got)
	}
	if len(e.log.String()) == 0 || len(e.seen.all()) < 2*len(calls) {
		t.Errorf("the log holds %d bytes and %d answers were recorded: nothing to scan", len(e.log.String()), len(e.seen.all()))
	}
	if n := len(e.spans.Ended()); n < 2*len(calls) {
		t.Errorf("%d spans were recorded for %d calls: nothing to scan", n, 2*len(calls))
	}
}

// spanTexts answers, for each span, everything it carries as text: its
// name, status, attributes, events with their attributes, and links.
func spanTexts(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		var b strings.Builder
		fmt.Fprintf(&b, "%s status=%s %q", s.Name(), s.Status().Code, s.Status().Description)
		attrs := func(kvs []attribute.KeyValue) {
			for _, kv := range kvs {
				fmt.Fprintf(&b, " %s=%s", kv.Key, kv.Value.Emit())
			}
		}
		attrs(s.Attributes())
		for _, ev := range s.Events() {
			fmt.Fprintf(&b, " event %s", ev.Name)
			attrs(ev.Attributes)
		}
		for _, l := range s.Links() {
			fmt.Fprintf(&b, " link %s", l.SpanContext.SpanID())
			attrs(l.Attributes)
		}
		out = append(out, b.String())
	}
	return out
}

// sendRecorded is send through the recorder, for a goroutine of the test.
func sendRecorded(e *e2e, path, key, body string) (int, string, error) {
	req, err := http.NewRequest("POST", e.base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	resp, err := (&http.Client{Transport: recorder{key: key, tr: e.seen}}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), err
}

// start serves e.cfg until the test ends and reads the admin key its
// first start wrote into dir.
func (e *e2e) start(t *testing.T, dir string) {
	t.Helper()
	s, err := New(context.Background(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.s, e.base = s, "http://"+s.Addr()
	ctx, stop := context.WithCancel(context.Background())
	e.stop = stop
	go func() { e.ran <- s.Run(ctx) }()
	t.Cleanup(func() { e.shutdown(t) })
	e.admin = readCreds(t, dir)["TOOLPLANE_ADMIN_KEY"]
	if e.admin == "" {
		t.Fatal("first start wrote no admin key")
	}
}

// TestPrivilegedSQLConnectionOverREST proves the REST door answers a SQL
// connection whose role is a PostgreSQL superuser with a refusal at
// secrets.dsn naming the power and the way out, stores nothing, and that
// the operator's explicit acceptance creates it and is shown with it.
func TestPrivilegedSQLConnectionOverREST(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	e := startE2E(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), planted("pg/super"))
	body := map[string]any{"name": "pg-super", "provider": "pgsuper", "kind": "static",
		"config":  map[string]any{"driver": "postgres", "egress": map[string]any{"hosts": []string{"127.0.0.1"}, "allow_cidrs": []string{"127.0.0.0/8"}}},
		"secrets": map[string]any{"dsn": u.String()}}
	raw, _ := json.Marshal(body)
	status, answer := e.do(t, "POST", "/v1/connections", e.admin, string(raw))
	if status != http.StatusBadRequest || !strings.Contains(answer, "secrets.dsn") || !strings.Contains(answer, "superuser") ||
		!strings.Contains(answer, "allow_privileged_role") {
		t.Fatalf("creating a superuser's connection: %d %s; want 400 at secrets.dsn naming superuser and allow_privileged_role", status, answer)
	}
	if strings.Contains(answer, "pg/super") || strings.Contains(answer, url.QueryEscape("pg/super")) {
		t.Fatalf("the refusal shows the password: %s", answer)
	}
	body["config"].(map[string]any)["allow_privileged_role"] = true
	id := e.createConnection(t, e.admin, body)
	got := e.must(t, "GET", "/v1/connections/"+id, e.admin, "", http.StatusOK)
	if cfg, _ := got["connection"].(map[string]any)["config"].(map[string]any); cfg["allow_privileged_role"] != true {
		t.Fatalf("the connection does not show the acceptance: %v", got)
	}
}
