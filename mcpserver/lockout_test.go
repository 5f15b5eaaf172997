package mcpserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/jwtauth"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// frozen answers a clock stopped at the test's start, so that a flood's
// failures all fall in one of the budget's fixed windows, whenever the
// test runs; on the wall clock a window may end mid-flood and refill the
// budget.
func frozen() func() time.Time {
	at := time.Now()
	return func() time.Time { return at }
}

// from answers a client whose connections leave from the loopback address
// ip, so a test can play two callers at two addresses on one machine.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// initialize opens a session with key from client and answers the status.
func initialize(t *testing.T, client *http.Client, url, key string) *http.Response {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// A flood of wrong secrets under an agent key's id never makes the key
// answer 429 on the MCP door: the flooder is told 401 within the failure
// budget and 429 after, the holder opens its session and keeps its budget.
func TestMCPWrongSecretsNeverLockOutTheHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.New(t)
	reg, _, _ := registry.Build(nil, registry.Options{})
	iv, _ := invoke.New(invoke.Config{Registry: reg, Handlers: handler.NewRegistry(), Store: store, Policy: policy.Grants{}})
	id, secret, _ := apikey.New(toolplane.CredentialAgent)
	if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1",
		Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d := mcpserver.NewTestDoor(iv, reg, store)
	d.Limiter, d.Failures = ratelimit.New(5, time.Minute), ratelimit.NewFailures(3, time.Minute)
	d.Now = frozen()
	srv := httptest.NewServer((&mcpserver.Server{Door: d}).Handler())
	t.Cleanup(srv.Close)

	wrong := apikey.Key(id, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	var statuses []int
	for range 20 {
		statuses = append(statuses, initialize(t, from("127.0.0.2"), srv.URL, wrong).StatusCode)
	}
	for i, got := range statuses {
		want := http.StatusTooManyRequests
		if i < 3 {
			want = http.StatusUnauthorized
		}
		if got != want {
			t.Errorf("the flood's answers %v; want three 401s, then 429s", statuses)
			break
		}
	}
	resp := initialize(t, from("127.0.0.1"), srv.URL, apikey.Key(id, secret))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the holder after the flood: %d", resp.StatusCode)
	}
	if rem := resp.Header.Get("X-RateLimit-Remaining"); rem != "4" {
		t.Errorf("the holder has %s requests left; the flood spent its budget", rem)
	}
}

// A flood of junk tokens from one address spends its failure budget, yet a
// valid credential presented from there afterwards opens its session on
// the MCP door: an agent key the node has never cached, and a JWT.
func TestMCPJunkFromASharedAddressNeverLocksOutValidCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.New(t)
	reg, _, _ := registry.Build(nil, registry.Options{})
	iv, _ := invoke.New(invoke.Config{Registry: reg, Handlers: handler.NewRegistry(), Store: store, Policy: policy.Grants{}})
	id, secret, _ := apikey.New(toolplane.CredentialAgent)
	if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1",
		Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256)}}})
	}))
	t.Cleanup(jwks.Close)
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	tok, err := jwt.Signed(signer).Claims(map[string]any{"iss": "https://idp.example", "aud": "toolplane", "sub": "agent-jwt", "org": "org-1",
		"exp": time.Now().Add(time.Hour).Unix(), "toolplane_kind": "agent"}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	d := mcpserver.NewTestDoor(iv, reg, store)
	d.Tokens = &jwtauth.Verifier{Issuer: "https://idp.example", Audience: "toolplane", JWKSURL: jwks.URL}
	d.Keys = apikey.NewCache(0, time.Hour)
	d.Limiter, d.Failures = ratelimit.New(5, time.Minute), ratelimit.NewFailures(3, time.Minute)
	d.Now = frozen()
	srv := httptest.NewServer((&mcpserver.Server{Door: d}).Handler())
	t.Cleanup(srv.Close)

	got429 := 0
	for i := range 30 {
		var junk string
		switch i % 3 {
		case 0:
			junk = "junk-" + strconv.Itoa(i)
		case 1:
			junk = tok[:len(tok)-3] + "abc" // a JWT whose signature fails
		default:
			junkID, junkSecret, _ := apikey.New(toolplane.CredentialAgent) // a key id nobody holds
			junk = apikey.Key(junkID, junkSecret)
		}
		switch status := initialize(t, from("127.0.0.1"), srv.URL, junk).StatusCode; status {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			got429++
		default:
			t.Fatalf("junk answered %d", status)
		}
	}
	if got429 != 27 {
		t.Errorf("the flood got %d 429s past its budget of 3; want 27", got429)
	}
	for _, c := range []struct{ name, token string }{{"an uncached agent key", apikey.Key(id, secret)}, {"a JWT", tok}} {
		if status := initialize(t, from("127.0.0.1"), srv.URL, c.token).StatusCode; status != http.StatusOK {
			t.Errorf("%s from the flooded address: %d, want 200", c.name, status)
		}
	}
}
