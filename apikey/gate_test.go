package apikey

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/ratelimit"
)

// The gate's order, step by step: failures never spend a key's budget, an
// address past its failure budget is refused without a store read for the
// key id it failed with unless its key is one the cache recognises, and a
// right secret from any other address authenticates however many wrong
// ones were sent for its id.
func TestGateKeepsTheHolderOutOfTheFloodersReach(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	id, key := store.stored(t, time.Time{})
	wrong := Key(id, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	g := Gate{Authenticator: Authenticator{Store: store, Cache: NewCache(0, time.Hour)},
		Limiter: ratelimit.New(3, time.Minute), Failures: ratelimit.NewFailures(2, time.Minute)}
	steps := []struct {
		name, token, addr string
		want              string // "ok", "401", "429 failures", "429 key"
		storeRead         bool
	}{
		{"a wrong secret", wrong, "10.0.0.9", "401", true},
		{"a second wrong secret", wrong, "10.0.0.9", "401", true},
		{"the flooder's address is spent: refused unread", wrong, "10.0.0.9", "429 failures", false},
		{"the key id has no budget to spend: a wrong secret from elsewhere is only not valid", wrong, "10.0.0.8", "401", true},
		{"the holder, uncached, at the flooder's address: refused unread", key, "10.0.0.9", "429 failures", false},
		{"the holder, from elsewhere, still authenticates", key, "10.0.0.1", "ok", true},
		{"the holder at the flooder's address, recognised by the cache", key, "10.0.0.9", "ok", false},
		{"the holder's third request", key, "10.0.0.1", "ok", false},
		{"the holder's own budget, spent by the holder alone", key, "10.0.0.1", "429 key", false},
	}
	for _, s := range steps {
		before := store.readCount()
		_, d, err := g.Admit(context.Background(), s.token, s.addr, now)
		var limited *LimitedError
		got := "ok"
		switch {
		case errors.As(err, &limited) && limited.Failures:
			got = "429 failures"
		case errors.As(err, &limited):
			got = "429 key"
		case errors.Is(err, toolplane.ErrUnauthenticated):
			got = "401"
			// Refused as the key it was presented as, in the doors' words.
			if refused := (*RefusedError)(nil); !errors.As(err, &refused) || refused.Error() != "the API key is not valid" {
				t.Errorf("%s: refused as %v", s.name, err)
			}
		case err != nil:
			got = err.Error()
		}
		if got != s.want {
			t.Errorf("%s: %s, want %s", s.name, got, s.want)
		}
		if read := store.readCount() > before; read != s.storeRead {
			t.Errorf("%s: store read %v, want %v", s.name, read, s.storeRead)
		}
		if got != "401" && d.Limit == 0 {
			t.Errorf("%s: no decision to report", s.name)
		}
	}
}

// An address that spent its failure budget on junk (tokens that are not
// keys, keys of ids nobody holds) still has a valid key checked and
// admitted: a key is refused unchecked only where its own key id failed
// from that address, which is what bounds the Argon2id work of a flood.
func TestGateChecksAValidKeyFromAFloodedAddress(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	id, key := store.stored(t, time.Time{})
	other, otherKey := store.stored(t, time.Time{})
	g := Gate{Authenticator: Authenticator{Store: store, Cache: NewCache(0, time.Hour)},
		Failures: ratelimit.NewFailures(2, time.Minute)}
	const flooder = "10.0.0.9"
	for i := range 10 {
		junk := "not-a-key"
		if i%2 == 1 {
			junkID, secret, err := New(toolplane.CredentialAgent)
			if err != nil {
				t.Fatal(err)
			}
			junk = Key(junkID, secret)
		}
		if _, _, err := g.Admit(context.Background(), junk, flooder, now); err == nil {
			t.Fatalf("junk %q admitted", junk)
		}
	}
	// Wrong secrets for the other key's id spend that id's budget too.
	wrong := Key(other, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	for range 2 {
		g.Admit(context.Background(), wrong, flooder, now)
	}
	steps := []struct {
		name, token string
		want        string // "ok", "429"
		storeRead   bool
	}{
		{"a valid key nobody flooded, never cached", key, "ok", true},
		{"the same key, now cached", key, "ok", false},
		{"a wrong secret for the flooded id: refused unread", wrong, "429", false},
		{"the flooded id's holder, uncached, at the flooder's address", otherKey, "429", false},
	}
	for _, s := range steps {
		before := store.readCount()
		cred, _, err := g.Admit(context.Background(), s.token, flooder, now)
		got := "ok"
		var limited *LimitedError
		switch {
		case errors.As(err, &limited) && limited.Failures:
			got = "429"
		case err != nil:
			got = err.Error()
		case cred.ID != id:
			got = "admitted as " + cred.ID
		}
		if got != s.want {
			t.Errorf("%s: %s, want %s", s.name, got, s.want)
		}
		if read := store.readCount() > before; read != s.storeRead {
			t.Errorf("%s: store read %v, want %v", s.name, read, s.storeRead)
		}
	}
}

// A flood of wrong secrets for a real key id from one address, far past
// the budget, limits that address only: the real key, presented from an
// address that shares nothing with the flood but its own budget spent on
// other failures (a NAT's other users), is checked and admitted; wrong
// secrets for the id from elsewhere are answered as not valid, not told to
// slow down; and the flooding address is refused unread.
func TestGateLimitsAFloodByItsAddressNotByTheKeyID(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	id, key := store.stored(t, time.Time{})
	wrong := Key(id, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	g := Gate{Authenticator: Authenticator{Store: store, Cache: NewCache(0, time.Hour)},
		Limiter: ratelimit.New(600, time.Minute), Failures: ratelimit.NewFailures(30, time.Minute)}
	const flooder, office = "203.0.113.9", "198.51.100.4"
	for range 620 {
		if _, _, err := g.Admit(context.Background(), wrong, flooder, now); err == nil {
			t.Fatal("a wrong secret admitted")
		}
	}
	// The office spends its own budget on junk.
	for range 40 {
		g.Admit(context.Background(), "not-a-key", office, now)
	}
	if _, _, err := g.Admit(context.Background(), wrong, "192.0.2.1", now); !errors.Is(err, toolplane.ErrUnauthenticated) {
		t.Errorf("a wrong secret for the flooded id from a fresh address: %v, want not valid", err)
	}
	cred, _, err := g.Admit(context.Background(), key, office, now)
	if err != nil || cred.ID != id {
		t.Fatalf("the real key from another address: %v", err)
	}
	before := store.readCount()
	var limited *LimitedError
	if _, _, err := g.Admit(context.Background(), wrong, flooder, now); !errors.As(err, &limited) || !limited.Failures {
		t.Errorf("the flooding address: %v, want limited", err)
	}
	if store.readCount() != before {
		t.Error("the flooding address's next wrong secret was read from the store")
	}
}
