package secret_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
)

// memStore is the part of a connection store RewrapAll uses, in memory,
// with the semantics toolplane.ConnectionStore documents: listing by ID
// across organizations after a cursor, and updates conditional on
// Version. beforeUpdate, when set, runs before each update is decided, so
// a test can change the row under it as another node would.
type memStore struct {
	mu           sync.Mutex
	rows         map[string]toolplane.Connection // by org/id
	beforeUpdate func(c *toolplane.Connection)
	updates      int
}

func newMemStore() *memStore { return &memStore{rows: map[string]toolplane.Connection{}} }

func (s *memStore) put(c toolplane.Connection) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows[c.OrganizationID+"/"+c.ID] = c
}

func (s *memStore) get(org, id string) toolplane.Connection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows[org+"/"+id]
}

func (s *memStore) ListAllConnections(ctx context.Context, after string, limit int) ([]toolplane.Connection, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []toolplane.Connection
	for _, c := range s.rows {
		if c.ID > after {
			all = append(all, c)
		}
	}
	slices.SortFunc(all, func(a, b toolplane.Connection) int { return strings.Compare(a.ID, b.ID) })
	if len(all) <= limit {
		return all, "", nil
	}
	all = all[:limit]
	return all, all[limit-1].ID, nil
}

func (s *memStore) GetConnection(ctx context.Context, org, id string) (*toolplane.Connection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.rows[org+"/"+id]
	if !ok {
		return nil, fmt.Errorf("connection %s: %w", id, toolplane.ErrNotFound)
	}
	return &c, nil
}

