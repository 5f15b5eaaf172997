package cli

import (
	"runtime/debug"
	"testing"
)

func TestResolveVersion(t *testing.T) {
	t.Parallel()
	built := func(v string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{Main: debug.Module{Version: v}}, true }
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	tests := []struct {
		name, stamped string
		info          func() (*debug.BuildInfo, bool)
		want          string
	}{
		{"stamped wins", "v1.2.3", built("v1.0.0"), "v1.2.3"},
		{"go install of a tag", "", built("v1.4.0"), "v1.4.0"},
		{"checkout", "", built("v0.0.0-20261201142959-f5edd739abcd+dirty"), "v0.0.0-20261201142959-f5edd739abcd+dirty"},
		{"no version recorded", "", built("(devel)"), "devel"},
		{"no build info", "", none, "devel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := resolveVersion(tt.stamped, tt.info); got != tt.want {
				t.Errorf("resolveVersion = %q, want %q", got, tt.want)
			}
		})
	}
}
