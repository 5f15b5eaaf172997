package ceiling_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/ceiling"
)

func call(provider string, fanout int64) toolplane.RunShape {
	return toolplane.RunShape{Kind: toolplane.ShapeCall, Provider: provider, Fanout: fanout}
}

func node(kind toolplane.ShapeKind, parts ...toolplane.RunShape) toolplane.RunShape {
	return toolplane.RunShape{Kind: kind, Parts: parts}
}

func seq(parts ...toolplane.RunShape) toolplane.RunShape {
	return node(toolplane.ShapeSequence, parts...)
}
func branch(parts ...toolplane.RunShape) toolplane.RunShape {
	return node(toolplane.ShapeBranch, parts...)
}
func par(parts ...toolplane.RunShape) toolplane.RunShape {
	return node(toolplane.ShapeParallel, parts...)
}

// Vendor arithmetic adds two wide nodes that can run in parallel against
// one account: reading one node's concurrency would undercount them. In a
// sequence or a branch only one runs at a time, so they take the larger.
func TestVendorArithmeticAddsTwoWideNodesThatCanRunInParallelAgainstOneAccount(t *testing.T) {
	t.Parallel()
	wideA, wideB := call("exa", 6), call("exa", 4)
	for _, c := range []struct {
		name  string
		shape toolplane.RunShape
		want  int64
	}{
		{"parallel adds", par(wideA, wideB), 10},
		{"sequence takes the larger", seq(wideA, wideB), 6},
		{"branch takes the larger", branch(wideA, wideB), 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := ceiling.Calls(c.shape, "exa"); got != c.want {
				t.Errorf("Calls(%s) = %d, want %d", ceiling.Format(c.shape), got, c.want)
			}
		})
	}
	// Against an account of 100: ten runs of the parallel shape reach it
	// exactly (10 × 10), eleven cross it although each node alone (6, 4)
	// times 11 would not.
	account := func(runs int64) *toolplane.VendorCeiling {
		return &toolplane.VendorCeiling{Provider: "exa", AccountLimit: 100,
			Lanes: []toolplane.Lane{{Name: "batch", ActiveRuns: runs, Shape: par(wideA, wideB)}}}
	}
	if a, err := ceiling.Check(account(10)); err != nil || a.Sum != 100 {
		t.Errorf("Check(10 runs) = %+v, %v; want sum 100 within the limit", a, err)
	}
	var exceeded *ceiling.ExceededError
	if _, err := ceiling.Check(account(11)); !errors.As(err, &exceeded) || exceeded.Arithmetic.Sum != 110 {
		t.Errorf("Check(11 runs) = %v, want the sum 110 refused", err)
	}
}

func TestCalls(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		shape toolplane.RunShape
		want  int64
	}{
		{"one call", call("exa", 0), 1},
		{"fanout 1", call("exa", 1), 1},
		{"wide call", call("exa", 25), 25},
		{"another vendor counts nothing", call("fullenrich", 10), 0},
		{"parallel of another vendor", par(call("fullenrich", 10), call("exa", 2)), 2},
		{"sequence of parallels", seq(par(call("exa", 3), call("exa", 3)), par(call("exa", 5))), 6},
		{"branch of a parallel and a wide call", branch(par(call("exa", 2), call("exa", 2)), call("exa", 3)), 4},
		{"parallel of sequences", par(seq(call("exa", 2), call("exa", 7)), seq(call("exa", 1), call("fullenrich", 9))), 8},
		{"nested parallels add through", par(par(call("exa", 1), call("exa", 1)), par(call("exa", 1), seq(call("exa", 4)))), 7},
		{"no call of the vendor", seq(call("a", 3), branch(call("b", 1))), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if err := ceiling.CheckShape(c.shape); err != nil {
				t.Fatalf("CheckShape: %v", err)
			}
			if got := ceiling.Calls(c.shape, "exa"); got != c.want {
				t.Errorf("Calls(%s) = %d, want %d", ceiling.Format(c.shape), got, c.want)
			}
		})
	}
}

