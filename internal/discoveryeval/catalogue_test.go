package discoveryeval

import (
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/semver"
)

func TestCatalogueBuilds(t *testing.T) {
	t.Parallel()
	tools := Catalogue()
	reg, err := Registry(tools)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	domains := map[string]bool{}
	var titled, hinted, requires, pairs, replacedByOther, replacedBySelf int
	for _, tl := range tools {
		names[tl.Def.Name] = true
		domains[tl.Domain] = true
		if tl.Def.Title != "" {
			titled++
		}
		if len(tl.Def.SearchHints) > 0 {
			hinted++
		}
		if tl.Deprecated {
			if name, _ := semver.SplitRef(tl.Replacement); name == tl.Def.Name {
				replacedBySelf++
			} else {
				replacedByOther++
			}
		}
	}
	for _, tl := range tools {
		for _, d := range tl.Def.Dependencies {
			name, _ := semver.SplitRef(d.Tool)
			if !names[name] {
				t.Errorf("%s depends on %s, which is not in the catalogue", tl.Def.Name, d.Tool)
			}
			switch d.Relation {
			case toolplane.RequiresOutputOf:
				requires++
			case toolplane.CommonlyPairedWith:
				pairs++
			}
		}
		if tl.Deprecated {
			name, _ := semver.SplitRef(tl.Replacement)
			if !names[name] {
				t.Errorf("%s is replaced by %s, which is not in the catalogue", tl.Def.Name, tl.Replacement)
			}
		}
	}
	served := reg.Tools("")
	t.Logf("%d tool versions, %d served by name, %d domains; %d titled, %d with hints, %d+%d edges, %d+%d deprecated",
		len(tools), len(served), len(domains), titled, hinted, requires, pairs, replacedByOther, replacedBySelf)
	if len(tools) < 500 || len(domains) < 20 {
		t.Errorf("catalogue too small: %d tools over %d domains", len(tools), len(domains))
	}
	if titled == 0 || titled == len(tools) || hinted == 0 || requires == 0 || pairs == 0 || replacedByOther == 0 || replacedBySelf == 0 {
		t.Errorf("a hard case is missing: %d titled, %d with hints, %d+%d edges, %d+%d deprecated", titled, hinted, requires, pairs, replacedByOther, replacedBySelf)
	}
	// Every deprecated tool replaced by another is served, deprecated.
	deprecated := 0
	for _, tl := range served {
		if tl.State == toolplane.StateDeprecated {
			deprecated++
			if name, _ := tl.ReplacementRef(); name == "" || strings.EqualFold(name, tl.Def.Name) {
				t.Errorf("%s is served deprecated with replacement %q", tl.Def.Name, tl.Replacement)
			}
		}
	}
	if deprecated != replacedByOther {
		t.Errorf("%d deprecated tools served, want %d", deprecated, replacedByOther)
	}
}
