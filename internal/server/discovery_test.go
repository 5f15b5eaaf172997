package server

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/internal/syncbuf"
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

// embeddingsFake is an OpenAI-compatible embeddings endpoint: a hashed
// bag of the words of each input, 64 dimensions, or, while hang is set,
// no answer at all. It notes whether every request carried the key.
type embeddingsFake struct {
	hang     atomic.Bool
	requests atomic.Int64
	badKey   atomic.Int64
}

func (f *embeddingsFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if r.Header.Get("Authorization") != "Bearer "+embeddingsKey {
		f.badKey.Add(1)
	}
	var req struct {
		Input []string `json:"input"`
	}
	// Read whole before hanging: the server notices the client went
	// away (and ends r's context) only once the body is read.
	json.NewDecoder(r.Body).Decode(&req)
	if f.hang.Load() {
		<-r.Context().Done()
		return
	}
	type datum struct {
		Embedding []float64 `json:"embedding"`
	}
	var data []datum
	for _, in := range req.Input {
		v := make([]float64, 64)
		v[0] = 0.01 // never a zero vector
		for _, w := range strings.Fields(strings.ToLower(in)) {
			h := fnv.New32a()
			h.Write([]byte(strings.Trim(w, ".,:;")))
			v[h.Sum32()%64]++
		}
		data = append(data, datum{v})
	}
	json.NewEncoder(w).Encode(map[string]any{"data": data})
}

const embeddingsKey = "sk-embeddings-test-7f3a"

// TestSearchWithEmbeddings: a node configured with an embeddings endpoint
// embeds every tool it serves in the background, keeps the vectors in
// its database, and fuses them into its searches; when the endpoint hangs
// a search answers from the words within the bound and says so. The key,
// read from its file, reaches the endpoint and no log.
func TestSearchWithEmbeddings(t *testing.T) {
	t.Parallel()
	fake := &embeddingsFake{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "embeddings.key")
	if err := os.WriteFile(keyFile, []byte(embeddingsKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	const bound = 250 * time.Millisecond
	s, err := New(context.Background(), Config{Addr: "127.0.0.1:0", DataDir: dir, Database: filepath.Join(dir, "toolplane.db"), Demo: true,
		Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Embeddings: EmbeddingsConfig{URL: srv.URL, Model: "bag-of-words", KeyFile: keyFile, Timeout: bound, PerMinute: 600}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	t.Cleanup(func() { stop(); <-ran })

	store := s.b.Store.(toolplane.EmbeddingStore)
	want := len(s.reg.Platform())
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := 0
		if err := store.EachToolEmbedding(t.Context(), "bag-of-words", func(*toolplane.ToolEmbedding) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d platform tools embedded", n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	reader := &toolplane.Credential{ID: "tpk_reader", OrganizationID: DefaultOrganization, Kind: toolplane.CredentialPerson, Subject: "reader"}
	asked := fake.requests.Load()
	res, err := s.door.Search(t.Context(), reader, "", discovery.Query{Text: "find helpdesk tickets by subject"})
	if err != nil || res.Degraded != "" || len(res.Matches) == 0 || res.Matches[0].Name != "demo.search_tickets" {
		t.Fatalf("search with the endpoint answering: %+v, %v", res, err)
	}
	if fake.requests.Load() != asked+1 {
		t.Errorf("the search sent the endpoint %d requests, want its query's one", fake.requests.Load()-asked)
	}

	fake.hang.Store(true)
	start := time.Now()
	res, err = s.door.Search(t.Context(), reader, "", discovery.Query{Text: "add a note to a ticket"})
	took := time.Since(start)
	if err != nil || res.Degraded != "semantic" || len(res.Matches) == 0 {
		t.Fatalf("search with the endpoint hung: %+v, %v; want the words' answer, degraded", res, err)
	}
	if took > bound+time.Second {
		t.Errorf("the hung endpoint held the search %v; the bound is %v", took, bound)
	}
	if fake.badKey.Load() != 0 {
		t.Errorf("%d requests without the key", fake.badKey.Load())
	}
	if strings.Contains(logs.String(), embeddingsKey) {
		t.Error("the embeddings key is in the log")
	}
}
