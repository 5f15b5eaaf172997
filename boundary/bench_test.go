package boundary_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
)

// BenchmarkBound5000Rows runs the whole pipeline on 5,000 rows of about 200
// bytes each against the platform limit: the common shape of a list tool
// that returned far more than a model can read.
func BenchmarkBound5000Rows(b *testing.B) {
	in := rows(5000)
	spec := boundary.Spec{ItemKind: "crm.person"}
	b.ReportAllocs()
	for b.Loop() {
		data, _ := boundary.Apply(in, spec)
		if boundary.Size(data) > boundary.PlatformLimit {
			b.Fatal("over the limit")
		}
	}
}

// BenchmarkApply5000StructRows is the same answer as typed rows, the shape a
// Go handler usually returns; each kept row costs a json.Marshal.
func BenchmarkApply5000StructRows(b *testing.B) {
	in := make([]contact, 5000)
	for i := range in {
		in[i] = contact{ID: fmt.Sprintf("c-%05d", i), Name: "Person Number", Password: "pw", Tags: []string{"customer", "renewal"},
			Bio: "Met at the spring conference; follow up about the renewal."}
	}
	spec := boundary.Spec{ItemKind: "crm.contact"}
	b.ReportAllocs()
	for b.Loop() {
		boundary.Apply(in, spec)
	}
}

// BenchmarkBoundTree is Bound alone on 5,000 plain rows, without the rest of
// the pipeline.
func BenchmarkBoundTree(b *testing.B) {
	in := rows(5000)
	b.ReportAllocs()
	for b.Loop() {
		boundary.Bound(in, boundary.PlatformLimit)
	}
}

func BenchmarkEncode(b *testing.B) {
	in := rows(5000)
	buf := boundary.Encode(nil, in)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = boundary.Encode(buf[:0], in)
	}
}

func BenchmarkRedact(b *testing.B) {
	clean := rows(5000)
	withSecrets := rows(5000)
	for _, r := range withSecrets {
		r.(map[string]any)["api_key"] = "sk-live-0123456789"
	}
	for _, bc := range []struct {
		name string
		in   []any
	}{
		{"clean", clean},
		{"secret_in_every_row", withSecrets},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				boundary.Redact(bc.in)
			}
		})
	}
}

// BenchmarkRenderItem is the answer of one read call of an item: a
// 327-byte object from outside, marked untrusted.
func BenchmarkRenderItem(b *testing.B) {
	var item any
	if err := json.Unmarshal([]byte(`{"id":"item-42","name":"Item 42","description":"A thing kept in stock, described at some length so the answer has a realistic size.","price_cents":1250,"currency":"EUR","tags":["alpha","beta","gamma"],"stock":17,"updated_at":"2026-12-02T01:00:00Z","warehouse":{"id":"w-1","city":"Lyon"}}`), &item); err != nil {
		b.Fatal(err)
	}
	r := toolplane.Result{OK: true, Data: item, Meta: toolplane.Meta{Untrusted: true}}
	b.ReportAllocs()
	for b.Loop() {
		boundary.Render(r)
	}
}
