package storetest

import (
	"bytes"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// EmbeddingStore is what RunEmbeddings needs of a backend: a store and
// its tool embeddings.
type EmbeddingStore interface {
	toolplane.Store
	toolplane.EmbeddingStore
}

// The tool embeddings contract, beyond toolplane.EmbeddingStore's
// comments:
//
//   - One row per organization, version and model; a put replaces it.
//   - Vectors are kept byte for byte; a malformed one is refused and
//     nothing is stored.
//   - No get or put reaches another organization's row, nor another
//     model's.
var embeddingCases = []struct {
	name string
	run  func(t *testing.T, s EmbeddingStore)
}{
	{"RoundTrip", testEmbeddingRoundTrip},
	{"Isolation", testEmbeddingIsolation},
	{"Refused", testEmbeddingRefused},
	{"Each", testEmbeddingEach},
}

// RunEmbeddings runs the tool embeddings checks as subtests of t, named
// Embeddings/Check, each on a store newStore answers.
func RunEmbeddings(t *testing.T, newStore func(t *testing.T) EmbeddingStore) {
	t.Helper()
	t.Run("Embeddings", func(t *testing.T) {
		t.Parallel()
		for _, c := range embeddingCases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, newStore(t))
			})
		}
	})
}

func newEmbedding(org, name, model string, vector ...byte) *toolplane.ToolEmbedding {
	return &toolplane.ToolEmbedding{OrganizationID: org, Name: name, Version: "1.0.0", Model: model,
		TextHash: "h-" + name, Vector: vector, CreatedAt: at(time.Minute)}
}

func testEmbeddingRoundTrip(t *testing.T, s EmbeddingStore) {
	ctx, org := t.Context(), newOrg()
	if _, err := s.GetToolEmbedding(ctx, org, "crm.lookup", "1.0.0", "m1"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetToolEmbedding before a put = %v, want ErrNotFound", err)
	}
	// Bytes a text column would mangle: a zero, an invalid UTF-8 byte.
	want := newEmbedding(org, "crm.lookup", "m1", 0, 0, 0x80, 0x3f, 0xff, 0xfe, 0, 0)
	if err := s.PutToolEmbedding(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetToolEmbedding(ctx, org, "crm.lookup", "1.0.0", "m1")
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(*got, *want); d != "" {
		t.Errorf("GetToolEmbedding: %s", d)
	}
	// A put again replaces: the text changed, and its vector with it.
	again := newEmbedding(org, "crm.lookup", "m1", 1, 2, 3, 4)
	again.TextHash, again.CreatedAt = "h-new", at(time.Hour)
	if err := s.PutToolEmbedding(ctx, again); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetToolEmbedding(ctx, org, "crm.lookup", "1.0.0", "m1")
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(*got, *again); d != "" {
		t.Errorf("GetToolEmbedding after a second put: %s", d)
	}
	// The platform's own tools are kept under no organization.
	platform := newEmbedding("", "demo.search", "m1", 9, 9, 9, 9)
	if err := s.PutToolEmbedding(ctx, platform); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetToolEmbedding(ctx, "", "demo.search", "1.0.0", "m1"); err != nil || !bytes.Equal(got.Vector, platform.Vector) {
		t.Errorf("the platform's embedding: %+v, %v", got, err)
	}
}

func testEmbeddingIsolation(t *testing.T, s EmbeddingStore) {
	ctx, a, b := t.Context(), newOrg(), newOrg()
	if err := s.PutToolEmbedding(ctx, newEmbedding(a, "crm.lookup", "m1", 1, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetToolEmbedding(ctx, b, "crm.lookup", "1.0.0", "m1"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("organization %s reads %s's embedding: %v, want ErrNotFound", b, a, err)
	}
	if _, err := s.GetToolEmbedding(ctx, a, "crm.lookup", "1.0.0", "m2"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("another model reads m1's embedding: %v, want ErrNotFound", err)
	}
	// b's put of the same version is b's own row: a's is untouched.
	if err := s.PutToolEmbedding(ctx, newEmbedding(b, "crm.lookup", "m1", 2, 2, 2, 2)); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetToolEmbedding(ctx, a, "crm.lookup", "1.0.0", "m1")
	if err != nil || !bytes.Equal(got.Vector, []byte{1, 1, 1, 1}) {
		t.Errorf("after %s's put, %s's embedding is %+v, %v; want its own", b, a, got, err)
	}
	got, err = s.GetToolEmbedding(ctx, b, "crm.lookup", "1.0.0", "m1")
	if err != nil || !bytes.Equal(got.Vector, []byte{2, 2, 2, 2}) {
		t.Errorf("%s's embedding is %+v, %v; want its own", b, got, err)
	}
}

func testEmbeddingRefused(t *testing.T, s EmbeddingStore) {
	ctx, org := t.Context(), newOrg()
	for _, tc := range []struct {
		name string
		e    *toolplane.ToolEmbedding
	}{
		{"empty", newEmbedding(org, "t.empty", "m1")},
		{"not whole float32s", newEmbedding(org, "t.odd", "m1", 1, 2, 3)},
		{"too long", newEmbedding(org, "t.long", "m1", make([]byte, toolplane.MaxEmbeddingBytes+4)...)},
		{"no model", newEmbedding(org, "t.model", "", 1, 2, 3, 4)},
	} {
		if err := s.PutToolEmbedding(ctx, tc.e); !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("%s: PutToolEmbedding = %v, want ErrInvalid", tc.name, err)
		}
		if _, err := s.GetToolEmbedding(ctx, org, tc.e.Name, "1.0.0", tc.e.Model); !errors.Is(err, toolplane.ErrNotFound) {
			t.Errorf("%s: stored anyway (%v)", tc.name, err)
		}
	}
}

func testEmbeddingEach(t *testing.T, s EmbeddingStore) {
	ctx, a, b := t.Context(), newOrg(), newOrg()
	// A model name of this test's own: the store is shared with other
	// tests' rows.
	model := "each-" + a
	want := map[string]bool{}
	for _, e := range []*toolplane.ToolEmbedding{
		newEmbedding(a, "crm.lookup", model, 1, 0, 0, 0), newEmbedding(a, "crm.update", model, 2, 0, 0, 0),
		newEmbedding(b, "crm.lookup", model, 3, 0, 0, 0), newEmbedding(a, "crm.lookup", "other-"+a, 4, 0, 0, 0),
	} {
		if err := s.PutToolEmbedding(ctx, e); err != nil {
			t.Fatal(err)
		}
		if e.Model == model {
			want[e.OrganizationID+"/"+e.Name+"/"+string(e.Vector[:1])] = true
		}
	}
	got := map[string]bool{}
	if err := s.EachToolEmbedding(ctx, model, func(e *toolplane.ToolEmbedding) error {
		if e.Model != model {
			t.Errorf("EachToolEmbedding(%s) answered model %s", model, e.Model)
		}
		got[e.OrganizationID+"/"+e.Name+"/"+string(e.Vector[:1])] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("EachToolEmbedding answered %v, want %v", got, want)
	}
	stop := errors.New("enough")
	n := 0
	if err := s.EachToolEmbedding(ctx, model, func(*toolplane.ToolEmbedding) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("EachToolEmbedding with fn failing: %v after %d rows, want fn's error after 1", err, n)
	}
}
