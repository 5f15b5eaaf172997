package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/toolplane/toolplane/door"
)

// TestOpenAPIDocumentMatchesTheRoutes checks every route the mux serves is
// in the document, with its method, and the document names no route the
// mux does not serve.
func TestOpenAPIDocumentMatchesTheRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi = %q", doc.OpenAPI)
	}
	var documented, served []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	for _, rt := range (&Server{}).routes() {
		served = append(served, rt.method+" "+rt.path)
	}
	sort.Strings(documented)
	sort.Strings(served)
	if strings.Join(documented, "\n") != strings.Join(served, "\n") {
		t.Fatalf("document and routes differ:\ndocumented:\n%s\nserved:\n%s", strings.Join(documented, "\n"), strings.Join(served, "\n"))
	}
}

// TestOpenAPIDocumentIsComplete holds the document to what its linters
// (.ci/openapi: Spectral and Redocly) and its readers need, so a route
// added without them fails here before CI: every operation has a unique
// camelCase operationId, declared tags, a summary and a description; every
// array schema says what its items are; every $ref resolves.
func TestOpenAPIDocumentIsComplete(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	tags, _ := doc["tags"].([]any)
	for _, tg := range tags {
		tg, _ := tg.(map[string]any)
		name, _ := tg["name"].(string)
		if desc, _ := tg["description"].(string); desc == "" {
			t.Errorf("tag %q has no description", name)
		}
		declared[name] = true
	}
	camel := regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)
	ids := map[string]string{}
	paths, _ := doc["paths"].(map[string]any)
	for path, ops := range paths {
		ops, _ := ops.(map[string]any)
		for method, op := range ops {
			op, _ := op.(map[string]any)
			where := strings.ToUpper(method) + " " + path
			id, _ := op["operationId"].(string)
			switch {
			case !camel.MatchString(id):
				t.Errorf("%s: operationId %q is not camelCase", where, id)
			case ids[id] != "":
				t.Errorf("%s: operationId %q is also %s's", where, id, ids[id])
			}
			ids[id] = where
			opTags, _ := op["tags"].([]any)
			if len(opTags) == 0 {
				t.Errorf("%s: no tags", where)
			}
			for _, tg := range opTags {
				if name, _ := tg.(string); !declared[name] {
					t.Errorf("%s: tag %q is not declared in tags", where, name)
				}
			}
			for _, field := range []string{"summary", "description"} {
				if s, _ := op[field].(string); strings.TrimSpace(s) == "" {
					t.Errorf("%s: no %s", where, field)
				}
			}
		}
	}
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["type"] == "array" && v["items"] == nil {
				t.Errorf("%s: an array without items", at)
			}
			if ref, ok := v["$ref"].(string); ok && resolve(doc, ref) == nil {
				t.Errorf("%s: $ref %q does not resolve", at, ref)
			}
			for k, e := range v {
				walk(at+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(at+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("#", doc)
}

// resolve answers what a local reference (#/a/b) names in doc, or nil.
func resolve(doc map[string]any, ref string) any {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var at any = doc
	for _, part := range strings.Split(rest, "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := at.(map[string]any)
		if !ok {
			return nil
		}
		at = m[part]
	}
	return at
}

// TestServedOpenAPINamesThePublicURL checks the document a server serves
// names that server (its public URL) and is otherwise the embedded one,
// and that without a public URL the embedded document is served as is.
func TestServedOpenAPINamesThePublicURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		publicURL, want string
	}{
		{"", "http://127.0.0.1:8080"},
		{"https://tools.example.com", "https://tools.example.com"},
		{"http://10.0.0.7:9000/toolplane", "http://10.0.0.7:9000/toolplane"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			s := &Server{Door: &door.Door{}, PublicURL: tt.publicURL}
			srv := httptest.NewServer(s.Handler())
			defer srv.Close()
			// The copy naming the public URL is made on the first request
			// for it, by one of the requests that come at once.
			if s.documented.Load() {
				t.Fatal("the document naming the public URL was made before anybody asked for it")
			}
			bodies := make([][]byte, 4)
			var wg sync.WaitGroup
			for i := range bodies {
				wg.Go(func() {
					resp, err := http.Get(srv.URL + "/v1/openapi.json")
					if err != nil {
						t.Error(err)
						return
					}
					defer resp.Body.Close()
					if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
						t.Errorf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
					}
					bodies[i], _ = io.ReadAll(resp.Body)
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			body := bodies[0]
			for _, b := range bodies[1:] {
				if !bytes.Equal(b, body) {
					t.Fatal("requests at once were served different documents")
				}
			}
			if want := tt.publicURL != ""; s.documented.Load() != want {
				t.Errorf("document copy made: %v, want %v", s.documented.Load(), want)
			}
			var served, embedded map[string]any
			if err := json.Unmarshal(body, &served); err != nil {
				t.Fatalf("served document: %v", err)
			}
			if err := json.Unmarshal(openAPI, &embedded); err != nil {
				t.Fatal(err)
			}
			servers, _ := served["servers"].([]any)
			if len(servers) != 1 {
				t.Fatalf("servers = %v", served["servers"])
			}
			if url, _ := servers[0].(map[string]any)["url"].(string); url != tt.want {
				t.Errorf("servers[0].url = %q, want %q", url, tt.want)
			}
			delete(served, "servers")
			delete(embedded, "servers")
			if !reflect.DeepEqual(served, embedded) {
				t.Error("the served document differs from the embedded one beyond servers")
			}
		})
	}
}
