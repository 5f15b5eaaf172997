package compat

import (
	"errors"
	"testing"

	"github.com/toolplane/toolplane/semver"
)

// The gate's version refusal matches compat's own sentinel; parsing and
// precedence themselves are package semver's, tested there.
func TestInvalidVersionIsErrInvalidVersion(t *testing.T) {
	t.Parallel()
	prev, next := refundOrder(), refundOrder()
	next.Version = "v2"
	if err := Check(prev, next); !errors.Is(err, ErrInvalidVersion) {
		t.Errorf("Check with version %q = %v, want ErrInvalidVersion", next.Version, err)
	}
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
