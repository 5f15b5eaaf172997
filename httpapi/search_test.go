package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// searchTool answers a read definition that passes the registry's checks.
func searchTool(name, desc string, deps ...toolplane.Dependency) toolplane.Definition {
	return toolplane.Definition{
		Name: name, Version: "1.0.0", Description: desc,
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"The record's identifier."}}}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Kind:         toolplane.KindInternal, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}},
		Effect: toolplane.EffectRead, Dependencies: deps, Tags: []string{strings.Split(name, ".")[0]},
	}
}

func requires(tool string) toolplane.Dependency {
	return toolplane.Dependency{Relation: toolplane.RequiresOutputOf, Tool: tool}
}

// searchFixture is an API over one organization's catalogue, searched
// by an agent granted every tool (all), one granted every tool but the
// payroll export (most), and a person.
type searchFixture struct {
	srv               *httptest.Server
	all, most, person string
}

func newSearchFixture(t *testing.T) *searchFixture {
	t.Helper()
	store, _ := sqlitetest.NewDB(t)
	defs := []toolplane.Definition{
		searchTool("crm.get_customer_id", "Find a customer's id from their email address."),
		searchTool("payments.get_customer_orders", "List a customer's orders.", requires("crm.get_customer_id")),
		searchTool("payments.refund", "Refund an order to the customer's card.", requires("payments.get_customer_orders"),
			toolplane.Dependency{Relation: toolplane.CommonlyPairedWith, Tool: "email.notify"}),
		searchTool("email.notify", "Tell a customer something by email."),
		searchTool("payroll.export_salaries", "Export the payroll: every employee's salary and bank account.", requires("payments.refund")),
		searchTool("crm.find_people", "Find people records by name or email."),
		// Its namespace is the search route's last segment.
		searchTool("search.tickets", "Search support tickets by words."),
	}
	old := searchTool("crm.search_customers", "Search customers by name, email or phone.")
	handlers := map[string]bool{old.Name: false}
	var vs []registry.Version
	for _, d := range defs {
		handlers[d.Name] = false
		vs = append(vs, registry.Version{Organization: "org-1", Def: d, State: toolplane.StateActive})
	}
	vs = append(vs, registry.Version{Organization: "org-1", Def: old, State: toolplane.StateDeprecated, Replacement: "crm.find_people@^1.0.0"})
	reg, _, err := registry.Build(nil, registry.Options{Bindings: registry.Static{Handlers: handlers}})
	if err != nil {
		t.Fatal(err)
	}
	if ps := reg.SetVersions("published", vs); len(ps) > 0 {
		t.Fatalf("versions refused: %v", ps)
	}
	index := discovery.New(discovery.Options{})
	t.Cleanup(index.Follow(reg))
	quiet := slog.New(slog.DiscardHandler)
	layer := &door.Door{Registry: reg, Store: store, Log: quiet, Discovery: index}
	f := &searchFixture{srv: httptest.NewServer((&httpapi.Server{Door: layer, Store: store, Log: quiet}).Handler())}
	t.Cleanup(f.srv.Close)
	f.all = mint(t, store, toolplane.CredentialAgent, "agent-all", nil, []string{"*"}, false)
	f.most = mint(t, store, toolplane.CredentialAgent, "agent-most", nil, []string{"crm.*", "payments.*", "email.*", "search.*"}, false)
	f.person = mint(t, store, toolplane.CredentialPerson, "ada", []string{"approver"}, nil, false)
	return f
}

