package semver_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/semver"
)

func parse(t testing.TB, s string) semver.Version {
	t.Helper()
	v, err := semver.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestParseValid(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in                  string
		major, minor, patch uint64
		pre, build          []string
	}{
		{in: "0.0.0"},
		{in: "1.2.3", major: 1, minor: 2, patch: 3},
		{in: "10.20.30", major: 10, minor: 20, patch: 30},
		{in: "18446744073709551615.18446744073709551615.18446744073709551615", major: 1<<64 - 1, minor: 1<<64 - 1, patch: 1<<64 - 1},
		// semver.org's own examples.
		{in: "1.0.0-alpha", major: 1, pre: []string{"alpha"}},
		{in: "1.0.0-alpha.1", major: 1, pre: []string{"alpha", "1"}},
		{in: "1.0.0-0.3.7", major: 1, pre: []string{"0", "3", "7"}},
		{in: "1.0.0-x.7.z.92", major: 1, pre: []string{"x", "7", "z", "92"}},
		{in: "1.0.0-x-y-z.--", major: 1, pre: []string{"x-y-z", "--"}},
		{in: "1.0.0-alpha+001", major: 1, pre: []string{"alpha"}, build: []string{"001"}},
		{in: "1.0.0+20130313144700", major: 1, build: []string{"20130313144700"}},
		{in: "1.0.0-beta+exp.sha.5114f85", major: 1, pre: []string{"beta"}, build: []string{"exp", "sha", "5114f85"}},
		{in: "1.0.0+21AF26D3----117B344092BD", major: 1, build: []string{"21AF26D3----117B344092BD"}},
		// A leading zero is only refused in a numeric prerelease identifier.
		{in: "1.0.0-0A", major: 1, pre: []string{"0A"}},
		{in: "1.0.0-0", major: 1, pre: []string{"0"}},
		{in: "1.0.0+0.00", major: 1, build: []string{"0", "00"}},
		// Prerelease numbers are not bounded by uint64.
		{in: "1.0.0-99999999999999999999", major: 1, pre: []string{"99999999999999999999"}},
		{in: "2.2.0-rc-1.x--y", major: 2, minor: 2, pre: []string{"rc-1", "x--y"}},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			v, err := semver.Parse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if v.Major() != tc.major || v.Minor() != tc.minor || v.Patch() != tc.patch {
				t.Errorf("numbers = %d.%d.%d, want %d.%d.%d", v.Major(), v.Minor(), v.Patch(), tc.major, tc.minor, tc.patch)
			}
			if !slices.Equal(v.Prerelease(), tc.pre) || (tc.pre == nil) != (v.Prerelease() == nil) {
				t.Errorf("Prerelease() = %q, want %q", v.Prerelease(), tc.pre)
			}
			if !slices.Equal(v.Build(), tc.build) || (tc.build == nil) != (v.Build() == nil) {
				t.Errorf("Build() = %q, want %q", v.Build(), tc.build)
			}
			if got := v.String(); got != tc.in {
				t.Errorf("String() = %q, want the input back", got)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in     string
		detail string // in the error when set
	}{
		{"", "empty"},
		{"1", "MAJOR.MINOR.PATCH"},
		{"1.2", "MAJOR.MINOR.PATCH"},
		{"1.2.3.4", "MAJOR.MINOR.PATCH"},
		{"v1.2.3", "leading 'v'"},
		{"V1.2.3", "leading 'V'"},
		{"01.2.3", `major "01" has a leading zero`},
		{"1.02.3", `minor "02" has a leading zero`},
		{"1.2.03", `patch "03" has a leading zero`},
		{"00.0.0", "leading zero"},
		{"18446744073709551616.0.0", "too large"},
		{"1.18446744073709551616.0", "too large"},
		{"1.2.x", `"x" is not a number`},
		{"1..3", `"" is not a number`},
		{".1.2", "not a number"},
		{"1.2.", "not a number"},
		{"-1.0.0", "MAJOR.MINOR.PATCH is missing"},
		{"+1.0.0", "MAJOR.MINOR.PATCH is missing"},
		{"1.2.3-", "prerelease: has an empty identifier"},
		{"1.2.3-a..b", "empty identifier"},
		{"1.2.3-.a", "empty identifier"},
		{"1.2.3-a.", "empty identifier"},
		{"1.2.3-01", `prerelease: "01" has a leading zero`},
		{"1.2.3-rc.00", "leading zero"},
		{"1.2.3+", "build metadata: has an empty identifier"},
		{"1.2.3+a..b", "empty identifier"},
		{"1.2.3+a_b", `"a_b" has a character other than`},
		{"1.2.3++a", "build metadata"},
		{"1.2.3+a+b", "build metadata"},
		{"1.2.3-rc+", "build metadata"},
		{"1.2.3-α", "prerelease"},
		{"1.2.3-rc.1/x", "prerelease"},
		{" 1.2.3", ""},
		{"1.2.3 ", ""},
		{"1.2.3\n", ""},
		{"1.2.3\x00", ""},
		{"1.2.+3", ""},
		{"１.2.3", "not a number"},
		{"=1.2.3", ""},
		{"^1.2.3", ""},
		{"1.2.3-rc.1 ", ""},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			v, err := semver.Parse(tc.in)
			if !errors.Is(err, semver.ErrInvalid) {
				t.Fatalf("Parse = %v, %v; want ErrInvalid", v, err)
			}
			if msg := err.Error(); !strings.Contains(msg, strconv.Quote(tc.in)) || !strings.Contains(msg, tc.detail) {
				t.Errorf("error %q should quote the input and say %q", msg, tc.detail)
			}
			if semver.Compare(v, semver.Version{}) != 0 || v.String() != "0.0.0" {
				t.Errorf("a refused version answers %v, want the zero Version", v)
			}
		})
	}
}

