package httpapi

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
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
