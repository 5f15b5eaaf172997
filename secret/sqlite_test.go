package secret_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// TestRewrapAllSQLite rotates the key of connections kept in the embedded
// store, while a node keeps refreshing some of their tokens.
func TestRewrapAllSQLite(t *testing.T) {
	t.Parallel()
	before, during, after := rings(t)
	s := sqlitetest.New(t)
	ctx := t.Context()
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	orgs := []string{"org_a", "org_b"}
	const n = 130 // past a page, with every ID in both organizations
	for i := range n {
		for _, org := range orgs {
			id := fmt.Sprintf("con_%04d", i)
			c := &toolplane.Connection{ID: id, OrganizationID: org, Name: "conn " + id, Provider: "crm",
				Kind: toolplane.ConnectionStatic, State: toolplane.ConnectionActive, Owner: "ada",
				CreatedAt: created, UpdatedAt: created, Version: 1}
			if i%10 != 9 { // every tenth holds no secret yet
				sealed, err := secret.SealSecrets(before, org, id, toolplane.Secrets{Token: toolplane.SecretString("tok-" + id + "-" + org)})
				if err != nil {
					t.Fatal(err)
				}
				c.Secret = sealed
			}
			ch := &toolplane.Change{ID: "chg_" + org + id, OrganizationID: org, Kind: "connection.create", Subject: id, Actor: "ada", CreatedAt: created}
			if err := s.InsertConnection(ctx, c, ch); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A node refreshing tokens of org_a's first connections meanwhile,
	// under the new key, with compare-and-swap as every node writes.
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; wctx.Err() == nil && i < 300; i++ {
			id := fmt.Sprintf("con_%04d", i%20)
			if i%20%10 == 9 {
				continue
			}
			for wctx.Err() == nil {
				c, err := s.GetConnection(wctx, "org_a", id)
				if err != nil {
					if wctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				c.Secret, err = secret.SealSecrets(during, "org_a", id, toolplane.Secrets{Token: toolplane.SecretString(fmt.Sprintf("tok-%s-org_a-%d", id, i))})
				if err != nil {
					t.Error(err)
					return
				}
				if ok, err := s.UpdateConnection(wctx, c, nil); ok || err != nil {
					break
				}
			}
		}
	})
	r, err := secret.RewrapAll(ctx, s, during, nil)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("RewrapAll: %v", err)
	}
	withSecret := 2 * (n - n/10)
	if r.Rewrapped+r.Current != withSecret || r.Empty != 2*(n/10) || r.Failed != 0 || r.Gone != 0 {
		t.Errorf("report %+v, want %d rewrapped or current and %d empty", r, withSecret, 2*(n/10))
	}

	// Every secret opens with the new key alone, each its own, and
	// nothing but the secret and the version moved.
	for _, org := range orgs {
		for i := range n {
			id := fmt.Sprintf("con_%04d", i)
			c, err := s.GetConnection(ctx, org, id)
			if err != nil {
				t.Fatal(err)
			}
			if c.Name != "conn "+id || !c.UpdatedAt.Equal(created) {
				t.Errorf("%s/%s: name %q updated %v changed", org, id, c.Name, c.UpdatedAt)
			}
			got, err := secret.OpenSecrets(after, org, id, c.Secret)
			if err != nil {
				t.Errorf("%s/%s with only the new key: %v", org, id, err)
				continue
			}
			want := "tok-" + id + "-" + org
			if tok := got.Token.Reveal(); i%10 != 9 && (len(tok) < len(want) || tok[:len(want)] != want) {
				t.Errorf("%s/%s holds another connection's token", org, id)
			}
		}
	}

	// Run again: nothing is left under the old key.
	r, err = secret.RewrapAll(ctx, s, during, nil)
	if err != nil || r.Rewrapped != 0 || r.Current != withSecret {
		t.Errorf("second RewrapAll = %+v, %v; want all current", r, err)
	}
}