func twoLanes(limit int64) *toolplane.VendorCeiling {
	return &toolplane.VendorCeiling{OrganizationID: "org", Provider: "exa", AccountLimit: limit, Lanes: []toolplane.Lane{
		{Name: "interactive", ActiveRuns: 20, Shape: par(call("exa", 3), call("exa", 3))},
		{Name: "batch", ActiveRuns: 5, Shape: seq(call("exa", 10), call("fullenrich", 50))},
	}}
}

// A refusal names every lane's product and the sum, so the operator sees
// which lane to narrow.
func TestRefusalNamesTheArithmetic(t *testing.T) {
	t.Parallel()
	_, err := ceiling.Check(twoLanes(100))
	var exceeded *ceiling.ExceededError
	if !errors.As(err, &exceeded) {
		t.Fatalf("Check = %v, want an *ExceededError", err)
	}
	if !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("Check = %v, want it of kind ErrInvalid", err)
	}
	want := "the lanes can make more calls to exa at once than its account accepts: " +
		"interactive: 20 runs × 6 calls = 120; batch: 5 runs × 10 calls = 50; sum 170 > account limit 100"
	if err.Error() != want {
		t.Errorf("Check =\n %s\nwant\n %s", err, want)
	}
	a, err := ceiling.Check(twoLanes(170))
	if err != nil {
		t.Fatalf("Check at the sum = %v, want it within", err)
	}
	if got, want := a.String(), "interactive: 20 runs × 6 calls = 120; batch: 5 runs × 10 calls = 50; sum 170 <= account limit 170"; got != want {
		t.Errorf("String = %s, want %s", got, want)
	}
	one := &toolplane.VendorCeiling{Provider: "exa", AccountLimit: 5, Lanes: []toolplane.Lane{{Name: "solo", ActiveRuns: 1, Shape: call("exa", 0)}}}
	if a, _ := ceiling.Check(one); a.String() != "solo: 1 run × 1 call = 1; sum 1 <= account limit 5" {
		t.Errorf("String = %s", a.String())
	}
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	c := twoLanes(1000)
	c.Lanes = append(c.Lanes, toolplane.Lane{Name: "typo", ActiveRuns: 3, Shape: call("exa.ai", 4)})
	a, err := ceiling.Check(c)
	if err != nil {
		t.Fatal(err)
	}
	w := ceiling.Warnings(a)
	if len(w) != 1 || !strings.Contains(w[0], "lane typo makes no call to exa") {
		t.Errorf("Warnings = %q, want one naming lane typo", w)
	}
}

