package console_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/console"
	"github.com/toolplane/toolplane/registry"
)

// searchable adds to the world's registry, served to its organization
// only, tools with a dependency graph and a deprecated version, and a
// person of another organization (key "stranger").
func searchable(t *testing.T, w *world) {
	t.Helper()
	def := func(name, desc string, deps ...toolplane.Dependency) toolplane.Definition {
		return toolplane.Definition{Name: name, Version: "1.0.0", Description: desc,
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`),
			OutputSchema: json.RawMessage(`{"type":"object"}`), Kind: toolplane.KindInternal,
			Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "xss.meter"}}, Effect: toolplane.EffectRead,
			Tags: []string{strings.Split(name, ".")[0]}, Dependencies: deps}
	}
	req := func(tool string) toolplane.Dependency {
		return toolplane.Dependency{Relation: toolplane.RequiresOutputOf, Tool: tool}
	}
	notify := def("email.notify", "Tell a customer something by email.")
	no := false
	notify.Effect, notify.Repeatable = toolplane.EffectWrite, &no
	vs := []registry.Version{
		{Organization: org, Def: def("crm.get_customer_id", "Find a customer's id from their email address.")},
		{Organization: org, Def: def("payments.get_customer_orders", "List a customer's orders.", req("crm.get_customer_id"))},
		{Organization: org, Def: def("payments.refund", "Refund an order to the customer's card.", req("payments.get_customer_orders"),
			toolplane.Dependency{Relation: toolplane.CommonlyPairedWith, Tool: "email.notify"})},
		{Organization: org, Def: notify},
		{Organization: org, Def: def("payroll.export_salaries", "Export the payroll: every employee's salary.", req("payments.refund"))},
		{Organization: org, Def: def("crm.find_people", "Find people records by name or email.")},
		{Organization: org, Def: def("crm.search_customers", "Search customers by name, email or phone."), State: toolplane.StateDeprecated,
			Replacement: "crm.find_people@^1.0.0"},
	}
	for i := range vs {
		if vs[i].State == "" {
			vs[i].State = toolplane.StateActive
		}
	}
	if ps := w.reg.SetVersions("searchable", vs); len(ps) > 0 {
		t.Fatalf("versions refused: %v", ps)
	}
	id, sec, err := apikey.New(toolplane.CredentialPerson)
	if err != nil {
		t.Fatal(err)
	}
	c := &toolplane.Credential{ID: id, OrganizationID: other, Kind: toolplane.CredentialPerson, Subject: "stranger",
		Roles: []string{toolplane.RolePlatformAdmin}, Hash: apikey.Hash(sec), CreatedAt: time.Now()}
	if err := w.store.InsertCredential(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	w.keys["stranger"] = apikey.Key(id, sec)
}

// rows answers the tool names of a page's search matches, in order.
func rows(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<tr><td[^>]*><a href="[^"]*/catalog/[^"]+">([^<]+)</a>`).FindAllStringSubmatch(body, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

// TestCatalogueSearch runs on every backend: the person's session, and
// the other organization's, are the store's.
func TestCatalogueSearch(t *testing.T) {
	t.Parallel()
	for _, backend := range backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			catalogueSearch(t, newWorldOn(t, backend))
		})
	}
}

