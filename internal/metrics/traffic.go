package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolplane/toolplane/resilience"
)

// WatchTraffic adds the node's traffic protections to the metrics, read at
// each scrape: every breaker's state and trips, what each bulkhead holds
// against its cap, and the calls refused by reason.
func (m *Metrics) WatchTraffic(t *resilience.Traffic) {
	if t == nil {
		return
	}
	m.reg.MustRegister(&trafficCollector{t: t,
		state: prometheus.NewDesc("toolplane_breaker_state",
			"A circuit breaker's state on this node, by organization, tool and downstream target: 0 closed, 1 open, 2 half-open.", []string{"organization", "tool", "target"}, nil),
		trips: prometheus.NewDesc("toolplane_breaker_trips_total",
			"How often a circuit breaker opened on this node.", []string{"organization", "tool", "target"}, nil),
		failures: prometheus.NewDesc("toolplane_breaker_window_failures",
			"A circuit breaker's failed endings in its trailing window.", []string{"organization", "tool", "target"}, nil),
		inFlight: prometheus.NewDesc("toolplane_in_flight",
			"Calls in flight on this node: the node's total (scope node), and by tool (organization/tool), downstream target (organization/target) and organization; a handler still running past its timeout counts until it ends.", []string{"scope", "name"}, nil),
		caps: prometheus.NewDesc("toolplane_in_flight_cap",
			"The bulkhead cap the calls in flight of a tool, downstream target or organization were admitted under (same scope and name as toolplane_in_flight; a key with no cap has no series).", []string{"scope", "name"}, nil),
		saturation: prometheus.NewDesc("toolplane_bulkhead_saturation",
			"Calls in flight over their bulkhead's cap (1 is full: the next call is refused), by scope (node, tool, target, organization) and name.", []string{"scope", "name"}, nil),
		nodeMax: prometheus.NewDesc("toolplane_in_flight_node_max",
			"The node's hard cap on calls in flight.", nil, nil),
		pressure: prometheus.NewDesc("toolplane_node_pressure",
			"The node's last sampled saturation of goroutines and heap (1 is saturated).", nil, nil),
		refused: prometheus.NewDesc("toolplane_traffic_refused_total",
			"Calls refused before they ran, by reason (breaker_open, tool_in_flight, agent_in_flight, organization_in_flight, target_in_flight, shed).", []string{"reason"}, nil),
	})
}

type trafficCollector struct {
	t                                                                              *resilience.Traffic
	state, trips, failures, inFlight, caps, saturation, nodeMax, pressure, refused *prometheus.Desc
}

func (c *trafficCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.trips, c.failures, c.inFlight, c.caps, c.saturation, c.nodeMax, c.pressure, c.refused} {
		ch <- d
	}
}

func (c *trafficCollector) Collect(ch chan<- prometheus.Metric) {
	for _, b := range c.t.Breakers("", "") {
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, float64(b.State), b.Organization, b.Tool, b.Target)
		ch <- prometheus.MustNewConstMetric(c.trips, prometheus.CounterValue, float64(b.Trips), b.Organization, b.Tool, b.Target)
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.GaugeValue, float64(b.Failures), b.Organization, b.Tool, b.Target)
	}
	o := c.t.Occupancy()
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(o.InFlight), "node", "")
	if o.NodeMax > 0 {
		ch <- prometheus.MustNewConstMetric(c.saturation, prometheus.GaugeValue, float64(o.InFlight)/float64(o.NodeMax), "node", "")
	}
	for _, s := range []struct {
		scope        string
		counts, caps map[string]int
	}{{"tool", o.Tools, o.ToolCaps}, {"target", o.Targets, o.TargetCaps}, {"organization", o.Organizations, o.OrganizationCaps}} {
		for name, n := range s.counts {
			ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(n), s.scope, name)
			if limit := s.caps[name]; limit > 0 {
				ch <- prometheus.MustNewConstMetric(c.caps, prometheus.GaugeValue, float64(limit), s.scope, name)
				ch <- prometheus.MustNewConstMetric(c.saturation, prometheus.GaugeValue, float64(n)/float64(limit), s.scope, name)
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(c.nodeMax, prometheus.GaugeValue, float64(o.NodeMax))
	ch <- prometheus.MustNewConstMetric(c.pressure, prometheus.GaugeValue, o.Pressure)
	for reason, n := range o.Refused {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(n), reason)
	}
}
