package compat

import (
	"errors"
	"testing"

	"github.com/toolplane/toolplane/semver"
)

// TestParseVersion pins the versions the gate accepts and refuses, and
// that a refusal matches compat's own sentinel.
func TestParseVersion(t *testing.T) {
	t.Parallel()
	valid := []string{"0.0.0", "1.2.3", "10.20.30", "1.2.3-rc.1", "1.2.3-0.3.7", "1.2.3-x.7.z.92", "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85", "1.0.0-x-y-z.--", "1.0.0-0A"}
	for _, s := range valid {
		if _, err := semver.Parse(s); err != nil {
			t.Errorf("semver.Parse(%q): %v", s, err)
		}
	}
	invalid := []string{"", "1", "1.2", "v1.2.3", "01.2.3", "1.02.3", "1.2.03", "1.2.3-", "1.2.3-01", "1.2.3-a..b", "1.2.3+", "1.2.3+a_b", "1.2.3.4", "99999999999999999999.0.0", "-1.0.0", "1.2.3-α", " 1.2.3", "1.2.x"}
	for _, s := range invalid {
		if _, err := semver.Parse(s); !errors.Is(err, ErrInvalidVersion) {
			t.Errorf("semver.Parse(%q) = %v, want ErrInvalidVersion", s, err)
		}
	}
}

func TestVersionOrder(t *testing.T) {
	t.Parallel()
	// semver.org's precedence example, then some more.
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0-0", "1.1.0", "2.0.0", "10.0.0"}
	for i := range order {
		for j := range order {
			a, _ := semver.Parse(order[i])
			b, _ := semver.Parse(order[j])
			if got, want := semver.Compare(a, b), sign(i-j); got != want {
				t.Errorf("compare(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
	a, _ := semver.Parse("1.0.0+a")
	b, _ := semver.Parse("1.0.0+b")
	if semver.Compare(a, b) != 0 {
		t.Error("build metadata must not order versions")
	}
	huge1, _ := semver.Parse("1.0.0-99999999999999999999")
	huge2, _ := semver.Parse("1.0.0-100000000000000000000")
	if semver.Compare(huge1, huge2) != -1 {
		t.Error("numeric identifiers beyond uint64 must still order by value")
	}
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

func TestDeclaredBump(t *testing.T) {
	t.Parallel()
	cases := []struct {
		from, to string
		want     Bump
		next     string
	}{
		{"2.1.0", "2.1.1", Patch, "2.1.1"},
		{"2.1.0", "2.1.7", Patch, "2.1.1"},
		{"2.1.0", "2.2.0", Minor, "2.2.0"},
		{"2.1.5", "2.2.0", Minor, "2.2.0"},
		{"2.1.0", "3.0.0", Major, "3.0.0"},
		{"2.1.0", "2.2.0-rc.1", Minor, "2.2.0"},
		// Between prereleases of one version, that version's shape decides.
		{"3.0.0-rc.1", "3.0.0-rc.2", Major, "3.0.0"},
		{"3.0.0-rc.1", "3.0.0", Major, "3.0.0"},
		{"2.2.0-rc.1", "2.2.0-rc.2", Minor, "2.2.0"},
		{"2.2.0-rc.1", "2.2.0", Minor, "2.2.0"},
		{"2.1.1-rc.1", "2.1.1", Patch, "2.1.1"},
		{"2.1.0-rc.1", "2.1.1", Patch, "2.1.0"},
	}
	for _, tc := range cases {
		from, err1 := semver.Parse(tc.from)
		to, err2 := semver.Parse(tc.to)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if got := declared(from, to); got != tc.want {
			t.Errorf("declared(%s, %s) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
		if got := suggest(from, tc.want); got != tc.next {
			t.Errorf("suggest(%s, %v) = %s, want %s", tc.from, tc.want, got, tc.next)
		}
	}
}

func TestBumpText(t *testing.T) {
	t.Parallel()
	for _, b := range []Bump{Patch, Minor, Major} {
		text, err := b.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Bump
		if err := back.UnmarshalText(text); err != nil || back != b {
			t.Errorf("%v round-trips to %v, %v", b, back, err)
		}
	}
	if Patch >= Minor || Minor >= Major {
		t.Error("bumps must be ordered PATCH < MINOR < MAJOR")
	}
	if _, err := Bump(7).MarshalText(); err == nil {
		t.Error("an out-of-range bump must not marshal")
	}
	var b Bump
	if err := b.UnmarshalText([]byte("huge")); err == nil {
		t.Error("an unknown bump must not unmarshal")
	}
	if got := Bump(7).String(); got != "Bump(7)" {
		t.Errorf("String of an unknown bump = %q", got)
	}
}
