package upstream

import (
	"runtime"
	"slices"
	"testing"
)

func TestCommandEnv(t *testing.T) {
	t.Parallel()
	environ := []string{
		"PATH=/usr/bin:/bin", "HOME=/home/op", "LANG=C.UTF-8", "TMPDIR=/tmp/x",
		"TOOLPLANE_SECRET_KEY=k1", "DATABASE_URL=postgres://u:p@db/x", "AWS_SECRET_ACCESS_KEY=k2",
		"TERM=() { :; }", // a function bash exported, not a variable
		"NOEQUALS",
		"SSL_CERT_FILE=/etc/ssl/corp.pem", "HTTPS_PROXY=http://u:p@proxy:3128",
	}
	if runtime.GOOS != "windows" {
		environ = append(environ, "path=/lower") // POSIX names are case-sensitive
	}
	got := commandEnv(environ)
	want := []string{"PATH=/usr/bin:/bin", "HOME=/home/op", "LANG=C.UTF-8", "TMPDIR=/tmp/x", "SSL_CERT_FILE=/etc/ssl/corp.pem"}
	if !slices.Equal(got, want) {
		t.Fatalf("commandEnv = %q, want %q", got, want)
	}
}
