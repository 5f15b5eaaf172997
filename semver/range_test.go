package semver_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/semver"
)

func TestParseRangeValid(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"", "*"},
		{"*", "*"},
		{"2.1.0", "2.1.0"},
		{"=2.1.0", "2.1.0"},
		{"^2.1.0", "^2.1.0"},
		{"~2.1.0", "~2.1.0"},
		{"^0.2.3", "^0.2.3"},
		{"^0.0.0", "^0.0.0"},
		{"^2.2.0-rc.1", "^2.2.0-rc.1"},
		{"~1.0.0-alpha.1", "~1.0.0-alpha.1"},
		{"=1.0.0-rc.1", "1.0.0-rc.1"},
		{"^18446744073709551615.0.0", "^18446744073709551615.0.0"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			r, err := semver.ParseRange(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
			back, err := semver.ParseRange(r.String())
			if err != nil || !reflect.DeepEqual(back, r) {
				t.Errorf("ParseRange(%q) = %v, %v; want the range back", r.String(), back, err)
			}
		})
	}
}

func TestParseRangeInvalid(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in        string
		isVersion bool // the version inside is what is wrong
		detail    string
	}{
		{"v2.1.0", true, "leading 'v'"},
		{"^v2.1.0", true, "leading 'v'"},
		{"^2", true, "MAJOR.MINOR.PATCH"},
		{"~2.1", true, "MAJOR.MINOR.PATCH"},
		{"2.x", true, "MAJOR.MINOR.PATCH"},
		{"2.1.*", true, "not a number"},
		{"^02.1.0", true, "leading zero"},
		{"^2.1.0-", true, "empty identifier"},
		{"=", true, "empty"},
		{"^", true, "empty"},
		{"~", true, "empty"},
		{"^^2.1.0", true, ""},
		{"~>2.1.0", true, ""},
		{"**", true, ""},
		{"latest", true, ""},
		{">=2.1.0", false, "comparison operators"},
		{"<3.0.0", false, "comparison operators"},
		{"!=1.0.0", false, "comparison operators"},
		{">=2.1.0 <3.0.0", false, "comparison operators"},
		{"^2.1.0 || ^3.0.0", false, "one version"},
		{"2.1.0,3.0.0", false, "one version"},
		{"^ 2.1.0", false, "no spaces"},
		{"^2.1.0\n", false, "no spaces"},
		{" ^2.1.0", false, "no spaces"},
		{"2.1.0+build.5", false, `drop "+build.5"`},
		{"^2.1.0+b", false, `drop "+b"`},
		{"=2.1.0-rc.1+b", false, "build metadata"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			r, err := semver.ParseRange(tc.in)
			if !errors.Is(err, semver.ErrInvalidRange) {
				t.Fatalf("ParseRange = %v, %v; want ErrInvalidRange", r, err)
			}
			if got := errors.Is(err, semver.ErrInvalid); got != tc.isVersion {
				t.Errorf("errors.Is(%v, ErrInvalid) = %v, want %v", err, got, tc.isVersion)
			}
			if msg := err.Error(); !strings.Contains(msg, strconv.Quote(tc.in)) || !strings.Contains(msg, tc.detail) {
				t.Errorf("error %q should quote the input and say %q", msg, tc.detail)
			}
			if !reflect.DeepEqual(r, semver.Range{}) {
				t.Errorf("a refused range answers %v, want the zero Range", r)
			}
		})
	}
}

