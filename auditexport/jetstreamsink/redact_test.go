package jetstreamsink

import (
	"strings"
	"testing"
)

// A NATS URL's password never reaches an error (which serve logs),
// whether the URL parses or not.
func TestURLPasswordNeverInAnError(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"nats://exporter:s3cr3t-pass@127.0.0.1:42x22", // does not parse
		"nats://exporter:s3cr3t-pass@[::1",            // does not parse
	} {
		_, err := New(Config{URL: url, Stream: "AUDIT"})
		if err == nil {
			t.Fatalf("New(%q) = nil error", url)
		}
		if strings.Contains(err.Error(), "s3cr3t-pass") {
			t.Errorf("New(%q) = %v: the password is in the error", url, err)
		}
	}
	if got := redacted("nats://exporter:s3cr3t-pass@127.0.0.1:4222"); strings.Contains(got, "s3cr3t-pass") || !strings.Contains(got, "127.0.0.1:4222") {
		t.Errorf("redacted = %q", got)
	}
}
