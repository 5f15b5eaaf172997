package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// Every refusal the door layer answers before a request reaches the MCP
// endpoint is answered with its code's status from the httperr table, that
// code in the JSON-RPC error's data (the request carried an id), and, for
// a token, the Bearer challenge: a missing token, a refused one, a
// person's key, a spent budget, credentials that cannot be checked. A
// refused token is told in the words every door uses: what the token was
// taken for, not which check failed.
func TestMCPAnswersEachDoorRefusalWithItsCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mint := func(t *testing.T, store *sqlite.Store, kind toolplane.CredentialKind) string {
		t.Helper()
		id, secret, _ := apikey.New(kind)
		if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: kind, Subject: "someone",
			Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		return apikey.Key(id, secret)
	}
	tests := []struct {
		name string
		// setup answers the token to send, after setting d up.
		setup     func(t *testing.T, d *door.Door) string
		code      httperr.Code
		challenge string // in WWW-Authenticate; "" for none
		message   string
	}{
		{"no token", func(*testing.T, *door.Door) string { return "" },
			httperr.Unauthenticated, `Bearer realm=`, "send an agent's API key as Authorization: Bearer <key>"},
		{"an unknown key", func(*testing.T, *door.Door) string {
			id, _, _ := apikey.New(toolplane.CredentialAgent)
			return apikey.Key(id, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
		}, httperr.Unauthenticated, `error="invalid_token"`, "the API key is not valid"},
		{"a token that is no key, where only keys are accepted", func(*testing.T, *door.Door) string { return "eyJhbGciOiJFUzI1NiJ9.e30.sig" },
			httperr.Unauthenticated, `error="invalid_token"`, "the bearer token is not a valid API key"},
		{"a person's key", func(t *testing.T, d *door.Door) string {
			return mint(t, d.Store.(*sqlite.Store), toolplane.CredentialPerson)
		}, httperr.Denied, "", "tools are called with an agent's key"},
		{"over the key's budget", func(t *testing.T, d *door.Door) string {
			key := mint(t, d.Store.(*sqlite.Store), toolplane.CredentialAgent)
			d.Limiter = ratelimit.New(1, time.Minute)
			// One instant for both requests: the budget's window cannot end between them.
			d.Now = frozen()
			_, err := d.Authenticate(ctx, "Bearer "+key, "127.0.0.1", http.Header{}) // the budget's one request
			if err != nil {
				t.Fatal(err)
			}
			return key
		}, httperr.RateLimited, "", "too many requests"},
		{"credentials that cannot be checked", func(t *testing.T, d *door.Door) string {
			s, db := sqlitetest.NewDB(t)
			key := mint(t, s, toolplane.CredentialAgent)
			db.Close() // the database stops answering
			d.Store = s
			return key
		}, httperr.Unavailable, "", "credentials cannot be checked right now"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := sqlitetest.New(t)
			reg, _, _ := registry.Build(nil, registry.Options{})
			iv, _ := invoke.New(invoke.Config{Registry: reg, Handlers: handler.NewRegistry(), Store: store, Policy: policy.Grants{}})
			d := mcpserver.NewTestDoor(iv, reg, store)
			token := tt.setup(t, d)
			srv := httptest.NewServer((&mcpserver.Server{Door: d}).Handler())
			t.Cleanup(srv.Close)
			body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
			req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var got struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Message string         `json:"message"`
					Data    httperr.Detail `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("%d %s: %v", resp.StatusCode, raw, err)
			}
			if resp.StatusCode != tt.code.Status() || got.Error.Data.Code != string(tt.code) || string(got.ID) != "1" ||
				!strings.Contains(strings.ToLower(got.Error.Message), strings.ToLower(tt.message)) {
				t.Errorf("%d %s; want %d, code %s, saying %q", resp.StatusCode, raw, tt.code.Status(), tt.code, tt.message)
			}
			if h := resp.Header.Get("WWW-Authenticate"); (tt.challenge == "") != (h == "") || !strings.Contains(h, tt.challenge) {
				t.Errorf("WWW-Authenticate %q; want one holding %q", h, tt.challenge)
			}
		})
	}
}

// A server without a door layer would authenticate nobody: building its
// handler is refused at wiring, not at the first request.
func TestServerWithoutADoorIsAWiringMistake(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("Handler of a Server without a Door did not panic")
		}
	}()
	(&mcpserver.Server{}).Handler()
}
