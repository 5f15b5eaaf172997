package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/registry"
)

// tool answers a read definition that passes the registry's checks.
func tool(name, desc string, tags ...string) toolplane.Definition {
	return toolplane.Definition{
		Name:         name,
		Version:      "1.0.0",
		Description:  desc,
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"The record's identifier."}}}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Kind:         toolplane.KindInternal,
		Binding:      toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}},
		Effect:       toolplane.EffectRead,
		Tags:         tags,
	}
}

// world is a registry of platform tools and one organization's published
// versions.
func world(t *testing.T, platform []toolplane.Definition, org []registry.Version) *registry.Registry {
	t.Helper()
	handlers := map[string]bool{}
	for _, d := range platform {
		handlers[d.Binding.Handler.Key] = false
	}
	for _, v := range org {
		handlers[v.Def.Binding.Handler.Key] = false
	}
	reg, _, err := registry.Build(platform, registry.Options{Bindings: registry.Static{Handlers: handlers}})
	if err != nil {
		t.Fatal(err)
	}
	if ps := reg.SetVersions("published", org); len(ps) > 0 {
		t.Fatalf("versions refused: %v", ps)
	}
	return reg
}

var crm = []toolplane.Definition{
	tool("payments.refund_order", "Issue a full or partial refund for a customer's order.", "payments"),
	tool("payments.get_order", "Read one order with its lines, totals and payment state.", "payments"),
	tool("crm.find_contact", "Look up a contact person by name, email address or phone number.", "crm"),
	tool("crm.update_company", "Change fields of one company account.", "crm"),
	tool("tickets.open_ticket", "Open a support ticket for a customer problem.", "support"),
	tool("email.send_message", "Send an email message to one or more recipients.", "email"),
}

func names(ms []Match) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

func TestSearchFindsByWords(t *testing.T) {
	t.Parallel()
	reg := world(t, crm, nil)
	x := New(Options{})
	x.Follow(reg)
	cases := []struct {
		q     string
		first string
	}{
		{"refund an order", "payments.refund_order"},
		{"look up a contact by email", "crm.find_contact"},
		{"send an email", "email.send_message"},
		{"refundOrder", "payments.refund_order"},
		{"hey, could you please just refund order 1043 for me quickly, thanks", "payments.refund_order"},
		{"look up Maria Lopez's contact at Globex by email", "crm.find_contact"},
		{"РАYMENTS refund", "payments.refund_order"}, // Cyrillic Р and А
	}
	for _, c := range cases {
		res, err := x.Search(context.Background(), "org-a", reg.Tools("org-a"), Query{Text: c.q})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Matches) == 0 || res.Matches[0].Name != c.first {
			t.Errorf("%q: got %v (no good match %v), want %s first", c.q, names(res.Matches), res.NoGoodMatch, c.first)
		}
	}
}

