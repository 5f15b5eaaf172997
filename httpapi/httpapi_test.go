package httpapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/jwtauth"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/resilience"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

type fixture struct {
	db    *sql.DB
	store *sqlite.Store
	// door is the door layer api goes through: a test sets the limits,
	// the key cache, the token verifier or the grant service on it.
	door             *door.Door
	api              *httpapi.Server
	srv              *httptest.Server
	agent, person    string
	revoked, auditor string
}

func mint(t testing.TB, s *sqlite.Store, kind toolplane.CredentialKind, subject string, roles, tools []string, revoked bool) string {
	t.Helper()
	return mintIn(t, s, "org-1", kind, subject, roles, tools, revoked)
}

// mintIn is mint in another organization.
func mintIn(t testing.TB, s *sqlite.Store, org string, kind toolplane.CredentialKind, subject string, roles, tools []string, revoked bool) string {
	t.Helper()
	id, secret, err := apikey.New(kind)
	if err != nil {
		t.Fatal(err)
	}
	c := &toolplane.Credential{ID: id, OrganizationID: org, Kind: kind, Subject: subject, Roles: roles, Tools: tools,
		Hash: apikey.Hash(secret), CreatedAt: time.Now()}
	if revoked {
		c.RevokedAt = time.Now()
	}
	if err := s.InsertCredential(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return apikey.Key(id, secret)
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	store, db := sqlitetest.NewDB(t)
	reg, hs := demotest.Registry(t)
	quiet := slog.New(slog.DiscardHandler)
	approvals := approval.New(approval.Config{Store: store, TTL: time.Hour})
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Approvals: approvals, Logger: quiet,
		// The caller's caps are off: tests here fire many calls as one agent.
		Traffic: resilience.New(resilience.Config{AgentMaxInFlight: -1, OrgMaxInFlight: -1})})
	if err != nil {
		t.Fatal(err)
	}
	layer := &door.Door{Invoker: iv, Registry: reg, Store: store, Log: quiet}
	api := &httpapi.Server{Door: layer, Store: store, Log: quiet}
	f := &fixture{db: db, store: store, door: layer, api: api, srv: httptest.NewServer(api.Handler())}
	t.Cleanup(f.srv.Close)
	f.agent = mint(t, store, toolplane.CredentialAgent, "agent-support", nil, []string{"demo.search_tickets", "demo.add_note", "demo.refund_order"}, false)
	f.person = mint(t, store, toolplane.CredentialPerson, "ada", []string{"approver"}, nil, false)
	f.auditor = mint(t, store, toolplane.CredentialPerson, "grace", []string{"auditor"}, nil, false)
	f.revoked = mint(t, store, toolplane.CredentialAgent, "agent-old", nil, []string{"demo.*"}, true)
	return f
}

func (f *fixture) do(t *testing.T, method, path, key, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil && resp.StatusCode != 200 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for name, key := range map[string]string{"no key": "", "malformed": "nope", "revoked": f.revoked, "wrong secret": f.agent[:len(f.agent)-4] + "AAAA"} {
		status, body := f.do(t, "GET", "/v1/tools", key, "")
		e, _ := body["error"].(map[string]any)
		if status != http.StatusUnauthorized || errCode(body) != "unauthenticated" || e["request_id"] == "" {
			t.Errorf("%s: %d %v", name, status, body)
		}
	}
}