// precedence is a chain of versions, each before the next: semver.org's
// example first, then the edge cases of each rule.
var precedence = []string{
	"0.0.0-0",
	"0.0.0",
	"0.0.1",
	"0.1.0",
	"0.10.0",
	// Numeric identifiers by value, whatever their length or width.
	"1.0.0-0",
	"1.0.0-1",
	"1.0.0-2",
	"1.0.0-10",
	"1.0.0-99999999999999999999",
	"1.0.0-100000000000000000000",
	// Numeric below alphanumeric; alphanumeric by ASCII.
	"1.0.0--",
	"1.0.0-0A",
	"1.0.0-A",
	"1.0.0-Z",
	"1.0.0-a",
	// semver.org: 1.0.0-alpha < 1.0.0-alpha.1 < 1.0.0-alpha.beta <
	// 1.0.0-beta < 1.0.0-beta.2 < 1.0.0-beta.11 < 1.0.0-rc.1 < 1.0.0.
	"1.0.0-alpha",
	"1.0.0-alpha.1",
	"1.0.0-alpha.beta",
	"1.0.0-beta",
	"1.0.0-beta.2",
	"1.0.0-beta.11",
	"1.0.0-rc.1",
	"1.0.0",
	"1.0.1",
	"1.1.0-0",
	"1.1.0",
	"1.2.0",
	"1.10.0",
	"2.0.0",
	"10.0.0",
	"18446744073709551615.0.0",
}

// TestComparePrecedence checks every pair of the chain, both ways round.
func TestComparePrecedence(t *testing.T) {
	t.Parallel()
	vs := make([]semver.Version, len(precedence))
	for i, s := range precedence {
		vs[i] = parse(t, s)
	}
	for i := range vs {
		for j := range vs {
			if got, want := semver.Compare(vs[i], vs[j]), sign(i-j); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", vs[i], vs[j], got, want)
			}
		}
	}
	shuffled := slices.Clone(vs)
	slices.Reverse(shuffled)
	slices.SortFunc(shuffled, semver.Compare)
	for i := range vs {
		if shuffled[i].String() != vs[i].String() {
			t.Fatalf("sorting by Compare put %s at %d, want %s", shuffled[i], i, vs[i])
		}
	}
}

