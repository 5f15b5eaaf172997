package mcpserver_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
)

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
	store := openStore(t)
	reg, _, _ := registry.Build(nil, registry.Options{})
	iv, _ := invoke.New(invoke.Config{Registry: reg, Handlers: handler.NewRegistry(), Store: store, Policy: policy.Grants{}})
	id, secret, _ := apikey.New(toolplane.CredentialAgent)
	if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1",
		Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&mcpserver.Server{Invoker: iv, Registry: reg, Store: store, Log: slog.New(slog.DiscardHandler),
		Limiter: ratelimit.New(5, time.Minute), Failures: ratelimit.NewFailures(3, time.Minute)}).Handler())
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