func TestAgentSeesAndCallsItsTools(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	status, body := f.do(t, "GET", "/v1/tools", f.agent, "")
	if status != 200 || len(body["items"].([]any)) != 3 {
		t.Fatalf("tools: %d %v", status, body)
	}
	if status, _ := f.do(t, "GET", "/v1/tools/demo.analyze_text", f.agent, ""); status != http.StatusNotFound {
		t.Fatalf("an ungranted tool was visible: %d", status)
	}
	status, body = f.do(t, "POST", "/v1/tools/demo.search_tickets/invoke", f.agent, `{"arguments":{"query":"cracked"},"run_id":"run-1"}`)
	if status != 200 || body["ok"] != true {
		t.Fatalf("invoke: %d %v", status, body)
	}
	// A validation refusal is a result with a field path.
	status, body = f.do(t, "POST", "/v1/tools/demo.add_note/invoke", f.agent, `{"arguments":{"ticket_id":"t-1001"},"run_id":"run-1"}`)
	e := body["error"].(map[string]any)
	if status != 200 || body["ok"] != false || e["code"] != "invalid_input" || e["field_path"] != "/text" {
		t.Fatalf("validation: %d %v", status, body)
	}
	// An ungranted tool is a denial, decided by policy.
	status, body = f.do(t, "POST", "/v1/tools/demo.analyze_text/invoke", f.agent, `{"arguments":{"text":"x"},"run_id":"run-1"}`)
	if status != 200 || body["error"].(map[string]any)["code"] != "denied" {
		t.Fatalf("denial: %d %v", status, body)
	}
	// A write twice: the second answer is replayed.
	for i, want := range []bool{false, true} {
		status, body = f.do(t, "POST", "/v1/tools/demo.add_note/invoke", f.agent, `{"arguments":{"ticket_id":"t-1001","text":"Shipped."},"run_id":"run-1"}`)
		replayed, _ := body["meta"].(map[string]any)["replayed"].(bool)
		if status != 200 || replayed != want {
			t.Fatalf("write %d: %d %v", i, status, body)
		}
	}
	// A person's key does not call tools.
	if status, body := f.do(t, "POST", "/v1/tools/demo.search_tickets/invoke", f.person, `{"arguments":{"query":"x"}}`); status != http.StatusForbidden || errCode(body) != "denied" {
		t.Fatalf("person invoking: %d %v", status, body)
	}
	// A malformed body is a 400 in the envelope.
	if status, body := f.do(t, "POST", "/v1/tools/demo.search_tickets/invoke", f.agent, `{"args":{}}`); status != http.StatusBadRequest || errCode(body) != "invalid_request" {
		t.Fatalf("bad body: %d %v", status, body)
	}
}

func TestApprovalThroughTheAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	call := `{"arguments":{"order_id":"o-502","amount_cents":1250,"reason":"charged twice"},"run_id":"run-1"}`
	status, body := f.do(t, "POST", "/v1/tools/demo.refund_order/invoke", f.agent, call)
	if status != http.StatusAccepted {
		t.Fatalf("refund: %d %v", status, body)
	}
	id := body["approval"].(map[string]any)["id"].(string)
	status, body = f.do(t, "GET", "/v1/approvals", f.person, "")
	if status != 200 || len(body["items"].([]any)) != 1 {
		t.Fatalf("approvals: %d %v", status, body)
	}
	if status, _ := f.do(t, "POST", "/v1/approvals/"+id+"/approve", f.agent, ""); status != http.StatusForbidden {
		t.Fatalf("an agent approved: %d", status)
	}
	if status, body = f.do(t, "POST", "/v1/approvals/"+id+"/approve", f.person, `{"reason":"checked"}`); status != 200 || body["status"] != "approved" {
		t.Fatalf("approve: %d %v", status, body)
	}
	if status, body = f.do(t, "POST", "/v1/approvals/"+id+"/approve", f.person, ""); status != http.StatusConflict {
		t.Fatalf("approved twice: %d %v", status, body)
	}
	// The agent calls again with the approval: the refund is made once.
	withApproval := strings.Replace(call, `"run_id"`, `"authorized_by":"`+id+`","run_id"`, 1)
	status, body = f.do(t, "POST", "/v1/tools/demo.refund_order/invoke", f.agent, withApproval)
	if status != 200 || body["ok"] != true {
		t.Fatalf("approved call: %d %v", status, body)
	}
	status, body = f.do(t, "POST", "/v1/tools/demo.refund_order/invoke", f.agent, withApproval)
	if status != 200 || body["meta"].(map[string]any)["replayed"] != true {
		t.Fatalf("again: %d %v", status, body)
	}
	// The auditor reads the trail; the agent may not.
	if status, body = f.do(t, "GET", "/v1/audit/events?tool=demo.refund_order", f.auditor, ""); status != 200 || len(body["items"].([]any)) < 3 {
		t.Fatalf("audit: %d %v", status, body)
	}
	if status, _ = f.do(t, "GET", "/v1/audit/events", f.agent, ""); status != http.StatusForbidden {
		t.Fatalf("an agent read the audit trail: %d", status)
	}
}

func TestHealthAndUnknownRoutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if status, _ := f.do(t, "GET", "/healthz", "", ""); status != 200 {
		t.Fatal("healthz")
	}
	if status, _ := f.do(t, "GET", "/readyz", "", ""); status != 200 {
		t.Fatal("readyz")
	}
	if status, body := f.do(t, "GET", "/v1/nothing", f.agent, ""); status != http.StatusNotFound || errCode(body) != "not_found" {
		t.Fatalf("unknown route: %d %v", status, body)
	}
}

func TestRateLimitHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.door.Limiter = ratelimit.New(2, time.Minute)
	f.door.Now = frozen()
	for i := range 3 {
		req, _ := http.NewRequest("GET", f.srv.URL+"/v1/tools", nil)
		req.Header.Set("Authorization", "Bearer "+f.agent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header
		if h.Get("X-RateLimit-Limit") != "2" || h.Get("X-RateLimit-Reset") == "" {
			t.Fatalf("request %d headers: %v", i, h)
		}
		want := []int{200, 200, http.StatusTooManyRequests}[i]
		if resp.StatusCode != want || h.Get("X-RateLimit-Remaining") != []string{"1", "0", "0"}[i] {
			t.Fatalf("request %d: %d remaining %s", i, resp.StatusCode, h.Get("X-RateLimit-Remaining"))
		}
		if i == 2 && h.Get("Retry-After") == "" {
			t.Fatal("no Retry-After on 429")
		}
	}
}

func TestKeysCreateListRevoke(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin := f.mintAdmin(t)
	if status, body := f.do(t, "POST", "/v1/keys", f.person, `{"kind":"agent","subject":"x","tools":["demo.*"]}`); status != http.StatusForbidden {
		t.Fatalf("an approver minted a key: %d %v", status, body)
	}
	status, body := f.do(t, "POST", "/v1/keys", admin, `{"kind":"agent","subject":"agent-new","tools":["demo.search_tickets"],"label":"ci"}`)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, body)
	}
	key := body["key"].(string)
	id := body["credential"].(map[string]any)["id"].(string)
	if status, _ := f.do(t, "GET", "/v1/tools", key, ""); status != 200 {
		t.Fatalf("the new key does not work: %d", status)
	}
	status, body = f.do(t, "GET", "/v1/keys", admin, "")
	if status != 200 || strings.Contains(strings.ToLower(toJSON(body)), "hash") {
		t.Fatalf("list: %d %v", status, body)
	}
	if status, body = f.do(t, "POST", "/v1/keys/"+id+"/revoke", admin, ""); status != 200 {
		t.Fatalf("revoke: %d %v", status, body)
	}
	if status, _ := f.do(t, "GET", "/v1/tools", key, ""); status != http.StatusUnauthorized {
		t.Fatalf("a revoked key still works: %d", status)
	}
	if status, body = f.do(t, "POST", "/v1/keys", admin, `{"kind":"agent","subject":"x","roles":["approver"]}`); status != http.StatusBadRequest {
		t.Fatalf("an agent key with roles: %d %v", status, body)
	}
	if status, body = f.do(t, "POST", "/v1/keys", admin, `{"kind":"agent","subject":"x","tools":["demo.*","crm.[z"]}`); status != http.StatusBadRequest || body["error"].(map[string]any)["field_path"] != "/tools/1" {
		t.Fatalf("an agent key with a pattern that cannot match: %d %v", status, body)
	}
}

func (f *fixture) mintAdmin(t *testing.T) string {
	t.Helper()
	return mint(t, f.store, toolplane.CredentialPerson, "root", []string{"platform_admin"}, nil, false)
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestJWTCallerInvokes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256)}}})
	}))
	t.Cleanup(jwks.Close)
	f.door.Tokens = &jwtauth.Verifier{Issuer: "https://idp.example", Audience: "toolplane", JWKSURL: jwks.URL}
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	tok, _ := jwt.Signed(signer).Claims(map[string]any{"iss": "https://idp.example", "aud": "toolplane", "sub": "agent-jwt", "org": "org-1",
		"exp": time.Now().Add(time.Hour).Unix(), "toolplane_kind": "agent", "toolplane_tools": []string{"demo.search_tickets"}}).Serialize()
	status, body := f.do(t, "POST", "/v1/tools/demo.search_tickets/invoke", tok, `{"arguments":{"query":"invoice"},"run_id":"run-j"}`)
	if status != 200 || body["ok"] != true {
		t.Fatalf("JWT call: %d %v", status, body)
	}
	if status, _ := f.do(t, "GET", "/v1/tools", tok[:len(tok)-3]+"abc", ""); status != http.StatusUnauthorized {
		t.Fatalf("a tampered token: %d", status)
	}
}

