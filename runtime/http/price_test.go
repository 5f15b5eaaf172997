package httpruntime_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolplane/toolplane"
)

// TestPricedHTTPToolIsMeteredFromItsResponse: an http tool priced from a
// field of its response body writes a usage row of that cost (a fraction
// of a cent counted whole) and the call's audit event carries it; a
// response that states no cost, or more than the tool's bound, is a meter
// fault whose data the caller never sees; a fixed price is charged as is.
func TestPricedHTTPToolIsMeteredFromItsResponse(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Query().Get("case") {
		case "priced":
			_, _ = io.WriteString(w, `{"result":{"name":"Acme"},"usage":{"cost_cents":12.5}}`)
		case "unpriced":
			_, _ = io.WriteString(w, `{"result":{"name":"Acme"}}`)
		case "too dear":
			_, _ = io.WriteString(w, `{"result":{"name":"Acme"},"usage":{"cost_cents":5000}}`)
		default:
			_, _ = io.WriteString(w, `{"result":{"name":"Acme"}}`)
		}
	}))
	t.Cleanup(srv.Close)
	byField := func(c string) toolplane.Definition {
		return httpDef("vendor.lookup_"+map[string]string{"priced": "a", "unpriced": "b", "too dear": "c"}[c], toolplane.EffectRead,
			toolplane.HTTPBinding{Method: http.MethodGet, URL: srv.URL + "/lookup", Query: map[string]string{"case": c}, Output: "/result"},
			func(d *toolplane.Definition) {
				d.Metered, d.Price = true, &toolplane.Price{Field: "/usage/cost_cents", MaxCents: 100}
			})
	}
	fixed := httpDef("vendor.order", toolplane.EffectWrite, toolplane.HTTPBinding{Method: http.MethodPost, URL: srv.URL + "/order"},
		func(d *toolplane.Definition) { d.Metered, d.Price = true, &toolplane.Price{Cents: 7} })
	priced, unpriced, dear := byField("priced"), byField("unpriced"), byField("too dear")
	e := newEnv(t, priced, unpriced, dear, fixed)
	store := e.store.(toolplane.Store)
	ctx := context.Background()

	r := e.call(t, priced.Name, map[string]any{})
	if !r.OK || r.Meta.UsageID == "" || r.Data.(map[string]any)["name"] != "Acme" {
		t.Fatalf("priced call: %+v", r)
	}
	wantSpent(t, store, 13)
	for _, d := range []toolplane.Definition{unpriced, dear} {
		r = e.call(t, d.Name, map[string]any{})
		if r.OK || r.Error.Code != toolplane.CodeInternalError || r.Data != nil {
			t.Fatalf("%s: %+v, want a meter fault without the data", d.Name, r)
		}
	}
	wantSpent(t, store, 13)
	r = e.call(t, fixed.Name, map[string]any{"note": "one"})
	if !r.OK {
		t.Fatalf("fixed: %+v", r.Error)
	}
	wantSpent(t, store, 20)
	evs, _, err := store.ListAudit(ctx, "org-1", toolplane.AuditFilter{}, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	costs := map[string]int64{}
	for _, ev := range evs {
		costs[ev.Tool] += ev.CostCents
	}
	if costs[priced.Name] != 13 || costs[fixed.Name] != 7 || costs[unpriced.Name] != 0 {
		t.Fatalf("audit costs %v, want 13 and 7", costs)
	}
}

func wantSpent(t *testing.T, s toolplane.Store, want int64) {
	t.Helper()
	if got, err := s.RunTreeCost(context.Background(), "org-1", "run-1"); err != nil || got != want {
		t.Fatalf("spent %d (%v), want %d", got, err, want)
	}
}
