package apikey_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/sqlite"
)

// TestCreateRefusesTextNoStoreHolds: a subject, label, role or tool that
// is not plain text is the caller's mistake, refused at its field before
// the store is asked; a store that cannot answer is not (ErrNotStored is
// the caller's 400 at the doors).
func TestCreateRefusesTextNoStoreHolds(t *testing.T) {
	t.Parallel()
	keys, _, _ := newKeys(t)
	ctx := context.Background()
	for _, c := range []struct {
		field string
		k     apikey.NewKey
	}{
		{"/subject", apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "bot\x00"}},
		{"/label", apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "bot", Label: "\xff"}},
		{"/roles/0", apikey.NewKey{Kind: toolplane.CredentialPerson, Subject: "ann", Roles: []string{"group:\x00"}}},
		{"/tools/0", apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "bot", Tools: []string{"crm.\x00"}}},
	} {
		_, _, err := keys.Create(ctx, c.k, admin)
		var invalid *apikey.InvalidError
		if !errors.As(err, &invalid) || invalid.Field != c.field || !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("%s: Create = %v, want an InvalidError at %s", c.field, err, c.field)
		}
	}
}

// TestCreateAnswersAnOutageAsAFault: a store that does not answer is the
// platform's fault, not a key the store refused.
func TestCreateAnswersAnOutageAsAFault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	s := sqlite.New(db)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	keys := apikey.NewKeys(apikey.KeysConfig{Store: s})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, err = keys.Create(ctx, apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "bot"}, admin)
	if err == nil || errors.Is(err, apikey.ErrNotStored) || errors.Is(err, toolplane.ErrInvalid) {
		t.Fatalf("Create with the database closed = %v, want a fault that is not ErrNotStored", err)
	}
}

// TestKeyAttributes: a key carries the attributes it was minted with,
// which rules read of its caller; a name a rule could not read, too many
// of them, or a value no store holds is refused at /attributes before
// the store is asked.
func TestKeyAttributes(t *testing.T) {
	t.Parallel()
	keys, store, cache := newKeys(t)
	ctx := context.Background()
	agent := func(attrs map[string]string) apikey.NewKey {
		return apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "bot", Attributes: attrs}
	}
	many := map[string]string{}
	for i := range apikey.MaxAttributes + 1 {
		many[string(rune('a'+i))] = "x"
	}
	for name, attrs := range map[string]map[string]string{
		"a capital":        {"Team": "billing"},
		"a dot":            {"team.name": "billing"},
		"a leading digit":  {"1team": "billing"},
		"empty":            {"": "billing"},
		"too many":         many,
		"a NUL in a value": {"team": "bill\x00ing"},
	} {
		_, _, err := keys.Create(ctx, agent(attrs), admin)
		var invalid *apikey.InvalidError
		if !errors.As(err, &invalid) || !strings.HasPrefix(invalid.Field, "/attributes") {
			t.Errorf("%s: Create = %v, want an InvalidError at /attributes", name, err)
		}
	}
	key, cred, err := keys.Create(ctx, agent(map[string]string{"team": "oncall", "tier": "gold"}), admin)
	if err != nil {
		t.Fatal(err)
	}
	if cred.Attributes["team"] != "oncall" || cred.Attributes["tier"] != "gold" {
		t.Errorf("minted attributes = %v", cred.Attributes)
	}
	got, err := cache.Authenticate(ctx, store, key, time.Now())
	if err != nil || got.Attributes["team"] != "oncall" || len(got.Attributes) != 2 {
		t.Errorf("authenticated attributes = %v, %v; want team oncall and tier gold", got, err)
	}
}
