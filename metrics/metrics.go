// Package metrics exposes toolplane's Prometheus metrics: calls by tool and
// outcome, call latency, and approvals waiting for a person. The invoker
// reports each call through an invoke.Observer; nothing else in the call
// path knows Prometheus exists.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolplane/toolplane"
)

// Metrics is one registry of toolplane's metrics.
type Metrics struct {
	reg     *prometheus.Registry
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

// PendingCounter answers how many approvals wait for a person.
type PendingCounter func(ctx context.Context) (int, error)

// New answers the metrics, with approvals pending read from pending at
// each scrape (nil leaves that gauge out).
func New(pending PendingCounter, log *slog.Logger) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolplane_tool_calls_total",
			Help: "Tool calls by tool and outcome (ok, a stable error code, approval_required, in_flight or fault).",
		}, []string{"tool", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolplane_tool_call_seconds",
			Help:    "Tool call latency, platform overhead and handler together.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"tool"}),
	}
	m.reg.MustRegister(m.calls, m.latency, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if pending != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "toolplane_approvals_pending",
			Help: "Approvals waiting for a person.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := pending(ctx)
			if err != nil {
				if log != nil {
					log.Warn("approvals pending gauge", "err", err)
				}
				return -1
			}
			return float64(n)
		}))
	}
	return m
}

// ObserveCall records one call (invoke.Observer).
func (m *Metrics) ObserveCall(tool, outcome string, took time.Duration) {
	m.calls.WithLabelValues(tool, outcome).Inc()
	m.latency.WithLabelValues(tool).Observe(took.Seconds())
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Pending answers a PendingCounter over a store's pending approvals of one
// organization, counted up to 1,000 and then pages on.
func Pending(store toolplane.ApprovalStore, org string) PendingCounter {
	return func(ctx context.Context) (int, error) {
		n, after := 0, ""
		for {
			as, next, err := store.ListApprovals(ctx, org, toolplane.ApprovalPending, after, 1000)
			if err != nil {
				return 0, err
			}
			n += len(as)
			if next == "" {
				return n, nil
			}
			after = next
		}
	}
}
