package connection_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// TestRotateKeyWhileReleasing rewraps every connection's secret under a
// new key while two nodes, holding the old and the new key, keep
// releasing them: no call fails, and afterwards the new key alone opens
// everything.
func TestRotateKeyWhileReleasing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oldLine, newLine := "old "+newKey(), "new "+newKey()
	parse := func(lines ...string) *secret.Keyring {
		text := ""
		for _, l := range lines {
			text += l + "\n"
		}
		k, err := secret.ParseKeyring(text)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	before, during, after := parse(oldLine), parse(newLine, oldLine), parse(newLine)

	const n = 30
	creator := e.serviceWith("n0", e.store, before)
	ids, toks := make([]string, n), make([]string, n)
	for i := range n {
		toks[i] = secretToken(fmt.Sprint("rotate", i))
		ids[i] = e.create(creator, admin, static(fmt.Sprint("crm-", i), fmt.Sprint("crm", i), toks[i])).ID
	}
	e.keys = during
	nodes := []*service{
		e.serviceWith("n1", e.store, during),
		e.serviceWith("n2", sqlitetest.Open(t, e.path), during),
	}
	releaseAll := func(s *service, i int) error {
		r, err := s.Release(context.Background(), releaseOf(call(""), tool("crm.read", fmt.Sprint("crm", i)), nil))
		e.saw(err)
		if err != nil {
			return err
		}
		if r.Connection.ID != ids[i] || r.Secrets.Token.Reveal() != toks[i] {
			return fmt.Errorf("released %s with another token, want %s", r.Connection.ID, ids[i])
		}
		return nil
	}

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var mu sync.Mutex
	calls := 0
	for g := range 4 {
		s := nodes[g%2]
		wg.Go(func() {
			for i := g; ctx.Err() == nil; i++ {
				if err := releaseAll(s, i%n); err != nil {
					t.Errorf("Release during the rotation: %v", err)
					return
				}
				mu.Lock()
				calls++
				mu.Unlock()
			}
		})
	}
	// The rotation starts once calls are under way, so it runs beside
	// them however the machine schedules the goroutines.
	for {
		mu.Lock()
		going := calls >= 8
		mu.Unlock()
		if going || t.Failed() {
			break
		}
		time.Sleep(time.Millisecond)
	}
	r, err := secret.RewrapAll(t.Context(), e.store, during, nil)
	stop()
	wg.Wait()
	if err != nil || r.Rewrapped+r.Current != n || r.Failed != 0 {
		t.Fatalf("RewrapAll = %+v, %v", r, err)
	}
	if calls == 0 {
		t.Fatalf("no call ran during the rotation")
	}

	for _, id := range ids {
		c, err := e.store.GetConnection(t.Context(), org, id)
		if err != nil {
			t.Fatal(err)
		}
		if k, err := secret.KeyID(c.Secret); err != nil || k != "new" {
			t.Errorf("connection %s is under key %q (%v), want new", id, k, err)
		}
	}
	// A node holding only the new key, and the nodes that served during
	// the rotation, release every connection.
	e.keys = after
	for _, s := range append(nodes, e.serviceWith("n3", e.store, after)) {
		for i := range n {
			if err := releaseAll(s, i); err != nil {
				t.Errorf("Release after the rotation: %v", err)
			}
		}
	}
}
