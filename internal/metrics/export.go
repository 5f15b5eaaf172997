package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolplane/toolplane"
)

// ExportLag is one audit export sink whose lag a scrape reads
// (*auditexport.Exporter).
type ExportLag interface {
	// Sink names the sink.
	Sink() string
	// Lag answers what waits for the sink, of every organization (org
	// nil).
	Lag(ctx context.Context, org *string) (toolplane.AuditOutboxLag, error)
}

// WatchExports reports the audit exports' lag at each scrape:
// toolplane_audit_export_lag_events{sink}, the events waiting for the
// sink, and toolplane_audit_export_lag_seconds{sink}, how long ago the
// oldest of them happened (0 when none waits). The labels are the sinks
// the operator configured, a handful.
func (m *Metrics) WatchExports(sinks []ExportLag, log *slog.Logger) {
	if len(sinks) == 0 {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	m.reg.MustRegister(&exportCollector{sinks: sinks, log: log,
		events: prometheus.NewDesc("toolplane_audit_export_lag_events",
			"Audit events waiting in the outbox for the sink.", []string{"sink"}, nil),
		seconds: prometheus.NewDesc("toolplane_audit_export_lag_seconds",
			"How long ago the oldest audit event waiting for the sink happened (0 when none waits).", []string{"sink"}, nil)})
}

// exportCollector reads the lag at scrape time: a gauge set by a loop
// would be stale by its period, and cost a query when nobody scrapes.
type exportCollector struct {
	sinks           []ExportLag
	log             *slog.Logger
	events, seconds *prometheus.Desc
}

func (c *exportCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.events
	ch <- c.seconds
}

func (c *exportCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := time.Now()
	for _, s := range c.sinks {
		lag, err := s.Lag(ctx, nil)
		if err != nil {
			// A gauge left out, not a zero: no lag is not what is known.
			c.log.Warn("audit export lag unread", "sink", s.Sink(), "err", err)
			continue
		}
		age := 0.0
		if !lag.Oldest.IsZero() {
			age = max(now.Sub(lag.Oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(c.events, prometheus.GaugeValue, float64(lag.Pending), s.Sink())
		ch <- prometheus.MustNewConstMetric(c.seconds, prometheus.GaugeValue, age, s.Sink())
	}
}
