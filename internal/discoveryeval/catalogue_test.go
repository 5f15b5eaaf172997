package discoveryeval

import (
	"testing"
)

func TestCatalogueBuilds(t *testing.T) {
	t.Parallel()
	tools := Catalogue()
	reg, err := Registry(tools)
	if err != nil {
		t.Fatal(err)
	}
	domains := map[string]int{}
	for _, tl := range tools {
		domains[tl.Domain]++
	}
	t.Logf("%d tool versions, %d served by name, %d domains", len(tools), len(reg.Tools("")), len(domains))
	if len(tools) < 500 || len(domains) < 20 {
		t.Fatalf("catalogue too small: %d tools over %d domains", len(tools), len(domains))
	}
}