func TestContains(t *testing.T) {
	t.Parallel()
	cases := []struct {
		rng  string
		in   []string
		out  []string
		name string
	}{
		{name: "caret", rng: "^2.1.0",
			in:  []string{"2.1.0", "2.1.1", "2.9.9", "2.1.0+build", "2.18446744073709551615.0"},
			out: []string{"2.0.9", "1.9.9", "3.0.0", "0.0.0"}},
		{name: "caret 0.x: MINOR breaks", rng: "^0.2.3",
			in:  []string{"0.2.3", "0.2.4", "0.2.99"},
			out: []string{"0.2.2", "0.3.0", "1.0.0", "0.0.3"}},
		{name: "caret 0.0.x: PATCH breaks", rng: "^0.0.3",
			in:  []string{"0.0.3", "0.0.3+b"},
			out: []string{"0.0.2", "0.0.4", "0.1.0", "1.0.3"}},
		{name: "caret 0.0.0", rng: "^0.0.0",
			in:  []string{"0.0.0"},
			out: []string{"0.0.1", "0.1.0"}},
		{name: "caret at the largest major", rng: "^18446744073709551615.0.0",
			in:  []string{"18446744073709551615.0.0", "18446744073709551615.18446744073709551615.0"},
			out: []string{"18446744073709551614.9.9"}},
		{name: "tilde", rng: "~2.1.0",
			in:  []string{"2.1.0", "2.1.9"},
			out: []string{"2.0.9", "2.2.0", "3.1.0"}},
		{name: "tilde 0.x", rng: "~0.2.3",
			in:  []string{"0.2.3", "0.2.4"},
			out: []string{"0.2.2", "0.3.0"}},
		{name: "tilde 0.0.x allows patches", rng: "~0.0.3",
			in:  []string{"0.0.3", "0.0.9"},
			out: []string{"0.0.2", "0.1.0"}},
		{name: "tilde at the largest minor", rng: "~1.18446744073709551615.0",
			in:  []string{"1.18446744073709551615.0", "1.18446744073709551615.7"},
			out: []string{"2.0.0", "1.18446744073709551614.0"}},
		{name: "exact", rng: "2.1.0",
			in:  []string{"2.1.0", "2.1.0+a"},
			out: []string{"2.1.1", "2.0.0", "2.1.0-rc.1"}},
		{name: "exact with =", rng: "=2.1.0",
			in:  []string{"2.1.0"},
			out: []string{"2.1.1"}},
		{name: "any", rng: "*",
			in:  []string{"0.0.0", "2.1.0", "18446744073709551615.0.0"},
			out: []string{"1.0.0-rc.1", "0.0.0-0"}},
		{name: "empty is any", rng: "",
			in:  []string{"1.0.0"},
			out: []string{"1.0.0-rc.1"}},
		// The prerelease rule.
		{name: "release range holds no prerelease", rng: "^2.1.0",
			out: []string{"2.1.0-rc.1", "2.2.0-rc.1", "2.1.1-0", "3.0.0-rc.1", "3.0.0-0"}},
		{name: "prerelease range holds its own triple's prereleases", rng: "^2.2.0-rc.1",
			in:  []string{"2.2.0-rc.1", "2.2.0-rc.2", "2.2.0-rc.1.1", "2.2.0-rc.1+b", "2.2.0", "2.5.0"},
			out: []string{"2.2.0-beta", "2.2.0-rc.0", "2.2.1-rc.1", "2.3.0-rc.1", "3.0.0-rc.1", "3.0.0", "2.1.9"}},
		{name: "tilde prerelease", rng: "~2.2.0-rc.1",
			in:  []string{"2.2.0-rc.2", "2.2.0", "2.2.5"},
			out: []string{"2.2.5-rc.1", "2.3.0"}},
		{name: "caret 0.0.x prerelease", rng: "^0.0.3-beta",
			in:  []string{"0.0.3-beta", "0.0.3-beta.2", "0.0.3"},
			out: []string{"0.0.3-alpha", "0.0.4-0", "0.0.4"}},
		{name: "exact prerelease", rng: "1.0.0-rc.1",
			in:  []string{"1.0.0-rc.1", "1.0.0-rc.1+b"},
			out: []string{"1.0.0-rc.2", "1.0.0", "1.0.0-rc"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := semver.ParseRange(tc.rng)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.in {
				if !r.Contains(parse(t, s)) {
					t.Errorf("%q does not contain %s", tc.rng, s)
				}
			}
			for _, s := range tc.out {
				if r.Contains(parse(t, s)) {
					t.Errorf("%q contains %s", tc.rng, s)
				}
			}
		})
	}
}

func TestZeroRange(t *testing.T) {
	t.Parallel()
	var r semver.Range
	if r.String() != "*" || !r.Contains(parse(t, "7.0.0")) || r.Contains(parse(t, "7.0.0-rc.1")) {
		t.Errorf("the zero Range must be *, containing every release and no prerelease")
	}
}

func TestSplitRef(t *testing.T) {
	t.Parallel()
	cases := []struct{ ref, name, rng string }{
		{"payments.refund_order@^2.1.0", "payments.refund_order", "^2.1.0"},
		{"payments.refund_order", "payments.refund_order", ""},
		{"payments.*@~1.0.0", "payments.*", "~1.0.0"},
		{"payments.refund_order@2.1.0-rc.1", "payments.refund_order", "2.1.0-rc.1"},
		{"payments.refund_order@", "payments.refund_order", ""},
		{"@^1.0.0", "", "^1.0.0"},
		{"a@b@^1.0.0", "a", "b@^1.0.0"},
		{"", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.ref, func(t *testing.T) {
			t.Parallel()
			name, rng := semver.SplitRef(tc.ref)
			if name != tc.name || rng != tc.rng {
				t.Errorf("SplitRef(%q) = %q, %q; want %q, %q", tc.ref, name, rng, tc.name, tc.rng)
			}
		})
	}
}

// FuzzParseRange checks that ParseRange never panics, that a range it
// accepts reads back from its String, and that a range other than "*"
// contains the version it names.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"", "*", "2.1.0", "=2.1.0", "^2.1.0", "~2.1.0", "^0.0.3", "^2.2.0-rc.1",
		">=1.0.0", "^2.1", "2.1.0+b", "^^1.0.0", "~18446744073709551615.18446744073709551615.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := semver.ParseRange(s)
		if err != nil {
			if !errors.Is(err, semver.ErrInvalidRange) {
				t.Fatalf("ParseRange(%q) = %v, want ErrInvalidRange", s, err)
			}
			return
		}
		out := r.String()
		back, err := semver.ParseRange(out)
		if err != nil || !reflect.DeepEqual(back, r) || back.String() != out {
			t.Fatalf("ParseRange(%q) = %v, %v; want %q back", out, back, err, out)
		}
		if out == "*" {
			return
		}
		v, err := semver.Parse(strings.TrimLeft(out, "^~"))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Contains(v) {
			t.Fatalf("%q does not contain %s, the version it names", out, v)
		}
	})
}
