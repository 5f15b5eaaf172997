package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/toolplane/toolplane/internal/server"
	"github.com/toolplane/toolplane/resilience"
)

// trafficOptions are the serve flags of the node's traffic protections.
type trafficOptions struct {
	protection                          *string
	tool, agent, target, node, routines *int
	org                                 *[]string
	heapMiB                             *int64
	shedLow, shedNormal                 *float64
}

// trafficFlags declares the flags of the node's circuit breakers,
// bulkheads and load shedding.
func trafficFlags(fs *pflag.FlagSet) *trafficOptions {
	return &trafficOptions{
		protection: fs.String("traffic-protection", "on", "circuit breakers, in-flight caps and load shedding: on, or off (every call is dispatched however its downstream or the node fares; for benchmarks)"),
		tool:       fs.Int("tool-max-in-flight", resilience.DefaultToolMaxInFlight, "calls of one tool running at once on this node, unless its definition's execution.max_in_flight says otherwise; past it calls answer unavailable with a Retry-After (0: no cap)"),
		agent:      fs.Int("agent-max-in-flight", resilience.DefaultAgentMaxInFlight, "calls of one agent (or of one key naming no agent) running at once on this node; past it calls answer rate_limited with a Retry-After (0: no cap)"),
		org: fs.StringArray("org-max-in-flight", nil, fmt.Sprintf("calls of one organization running at once on this node: N for every organization (default %d), or ORG=N for one (repeatable); past it calls answer rate_limited with a Retry-After (0: no cap)",
			resilience.DefaultOrgMaxInFlight)),
		target:     fs.Int("target-max-in-flight", resilience.DefaultTargetMaxInFlight, "one organization's calls to one downstream (an HTTP host, a database or connection provider, an upstream MCP server, a Go handler) running at once on this node; past it calls answer unavailable (0: no cap)"),
		node:       fs.Int("node-max-in-flight", resilience.DefaultNodeMaxInFlight, "calls running at once on this node at which it is saturated: it sheds low-priority calls from --shed-low-at of it, normal ones from --shed-normal-at, critical ones at it (0: not watched)"),
		routines:   fs.Int("node-max-goroutines", resilience.DefaultNodeMaxGoroutines, "goroutines at which this node counts as saturated, sampled every 100ms, shed as --node-max-in-flight (0: not watched)"),
		heapMiB:    fs.Int64("node-max-heap-mib", 0, "heap (MiB) at which this node counts as saturated, sampled every 100ms from runtime/metrics, shed as --node-max-in-flight (0: not watched)"),
		shedLow:    fs.Float64("shed-low-at", resilience.DefaultShedLowAt, "the fraction of saturation from which low-priority calls are shed"),
		shedNormal: fs.Float64("shed-normal-at", resilience.DefaultShedNormalAt, "the fraction of saturation from which normal-priority calls are shed"),
	}
}

// apply sets cfg's protections from the flags. Here 0 turns a cap off; in
// a resilience.Config it takes the default, and a negative value turns it
// off.
func (o *trafficOptions) apply(cfg *server.Config) error {
	switch *o.protection {
	case "on":
	case "off":
		cfg.TrafficOff = true
		return nil
	default:
		return fmt.Errorf("--traffic-protection: %q is neither on nor off", *o.protection)
	}
	off := func(v int) int {
		if v <= 0 {
			return -1
		}
		return v
	}
	t := resilience.Config{ToolMaxInFlight: off(*o.tool), AgentMaxInFlight: off(*o.agent), TargetMaxInFlight: off(*o.target),
		NodeMaxInFlight: off(*o.node), NodeMaxGoroutines: off(*o.routines), NodeMaxHeap: *o.heapMiB << 20,
		ShedLowAt: *o.shedLow, ShedNormalAt: *o.shedNormal}
	for _, v := range *o.org {
		org, n, named := strings.Cut(v, "=")
		if !named {
			n = org
		}
		k, err := strconv.Atoi(n)
		if err != nil || k < 0 || (named && org == "") {
			return fmt.Errorf("--org-max-in-flight: %q is neither N nor ORG=N", v)
		}
		if !named {
			t.OrgMaxInFlight = off(k)
			continue
		}
		if t.OrgOverrides == nil {
			t.OrgOverrides = map[string]int{}
		}
		t.OrgOverrides[org] = k // 0: no cap for this organization
	}
	if !(t.ShedLowAt > 0 && t.ShedLowAt <= t.ShedNormalAt && t.ShedNormalAt <= 1) {
		return fmt.Errorf("--shed-low-at and --shed-normal-at: want 0 < low <= normal <= 1, got %v and %v", t.ShedLowAt, t.ShedNormalAt)
	}
	cfg.Traffic = t
	return nil
}
