// Package metrics exposes toolplane's Prometheus metrics: calls by tool and
// outcome, call latency, and approvals waiting for a person. The invoker
// reports each call through an invoke.Observer; nothing else in the call
// path knows Prometheus exists.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
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
	// drops counts the vendor deliveries the webhook route answered
	// without moving a job, by provider and reason.
	drops *prometheus.CounterVec
	// limitFallbacks counts the rate-limit decisions a node took on its
	// own limit because its shared store did not answer.
	limitFallbacks *prometheus.CounterVec
	// series holds each tool and outcome's counter and latency observer
	// once looked up: a vector's lookup checks and hashes the label values
	// on every call, and there are only as many pairs as series.
	series sync.Map // seriesKey -> *series
}

// seriesKey names the series one call is recorded in.
type seriesKey struct{ tool, outcome string }

// series is where one tool's calls of one outcome are recorded.
type series struct {
	calls   prometheus.Counter
	latency prometheus.Observer
}

// PendingCounter answers how many approvals wait for a person, by
// organization.
type PendingCounter func(ctx context.Context) (map[string]int, error)

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
		drops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolplane_webhook_drops_total",
			Help: "Vendor webhook deliveries answered without moving a provider job, by provider and reason (unknown_job, job_mismatch, not_terminal, duplicate, bad_signature, ...).",
		}, []string{"provider", "reason"}),
		limitFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolplane_ratelimit_fallbacks_total",
			Help: "Rate-limit decisions this node took on its own in-memory limit because the shared rate-limit store (postgres, redis) did not answer in time.",
		}, []string{"store"}),
	}
	m.reg.MustRegister(m.calls, m.latency, m.drops, m.limitFallbacks, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if pending != nil {
		m.reg.MustRegister(&pendingCollector{count: pending, log: log, desc: prometheus.NewDesc("toolplane_approvals_pending",
			"Approvals waiting for a person, by organization (an organization with none has no series).", []string{"organization"}, nil)})
	}
	return m
}

// ObserveCall records one call (invoke.Observer).
func (m *Metrics) ObserveCall(tool, outcome string, took time.Duration) {
	k := seriesKey{tool, outcome}
	v, ok := m.series.Load(k)
	if !ok {
		v, _ = m.series.LoadOrStore(k, &series{calls: m.calls.WithLabelValues(tool, outcome), latency: m.latency.WithLabelValues(tool)})
	}
	s := v.(*series)
	s.calls.Inc()
	s.latency.Observe(took.Seconds())
}

// WebhookDropped counts one vendor delivery the webhook route dropped
// (providerjob.Receiver.Dropped).
func (m *Metrics) WebhookDropped(provider, reason string) {
	m.drops.WithLabelValues(provider, reason).Inc()
}

// RateLimitFallback answers the counter of rate-limit decisions taken on
// the node's own limit while the shared store named store did not answer
// (ratelimit.SharedOptions.FellBack).
func (m *Metrics) RateLimitFallback(store string) func() {
	c := m.limitFallbacks.WithLabelValues(store)
	return c.Inc
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Pending answers a PendingCounter over a store's pending approvals, every
// organization's: a deployment serving several must show each one's queue.
func Pending(store toolplane.ApprovalStore) PendingCounter {
	return func(ctx context.Context) (map[string]int, error) {
		return store.CountApprovals(ctx, toolplane.ApprovalPending)
	}
}

// pendingCollector reads the pending approvals at each scrape, one series
// per organization. A failed read is logged and leaves the series out of
// that scrape rather than failing the whole scrape: the calls and latency
// beside it are still worth having.
type pendingCollector struct {
	count PendingCounter
	log   *slog.Logger
	desc  *prometheus.Desc
}

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	byOrg, err := c.count(ctx)
	if err != nil {
		if c.log != nil {
			c.log.Warn("approvals pending gauge", "err", err)
		}
		return
	}
	for org, n := range byOrg {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), org)
	}
}
