package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/postgres/pgtest"
)

// freshnessBound is how soon a change to the catalogue committed on one
// node must be searchable on every other (issue 33).
const freshnessBound = 3 * time.Second

// TestSearchFreshAcrossNodes: two nodes on one PostgreSQL schema. A tool
// published and approved on node A is found by a search on node B within
// the bound, as is its deprecation, and its retirement takes it out of
// node B's answers within the bound too: node B hears of each change
// through the store's change feed, not at its next poll (an hour away
// here).
func TestSearchFreshAcrossNodes(t *testing.T) {
	t.Parallel()
	dsn := pgtest.SchemaDSN(t, pgtest.DSN(t))
	dir := t.TempDir()
	start := func() *Server {
		s, err := New(context.Background(), Config{Addr: "127.0.0.1:0", Database: dsn, DataDir: dir, Demo: true,
			// Only the change feed can bring node B a change in time.
			CatalogPoll: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- s.Run(ctx) }()
		t.Cleanup(func() { stop(); <-ran })
		return s
	}
	a, b := start(), start()
	nodeA := "http://" + a.Addr()
	admin := readCreds(t, dir)["TOOLPLANE_ADMIN_KEY"]
	reader := &toolplane.Credential{ID: "tpk_reader", OrganizationID: DefaultOrganization, Kind: toolplane.CredentialPerson, Subject: "reader"}
	const name = "finance.reconcile_ledger"
	q := discovery.Query{Text: "reconcile the ledger discrepancies between accounts"}
	// found answers the state of the tool as node s's search finds it,
	// "" when it does not.
	found := func(s *Server) toolplane.VersionState {
		res, err := s.door.Search(t.Context(), reader, "", q)
		if err != nil {
			t.Fatalf("search: %v", err)
		}
		for _, m := range res.Matches {
			if m.Name == name {
				return m.State
			}
		}
		return ""
	}
	// reaches waits for node B's search to answer want, and answers how
	// long it took from since.
	reaches := func(what string, since time.Time, want toolplane.VersionState) time.Duration {
		t.Helper()
		for found(b) != want {
			if time.Since(since) > 10*time.Second {
				t.Fatalf("%s: never reached node B", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
		took := time.Since(since)
		if took > freshnessBound {
			t.Errorf("%s reached node B's search after %v, more than %v", what, took, freshnessBound)
		}
		t.Logf("%s reached node B's search after %v", what, took)
		return took
	}
	if got := found(b); got != "" {
		t.Fatalf("node B finds %s before it is published: %s", name, got)
	}

	def := httpTool(name, "read", "ledger", map[string]any{"method": "GET", "url": "http://127.0.0.1:9/accounts/{id}"})
	def["owner"] = "finance"
	def["description"] = "Reconcile the ledger: list the discrepancies between two accounts' balances."
	raw, _ := json.Marshal(def)
	status, got := post(t, nodeA, "/v1/keys", admin, `{"kind":"person","subject":"bea","roles":["tool_owner:finance"]}`)
	var k struct {
		Key string `json:"key"`
	}
	if json.Unmarshal([]byte(got), &k); status != http.StatusCreated || k.Key == "" {
		t.Fatalf("bea's key: %d %s", status, got)
	}
	status, got = post(t, nodeA, "/v1/registry/tools", k.Key, string(raw))
	if status != http.StatusCreated {
		t.Fatalf("publish on node A: %d %s", status, got)
	}
	var pub struct {
		State toolplane.VersionState `json:"state"`
	}
	json.Unmarshal([]byte(got), &pub)
	served := time.Now()
	if pub.State == toolplane.StateInReview {
		if status, got := post(t, nodeA, "/v1/registry/tools/"+name+"/versions/1.0.0/approve", admin, `{"note":"reads balances"}`); status != http.StatusOK {
			t.Fatalf("approve on node A: %d %s", status, got)
		}
		served = time.Now()
	}
	// Node A serves it once its own write returned.
	if got := found(a); got != toolplane.StateActive {
		t.Fatalf("node A finds %s as %q after publishing it, want active", name, got)
	}
	reaches("the publish", served, toolplane.StateActive)

	changed := time.Now()
	if status, got := post(t, nodeA, "/v1/registry/tools/"+name+"/versions/1.0.0/deprecate", admin,
		`{"note":"moving to the new ledger","sunset_at":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`); status != http.StatusOK {
		t.Fatalf("deprecate on node A: %d %s", status, got)
	}
	reaches("the deprecation", changed, toolplane.StateDeprecated)

	changed = time.Now()
	if status, got := post(t, nodeA, "/v1/registry/tools/"+name+"/versions/1.0.0/retire", admin, `{"note":"gone"}`); status != http.StatusOK {
		t.Fatalf("retire on node A: %d %s", status, got)
	}
	reaches("the retirement", changed, "")
}