func catalogueSearch(t *testing.T, w *world) {
	searchable(t, w)
	b := w.browser()
	b.signIn("oliver")
	search := func(q url.Values) page {
		t.Helper()
		return b.get(console.Path + "/catalog?" + q.Encode())
	}

	// The catalogue page offers the search box, a GET form needing no
	// script.
	p := b.get(console.Path + "/catalog")
	if p.status != http.StatusOK || !strings.Contains(p.body, `<form class="search" method="get" action="/console/catalog" role="search">`) ||
		!strings.Contains(p.body, `name="q"`) || !strings.Contains(p.body, `name="tag"`) || !strings.Contains(p.body, `name="effect"`) {
		t.Fatalf("the catalogue: %d %s", p.status, p.body)
	}

	p = search(url.Values{"q": {"refund an order"}})
	got := rows(p.body)
	if p.status != http.StatusOK || len(got) == 0 || got[0] != "payments.refund" {
		t.Fatalf("refund an order: %v\n%s", got, p.body)
	}
	for _, want := range []string{"Refund an order to the customer&#39;s card.", "needs payments.get_customer_orders", "paired with email.notify", `value="refund an order"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the matches lack %q:\n%s", want, p.body)
		}
	}
	if !regexp.MustCompile(`<td[^>]*>(name|description)(, [a-z ]+)*</td>`).MatchString(p.body) {
		t.Errorf("the matches do not say what matched:\n%s", p.body)
	}

	// A deprecated version comes after its replacement and names it.
	p = search(url.Values{"q": {"search customers by email"}})
	got = rows(p.body)
	if i, j := index(got, "crm.find_people"), index(got, "crm.search_customers"); i < 0 || j < 0 || i > j {
		t.Errorf("search customers by email: %v", got)
	}
	if !strings.Contains(p.body, "Deprecated</strong>: use crm.find_people@^1.0.0 instead") {
		t.Errorf("the deprecated match does not name its replacement:\n%s", p.body)
	}

	// The filters narrow.
	if got := rows(search(url.Values{"effect": {"write"}, "tag": {"email"}}).body); strings.Join(got, ",") != "email.notify" {
		t.Errorf("effect write, tag email: %v", got)
	}
	if got := rows(search(url.Values{"effect": {"write"}}).body); strings.Join(got, ",") != "email.notify,xss.pay,xss.slow" {
		t.Errorf("effect write: %v", got)
	}
	if got := rows(search(url.Values{"tag": {"payments"}, "q": {"customer"}}).body); strings.Join(got, ",") != "payments.get_customer_orders,payments.refund" &&
		strings.Join(got, ",") != "payments.refund,payments.get_customer_orders" {
		t.Errorf("tag payments: %v", got)
	}

	// Nothing fits: the page says so, and shows nothing else.
	p = search(url.Values{"q": {"launch the rocket into orbit"}})
	if p.status != http.StatusOK || !strings.Contains(p.body, "No good match") || len(rows(p.body)) != 0 {
		t.Errorf("an unanswerable query: %d %s", p.status, p.body)
	}
	// A bad filter is refused on the page, with the form kept.
	p = search(url.Values{"q": {"refund"}, "effect": {"delete"}})
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "effect") || !strings.Contains(p.body, `name="q" value="refund"`) {
		t.Errorf("a bad effect: %d %s", p.status, p.body)
	}
	// Hostile text is text: escaped, never markup.
	p = search(url.Values{"q": {`<script>alert(1)</script> refund`}})
	if p.status != http.StatusOK || strings.Contains(p.body, "<script>alert") {
		t.Errorf("hostile text: %d %s", p.status, p.body)
	}

	// A person of another organization finds none of these tools, and
	// their pages answer as missing ones.
	s := w.browser()
	s.signIn("stranger")
	p = s.get(console.Path + "/catalog?" + url.Values{"q": {"export the payroll salaries"}}.Encode())
	if p.status != http.StatusOK || strings.Contains(p.body, "payroll.export_salaries") {
		t.Errorf("another organization's search: %d %s", p.status, p.body)
	}
	if p := s.get(console.Path + "/catalog/payroll.export_salaries/1.0.0"); p.status != http.StatusNotFound {
		t.Errorf("another organization's tool page: %d", p.status)
	}
}

func TestToolPageShowsItsDependencies(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	searchable(t, w)
	b := w.browser()
	b.signIn("oliver")
	p := b.get(console.Path + "/catalog/payments.refund/1.0.0")
	if p.status != http.StatusOK {
		t.Fatalf("the tool page: %d %s", p.status, p.body)
	}
	section := p.body[strings.Index(p.body, "<h2>Dependencies</h2>"):]
	section = section[:strings.Index(section, "</section>")]
	want := []string{
		`<dt>Call before it</dt><dd><ol><li><a href="/console/catalog/crm.get_customer_id/1.0.0">crm.get_customer_id</a></li><li><a href="/console/catalog/payments.get_customer_orders/1.0.0">payments.get_customer_orders</a></li></ol></dd>`,
		`<dt>Take its output</dt><dd><ul><li><a href="/console/catalog/payroll.export_salaries/1.0.0">payroll.export_salaries</a></li></ul></dd>`,
		`<dt>Paired with</dt><dd><ul><li><a href="/console/catalog/email.notify/1.0.0">email.notify</a></li></ul></dd>`,
		`<li>payments.refund is commonly paired with email.notify</li>`,
	}
	for _, s := range want {
		if !strings.Contains(section, s) {
			t.Errorf("the section lacks %s:\n%s", s, section)
		}
	}
	// A tool with no edges says so.
	if p := b.get(console.Path + "/catalog/crm.find_people/1.0.0"); !strings.Contains(p.body, "<h2>Dependencies</h2>") || !strings.Contains(p.body, "None: it requires") {
		t.Errorf("a tool without dependencies: %d %s", p.status, p.body)
	}
}

func index(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}