// get answers the status and the raw body of GET path as key.
func (f *searchFixture) get(t *testing.T, key, path string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func (f *searchFixture) search(t *testing.T, key string, q url.Values) discovery.Results {
	t.Helper()
	status, body := f.get(t, key, "/v1/tools/search?"+q.Encode())
	if status != http.StatusOK {
		t.Fatalf("search %v: %d %s", q, status, body)
	}
	var res discovery.Results
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func matchNames(res discovery.Results) []string {
	var out []string
	for _, m := range res.Matches {
		out = append(out, m.Name)
	}
	return out
}

func TestSearchShowsOnlyWhatTheKeyMayCall(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	const hidden = "payroll.export_salaries"
	payroll := url.Values{"q": {"export employee salaries payroll"}}
	if got := matchNames(f.search(t, f.all, payroll)); len(got) == 0 || got[0] != hidden {
		t.Fatalf("the granted key's search = %v, want %s first", got, hidden)
	}
	res := f.search(t, f.most, payroll)
	if slices.Contains(matchNames(res), hidden) {
		t.Fatalf("the ungranted tool was found: %v", matchNames(res))
	}
	// Every query, filtered or not, counts the candidates the key may
	// call and nothing else: the one tool apart.
	for _, q := range []url.Values{{}, {"q": {"customer"}}, {"q": {"refund"}}, {"effect": {"read"}}, {"tag": {"payroll"}}} {
		q.Set("limit", "50")
		a, m := f.search(t, f.all, q), f.search(t, f.most, q)
		wantDiff := 0
		if slices.Contains(matchNames(a), hidden) {
			wantDiff = 1
		}
		if slices.Contains(matchNames(m), hidden) || a.Total-m.Total != wantDiff {
			t.Errorf("%v: totals %d and %d, the ungranted key's matches %v", q, a.Total, m.Total, matchNames(m))
		}
	}
	// A person reads the organization's catalogue.
	if got := matchNames(f.search(t, f.person, payroll)); len(got) == 0 || got[0] != hidden {
		t.Errorf("the person's search = %v", got)
	}

	// The dependency graph of a tool both keys may call: the export takes
	// the refund's output, which only the granted key is told.
	var ga, gm discovery.Graph
	for key, g := range map[string]*discovery.Graph{f.all: &ga, f.most: &gm} {
		status, body := f.get(t, key, "/v1/tools/payments.refund/dependencies")
		if status != http.StatusOK || json.Unmarshal(body, g) != nil {
			t.Fatalf("dependencies: %d %s", status, body)
		}
	}
	if !reflect.DeepEqual(ga.Before, []string{"crm.get_customer_id", "payments.get_customer_orders"}) ||
		!reflect.DeepEqual(ga.After, []string{hidden}) || !reflect.DeepEqual(ga.PairsWith, []string{"email.notify"}) {
		t.Errorf("the granted key's graph = %+v", ga)
	}
	if !reflect.DeepEqual(gm.Before, ga.Before) || len(gm.After) != 0 || !reflect.DeepEqual(gm.PairsWith, ga.PairsWith) {
		t.Errorf("the ungranted key's graph = %+v", gm)
	}
	for _, n := range gm.Nodes {
		if n.Name == hidden {
			t.Error("the ungranted tool is a node of the graph")
		}
	}
	for _, e := range gm.Edges {
		if e.From == hidden || e.To == hidden {
			t.Error("the ungranted tool is an edge of the graph")
		}
	}

	// The ungranted tool answers as a tool that does not exist, word for
	// word (but for the request's id, and the name asked).
	notFound := func(name string) string {
		status, body := f.get(t, f.most, "/v1/tools/"+name+"/dependencies")
		var e struct {
			Error map[string]any `json:"error"`
		}
		if status != http.StatusNotFound || json.Unmarshal(body, &e) != nil {
			t.Fatalf("%s: %d %s", name, status, body)
		}
		delete(e.Error, "request_id")
		return strings.ReplaceAll(fmt.Sprint(e.Error), name, "NAME")
	}
	if a, b := notFound(hidden), notFound("payroll.export_wages"); a != b {
		t.Errorf("the ungranted tool's 404 %s differs from a missing one's %s", a, b)
	}
	if status, _ := f.get(t, f.all, "/v1/tools/"+hidden+"/dependencies"); status != http.StatusOK {
		t.Errorf("the granted key's graph of the tool: %d", status)
	}
}

func TestSearchAnswersDeprecationAndWhy(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	res := f.search(t, f.all, url.Values{"q": {"search customers by email"}})
	got := matchNames(res)
	i, j := slices.Index(got, "crm.find_people"), slices.Index(got, "crm.search_customers")
	if i < 0 || j < 0 || i > j {
		t.Fatalf("matches %v: want the replacement above the deprecated version", got)
	}
	if m := res.Matches[j]; m.State != toolplane.StateDeprecated || m.Replacement != "crm.find_people@^1.0.0" || len(m.Why) == 0 {
		t.Errorf("the deprecated match = %+v", m)
	}
	res = f.search(t, f.all, url.Values{"q": {"refund"}})
	if m := res.Matches[0]; m.Name != "payments.refund" || fmt.Sprint(m.Requires) != "[payments.get_customer_orders]" || fmt.Sprint(m.PairsWith) != "[email.notify]" {
		t.Errorf("the refund match = %+v", m)
	}
	// Filters narrow, and a query nothing answers says so.
	res = f.search(t, f.all, url.Values{"state": {"deprecated"}})
	if fmt.Sprint(matchNames(res)) != "[crm.search_customers]" || res.Total != 1 {
		t.Errorf("state=deprecated: %+v", res)
	}
	res = f.search(t, f.all, url.Values{"tag": {"crm", "email"}})
	if len(res.Matches) != 0 {
		t.Errorf("two tags no tool holds both of: %v", matchNames(res))
	}
	res = f.search(t, f.all, url.Values{"q": {"launch the rocket into orbit"}})
	if !res.NoGoodMatch || len(res.Matches) != 0 || res.Total != 0 {
		t.Errorf("an unanswerable query: %+v", res)
	}
	if res := f.search(t, f.all, url.Values{"q": {"customer"}, "limit": {"2"}}); len(res.Matches) != 2 || res.Total <= 2 {
		t.Errorf("limit 2: %d matches of %d", len(res.Matches), res.Total)
	}
}

func TestSearchRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	tags := url.Values{}
	for i := range 17 {
		tags.Add("tag", fmt.Sprintf("t%d", i))
	}
	tests := []struct {
		query, field, says string
	}{
		{"limit=ten", "limit", "limit"},
		{"limit=0", "limit", "limit"},
		{"limit=51", "limit", "limit"},
		{"limit=-1", "limit", "limit"},
		{"effect=delete", "", "effect"},
		{"state=retired", "", "state"},
		{"version=" + url.QueryEscape("^^1.x"), "", "version range"},
		{tags.Encode(), "", "17 tags"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			t.Parallel()
			status, body := f.get(t, f.all, "/v1/tools/search?"+tt.query)
			var e struct {
				Error httpErr `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil || status != http.StatusBadRequest || e.Error.Code != "invalid_request" ||
				!strings.Contains(e.Error.Message, tt.says) || e.Error.FieldPath != tt.field {
				t.Errorf("%d %s", status, body)
			}
		})
	}
	// Hostile text is words to search, never syntax, and a long query is
	// read up to its bound.
	for _, q := range []string{strings.Repeat("refund ", 100<<10/7), `name:* OR /.*/ AND "`, "(?i).*", "ｒｅｆｕｎｄ", "\x00\xff"} {
		if status, body := f.get(t, f.all, "/v1/tools/search?"+url.Values{"q": {q}}.Encode()); status != http.StatusOK {
			t.Errorf("%.20q: %d %s", q, status, body)
		}
	}
}

type httpErr struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	FieldPath string `json:"field_path"`
}

// TestSearchRouteAndToolNames checks /v1/tools/search is the search
// whatever the catalogue holds: no tool can be named search (a name is
// namespace.verb), and a tool in the namespace search is reached by its
// own name.
func TestSearchRouteAndToolNames(t *testing.T) {
	t.Parallel()
	f := newSearchFixture(t)
	status, body := f.get(t, f.all, "/v1/tools/search")
	var res struct {
		Matches []map[string]any `json:"matches"`
		Total   *int             `json:"total"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &res) != nil || res.Total == nil || *res.Total != 8 {
		t.Fatalf("GET /v1/tools/search: %d %s", status, body)
	}
	status, body = f.get(t, f.all, "/v1/tools/search.tickets")
	var tool struct {
		Tool struct{ Name string } `json:"tool"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &tool) != nil || tool.Tool.Name != "search.tickets" {
		t.Fatalf("GET /v1/tools/search.tickets: %d %s", status, body)
	}
	if status, body := f.get(t, f.all, "/v1/tools/search.tickets/dependencies"); status != http.StatusOK || !strings.Contains(string(body), `"tool":"search.tickets"`) {
		t.Fatalf("GET /v1/tools/search.tickets/dependencies: %d %s", status, body)
	}
	// search itself is no tool name the registry takes.
	d := searchTool("search", "Search everything.")
	if _, _, err := registry.Build([]toolplane.Definition{d}, registry.Options{Bindings: registry.Static{Handlers: map[string]bool{"search": false}}}); err == nil {
		t.Fatal("the registry took a tool named search")
	}
	// The route takes GET only.
	req, _ := http.NewRequest("POST", f.srv.URL+"/v1/tools/search", nil)
	req.Header.Set("Authorization", "Bearer "+f.all)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET" {
		t.Errorf("POST /v1/tools/search: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestSearchWithoutAnIndex checks a node that keeps no search index says
// so, and still answers dependencies.
func TestSearchWithoutAnIndex(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	status, body := f.do(t, "GET", "/v1/tools/search?q=refund", f.agent, "")
	if status != http.StatusNotFound || errCode(body) != "not_found" {
		t.Errorf("search: %d %v", status, body)
	}
	status, body = f.do(t, "GET", "/v1/tools/demo.refund_order/dependencies", f.agent, "")
	if status != http.StatusOK || body["tool"] != "demo.refund_order" {
		t.Errorf("dependencies: %d %v", status, body)
	}
}
