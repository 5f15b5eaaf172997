package connection_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/connection"
)

// tokenEndpoint is a provider's token endpoint answering as a test sets
// it, and counting the requests it was sent.
type tokenEndpoint struct {
	*httptest.Server
	mu       sync.Mutex
	status   int    // the status it answers
	body     string // the body it answers
	requests int
}

func startTokenEndpoint(t *testing.T) *tokenEndpoint {
	t.Helper()
	te := &tokenEndpoint{}
	te.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		te.mu.Lock()
		defer te.mu.Unlock()
		te.requests++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(te.status)
		fmt.Fprint(w, te.body)
	}))
	t.Cleanup(te.Close)
	return te
}

// answer has the endpoint answer status and body from now on.
func (te *tokenEndpoint) answer(status int, body string) {
	te.mu.Lock()
	defer te.mu.Unlock()
	te.status, te.body = status, body
}

func (te *tokenEndpoint) count() int {
	te.mu.Lock()
	defer te.mu.Unlock()
	return te.requests
}

// clientCredentials creates a client credentials connection to provider
// billing whose tokens are requested at te; it holds no token yet.
func clientCredentials(e *env, s *service, te *tokenEndpoint) *toolplane.Connection {
	return e.create(s, admin, connection.Input{
		Name: "billing-service", Provider: "billing", Kind: toolplane.ConnectionClientCredentials,
		Config:  toolplane.ConnectionConfig{ClientID: "billing-client", TokenURL: te.URL + "/token", Egress: loopback},
		Secrets: toolplane.Secrets{ClientSecret: toolplane.SecretString(secretToken("client"))},
	})
}

// TestRefreshProviderFailureStoresNoToken: a provider failing or refusing
// to issue a token leaves the connection's secret and expiry as they
// were; the lease is released, and a refused grant is stored as needing a
// new consent.
func TestRefreshProviderFailureStoresNoToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	te := startTokenEndpoint(t)
	s := e.service("n1")
	c := clientCredentials(e, s, te)
	before, _ := e.stored(org, c.ID)
	billing := tool("billing.read", "billing")

	te.answer(http.StatusServiceUnavailable, `{"error":"temporarily_unavailable"}`)
	_, err := e.release(s, call(""), billing, nil)
	connErr(t, err, toolplane.CodeUnavailable)
	row, _ := e.stored(org, c.ID)
	if te.count() != 1 || !bytes.Equal(row.Secret, before.Secret) || !row.TokenExpiresAt.IsZero() ||
		row.State != toolplane.ConnectionActive || row.RefreshOwner != "" {
		t.Fatalf("after the provider failed (%d requests): secret kept %t, expiry %v, state %s, lease %q; want it all as before, the lease released",
			te.count(), bytes.Equal(row.Secret, before.Secret), row.TokenExpiresAt, row.State, row.RefreshOwner)
	}

	te.answer(http.StatusBadRequest, `{"error":"invalid_grant"}`)
	_, err = e.release(s, call(""), billing, nil)
	connErr(t, err, toolplane.CodeConnectionExpired)
	row, _ = e.stored(org, c.ID)
	if te.count() != 2 || !bytes.Equal(row.Secret, before.Secret) || !row.TokenExpiresAt.IsZero() ||
		row.State != toolplane.ConnectionNeedsReauth || row.RefreshOwner != "" {
		t.Fatalf("after the provider refused the grant (%d requests): secret kept %t, expiry %v, state %s, lease %q; want needs_reauth and no token",
			te.count(), bytes.Equal(row.Secret, before.Secret), row.TokenExpiresAt, row.State, row.RefreshOwner)
	}
}

// tokenWritesFail is a store failing every write that releases a refresh
// lease: the write of a renewed token.
type tokenWritesFail struct {
	connection.Store
	err error
}

func (s tokenWritesFail) UpdateConnection(ctx context.Context, c *toolplane.Connection, ch *toolplane.Change) (bool, error) {
	if c.RefreshOwner == "" {
		return false, s.err
	}
	return s.Store.UpdateConnection(ctx, c, ch)
}

// TestRefreshStoreFailureIsReported: a token the provider issued that
// cannot be stored fails the call with the store's error, not as the
// provider's failure nor as a refusal of the connection, and is asked
// for once.
func TestRefreshStoreFailureIsReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	te := startTokenEndpoint(t)
	full := errors.New("disk full")
	s := e.serviceWith("n1", tokenWritesFail{Store: e.store, err: full}, e.keys)
	c := clientCredentials(e, s, te)
	before, _ := e.stored(org, c.ID)
	issued := secretToken("issued")
	e.plant(issued)
	te.answer(http.StatusOK, `{"access_token":"`+issued+`","token_type":"Bearer","expires_in":300}`)

	_, err := e.release(s, call(""), tool("billing.read", "billing"), nil)
	var ce *toolplane.ConnectionError
	if !errors.Is(err, full) || errors.As(err, &ce) {
		t.Fatalf("Release = %v; want the store's error, not a refusal", err)
	}
	row, _ := e.stored(org, c.ID)
	if te.count() != 1 || !bytes.Equal(row.Secret, before.Secret) || !row.TokenExpiresAt.IsZero() {
		t.Fatalf("%d token requests, secret kept %t, expiry %v; want one request and nothing stored",
			te.count(), bytes.Equal(row.Secret, before.Secret), row.TokenExpiresAt)
	}
}