func TestCheckFormRefuses(t *testing.T) {
	t.Parallel()
	deep := call("exa", 1)
	for range ceiling.MaxDepth {
		deep = seq(deep)
	}
	wide := make([]toolplane.RunShape, ceiling.MaxNodes)
	for i := range wide {
		wide[i] = call("exa", 1)
	}
	lanes := make([]toolplane.Lane, ceiling.MaxLanes+1)
	for i := range lanes {
		lanes[i] = toolplane.Lane{Name: "l" + strings.Repeat("x", i), ActiveRuns: 1, Shape: call("exa", 1)}
	}
	lane := func(l toolplane.Lane) func(*toolplane.VendorCeiling) {
		return func(c *toolplane.VendorCeiling) { c.Lanes = []toolplane.Lane{l} }
	}
	for _, c := range []struct {
		name, field string
		change      func(*toolplane.VendorCeiling)
	}{
		{"provider", "provider", func(c *toolplane.VendorCeiling) { c.Provider = "Exa" }},
		{"no provider", "provider", func(c *toolplane.VendorCeiling) { c.Provider = "" }},
		{"zero limit", "account_limit", func(c *toolplane.VendorCeiling) { c.AccountLimit = 0 }},
		{"huge limit", "account_limit", func(c *toolplane.VendorCeiling) { c.AccountLimit = ceiling.MaxAccountLimit + 1 }},
		{"long note", "note", func(c *toolplane.VendorCeiling) { c.Note = strings.Repeat("n", ceiling.MaxNote+1) }},
		{"note with NUL", "note", func(c *toolplane.VendorCeiling) { c.Note = "a\x00b" }},
		{"note not UTF-8", "note", func(c *toolplane.VendorCeiling) { c.Note = "a\xffb" }},
		{"too many lanes", "lanes", func(c *toolplane.VendorCeiling) { c.Lanes = lanes }},
		{"lane name", "lanes[0].name", lane(toolplane.Lane{Name: "Batch", ActiveRuns: 1, Shape: call("exa", 1)})},
		{"lane twice", "lanes[2].name", func(c *toolplane.VendorCeiling) { c.Lanes = append(c.Lanes, c.Lanes[0]) }},
		{"no runs", "lanes[0].active_runs", lane(toolplane.Lane{Name: "b", ActiveRuns: 0, Shape: call("exa", 1)})},
		{"too many runs", "lanes[0].active_runs", lane(toolplane.Lane{Name: "b", ActiveRuns: ceiling.MaxActiveRuns + 1, Shape: call("exa", 1)})},
		{"no shape", "lanes[0].shape.kind", lane(toolplane.Lane{Name: "b", ActiveRuns: 1})},
		{"unknown kind", "lanes[0].shape.kind", lane(toolplane.Lane{Name: "b", ActiveRuns: 1, Shape: toolplane.RunShape{Kind: "loop"}})},
		{"negative fanout", "lanes[0].shape.fanout", lane(toolplane.Lane{Name: "b", ActiveRuns: 1, Shape: call("exa", -1)})},
		{"huge fanout", "lanes[0].shape.parts[0].fanout", lane(toolplane.Lane{Name: "b", ActiveRuns: 1, Shape: par(call("exa", ceiling.MaxFanout+1))})},
		{"call without provider", "lanes[0].shape.provider", lane(toolplane.Lane{Name: "b", ActiveRuns: 1, Shape: call("", 1)})},
		{"call with parts", "lanes[0].shape.parts", lane(toolplane.Lane{Name: "b", ActiveRuns: 1, Shape: toolplane.RunShape{Kind: toolplane.ShapeCall, Provider: "exa", Parts: []toolplane.RunShape{call("exa", 1)}}})},
		{"empty parallel", "lanes[0].shape.parts", lane(toolplane.Lane{Name: "b", ActiveRuns: 1, Shape: par()})},
		{"group with a fanout", "lanes[0].shape", lane(toolplane.Lane{Name: "b", ActiveRuns: 1, Shape: toolplane.RunShape{Kind: toolplane.ShapeParallel, Fanout: 2, Parts: []toolplane.RunShape{call("exa", 1)}}})},
		{"too deep", "lanes[0].shape" + strings.Repeat(".parts[0]", ceiling.MaxDepth), lane(toolplane.Lane{Name: "b", ActiveRuns: 1, Shape: deep})},
		{"too many nodes", "lanes[0].shape.parts[255]", lane(toolplane.Lane{Name: "b", ActiveRuns: 1, Shape: par(wide...)})},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := twoLanes(1000)
			c.change(in)
			_, err := ceiling.Check(in)
			var invalid *ceiling.InvalidError
			if !errors.As(err, &invalid) || invalid.Field != c.field {
				t.Fatalf("Check = %v, want an *InvalidError at %s", err, c.field)
			}
			if !errors.Is(err, toolplane.ErrInvalid) {
				t.Errorf("Check = %v, want it of kind ErrInvalid", err)
			}
		})
	}
}

// The largest ceiling the bounds admit sums without overflow.
func TestBoundsKeepTheSumExact(t *testing.T) {
	t.Parallel()
	parts := make([]toolplane.RunShape, ceiling.MaxNodes-1)
	for i := range parts {
		parts[i] = call("exa", ceiling.MaxFanout)
	}
	c := &toolplane.VendorCeiling{Provider: "exa", AccountLimit: ceiling.MaxAccountLimit}
	for i := range ceiling.MaxLanes {
		c.Lanes = append(c.Lanes, toolplane.Lane{Name: "l" + strings.Repeat("x", i), ActiveRuns: ceiling.MaxActiveRuns, Shape: par(parts...)})
	}
	a, err := ceiling.Compute(c)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(ceiling.MaxLanes) * ceiling.MaxActiveRuns * int64(ceiling.MaxNodes-1) * ceiling.MaxFanout
	if a.Sum != want || a.Within() {
		t.Errorf("Sum = %d, want %d, beyond the limit", a.Sum, want)
	}
}
