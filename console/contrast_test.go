package console_test

import (
	"math"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// The stylesheet's text colours are readable on the backgrounds they are
// shown on, in the light theme and in the dark one: WCAG AA's 4.5:1 for
// text of any size. A colour used for text, such as a call's outcome,
// is one of these, never a border's colour, which needs only 3:1.
func TestTextColoursContrast(t *testing.T) {
	t.Parallel()
	css, err := os.ReadFile("assets/console.css")
	if err != nil {
		t.Fatal(err)
	}
	// The light theme's :root, then the dark theme's, which overrides.
	roots := regexp.MustCompile(`(?s):root \{(.*?)\}`).FindAllSubmatch(css, -1)
	if len(roots) != 2 {
		t.Fatalf("%d :root blocks in console.css, want the light theme's and the dark one's", len(roots))
	}
	pairs := []struct{ fg, bg string }{
		{"--fg", "--surface"}, {"--fg", "--bg"},
		{"--muted", "--surface"}, {"--muted", "--bg"},
		{"--link", "--surface"}, {"--link", "--bg"},
		{"--danger-fg", "--surface"}, {"--danger-fg", "--bg"},
		{"--ok-fg", "--surface"}, {"--ok-fg", "--bg"},
		{"--bar-fg", "--bar"},
	}
	vars := map[string]string{}
	decl := regexp.MustCompile(`(--[a-z-]+):\s*#([0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b`)
	for i, theme := range []string{"light", "dark"} {
		for _, m := range decl.FindAllSubmatch(roots[i][1], -1) {
			c := string(m[2])
			if len(c) == 3 { // #rgb is #rrggbb
				c = string([]byte{c[0], c[0], c[1], c[1], c[2], c[2]})
			}
			vars[string(m[1])] = "#" + c
		}
		for _, p := range pairs {
			fg, bg := vars[p.fg], vars[p.bg]
			if fg == "" || bg == "" {
				t.Errorf("%s theme: %s or %s is not a #rrggbb or #rgb colour", theme, p.fg, p.bg)
				continue
			}
			if r := contrast(fg, bg); r < 4.5 {
				t.Errorf("%s theme: %s (%s) on %s (%s) contrasts %.2f:1, want at least 4.5:1", theme, p.fg, fg, p.bg, bg, r)
			}
		}
	}
}

// contrast answers WCAG's contrast ratio of two #rrggbb colours.
func contrast(a, b string) float64 {
	la, lb := luminance(a), luminance(b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

// luminance answers a #rrggbb colour's relative luminance (WCAG 2).
func luminance(hex string) float64 {
	var l float64
	for i, w := range []float64{0.2126, 0.7152, 0.0722} {
		v, _ := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		c := float64(v) / 255
		if c <= 0.04045 {
			c /= 12.92
		} else {
			c = math.Pow((c+0.055)/1.055, 2.4)
		}
		l += w * c
	}
	return l
}
