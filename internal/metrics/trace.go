package metrics

import "github.com/prometheus/client_golang/prometheus"

// SpanDrops reports the spans a node's trace exporter dropped: at its
// full queue (a collector slower than the calls, or not answering), and
// in batches the collector did not take.
type SpanDrops interface {
	Dropped() (queueFull, exportFailed uint64)
}

// WatchSpans adds the spans d dropped to the metrics, read at each scrape
// as toolplane_trace_spans_dropped_total by reason (queue_full,
// export_failed): a collector that is down costs spans, never calls'
// time, and this says how many.
func (m *Metrics) WatchSpans(d SpanDrops) {
	if d == nil {
		return
	}
	m.reg.MustRegister(&spanCollector{d: d, desc: prometheus.NewDesc("toolplane_trace_spans_dropped_total",
		"Spans this node did not export, by reason: queue_full (the export queue was full; the call went on without waiting) or export_failed (the collector did not take the batch in time).",
		[]string{"reason"}, nil)})
}

type spanCollector struct {
	d    SpanDrops
	desc *prometheus.Desc
}

func (c *spanCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *spanCollector) Collect(ch chan<- prometheus.Metric) {
	full, failed := c.d.Dropped()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(full), "queue_full")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(failed), "export_failed")
}
