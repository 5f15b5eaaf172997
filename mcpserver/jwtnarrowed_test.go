package mcpserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/jwtauth"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// switching sends whichever bearer token it holds now.
type switching struct {
	token atomic.Value
	next  http.RoundTripper
}

func (s *switching) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+s.token.Load().(string))
	return s.next.RoundTrip(r)
}

// TestMCPCallIsDecidedOnTheTokenItCameWith: a JWT agent's MCP session
// outlives its token; the client goes on with a fresh token of the same
// subject whose toolplane_tools no longer name a tool. A call made with the
// fresh token is decided on it, as the REST door decides it: the tool is
// refused, not called on the rights of the token the session opened with.
//
// This fails on main: the MCP door calls with the credential the session
// was opened with (session.cred), so the invoker computes the principal
// from a token the caller no longer presents. The fix is in mcpserver:
// invokeTool takes the credential the door layer admitted for this very
// request (the *door.Caller admit put in the request's context; the SDK
// hands it to a tool handler as req.Extra.TokenInfo / the fast path has
// the request) rather than session.cred, and the session's listing is
// synced again when the admitted credential differs from the session's.
func TestMCPCallIsDecidedOnTheTokenItCameWith(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.New(t)
	reg, hs := demotest.Registry(t)
	quiet := slog.New(slog.DiscardHandler)
	iv, _ := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{},
		Approvals: approval.New(approval.Config{Store: store, TTL: time.Hour}), Logger: quiet})

	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256)}}})
	}))
	t.Cleanup(jwks.Close)
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	token := func(tools ...string) string {
		t.Helper()
		tok, err := jwt.Signed(signer).Claims(map[string]any{"iss": "https://idp.example", "aud": "toolplane", "sub": "agent-jwt", "org": "org-1",
			"exp": time.Now().Add(time.Hour).Unix(), "toolplane_kind": "agent", "toolplane_tools": tools}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	wide, narrow := token("demo.search_tickets", "demo.add_note"), token("demo.search_tickets")

	srv := httptest.NewServer((&mcpserver.Server{Log: quiet, Version: "test", Door: &door.Door{Invoker: iv, Registry: reg, Store: store, Log: quiet,
		Tokens: &jwtauth.Verifier{Issuer: "https://idp.example", Audience: "toolplane", JWKSURL: jwks.URL}}}).Handler())
	t.Cleanup(srv.Close)

	rt := &switching{next: http.DefaultTransport}
	rt.token.Store(wide)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: rt}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	note := &mcp.CallToolParams{Name: "demo_add_note", Arguments: map[string]any{"ticket_id": "t-1001", "text": "Shipped."},
		Meta: mcp.Meta{"toolplane/idempotency_key": "note-1"}}
	if r, err := cs.CallTool(ctx, note); err != nil || r.IsError {
		t.Fatalf("with the token naming demo.add_note: %+v %v", r, err)
	}

	// The same session, now with the token that no longer names it.
	rt.token.Store(narrow)
	note.Meta = mcp.Meta{"toolplane/idempotency_key": "note-2"}
	r, err := cs.CallTool(ctx, note)
	if err == nil && !r.IsError {
		t.Fatalf("a call made with a token that does not name demo.add_note ran: %+v", r)
	}
	if err == nil {
		var text strings.Builder
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if !strings.Contains(text.String(), "denied") && !strings.Contains(text.String(), "tool_unavailable") {
			t.Errorf("refusal = %s; want denied or tool_unavailable", text.String())
		}
	}
}
