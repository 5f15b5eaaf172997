package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/toolplane/toolplane/internal/server"
	"github.com/toolplane/toolplane/internal/syncbuf"
)

func TestAnomalyFlags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args      []string
		off       bool
		window    time.Duration
		threshold float64
		invalid   bool
	}{
		{args: nil, window: 5 * time.Minute, threshold: 4},
		{args: []string{"--anomaly=off"}, off: true},
		{args: []string{"--anomaly-window", "15m", "--anomaly-threshold", "6"}, window: 15 * time.Minute, threshold: 6},
		{args: []string{"--anomaly=maybe"}, invalid: true},
	}
	for _, tc := range cases {
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		o := anomalyFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		var cfg server.Config
		err := o.apply(&cfg)
		if tc.invalid {
			if err == nil {
				t.Errorf("%v: accepted", tc.args)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if cfg.AnomalyOff != tc.off || !tc.off && (cfg.AnomalyWindow != tc.window || cfg.AnomalyThreshold != tc.threshold) {
			t.Errorf("%v: off %v, window %v, threshold %v", tc.args, cfg.AnomalyOff, cfg.AnomalyWindow, cfg.AnomalyThreshold)
		}
	}
}

// A window or threshold the triage cannot run with is reported by its
// flag, before the database is opened.
func TestServeNamesABadAnomalySetting(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--anomaly-window", "10s"}, "toolplane serve: --anomaly-window: 10s is shorter than 1m0s\n"},
		{[]string{"--anomaly-threshold", "-2"}, "toolplane serve: --anomaly-threshold: -2 is not a positive number of standard deviations\n"},
	} {
		dir := t.TempDir()
		var out, errOut syncbuf.Buffer
		code := serve(context.Background(), append([]string{"--addr", "127.0.0.1:0", "--database", filepath.Join(dir, "toolplane.db")}, tt.flags...), &out, &errOut)
		if code != 1 || errOut.String() != tt.want {
			t.Errorf("%q: exit %d, stderr %q; want 1, %q", tt.flags, code, errOut.String(), tt.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "toolplane.db")); !os.IsNotExist(err) {
			t.Errorf("%q: the database was opened: %v", tt.flags, err)
		}
	}
}