func (s *memStore) UpdateConnection(ctx context.Context, c *toolplane.Connection, ch *toolplane.Change) (bool, error) {
	if s.beforeUpdate != nil {
		s.beforeUpdate(c)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := c.OrganizationID + "/" + c.ID
	old, ok := s.rows[key]
	if !ok || old.Version != c.Version {
		return false, nil
	}
	c.Version++
	stored := *c
	stored.Secret = bytes.Clone(c.Secret)
	s.rows[key] = stored
	s.updates++
	return true, nil
}

// seed stores n connections over two organizations, sealed under k.
func seed(t *testing.T, s *memStore, k *secret.Keyring, n int) {
	t.Helper()
	for i := range n {
		org := []string{"org_a", "org_b"}[i%2]
		id := fmt.Sprintf("con_%04d", i)
		sealed, err := secret.SealSecrets(k, org, id, toolplane.Secrets{Token: toolplane.SecretString("tok-" + id)})
		if err != nil {
			t.Fatal(err)
		}
		s.put(toolplane.Connection{ID: id, OrganizationID: org, Secret: sealed, Version: 1})
	}
}

// checkAll opens every connection with k and checks it is under the
// key id with its own token.
func checkAll(t *testing.T, s *memStore, k *secret.Keyring) {
	t.Helper()
	for _, c := range s.rows {
		if len(c.Secret) == 0 {
			continue
		}
		if id, _ := secret.KeyID(c.Secret); id != k.Current() {
			t.Errorf("%s is under %s, want %s", c.ID, id, k.Current())
		}
		got, err := secret.OpenSecrets(k, c.OrganizationID, c.ID, c.Secret)
		if err != nil {
			t.Errorf("%s: %v", c.ID, err)
			continue
		}
		if !strings.HasPrefix(got.Token.Reveal(), "tok-"+c.ID) {
			t.Errorf("%s holds another connection's token", c.ID)
		}
	}
}

// rings answers the keyrings before, during and after a rotation.
func rings(t *testing.T) (before, during, after *secret.Keyring) {
	t.Helper()
	oldKey, newKey := newKey(t), newKey(t)
	parse := func(text string) *secret.Keyring {
		k, err := secret.ParseKeyring(text)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	return parse("old " + oldKey), parse("new " + newKey + "\nold " + oldKey), parse("new " + newKey)
}

func TestRewrapAll(t *testing.T) {
	t.Parallel()
	before, during, after := rings(t)
	s := newMemStore()
	seed(t, s, before, 250) // past two pages
	// Some already under the new key, and some with no secret.
	seed2 := newMemStore()
	seed(t, seed2, during, 260)
	for _, id := range []string{"con_0250", "con_0251", "con_0252"} {
		org := map[bool]string{true: "org_a", false: "org_b"}[id[len(id)-1]%2 == 0]
		s.put(seed2.get(org, id))
	}
	s.put(toolplane.Connection{ID: "con_0300", OrganizationID: "org_a", Version: 4})
	s.put(toolplane.Connection{ID: "con_0301", OrganizationID: "org_b", Secret: []byte{}, Version: 1})

	r, err := secret.RewrapAll(t.Context(), s, during, nil)
	if err != nil {
		t.Fatalf("RewrapAll: %v", err)
	}
	want := secret.Report{Rewrapped: 250, Current: 3, Empty: 2}
	if r != want {
		t.Errorf("report %+v, want %+v", r, want)
	}
	checkAll(t, s, after)
	if c := s.get("org_a", "con_0000"); c.Version != 2 {
		t.Errorf("rewrapped connection at version %d, want 2", c.Version)
	}

	// Again: nothing left to do, nothing written.
	updates := s.updates
	r, err = secret.RewrapAll(t.Context(), s, during, nil)
	if err != nil || r != (secret.Report{Current: 253, Empty: 2}) {
		t.Errorf("second RewrapAll = %+v, %v", r, err)
	}
	if s.updates != updates {
		t.Errorf("second RewrapAll wrote %d rows", s.updates-updates)
	}
}

func TestRewrapAllFailures(t *testing.T) {
	t.Parallel()
	before, during, _ := rings(t)
	s := newMemStore()
	seed(t, s, before, 10)
	// A secret copied from another row does not authenticate here; one
	// under a key nobody holds cannot be unwrapped; one that is garbage
	// is malformed.
	moved := s.get("org_a", "con_0000")
	moved.ID = "con_0100"
	s.put(moved)
	foreign, err := ring(t, "lost").Seal([]byte(`{"token":"x"}`), secret.ConnectionAAD("org_b", "con_0101"))
	if err != nil {
		t.Fatal(err)
	}
	s.put(toolplane.Connection{ID: "con_0101", OrganizationID: "org_b", Secret: foreign, Version: 1})
	s.put(toolplane.Connection{ID: "con_0102", OrganizationID: "org_a", Secret: []byte("plain text"), Version: 1})

	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	r, err := secret.RewrapAll(t.Context(), s, during, log)
	if !errors.Is(err, secret.ErrIncomplete) {
		t.Fatalf("RewrapAll = %v, want ErrIncomplete", err)
	}
	if want := (secret.Report{Rewrapped: 10, Failed: 3}); r != want {
		t.Errorf("report %+v, want %+v", r, want)
	}
	for _, id := range []string{"con_0100", "con_0101", "con_0102"} {
		if !strings.Contains(logged.String(), "connection="+id) {
			t.Errorf("log does not name %s:\n%s", id, logged.String())
		}
	}
	if strings.Contains(logged.String(), "tok-") || strings.Contains(logged.String(), "plain text") {
		t.Errorf("log shows a secret:\n%s", logged.String())
	}
	if !strings.Contains(logged.String(), `key-encryption key \"lost\"`) {
		t.Errorf("log does not name the missing key:\n%s", logged.String())
	}
}

func TestRewrapAllLostUpdate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// race runs before the first update of con_0001 is decided.
		race func(t *testing.T, s *memStore, during *secret.Keyring, c toolplane.Connection)
		want secret.Report
	}{
		{
			name: "another node sealed a new secret under the new key",
			race: func(t *testing.T, s *memStore, during *secret.Keyring, c toolplane.Connection) {
				sealed, err := secret.SealSecrets(during, c.OrganizationID, c.ID, toolplane.Secrets{Token: toolplane.SecretString("tok-" + c.ID + "-refreshed")})
				if err != nil {
					t.Error(err)
				}
				c.Secret, c.Version = sealed, c.Version+1
				s.put(c)
			},
			want: secret.Report{Rewrapped: 2, Current: 1},
		},
		{
			name: "another node changed something else",
			race: func(t *testing.T, s *memStore, during *secret.Keyring, c toolplane.Connection) {
				c.Name, c.Version = "renamed", c.Version+1
				s.put(c)
			},
			want: secret.Report{Rewrapped: 3},
		},
		{
			name: "it was deleted",
			race: func(t *testing.T, s *memStore, during *secret.Keyring, c toolplane.Connection) {
				s.mu.Lock()
				delete(s.rows, c.OrganizationID+"/"+c.ID)
				s.mu.Unlock()
			},
			want: secret.Report{Rewrapped: 2, Gone: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before, during, after := rings(t)
			s := newMemStore()
			seed(t, s, before, 3)
			raced := false
			s.beforeUpdate = func(c *toolplane.Connection) {
				if c.ID == "con_0001" && !raced {
					raced = true
					tt.race(t, s, during, s.get(c.OrganizationID, c.ID))
				}
			}
			r, err := secret.RewrapAll(t.Context(), s, during, nil)
			if err != nil {
				t.Fatalf("RewrapAll: %v", err)
			}
			if r != tt.want {
				t.Errorf("report %+v, want %+v", r, tt.want)
			}
			checkAll(t, s, after)
			if c := s.get("org_b", "con_0001"); c.Name == "renamed" && c.Version != 3 {
				t.Errorf("the other node's change was lost or not rewrapped: version %d", c.Version)
			}
		})
	}
}

