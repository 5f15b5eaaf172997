package discovery

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/registry"
)

// vocabulary is what the synthetic catalogue's text is drawn from.
var vocabulary = strings.Fields(`account address alert archive assign attach audit balance batch bill booking branch bucket build calendar
campaign cancel card case charge check close comment commit company contact contract copy cost create credit customer dashboard
database delete deploy device discount document domain draft email employee event expense export file filter folder grant group
incident invoice issue item job key label lead list log meeting member message metric monitor note notify order owner package page
payment permission pipeline plan policy price product project publish queue quote read record refund release remove repository
report request reset restore review role rotate run schedule search secret send server service session shipment sign snapshot
stock subscription task team template ticket token transfer update upload user vendor version warehouse webhook workflow`)

// synthetic answers n tool definitions of random words, deterministic.
func synthetic(n int) []toolplane.Definition {
	r := rand.New(rand.NewPCG(1, 2))
	w := func() string { return vocabulary[r.IntN(len(vocabulary))] }
	defs := make([]toolplane.Definition, n)
	for i := range defs {
		var desc []string
		for range 12 + r.IntN(20) {
			desc = append(desc, w())
		}
		d := tool(fmt.Sprintf("ns%d.%s_%s_%d", i%60, w(), w(), i), strings.Join(desc, " ")+".", w(), w())
		defs[i] = d
	}
	return defs
}

func syntheticRegistry(b testing.TB, n int) *registry.Registry {
	defs := synthetic(n)
	handlers := map[string]bool{}
	for _, d := range defs {
		handlers[d.Binding.Handler.Key] = false
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: registry.Static{Handlers: handlers}})
	if err != nil {
		b.Fatal(err)
	}
	return reg
}

func BenchmarkSearch10k(b *testing.B) {
	reg := syntheticRegistry(b, 10_000)
	x := New(Options{})
	x.Follow(reg)
	ts := reg.Tools("")
	queries := []string{"refund a customer payment", "rotate the api key of a service", "list open incidents for my team", "export the audit log", "schedule a meeting"}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := x.Search(ctx, "", ts, Query{Text: queries[i%len(queries)]}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRebuild10k(b *testing.B) {
	reg := syntheticRegistry(b, 10_000)
	ts := reg.Every()
	b.ResetTimer()
	for b.Loop() {
		x := New(Options{})
		x.Rebuild(ts)
		x.set(ts)
	}
}