// A tool the caller may not call changes nothing in its answer: not the
// matches, not the count, not a score. The same search over the same
// candidates answers the same whether the index holds other tools or not.
func TestAuthorizationBeforeRanking(t *testing.T) {
	t.Parallel()
	secret := tool("payments.refund_everything", "Refund every order refund refund of every customer at once, refunds.", "payments")
	reg := world(t, append([]toolplane.Definition{secret}, crm...), nil)
	var granted []*registry.Tool
	for _, tl := range reg.Tools("org-a") {
		if tl.Def.Name != secret.Name {
			granted = append(granted, tl)
		}
	}
	all := New(Options{})
	all.Follow(reg)
	alone := New(Options{})
	alone.Rebuild(granted)
	for _, q := range []string{"refund", "refund everything", "refund every order of every customer", "payments", "order"} {
		a, err := all.Search(context.Background(), "org-a", granted, Query{Text: q, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		b, err := alone.Search(context.Background(), "org-a", granted, Query{Text: q, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range a.Matches {
			if m.Name == secret.Name {
				t.Fatalf("%q: a tool the caller may not call is a match", q)
			}
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Errorf("%q: the answer depends on a tool the caller may not call:\n%s\n%s", q, ja, jb)
		}
	}
}

func TestDeprecatedNeverAboveItsReplacement(t *testing.T) {
	t.Parallel()
	old := tool("crm.search_customers", "Search customers by name, email, phone, company, city or country; customer search.", "crm")
	repl := tool("crm.find_people", "Find people records.", "crm")
	oldV2 := tool("billing.list_invoices", "List invoices of a customer, invoices by date.", "billing")
	oldV2.Version = "1.4.0"
	newV2 := tool("billing.list_invoices", "List bills.", "billing")
	newV2.Version = "2.0.0"
	reg := world(t, nil, []registry.Version{
		{Organization: "org-a", Def: old, State: toolplane.StateDeprecated, Replacement: "crm.find_people@^1.0.0"},
		{Organization: "org-a", Def: repl, State: toolplane.StateActive},
		{Organization: "org-a", Def: oldV2, State: toolplane.StateDeprecated, Replacement: "2.0.0"},
		{Organization: "org-a", Def: newV2, State: toolplane.StateActive},
	})
	x := New(Options{})
	x.Follow(reg)
	res, err := x.Search(context.Background(), "org-a", reg.Tools("org-a"), Query{Text: "search customers by email"})
	if err != nil {
		t.Fatal(err)
	}
	got := names(res.Matches)
	if len(got) < 2 || got[0] != "crm.find_people" || got[1] != "crm.search_customers" {
		t.Fatalf("got %v, want the replacement above the deprecated tool", got)
	}
	if res.Matches[1].Replacement != "crm.find_people@^1.0.0" || res.Matches[1].State != toolplane.StateDeprecated {
		t.Errorf("the deprecated match says %+v", res.Matches[1])
	}
	// A caller that may not call the replacement is not told of it.
	var without []*registry.Tool
	for _, tl := range reg.Tools("org-a") {
		if tl.Def.Name != "crm.find_people" {
			without = append(without, tl)
		}
	}
	res, err = x.Search(context.Background(), "org-a", without, Query{Text: "search customers by email"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Matches) == 0 || res.Matches[0].Replacement != "" {
		t.Errorf("a replacement the caller may not call is named: %+v", res.Matches)
	}
}

func TestNoGoodMatch(t *testing.T) {
	t.Parallel()
	reg := world(t, crm, nil)
	x := New(Options{})
	x.Follow(reg)
	for _, q := range []string{"order a pizza with extra cheese", "translate this paragraph into French", "zzzz qqqq"} {
		res, err := x.Search(context.Background(), "org-a", reg.Tools("org-a"), Query{Text: q})
		if err != nil {
			t.Fatal(err)
		}
		if !res.NoGoodMatch || len(res.Matches) != 0 || res.Total != 0 {
			t.Errorf("%q: got %v, want no good match", q, names(res.Matches))
		}
	}
}

// A tool written to rank first everywhere (every field stuffed with
// every word, to its bound) does not: its words are counted to a bound,
// saturate, weigh by each field's length, and a tool holding far more
// distinct words than the typical candidate weighs less for each.
func TestStuffedToolDoesNotDominate(t *testing.T) {
	t.Parallel()
	var vocab []string
	for _, d := range crm {
		vocab = append(vocab, strings.Fields(d.Description)...)
		vocab = append(vocab, strings.ReplaceAll(d.Name, ".", " "))
	}
	stuffed := tool("misc.helper", strings.Repeat(strings.Join(vocab, " ")+" ", 40)[:4000])
	// Every other field stuffed too, to its bound.
	stuffed.Title = strings.Join(vocab, " ")[:120]
	for i := 0; i < 16; i++ {
		stuffed.SearchHints = append(stuffed.SearchHints, strings.Join(vocab[i:], " ")[:120])
	}
	stuffed.Tags = vocab[:32]
	props := map[string]any{}
	for i, w := range vocab {
		props[fmt.Sprintf("p%d", i)] = map[string]any{"type": "string", "description": w + " " + strings.Join(vocab, " ")}
	}
	stuffed.InputSchema, _ = json.Marshal(map[string]any{"type": "object", "properties": props})
	reg := world(t, append([]toolplane.Definition{stuffed}, crm...), nil)
	x := New(Options{})
	x.Follow(reg)
	for _, q := range []string{"refund an order", "look up a contact by email", "send mail", "open a support ticket", "change a company account"} {
		res, err := x.Search(context.Background(), "org-a", reg.Tools("org-a"), Query{Text: q})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Matches) > 0 && res.Matches[0].Name == "misc.helper" {
			t.Errorf("%q: the stuffed tool ranks first: %v", q, names(res.Matches))
		}
	}
}

func TestHostileQueries(t *testing.T) {
	t.Parallel()
	reg := world(t, crm, nil)
	x := New(Options{})
	x.Follow(reg)
	for _, q := range []string{
		strings.Repeat("refund ", 15_000),
		`name:/.*/ OR *:* ^10 "refund`,
		`(?i).*(a+)+$`,
		"refund\x00order",
		strings.Repeat("\u202e", 5000),
	} {
		res, err := x.Search(context.Background(), "org-a", reg.Tools("org-a"), Query{Text: q})
		if err != nil {
			t.Fatalf("%.40q: %v", q, err)
		}
		for _, m := range res.Matches {
			if m.Name == "" {
				t.Fatal("an empty match")
			}
		}
	}
}

func TestFilters(t *testing.T) {
	t.Parallel()
	send := tool("email.send_bulk", "Send a message to many recipients.", "email")
	send.Effect = toolplane.EffectSend
	no := false
	send.Repeatable = &no
	send.Connection = "smtp"
	reg, _, err := registry.Build(append([]toolplane.Definition{send}, crm...), registry.Options{Bindings: registry.Static{
		Handlers: map[string]bool{"email.send_bulk": false, "payments.refund_order": false, "payments.get_order": false, "crm.find_contact": false,
			"crm.update_company": false, "tickets.open_ticket": false, "email.send_message": false},
		Connections: map[string]bool{"smtp": true}}})
	if err != nil {
		t.Fatal(err)
	}
	x := New(Options{})
	x.Follow(reg)
	cases := []struct {
		q    Query
		want []string
	}{
		{Query{Text: "send", Effect: toolplane.EffectSend}, []string{"email.send_bulk"}},
		{Query{Text: "", Tags: []string{"payments"}}, []string{"payments.get_order", "payments.refund_order"}},
		{Query{Text: "order", Tags: []string{"PAYMENTS"}, Versions: "^1.0.0"}, []string{"payments.get_order", "payments.refund_order"}},
		{Query{Text: "order", Versions: "^2.0.0"}, nil},
	}
	for _, c := range cases {
		res, err := x.Search(context.Background(), "", reg.Tools(""), c.q)
		if err != nil {
			t.Fatal(err)
		}
		got := names(res.Matches)
		if len(got) == 0 {
			got = nil
		}
		if c.q.Text != "" && len(got) == 2 && got[0] > got[1] {
			got[0], got[1] = got[1], got[0]
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v: got %v, want %v", c.q, got, c.want)
		}
	}
	for _, q := range []Query{{Effect: "delete"}, {State: "retired"}, {Versions: "~>x"}, {Limit: -1}, {Tags: strings.Fields(strings.Repeat("a ", 17))}} {
		if _, err := x.Search(context.Background(), "", reg.Tools(""), q); err == nil {
			t.Errorf("%+v: no error", q)
		}
	}
}

func TestDependencies(t *testing.T) {
	t.Parallel()
	id := tool("crm.get_customer_id", "Find a customer's id.")
	orders := tool("payments.get_customer_orders", "List a customer's orders.")
	orders.Dependencies = []toolplane.Dependency{{Relation: toolplane.RequiresOutputOf, Tool: "crm.get_customer_id"}}
	refund := tool("payments.refund", "Refund an order.")
	refund.Dependencies = []toolplane.Dependency{{Relation: toolplane.RequiresOutputOf, Tool: "payments.get_customer_orders@^1.0.0"},
		{Relation: toolplane.CommonlyPairedWith, Tool: "email.notify"}, {Relation: toolplane.RequiresOutputOf, Tool: "secret.hidden"}}
	notify := tool("email.notify", "Tell a customer.")
	hidden := tool("secret.hidden", "Hidden.")
	audit := tool("audit.record_refund", "Record a refund.")
	audit.Dependencies = []toolplane.Dependency{{Relation: toolplane.RequiresOutputOf, Tool: "payments.refund"}}
	reg := world(t, []toolplane.Definition{id, orders, refund, notify, hidden, audit}, nil)
	var shown []*registry.Tool
	var root *registry.Tool
	for _, tl := range reg.Tools("") {
		if tl.Def.Name != "secret.hidden" {
			shown = append(shown, tl)
		}
		if tl.Def.Name == "payments.refund" {
			root = tl
		}
	}
	g := Dependencies(root, shown)
	if !reflect.DeepEqual(g.Before, []string{"crm.get_customer_id", "payments.get_customer_orders"}) {
		t.Errorf("before = %v", g.Before)
	}
	if !reflect.DeepEqual(g.After, []string{"audit.record_refund"}) || !reflect.DeepEqual(g.PairsWith, []string{"email.notify"}) {
		t.Errorf("after = %v, pairs = %v", g.After, g.PairsWith)
	}
	for _, e := range g.Edges {
		if e.To == "secret.hidden" || e.From == "secret.hidden" {
			t.Fatal("an edge to a tool the caller may not call")
		}
	}
	x := New(Options{})
	x.Follow(reg)
	res, err := x.Search(context.Background(), "", shown, Query{Text: "refund an order"})
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Matches[0]; m.Name != "payments.refund" || fmt.Sprint(m.Requires) != "[payments.get_customer_orders]" || fmt.Sprint(m.PairsWith) != "[email.notify]" {
		t.Errorf("match = %+v", m)
	}
}

// No tool may be shown to a model under a meta-tool's name: a session
// switching to meta-tool mode would otherwise lose the meta-tool.
func TestMetaToolNamesAreReserved(t *testing.T) {
	t.Parallel()
	for _, m := range MetaTools() {
		name := strings.Replace(m.Name, "_", ".", 1)
		_, _, err := registry.Build([]toolplane.Definition{tool(name, "A tool.")}, registry.Options{Bindings: registry.Static{Handlers: map[string]bool{name: false}}})
		if err == nil {
			t.Errorf("the registry took %s, shown to a model as %s", name, m.Name)
		}
	}
}