func TestRewrapAllKeepsLosing(t *testing.T) {
	t.Parallel()
	before, during, _ := rings(t)
	s := newMemStore()
	seed(t, s, before, 2)
	s.beforeUpdate = func(c *toolplane.Connection) {
		if c.ID == "con_0000" {
			row := s.get(c.OrganizationID, c.ID)
			row.Version++
			s.put(row)
		}
	}
	r, err := secret.RewrapAll(t.Context(), s, during, nil)
	if !errors.Is(err, secret.ErrIncomplete) || r != (secret.Report{Rewrapped: 1, Failed: 1}) {
		t.Errorf("RewrapAll = %+v, %v; want one failed, ErrIncomplete", r, err)
	}
}

func TestRewrapAllConcurrentWriters(t *testing.T) {
	t.Parallel()
	before, during, after := rings(t)
	s := newMemStore()
	seed(t, s, before, 200)
	// Nodes keep refreshing tokens during the walk, sealing under the new
	// key as step 1 of the procedure has them do, with compare-and-swap
	// and a re-read on loss.
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil && i < 2000; i++ {
				org := []string{"org_a", "org_b"}[i%2]
				id := fmt.Sprintf("con_%04d", (i*7+w)%200/2*2+i%2)
				for {
					c, err := s.GetConnection(ctx, org, id)
					if err != nil {
						t.Error(err)
						return
					}
					c.Secret, err = secret.SealSecrets(during, org, id, toolplane.Secrets{Token: toolplane.SecretString(fmt.Sprintf("tok-%s-%d", id, i))})
					if err != nil {
						t.Error(err)
						return
					}
					if ok, _ := s.UpdateConnection(ctx, c, nil); ok {
						break
					}
				}
			}
		})
	}
	r, err := secret.RewrapAll(ctx, s, during, nil)
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatalf("RewrapAll: %v", err)
	}
	if r.Rewrapped+r.Current != 200 || r.Failed != 0 {
		t.Errorf("report %+v, want 200 rewrapped or current", r)
	}
	checkAll(t, s, after)
}

func TestRewrapAllCancelled(t *testing.T) {
	t.Parallel()
	before, during, _ := rings(t)
	s := newMemStore()
	seed(t, s, before, 5)
	ctx, cancel := context.WithCancel(t.Context())
	s.beforeUpdate = func(c *toolplane.Connection) {
		if c.ID == "con_0001" {
			cancel()
		}
	}
	r, err := secret.RewrapAll(ctx, s, during, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RewrapAll = %+v, %v; want context.Canceled", r, err)
	}
	if r.Rewrapped > 2 {
		t.Errorf("walk went on after cancellation: %+v", r)
	}
}
