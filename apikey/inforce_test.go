package apikey_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// A call made with a key and run later (an approved call) runs only while
// the key is in force: one revoked meanwhile, or past its expiry, is
// refused as a key that does not authenticate.
func TestInForceRefusesARevokedOrExpiredKey(t *testing.T) {
	t.Parallel()
	svc, store, _ := newKeys(t)
	ctx := context.Background()
	now := time.Now()
	mint := func(expires time.Time) *toolplane.Credential {
		t.Helper()
		_, cred, err := svc.Create(ctx, apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "agent-support", Tools: []string{"demo.*"}, ExpiresAt: expires}, admin)
		if err != nil {
			t.Fatal(err)
		}
		return cred
	}
	live, revoked, expiring := mint(time.Time{}), mint(time.Time{}), mint(now.Add(time.Hour))
	if _, err := svc.Revoke(ctx, revoked.ID, admin); err != nil {
		t.Fatal(err)
	}
	if got, err := apikey.InForce(ctx, store, live.ID, now); err != nil || got.ID != live.ID {
		t.Fatalf("a live key: %+v, %v", got, err)
	}
	for name, at := range map[string]struct {
		id  string
		now time.Time
	}{"revoked": {revoked.ID, now}, "expired": {expiring.ID, now.Add(2 * time.Hour)}, "unknown": {"tpk_00000000000000000000000000000000", now}} {
		if got, err := apikey.InForce(ctx, store, at.id, at.now); !errors.Is(err, apikey.ErrInvalid) || got != nil {
			t.Errorf("a %s key: %+v, %v; want ErrInvalid", name, got, err)
		}
	}
}

// Revoking a revoked key answers it as it is: its revocation keeps the
// moment it was first revoked.
func TestRevokingAgainKeepsTheFirstRevocation(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	at := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	clock := at
	svc := apikey.NewKeys(apikey.KeysConfig{Store: store, Cache: apikey.NewCache(16, time.Minute), Now: func() time.Time { return clock }})
	ctx := context.Background()
	_, cred, err := svc.Create(ctx, apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "agent-support", Tools: []string{"demo.*"}}, admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Revoke(ctx, cred.ID, admin); err != nil {
		t.Fatal(err)
	}
	clock = at.Add(time.Hour)
	again, err := svc.Revoke(ctx, cred.ID, admin)
	if err != nil || !again.RevokedAt.Equal(at) {
		t.Fatalf("revoked again = %+v, %v; want revoked at %v", again, err, at)
	}
	if stored, err := store.GetCredential(ctx, cred.ID); err != nil || !stored.RevokedAt.Equal(at) {
		t.Fatalf("stored = %+v, %v; want revoked at %v", stored, err, at)
	}
}