func TestCompare(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		a, b string
		want int
	}{
		{"major first", "2.0.0", "1.9.9", 1},
		{"minor numerically", "1.10.0", "1.9.0", 1},
		{"patch numerically", "1.0.9", "1.0.10", -1},
		{"prerelease below its release", "1.0.0-rc.1", "1.0.0", -1},
		{"prerelease above the release before", "1.0.1-0", "1.0.0", 1},
		{"numeric identifier below alphanumeric", "1.0.0-1", "1.0.0-a", -1},
		{"numeric identifiers by value", "1.0.0-rc.9", "1.0.0-rc.10", -1},
		{"huge numeric identifiers by value", "1.0.0-99999999999999999999", "1.0.0-100000000000000000000", -1},
		{"alphanumeric identifiers lexically", "1.0.0-rc10", "1.0.0-rc9", -1},
		{"uppercase before lowercase", "1.0.0-RC", "1.0.0-rc", -1},
		{"longer set above its prefix", "1.0.0-alpha.1", "1.0.0-alpha", 1},
		{"digits only is numeric, a hyphen is not", "1.0.0-1", "1.0.0-1-", -1},
		{"build metadata ignored", "1.0.0+a", "1.0.0+b", 0},
		{"build metadata against none", "1.0.0+a", "1.0.0", 0},
		{"build metadata on prereleases", "1.0.0-rc.1+x", "1.0.0-rc.1+y.z", 0},
		{"build metadata cannot lift a prerelease", "1.0.0-rc.1+zzz", "1.0.0-rc.2", -1},
		{"equal", "2.1.0", "2.1.0", 0},
		{"zero", "0.0.0", "0.0.0", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := parse(t, tc.a), parse(t, tc.b)
			if got := semver.Compare(a, b); got != tc.want {
				t.Errorf("Compare(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
			if got := semver.Compare(b, a); got != -tc.want {
				t.Errorf("Compare(%s, %s) = %d, want %d", tc.b, tc.a, got, -tc.want)
			}
		})
	}
}

func TestZeroVersion(t *testing.T) {
	t.Parallel()
	var z semver.Version
	if z.String() != "0.0.0" || z.Prerelease() != nil || z.Build() != nil {
		t.Errorf("zero Version = %q, %q, %q; want 0.0.0 with no identifiers", z, z.Prerelease(), z.Build())
	}
	if semver.Compare(z, parse(t, "0.0.0")) != 0 {
		t.Error("the zero Version must be 0.0.0")
	}
}

// TestIdentifiersAreCopies checks that a Version cannot be changed through
// what its accessors answer, since Versions are shared by value.
func TestIdentifiersAreCopies(t *testing.T) {
	t.Parallel()
	v := parse(t, "1.0.0-rc.1+b.2")
	v.Prerelease()[0] = "zz"
	v.Build()[0] = "zz"
	if got := v.String(); got != "1.0.0-rc.1+b.2" {
		t.Errorf("after changing the answered slices, String() = %q", got)
	}
}

// FuzzParse checks that Parse never panics, refuses only with ErrInvalid,
// and that a version it accepts has one spelling: String answers the input
// back, which parses to an equal version. It also checks that Compare is
// antisymmetric against a few fixed versions.
func FuzzParse(f *testing.F) {
	seeds := slices.Clone(precedence)
	seeds = append(seeds, "", "1", "v1.2.3", "01.2.3", "1.2.3-01", "1.2.3-a..b", "1.2.3+", "1.2.3+a_b",
		"1.0.0+21AF26D3----117B344092BD", "1.0.0-x-y-z.--", "1.0.0-alpha+001", "18446744073709551616.0.0",
		"1.2.3-α", "1.2.3+a+b", "1.2.3--+-")
	for _, s := range seeds {
		f.Add(s)
	}
	refs := []semver.Version{{}, parse(f, "1.0.0-rc.1"), parse(f, "1.0.0"), parse(f, "1.0.0-99999999999999999999.a")}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := semver.Parse(s)
		if err != nil {
			if !errors.Is(err, semver.ErrInvalid) {
				t.Fatalf("Parse(%q) = %v, want ErrInvalid", s, err)
			}
			return
		}
		out := v.String()
		if out != s {
			t.Fatalf("Parse(%q).String() = %q, want the input back", s, out)
		}
		w, err := semver.Parse(out)
		if err != nil {
			t.Fatalf("Parse(%q) = %v, but it is the String of a parsed version", out, err)
		}
		if semver.Compare(v, w) != 0 || !slices.Equal(v.Build(), w.Build()) || w.String() != out {
			t.Fatalf("%q parses back to %q, not an equal version", out, w)
		}
		for _, r := range refs {
			if a, b := semver.Compare(v, r), semver.Compare(r, v); a != -b {
				t.Fatalf("Compare(%s, %s) = %d but Compare(%s, %s) = %d", v, r, a, r, v, b)
			}
		}
	})
}
