package upstream

import (
	"slices"
	"testing"
)

func TestCommandEnv(t *testing.T) {
	t.Parallel()
	environ := []string{
		"PATH=/usr/bin:/bin", "HOME=/home/op", "LANG=C.UTF-8", "TMPDIR=/tmp/x",
		"TOOLPLANE_SECRET_KEY=k1", "DATABASE_URL=postgres://u:p@db/x", "AWS_SECRET_ACCESS_KEY=k2",
		"TERM=() { :; }", // a function bash exported, not a variable
		"path=/lower",    // POSIX names are case-sensitive
		"NOEQUALS",
	}
	got := commandEnv(environ)
	want := []string{"PATH=/usr/bin:/bin", "HOME=/home/op", "LANG=C.UTF-8", "TMPDIR=/tmp/x"}
	if !slices.Equal(got, want) {
		t.Fatalf("commandEnv = %q, want %q", got, want)
	}
}
