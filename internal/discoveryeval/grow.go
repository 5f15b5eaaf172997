package discoveryeval

import (
	"fmt"
	"strings"
)

// Grow answers the catalogue extended to n tool names by copies of its
// active tools under other namespaces (stripe2.refund_charge): the same
// operations offered by more accounts or regions, as a large grant holds
// them. The catalogue's own tools come first, unchanged; the copies are
// deterministic.
func Grow(n int) []Tool {
	base := Catalogue()
	names := map[string]bool{}
	for _, t := range base {
		names[t.Def.Name] = true
	}
	out := append([]Tool(nil), base...)
	for k := 2; len(names) < n; k++ {
		for _, t := range base {
			if len(names) >= n {
				break
			}
			if t.Deprecated {
				continue
			}
			ns, verb, _ := strings.Cut(t.Def.Name, ".")
			name := fmt.Sprintf("%s%d.%s", ns, k, verb)
			if names[name] {
				continue
			}
			names[name] = true
			d := t.Def
			d.Name = name
			d.Version = "1.0.0"
			h := *d.Binding.Handler
			h.Key = name
			d.Binding.Handler = &h
			if d.Connection != "" {
				d.Connection = fmt.Sprintf("%s%d", ns, k)
			}
			d.Tags = append([]string(nil), d.Tags...)
			d.Dependencies = nil
			out = append(out, Tool{Def: d, Domain: t.Domain})
		}
	}
	return out
}
