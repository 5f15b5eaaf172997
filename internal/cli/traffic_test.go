package cli

import (
	"reflect"
	"testing"

	"github.com/spf13/pflag"

	"github.com/toolplane/toolplane/internal/server"
	"github.com/toolplane/toolplane/resilience"
)

func TestTrafficFlags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args    []string
		want    resilience.Config
		off     bool
		invalid bool
	}{
		{args: nil, want: resilience.Config{ToolMaxInFlight: 100, AgentMaxInFlight: 20, TargetMaxInFlight: 200, NodeMaxInFlight: 2000,
			NodeMaxGoroutines: 50000, ShedLowAt: 0.8, ShedNormalAt: 0.9}},
		{args: []string{"--traffic-protection=off"}, off: true},
		{args: []string{"--org-max-in-flight", "300", "--org-max-in-flight", "org_a=50", "--org-max-in-flight", "org_b=0", "--agent-max-in-flight", "0", "--node-max-heap-mib", "512"},
			want: resilience.Config{ToolMaxInFlight: 100, AgentMaxInFlight: -1, OrgMaxInFlight: 300, OrgOverrides: map[string]int{"org_a": 50, "org_b": 0},
				TargetMaxInFlight: 200, NodeMaxInFlight: 2000, NodeMaxGoroutines: 50000, NodeMaxHeap: 512 << 20, ShedLowAt: 0.8, ShedNormalAt: 0.9}},
		{args: []string{"--traffic-protection=maybe"}, invalid: true},
		{args: []string{"--org-max-in-flight", "=5"}, invalid: true},
		{args: []string{"--org-max-in-flight", "org_a=many"}, invalid: true},
		{args: []string{"--shed-low-at", "0.95"}, invalid: true},
	}
	for _, tc := range cases {
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		o := trafficFlags(fs)
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
		if cfg.TrafficOff != tc.off || !tc.off && !reflect.DeepEqual(cfg.Traffic, tc.want) {
			t.Errorf("%v: off %v, %+v; want off %v, %+v", tc.args, cfg.TrafficOff, cfg.Traffic, tc.off, tc.want)
		}
	}
}
