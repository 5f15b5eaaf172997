package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolplane/toolplane"
)

// CountAnomalies adds toolplane_anomalies_filed_total to the metrics and
// answers what counts one item the anomaly triage filed on this node, by
// signal. The signals are the triage's four, so the labels are bounded;
// every one is shown from the start, at 0. The triage runs on one node
// at a time, so the deployment's count is the sum over its nodes.
func (m *Metrics) CountAnomalies() func(toolplane.AnomalySignal) {
	filed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolplane_anomalies_filed_total",
		Help: "Anomaly triage items filed on this node, by signal (call_rate, denial_rate, error_rate, spend); a continuing deviation updates its item and is not counted again.",
	}, []string{"signal"})
	m.reg.MustRegister(filed)
	known := make(map[toolplane.AnomalySignal]prometheus.Counter, len(toolplane.AnomalySignals))
	for _, s := range toolplane.AnomalySignals {
		known[s] = filed.WithLabelValues(string(s))
	}
	return func(s toolplane.AnomalySignal) {
		if c, ok := known[s]; ok {
			c.Inc()
		}
	}
}
