package embed_test

import (
	"encoding/json"
	"errors"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/discovery/embed"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

const key = "sk-test-secret-4242"

// concepts are the words the fake model places together: what a real
// model learns, reduced to a table, so a paraphrase sharing no word with
// a tool lands near it.
var concepts = map[string]string{
	"refund": "money-back", "refunds": "money-back", "reimburse": "money-back", "repay": "money-back",
	"customer": "customer", "purchaser": "customer", "buyer": "customer", "client": "customer",
	"contact": "person", "person": "person", "email": "address", "mail": "address",
}

var stop = map[string]bool{"a": true, "an": true, "the": true, "to": true, "of": true, "by": true, "up": true}

// fake is an OpenAI-compatible embeddings endpoint answering, in mode
// "ok", a hashed bag of concepts of each input (deterministic vectors of
// dims dimensions), and garbage in the other modes.
type fake struct {
	mode     atomic.Value // string
	dims     atomic.Int64
	requests atomic.Int64
	keyOK    atomic.Bool
	srv      *httptest.Server
}

func newFake(t *testing.T) *fake {
	f := &fake{}
	f.mode.Store("ok")
	f.dims.Store(256)
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func vector(text string, dims int) []float64 {
	v := make([]float64, dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !('a' <= r && r <= 'z') }) {
		if stop[w] {
			continue
		}
		if c, ok := concepts[w]; ok {
			w = c
		}
		h := fnv.New32a()
		h.Write([]byte(w))
		v[int(h.Sum32())%dims]++
	}
	return v
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	f.keyOK.Store(r.Header.Get("Authorization") == "Bearer "+key)
	var req struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}
	if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil || req.Model != "fake-model" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	dims := int(f.dims.Load())
	type datum struct {
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	var data []datum
	for i, in := range req.Input {
		data = append(data, datum{i, vector(in, dims)})
	}
	switch f.mode.Load().(string) {
	case "hang":
		<-r.Context().Done()
		return
	case "500":
		// An error page that echoes the request's key.
		http.Error(w, "upstream failed for "+r.Header.Get("Authorization"), http.StatusInternalServerError)
		return
	case "not json":
		w.Write([]byte("<html>" + r.Header.Get("Authorization") + "</html>"))
		return
	case "too few":
		data = data[:len(data)-1]
	case "mixed dimensions":
		data[0].Embedding = append(data[0].Embedding, 1)
		if len(data) == 1 {
			data = append(data, datum{1, vector("x", dims)})
		}
	case "not finite":
		data[0].Embedding[0] = 1e39 // past float32
	case "zero":
		data[0].Embedding = make([]float64, dims)
	case "empty":
		data[0].Embedding = nil
	case "index twice":
		if len(data) == 1 {
			data = append(data, data[0])
		}
		data[1].Index = 0
	case "shuffled":
		slices.Reverse(data)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
}

var garbage = []string{"500", "not json", "too few", "mixed dimensions", "not finite", "zero", "empty", "index twice"}

func (f *fake) client(t *testing.T) *embed.Client {
	c, err := embed.NewClient(embed.ClientConfig{URL: f.srv.URL, Model: "fake-model", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEndpoint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"http://ollama:11434", "http://ollama:11434/v1/embeddings"},
		{"http://ollama:11434/", "http://ollama:11434/v1/embeddings"},
		{"https://api.example.com/v1", "https://api.example.com/v1/embeddings"},
		{"http://vllm:8000/v1/embeddings", "http://vllm:8000/v1/embeddings"},
		{"http://gw/openai/deployments/x/embeddings?api-version=1", "http://gw/openai/deployments/x/embeddings"},
		{"ftp://host", ""},
		{"http://user:pw@host", ""},
		{"host:80", ""},
	} {
		got, err := embed.Endpoint(tc.in)
		if tc.want == "" {
			if !errors.Is(err, toolplane.ErrInvalid) || strings.Contains(fmtErr(err), "pw") {
				t.Errorf("Endpoint(%q) = %q, %v; want ErrInvalid, naming no credential", tc.in, got, err)
			}
			continue
		}
		if got != tc.want || err != nil {
			t.Errorf("Endpoint(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestEmbed(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	c := f.client(t)
	texts := []string{"refund a customer", "look up a contact by email", "refund"}
	for _, mode := range append([]string{"ok", "shuffled"}, garbage...) {
		t.Run(mode, func(t *testing.T) {
			// One fake serves the subtests in turn.
			f.mode.Store(mode)
			vs, err := c.Embed(t.Context(), texts)
			if !f.keyOK.Load() {
				t.Error("the key was not sent as a bearer token")
			}
			if mode != "ok" && mode != "shuffled" {
				if !errors.Is(err, embed.ErrEndpoint) || vs != nil {
					t.Fatalf("Embed = %d vectors, %v; want none and ErrEndpoint", len(vs), err)
				}
				if strings.Contains(err.Error(), key) {
					t.Errorf("the error shows the key: %v", err)
				}
				return
			}
			if err != nil || len(vs) != len(texts) {
				t.Fatalf("Embed = %d vectors, %v", len(vs), err)
			}
			for i, v := range vs {
				want := vector(texts[i], 256)
				var norm, dot float64
				for j := range v {
					norm += float64(v[j]) * float64(v[j])
					dot += float64(v[j]) * want[j]
				}
				if math.Abs(norm-1) > 1e-5 || dot <= 0 {
					t.Errorf("vector %d: length² %v, dot with its text's %v; want a unit vector of text %d", i, norm, dot, i)
				}
			}
		})
	}
}

// def answers a platform tool's definition.
func def(name, description string) toolplane.Definition {
	return toolplane.Definition{Name: name, Version: "1.0.0", Kind: toolplane.KindInternal, Effect: toolplane.EffectRead,
		Description: description, InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object"}`),
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}}}
}

// world is a registry of three tools, a store, and the semantic signal
// over the fake endpoint.
type world struct {
	f        *fake
	reg      *registry.Registry
	store    *sqlite.Store
	sem      *embed.Semantic
	embedder *embed.Embedder
}

func newWorld(t *testing.T, defs ...toolplane.Definition) *world {
	t.Helper()
	if len(defs) == 0 {
		defs = []toolplane.Definition{def("payments.refund", "Refund a customer."), def("crm.lookup", "Look up a contact by email."),
			def("ops.restart", "Restart a service.")}
	}
	handlers := map[string]bool{}
	for _, d := range defs {
		handlers[d.Name] = false
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: registry.Static{Handlers: handlers}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(t)
	store := sqlitetest.New(t)
	w := &world{f: f, reg: reg, store: store}
	w.sem = embed.NewSemantic(f.client(t))
	w.sem.Follow(reg)
	w.embedder = embed.NewEmbedder(embed.EmbedderConfig{Client: f.client(t), Semantic: w.sem, Store: store,
		Items: embed.Items(reg, store), PerMinute: 6000})
	return w
}

// rows answers the vectors the store holds of the fake's model.
func (w *world) rows(t *testing.T) []*toolplane.ToolEmbedding {
	t.Helper()
	var out []*toolplane.ToolEmbedding
	if err := w.store.EachToolEmbedding(t.Context(), "fake-model", func(e *toolplane.ToolEmbedding) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSemanticFindsAParaphrase: a query sharing no word with a tool finds
// it through the vectors, marked "semantic", where the words alone find
// nothing worth answering.
func TestSemanticFindsAParaphrase(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if n, err := w.embedder.Pass(t.Context()); n != 3 || err != nil {
		t.Fatalf("Pass = %d, %v; want the 3 tools embedded", n, err)
	}
	q := discovery.Query{Text: "reimburse the purchaser"}
	words := discovery.New(discovery.Options{})
	words.Follow(w.reg)
	res, err := words.Search(t.Context(), "org_a", w.reg.Tools("org_a"), q)
	if err != nil || !res.NoGoodMatch {
		t.Fatalf("the words alone answered %+v, %v; want no good match (the test's premise)", res, err)
	}
	x := discovery.New(discovery.Options{Semantic: w.sem, SemanticTimeout: 5 * time.Second})
	x.Follow(w.reg)
	res, err = x.Search(t.Context(), "org_a", w.reg.Tools("org_a"), q)
	if err != nil || res.Degraded != "" || len(res.Matches) == 0 {
		t.Fatalf("with the vectors: %+v, %v", res, err)
	}
	if m := res.Matches[0]; m.Name != "payments.refund" || !slices.Contains(m.Why, "semantic") {
		t.Errorf("first match %s (%v), want payments.refund, matched semantically", m.Name, m.Why)
	}
	for _, m := range res.Matches {
		if m.Name == "ops.restart" {
			t.Errorf("an unrelated tool matched: %+v", m)
		}
	}
	// A candidate the caller may not call is never scored: the signal is
	// asked of the candidates given alone.
	only := []*registry.Tool{}
	for _, tl := range w.reg.Tools("org_a") {
		if tl.Def.Name != "payments.refund" {
			only = append(only, tl)
		}
	}
	res, err = x.Search(t.Context(), "org_a", only, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Matches {
		if m.Name == "payments.refund" {
			t.Errorf("a tool outside the candidates was answered: %+v", m)
		}
	}
}

// TestSearchDegrades: an endpoint that hangs or answers garbage for the
// query never fails the search: it answers from the words within the
// bound, and says the semantic signal was left out.
func TestSearchDegrades(t *testing.T) {
	t.Parallel()
	for _, mode := range append([]string{"hang"}, garbage...) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			if _, err := w.embedder.Pass(t.Context()); err != nil {
				t.Fatal(err)
			}
			const bound = 200 * time.Millisecond
			x := discovery.New(discovery.Options{Semantic: w.sem, SemanticTimeout: bound})
			x.Follow(w.reg)
			w.f.mode.Store(mode)
			start := time.Now()
			res, err := x.Search(t.Context(), "org_a", w.reg.Tools("org_a"), discovery.Query{Text: "refund a customer"})
			took := time.Since(start)
			if err != nil {
				t.Fatalf("search failed: %v", err)
			}
			if res.Degraded != "semantic" {
				t.Errorf("Degraded = %q, want semantic", res.Degraded)
			}
			if len(res.Matches) == 0 || res.Matches[0].Name != "payments.refund" {
				t.Errorf("the words' answer: %+v", res)
			}
			t.Logf("answered degraded after %v (bound %v)", took, bound)
			// The bound, and room for a slow shared machine.
			if took > bound+time.Second {
				t.Errorf("answered after %v; the bound is %v", took, bound)
			}
		})
	}
}

// TestEmbedderKeepsNoGarbage: a pass the endpoint answers garbage for
// stores nothing and holds nothing; once it answers well, every version
// is stored; a later answer of another size is refused; another node
// reads what was stored instead of asking again.
func TestEmbedderKeepsNoGarbage(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, mode := range garbage {
		w.f.mode.Store(mode)
		if _, err := w.embedder.Pass(t.Context()); !errors.Is(err, embed.ErrEndpoint) || strings.Contains(err.Error(), key) {
			t.Errorf("%s: Pass = %v, want ErrEndpoint naming no key", mode, err)
		}
		if rows := w.rows(t); len(rows) != 0 || w.sem.Dimensions() != 0 {
			t.Fatalf("%s: %d vectors stored, %d dimensions held; want none", mode, len(rows), w.sem.Dimensions())
		}
	}
	w.f.mode.Store("ok")
	if n, err := w.embedder.Pass(t.Context()); n != 3 || err != nil {
		t.Fatalf("Pass = %d, %v", n, err)
	}
	rows := w.rows(t)
	if len(rows) != 3 {
		t.Fatalf("%d vectors stored, want 3", len(rows))
	}
	for _, r := range rows {
		if r.OrganizationID != "" || len(r.Vector) != 256*4 {
			t.Errorf("row %+v: want the platform's, of 256 float32s", r)
		}
	}
	// Nothing missing: no request.
	before := w.f.requests.Load()
	if n, err := w.embedder.Pass(t.Context()); n != 0 || err != nil || w.f.requests.Load() != before {
		t.Errorf("a pass with nothing missing: %d, %v, %d requests", n, err, w.f.requests.Load()-before)
	}

	// Another node on the store: it loads the vectors and asks for none.
	other := embed.NewSemantic(w.f.client(t))
	other.Follow(w.reg)
	e2 := embed.NewEmbedder(embed.EmbedderConfig{Client: w.f.client(t), Semantic: other, Store: w.store, Items: embed.Items(w.reg, w.store)})
	if err := e2.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := e2.Pass(t.Context()); n != 0 || err != nil || w.f.requests.Load() != before {
		t.Errorf("the second node's pass: %d, %v, %d requests", n, err, w.f.requests.Load()-before)
	}

	// A tool whose text changed, embedded by a model now answering
	// another size: refused, and the old row stays as it was.
	changed := def("payments.refund", "Refund a customer, in part or whole.")
	reg2, _, err := registry.Build([]toolplane.Definition{changed}, registry.Options{Bindings: registry.Static{Handlers: map[string]bool{"payments.refund": false}}})
	if err != nil {
		t.Fatal(err)
	}
	e3 := embed.NewEmbedder(embed.EmbedderConfig{Client: w.f.client(t), Semantic: w.sem, Store: w.store, Items: embed.Items(reg2, w.store)})
	if err := e3.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.f.dims.Store(128)
	if _, err := e3.Pass(t.Context()); !errors.Is(err, embed.ErrEndpoint) {
		t.Errorf("a vector of another size: %v, want ErrEndpoint", err)
	}
	for _, r := range w.rows(t) {
		if len(r.Vector) != 256*4 {
			t.Errorf("a vector of another size was stored: %s, %d bytes", r.Name, len(r.Vector))
		}
	}
}

// TestEmbedderLetsGoOfWhatIsNotServed: a version no longer served loses
// its vector in memory at the next pass, so a node whose catalogue churns
// holds what it serves; what is still served keeps its vector, asked for
// nothing again.
func TestEmbedderLetsGoOfWhatIsNotServed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if n, err := w.embedder.Pass(t.Context()); n != 3 || err != nil {
		t.Fatalf("Pass = %d, %v", n, err)
	}
	hash := func(d toolplane.Definition) string { return embed.Hash(embed.Text(&d)) }
	gone, kept := def("ops.restart", "Restart a service."), def("crm.lookup", "Look up a contact by email.")
	if !w.sem.Has(hash(gone)) || !w.sem.Has(hash(kept)) {
		t.Fatal("the test's premise: both vectors held after the first pass")
	}
	remaining := []toolplane.Definition{def("payments.refund", "Refund a customer."), kept}
	reg2, _, err := registry.Build(remaining, registry.Options{Bindings: registry.Static{Handlers: map[string]bool{"payments.refund": false, "crm.lookup": false}}})
	if err != nil {
		t.Fatal(err)
	}
	e2 := embed.NewEmbedder(embed.EmbedderConfig{Client: w.f.client(t), Semantic: w.sem, Store: w.store, Items: embed.Items(reg2, w.store)})
	if err := e2.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := w.f.requests.Load()
	if n, err := e2.Pass(t.Context()); n != 0 || err != nil || w.f.requests.Load() != before {
		t.Fatalf("Pass = %d, %v, %d requests; want nothing asked", n, err, w.f.requests.Load()-before)
	}
	if w.sem.Has(hash(gone)) {
		t.Error("the vector of a version no longer served is still held")
	}
	if !w.sem.Has(hash(kept)) || w.sem.Dimensions() != 256 {
		t.Errorf("a served version's vector was let go (held %v, %d dimensions)", w.sem.Has(hash(kept)), w.sem.Dimensions())
	}
}
