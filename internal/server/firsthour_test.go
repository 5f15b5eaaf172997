package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/upstream"
)

// getWith sends a GET to base+path with the headers given as name, value
// pairs, following no redirect, and answers the status, Location and body.
func getWith(t *testing.T, base, path string, headers ...string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	hc := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(raw)
}

// TestTheServersAddressLeadsSomewhere: a browser opening the server's own
// address is sent to the console, an API client is told where the API,
// the MCP endpoint and the OpenAPI document are, and a person who signs in
// with no page to return to lands in the console, whose sign-in page then
// links there.
func TestTheServersAddressLeadsSomewhere(t *testing.T) {
	t.Parallel()
	no := false
	r := start(t, Config{}, upstream.Relax{Effect: toolplane.EffectRead, RequiresApproval: &no})

	status, loc, _ := getWith(t, r.base, "/", "Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	if status != http.StatusSeeOther || loc != r.base+"/console" {
		t.Fatalf("a browser at / got %d to %q, want 303 to the console", status, loc)
	}
	status, _, body := getWith(t, r.base, "/", "Accept", "application/json")
	if status != http.StatusOK {
		t.Fatalf("an API client at / got %d %s", status, body)
	}
	var index struct {
		Name  string            `json:"name"`
		Links map[string]string `json:"links"`
	}
	if err := json.Unmarshal([]byte(body), &index); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"api": "/v1", "mcp": "/mcp", "openapi": "/v1/openapi.json", "console": "/console"} {
		if index.Links[name] != r.base+want {
			t.Errorf("index link %s = %q, want %q", name, index.Links[name], r.base+want)
		}
	}
	if status, _, _ := getWith(t, r.base, "/nope", "Accept", "text/html"); status != http.StatusNotFound {
		t.Errorf("/nope answered %d: only / itself is the index", status)
	}

	// Signing in with the key form and no page to return to.
	b := newPageBrowser(t, r.base)
	_, page, _, _ := b.get(r.base + "/signin")
	m := formToken.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no key form on the sign-in page:\n%s", page)
	}
	req, _ := http.NewRequest(http.MethodPost, r.base+"/signin/key", strings.NewReader(url.Values{"csrf": {m[1]}, "key": {r.admin}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", r.base)
	status, page, at, _ := b.open(req)
	if status != http.StatusOK || !strings.HasPrefix(at, r.base+"/console") {
		t.Fatalf("after signing in: %d at %s, want the console", status, at)
	}
	if _, page, _, _ = b.get(r.base + "/signin"); !strings.Contains(page, `href="/console"`) {
		t.Errorf("the signed-in page does not link the console:\n%s", page)
	}
}

// TestPlatformToolsAreListed: a demo server's catalogue shows its
// built-in tools and those ingested from an upstream, each with its
// source, after the published versions, paged like them; one of them
// opens as a version nobody can deprecate; and the operator lists the
// upstream servers.
func TestPlatformToolsAreListed(t *testing.T) {
	t.Parallel()
	no := false
	r := start(t, Config{}, upstream.Relax{Effect: toolplane.EffectRead, RequiresApproval: &no})

	type version struct {
		Name     string `json:"name"`
		Version  string `json:"version"`
		State    string `json:"state"`
		Source   string `json:"source"`
		Upstream string `json:"upstream"`
	}
	list := func(query string) ([]version, string) {
		t.Helper()
		status, _, body := getWith(t, r.base, "/v1/registry/tools"+query, "Authorization", "Bearer "+r.admin)
		if status != http.StatusOK {
			t.Fatalf("list %s: %d %s", query, status, body)
		}
		var page struct {
			Items []version `json:"items"`
			Next  string    `json:"next_cursor"`
		}
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatal(err)
		}
		return page.Items, page.Next
	}
	var all []version
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The upstream's tools arrive when its first sync ends.
		all = nil
		for cursor, first := "", true; first || cursor != ""; first = false {
			items, next := list("?limit=2" + map[bool]string{true: "", false: "&cursor=" + url.QueryEscape(cursor)}[cursor == ""])
			if len(items) > 2 {
				t.Fatalf("a page of limit 2 held %d", len(items))
			}
			all, cursor = append(all, items...), next
		}
		var upstreamSeen bool
		for _, v := range all {
			upstreamSeen = upstreamSeen || v.Source == "upstream"
		}
		if upstreamSeen || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	bySource := map[string][]string{}
	seen := map[string]bool{}
	for _, v := range all {
		if seen[v.Name] {
			t.Errorf("%s listed twice across pages", v.Name)
		}
		seen[v.Name] = true
		if v.State != "active" {
			t.Errorf("%s is %s", v.Name, v.State)
		}
		bySource[v.Source] = append(bySource[v.Source], v.Name)
		if v.Source == "upstream" && v.Upstream != "slow" {
			t.Errorf("%s comes from upstream %q, want slow", v.Name, v.Upstream)
		}
	}
	if len(bySource["builtin"]) == 0 || len(bySource["upstream"]) == 0 {
		t.Fatalf("listed by source: %v; want the demo's built-in tools and the upstream's", bySource)
	}
	if items, _ := list("?state=in_review"); len(items) != 0 {
		t.Errorf("the review queue lists %v: platform tools are never in review", items)
	}
	name := bySource["builtin"][0]
	items, _ := list("?name=" + url.QueryEscape(name))
	if len(items) != 1 || items[0].Source != "builtin" {
		t.Fatalf("by name %s: %v", name, items)
	}
	status, _, body := getWith(t, r.base, "/v1/registry/tools/"+url.PathEscape(name)+"/versions/"+url.PathEscape(items[0].Version), "Authorization", "Bearer "+r.admin)
	if status != http.StatusOK || !strings.Contains(body, `"source":"builtin"`) || !strings.Contains(body, `"definition"`) {
		t.Fatalf("show %s: %d %s", name, status, body)
	}
	if status, body := post(t, r.base, "/v1/registry/tools/"+url.PathEscape(name)+"/versions/"+url.PathEscape(items[0].Version)+"/deprecate", r.admin,
		`{"sunset_at":"2099-01-01T00:00:00Z","note":"no"}`); status < 400 {
		t.Fatalf("deprecating a built-in tool answered %d %s", status, body)
	}

	status, _, body = getWith(t, r.base, "/v1/upstreams", "Authorization", "Bearer "+r.admin)
	if status != http.StatusOK {
		t.Fatalf("upstreams: %d %s", status, body)
	}
	var ups struct {
		Items []upstream.Server `json:"items"`
	}
	if err := json.Unmarshal([]byte(body), &ups); err != nil {
		t.Fatal(err)
	}
	if len(ups.Items) != 1 || ups.Items[0].Slug != "slow" || ups.Items[0].Transport != "http" || ups.Items[0].Path != "/mcp/slow" || ups.Items[0].Tools == 0 {
		t.Fatalf("upstreams: %+v", ups.Items)
	}
	if status, _, body := getWith(t, r.base, "/v1/upstreams", "Authorization", "Bearer "+r.agent); status != http.StatusForbidden {
		t.Fatalf("an agent listed the upstreams: %d %s", status, body)
	}
}
