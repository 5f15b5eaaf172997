package registry

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
)

// BenchmarkOutputItem is what a read call of one item costs after the
// downstream answered: the output check, the boundary and the rendering of
// the REST answer, on the item the load generator's JSON API serves, as the
// http runtime decodes it.
func BenchmarkOutputItem(b *testing.B) {
	d := readDef()
	d.OutputSchema = json.RawMessage(`{"type":"object","required":["id"],"properties":{"id":{"type":"string"},"name":{"type":"string"},"price_cents":{"type":"integer"},"in_stock":{"type":"boolean"}}}`)
	d.Annotations.OpenWorld = true
	reg, _, err := Build([]toolplane.Definition{d}, Options{Bindings: deployment})
	if err != nil {
		b.Fatal(err)
	}
	tool, ok := reg.Get("", d.Name)
	if !ok {
		b.Fatal("the tool is not registered")
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(`{"id":"it_000001","name":"Widget, blue, large","sku":"WDG-BLU-L-0001","price_cents":1299,"currency":"EUR","in_stock":true,"quantity":42,"warehouse":"loopback-1","tags":["hardware","blue","large"],"updated_at":"2026-01-01T00:00:00Z","description":"A plain item record of about three hundred bytes, as a small JSON API answers."}`)))
	dec.UseNumber()
	var item any
	if err := dec.Decode(&item); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r, vs := tool.Output(item)
		if len(vs) > 0 || !r.OK {
			b.Fatalf("the item breaks the output schema: %v", vs)
		}
		boundary.Render(r)
	}
}