// A token that does not authenticate is refused in words that say what it
// was taken for, a key or (where JWTs are accepted) either, and the same
// words whichever check failed: a JWT is never told it is a bad API key,
// and a tampered, expired or foreign JWT cannot be told apart.
func TestARefusedTokenIsNamedForWhatItWasTakenFor(t *testing.T) {
	t.Parallel()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256)}}})
	}))
	t.Cleanup(jwks.Close)
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	token := func(iss string, exp time.Duration) string {
		tok, _ := jwt.Signed(signer).Claims(map[string]any{"iss": iss, "aud": "toolplane", "sub": "agent-jwt", "org": "org-1",
			"exp": time.Now().Add(exp).Unix(), "toolplane_kind": "agent"}).Serialize()
		return tok
	}
	good := token("https://idp.example", time.Hour)
	const (
		either = "the bearer token is neither a valid API key nor a valid JWT of the configured issuer"
		key    = "the API key is not valid"
		notKey = "the bearer token is not a valid API key"
	)
	withJWTs := newFixture(t)
	withJWTs.door.Tokens = &jwtauth.Verifier{Issuer: "https://idp.example", Audience: "toolplane", JWKSURL: jwks.URL}
	keysOnly := newFixture(t)
	tests := []struct {
		name  string
		f     *fixture
		token string
		want  string
	}{
		{"a tampered JWT", withJWTs, good[:len(good)-3] + "abc", either},
		{"an expired JWT", withJWTs, token("https://idp.example", -time.Hour), either},
		{"a JWT of another issuer", withJWTs, token("https://evil.example", time.Hour), either},
		{"not a token at all", withJWTs, "hello", either},
		{"a wrong API key secret", withJWTs, withJWTs.agent[:len(withJWTs.agent)-4] + "AAAA", key},
		{"a JWT where only keys are accepted", keysOnly, good, notKey},
		{"a wrong API key where only keys are accepted", keysOnly, keysOnly.agent[:len(keysOnly.agent)-4] + "AAAA", key},
	}
	for _, tt := range tests {
		status, body := tt.f.do(t, "GET", "/v1/tools", tt.token, "")
		e, _ := body["error"].(map[string]any)
		if status != http.StatusUnauthorized || errCode(body) != "unauthenticated" || e["message"] != tt.want {
			t.Errorf("%s: %d %v; want 401 %q", tt.name, status, body, tt.want)
		}
	}
	if status, _ := withJWTs.do(t, "GET", "/v1/tools", good, ""); status != http.StatusOK {
		t.Fatalf("the valid JWT: %d", status)
	}
}

func TestWriteNeedsARunOrAKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	status, body := f.do(t, "POST", "/v1/tools/demo.add_note/invoke", f.agent, `{"arguments":{"ticket_id":"t-1001","text":"x"}}`)
	if status != http.StatusBadRequest || errCode(body) != "invalid_request" {
		t.Fatalf("a write without run or key: %d %v", status, body)
	}
}

func TestGroupApprovalNeedsAMember(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := &toolplane.Approval{ID: "apr_group", OrganizationID: "org-1", RunID: "run-1", Tool: "demo.refund_order", ToolVersion: "1.0.0",
		Key: "k", ArgumentsHash: "h", Arguments: []byte(`{}`), Invocation: []byte(`{}`), PrincipalID: "agent-support",
		Status: toolplane.ApprovalPending, DefaultOnTimeout: "deny", ApproverGroup: "finance",
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := f.store.InsertApproval(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if status, body := f.do(t, "POST", "/v1/approvals/apr_group/approve", f.person, ""); status != http.StatusForbidden || !strings.Contains(toJSON(body), "finance") {
		t.Fatalf("a non-member answered a group approval: %d %v", status, body)
	}
}

// A server without its door layer is a wiring bug: it is refused when the
// server is built, not answered at its first request.
func TestAServerWithoutADoorIsRefused(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("Handler built a server without a Door")
		}
	}()
	(&httpapi.Server{Store: sqlitetest.New(t)}).Handler()
}
