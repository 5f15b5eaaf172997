package registry

import (
	"encoding/json"
	"testing"

	"github.com/toolplane/toolplane"
)

// TestPublishingChecksPrices: a price is bounded and well formed, sits on
// a metered http or sql tool, and points where the answer can hold it,
// where that is knowable from the output schema or the statement.
func TestPublishingChecksPrices(t *testing.T) {
	t.Parallel()
	httpDef := func(out, output string, p *toolplane.Price) toolplane.Definition {
		d := base()
		d.Name, d.Connection, d.Metered, d.Price = "vendor.lookup", "vendor", true, p
		d.Effect, d.Repeatable = toolplane.EffectRead, nil
		d.OutputSchema = json.RawMessage(out)
		d.Binding = toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "POST", URL: "https://vendor.example/lookup", Output: output}}
		return d
	}
	const closed = `{"type":"object","additionalProperties":false,"properties":{"usage":{"type":"object","properties":{"cents":{"type":"number"}}},"name":{"type":"string"}}}`
	const open = `{"type":"object"}`
	sqlDef := func(stmt string, p *toolplane.Price) toolplane.Definition {
		d := base()
		d.Name, d.Connection, d.Metered, d.Price = "crm.sql_tool", "warehouse", true, p
		d.Binding = toolplane.Binding{SQL: &toolplane.SQLBinding{Statement: stmt}}
		return d
	}
	for _, tc := range []struct {
		name  string
		def   toolplane.Definition
		field string // "" passes
	}{
		{"fixed", httpDef(open, "", &toolplane.Price{Cents: 2}), ""},
		{"from a field", httpDef(closed, "", &toolplane.Price{Field: "/usage/cents", MaxCents: 500}), ""},
		{"a field under no output pointer's reach is unknowable", httpDef(closed, "/name", &toolplane.Price{Field: "/meta/cost", MaxCents: 5}), ""},
		{"negative", httpDef(open, "", &toolplane.Price{Cents: -1}), "price.cents"},
		{"absurd", httpDef(open, "", &toolplane.Price{Cents: toolplane.MaxPriceCents + 1}), "price.cents"},
		{"nothing", httpDef(open, "", &toolplane.Price{}), "price"},
		{"both", httpDef(open, "", &toolplane.Price{Cents: 1, Field: "/c", MaxCents: 5}), "price.cents"},
		{"field unbounded", httpDef(open, "", &toolplane.Price{Field: "/c"}), "price.max_cents"},
		{"field bound absurd", httpDef(open, "", &toolplane.Price{Field: "/c", MaxCents: toolplane.MaxPriceCents + 1}), "price.max_cents"},
		{"bound without field", httpDef(open, "", &toolplane.Price{Cents: 1, MaxCents: 5}), "price.max_cents"},
		{"not a pointer", httpDef(open, "", &toolplane.Price{Field: "usage.cents", MaxCents: 5}), "price.field"},
		{"a property the closed schema lacks", httpDef(closed, "", &toolplane.Price{Field: "/cost", MaxCents: 5}), "price.field"},
		{"inside a scalar", httpDef(closed, "", &toolplane.Price{Field: "/name/cents", MaxCents: 5}), "price.field"},
		{"not metered", func() toolplane.Definition {
			d := httpDef(open, "", &toolplane.Price{Cents: 1})
			d.Metered = false
			return d
		}(), "metered"},
		{"on a handler", func() toolplane.Definition {
			d := base()
			d.Metered, d.Price = true, &toolplane.Price{Cents: 1}
			return d
		}(), "price"},
		{"sql fixed", sqlDef(`UPDATE companies SET name = :filter WHERE id = :company_id`, &toolplane.Price{Cents: 3}), ""},
		{"sql column", sqlDef(`UPDATE companies SET name = :filter WHERE id = :company_id RETURNING credits AS cost_cents`, &toolplane.Price{Field: "cost_cents", MaxCents: 50}), ""},
		{"sql column of no rows", sqlDef(`UPDATE companies SET name = :filter WHERE id = :company_id`, &toolplane.Price{Field: "cost_cents", MaxCents: 50}), "price.field"},
		{"sql column never named", sqlDef(`UPDATE companies SET name = :filter WHERE id = :company_id RETURNING id`, &toolplane.Price{Field: "cost_cents", MaxCents: 50}), "price.field"},
		{"sql star is unknowable", sqlDef(`UPDATE companies SET name = :filter WHERE id = :company_id RETURNING *`, &toolplane.Price{Field: "cost_cents", MaxCents: 50}), ""},
	} {
		ps := problems(t, []toolplane.Definition{tc.def}, Options{Bindings: deployment})
		if tc.field == "" {
			if len(ps) != 0 {
				t.Errorf("%s: problems %v", tc.name, ps)
			}
			continue
		}
		found := false
		for _, p := range ps {
			found = found || p.Field == tc.field
		}
		if !found {
			t.Errorf("%s: problems %v, want one at %s", tc.name, ps, tc.field)
		}
	}
}
