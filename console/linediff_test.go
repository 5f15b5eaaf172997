package console

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// render writes a diff as the page marks it: "+x", "-x", " x", and
// "…n" for a gap.
func render(d []diffLine) []string {
	out := make([]string, 0, len(d))
	for _, l := range d {
		if l.Skipped > 0 {
			out = append(out, fmt.Sprintf("…%d", l.Skipped))
			continue
		}
		out = append(out, l.Mark()+l.Text)
	}
	return out
}

func TestLineDiff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, a, b string
		want       []string
	}{
		{"both empty", "", "", []string{}},
		{"equal", "a\nb\n", "a\nb\n", []string{" a", " b"}},
		{"from nothing", "", "a\nb", []string{"+a", "+b"}},
		{"to nothing", "a\nb\n", "", []string{"-a", "-b"}},
		{"one line changed", "a\nb\nc", "a\nx\nc", []string{" a", "-b", "+x", " c"}},
		{"inserted", "a\nc", "a\nb\nc", []string{" a", "+b", " c"}},
		{"deleted", "a\nb\nc", "a\nc", []string{" a", "-b", " c"}},
		{"appended", "a", "a\nb", []string{" a", "+b"}},
		{"a last line end only", "a\nb", "a\nb\n", []string{" a", " b"}},
		{"CRLF is a line end", "a\r\nb\r\n", "a\nb\n", []string{" a", " b"}},
		{"moved line", "a\nb\nc\nd", "b\nc\na\nd", []string{"-a", " b", " c", "+a", " d"}},
		{"blank lines count", "a\n\nb", "a\nb", []string{" a", "-", " b"}},
		{"nothing in common", "a\nb", "c\nd", []string{"-a", "-b", "+c", "+d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := render(lineDiff(tc.a, tc.b)); !slices.Equal(got, tc.want) {
				t.Errorf("lineDiff(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

// lcsLen is the length of the longest common subsequence of x and y, by
// memoized recursion over prefixes: a second way of finding what lineDiff
// keeps.
func lcsLen(x, y []string) int {
	memo := map[[2]int]int{}
	var f func(i, j int) int
	f = func(i, j int) int {
		if i == 0 || j == 0 {
			return 0
		}
		k := [2]int{i, j}
		if v, ok := memo[k]; ok {
			return v
		}
		v := max(f(i-1, j), f(i, j-1))
		if x[i-1] == y[j-1] {
			v = f(i-1, j-1) + 1
		}
		memo[k] = v
		return v
	}
	return f(len(x), len(y))
}

// On random texts of few distinct lines, the kept and removed lines are
// the old text, the kept and added the new, and as many are kept as the
// texts have in common at most.
func TestLineDiffIsMinimal(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	text := func() []string {
		n := rng.IntN(12)
		out := make([]string, n)
		for i := range out {
			out[i] = string(rune('a' + rng.IntN(4)))
		}
		return out
	}
	for range 2000 {
		x, y := text(), text()
		d := lineDiff(strings.Join(x, "\n"), strings.Join(y, "\n"))
		var old, now []string
		kept := 0
		for _, l := range d {
			if l.Op != diffAdded {
				old = append(old, l.Text)
			}
			if l.Op != diffRemoved {
				now = append(now, l.Text)
			}
			if l.Op == diffKept {
				kept++
			}
		}
		if !slices.Equal(old, x) || !slices.Equal(now, y) {
			t.Fatalf("lineDiff(%q, %q) = %q does not rebuild both texts", x, y, render(d))
		}
		if want := lcsLen(x, y); kept != want {
			t.Fatalf("lineDiff(%q, %q) keeps %d lines, the texts share %d: %q", x, y, kept, want, render(d))
		}
	}
}

// Two large unrelated texts are one removal and one addition, not a
// table of their lines' product; their common head and tail stay kept.
func TestLineDiffBoundsItsTable(t *testing.T) {
	t.Parallel()
	var a, b []string
	for i := range 3000 {
		a = append(a, fmt.Sprintf("old %d", i))
		b = append(b, fmt.Sprintf("new %d", i))
	}
	a = append(append([]string{"head"}, a...), "tail")
	b = append(append([]string{"head"}, b...), "tail")
	d := lineDiff(strings.Join(a, "\n"), strings.Join(b, "\n"))
	if len(d) != 6002 || d[0] != (diffLine{Op: diffKept, Text: "head"}) || d[len(d)-1] != (diffLine{Op: diffKept, Text: "tail"}) ||
		d[1] != (diffLine{Op: diffRemoved, Text: "old 0"}) || d[3001] != (diffLine{Op: diffAdded, Text: "new 0"}) {
		t.Errorf("the bounded diff: %d lines, %q ... %q", len(d), render(d[:3]), render(d[len(d)-3:]))
	}
}

// Folding keeps diffContext kept lines either side of a change and gaps
// the rest.
func TestFoldedKeepsContext(t *testing.T) {
	t.Parallel()
	var a []string
	for i := range 20 {
		a = append(a, fmt.Sprint(i))
	}
	b := slices.Clone(a)
	b[10] = "ten"
	got := render(folded(lineDiff(strings.Join(a, "\n"), strings.Join(b, "\n"))))
	want := []string{"…7", " 7", " 8", " 9", "-10", "+ten", " 11", " 12", " 13", "…6"}
	if !slices.Equal(got, want) {
		t.Errorf("folded = %q, want %q", got, want)
	}
	if got := folded(lineDiff("a\nb", "a\nb")); len(got) != 1 || got[0].Skipped != 2 {
		t.Errorf("an unchanged text folds to %q", render(got))
	}
}
