package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/authserver"
	"github.com/toolplane/toolplane/policy/policytest"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/signin"
)

// oauthIssuer is the benchmark's public URL; its /mcp the resource.
const oauthIssuer = "http://127.0.0.1"

// oauthToken answers an access token of the authorization server over
// f's store, for agent-a acting for pat on crm.lookup. The server watches
// the store's changes, as a node does, so its verifier keeps the consents
// it found in force.
func oauthToken(b *testing.B, f *fastFixture) string {
	k := make([]byte, secret.KeySize)
	rand.Read(k)
	keys, err := secret.ParseKeyring("k1 " + base64.StdEncoding.EncodeToString(k))
	if err != nil {
		b.Fatal(err)
	}
	people, err := signin.New(signin.Config{Store: f.store, Keys: keys, PublicURL: oauthIssuer})
	if err != nil {
		b.Fatal(err)
	}
	as, err := authserver.New(authserver.Config{Store: f.store, Keys: keys, Issuer: oauthIssuer, People: people, AccessTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	g := &toolplane.OAuthGrant{OrganizationID: "org-1", ID: toolplane.NewID("oag_"), ClientID: "tpc_bench", Subject: "pat", AgentID: "agent-a",
		Tools: []string{"crm.lookup"}, Resource: oauthIssuer + "/mcp", CreatedAt: now, ExpiresAt: now.Add(time.Hour), SignedInAt: now}
	if err := f.store.InsertOAuthGrant(context.Background(), g); err != nil {
		b.Fatal(err)
	}
	tok, err := as.AccessToken(context.Background(), g.OrganizationID, g.ID)
	if err != nil {
		b.Fatal(err)
	}
	f.s.Door.Tokens = authserver.Chain{Own: as.Verifier()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); as.Watch(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	return tok
}

// BenchmarkCallCredential is BenchmarkFastPathCall with each kind of
// bearer credential: an API key (from the key cache) and an access token
// of the server's own authorization server (its signature remembered, its
// consent kept in force while the store's change feed says nothing
// changed, so a revocation is seen at the next call). Beside wall time it
// reports the process's CPU time per call (cpu-ns/op, getrusage user and
// system over the timed loop): on a shared machine wall time also counts
// the waits for a core.
func BenchmarkCallCredential(b *testing.B) {
	for _, kind := range []string{"api_key", "oauth_token"} {
		b.Run(kind, func(b *testing.B) {
			f := newFastFixture(b, 0)
			f.s.Door.Keys = apikey.NewCache(0, time.Hour)
			f.s.Door.Limiter = ratelimit.New(1<<30, time.Minute)
			bearer := f.keyA
			if kind == "oauth_token" {
				bearer = oauthToken(b, f)
			}
			inner := f.s.Handler()
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				inner.ServeHTTP(w, r.WithContext(authserver.WithResource(r.Context(), oauthIssuer+"/mcp")))
			})
			srv := httptest.NewServer(h)
			b.Cleanup(srv.Close)
			client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL,
				HTTPClient: &http.Client{Transport: withKey{bearer, http.DefaultTransport}}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cs.Close() })
			sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
			body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"crm_lookup","arguments":{"id":"c-1"}}}`
			req := func() *http.Request {
				r := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(body))
				r.RemoteAddr = "127.0.0.1:40000"
				for k, v := range map[string]string{"Authorization": "Bearer " + bearer, "Content-Type": "application/json",
					"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid, "Mcp-Protocol-Version": version} {
					r.Header.Set(k, v)
				}
				return r
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req())
			if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Ada") {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := policytest.CPUTime()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req())
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
			if used := policytest.CPUTime() - cpu; used > 0 {
				b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
