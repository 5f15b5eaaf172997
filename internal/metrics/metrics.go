// Package metrics exposes toolplane's Prometheus metrics: calls by tool,
// version, agent and outcome, latency by tool and by stage, spend,
// denials, approvals waiting and their wait, uncertain actions, and the
// node's traffic protections. The invoker reports each call through an
// invoke.Observer; nothing else in the call path knows Prometheus exists.
//
// Every label a caller can influence is bounded: each family keeps at
// most a configured number of distinct values per label and of series,
// and records the rest under Overflow (see docs/metrics.md).
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
	"github.com/toolplane/toolplane/invoke"
)

// Config is what Metrics are built from; every field is optional.
type Config struct {
	// Pending reads the approvals waiting for a person at each scrape;
	// nil leaves that gauge out.
	Pending PendingCounter
	// Uncertain reads the uncertain actions open at each scrape; nil
	// leaves that gauge out.
	Uncertain UncertainCounter
	// MaxLabelValues caps the distinct values of each label of each
	// family (DefaultMaxLabelValues when zero); MaxSeries caps each
	// family's series (DefaultMaxSeries when zero). Past either, values
	// are recorded under Overflow.
	MaxLabelValues, MaxSeries int
	Log                       *slog.Logger
}

// Metrics is one registry of toolplane's metrics.
type Metrics struct {
	reg *prometheus.Registry
	// The families every call may touch, each bounded: calls by tool,
	// version, agent and outcome; latency by tool; spend by organization,
	// agent and tool; denials by organization and agent.
	calls   *bounded[prometheus.Counter]
	latency *bounded[prometheus.Observer]
	spend   *bounded[prometheus.Counter]
	denials *bounded[prometheus.Counter]
	// stages holds each stage's latency observer, looked up once.
	stages [invoke.StageCount]prometheus.Observer
	// wait is how long approvals waited for their decision, by decision.
	wait *prometheus.HistogramVec
	// drops counts the vendor deliveries the webhook route answered
	// without moving a job, by provider and reason.
	drops *prometheus.CounterVec
	// limitFallbacks counts the rate-limit decisions a node took on its
	// own limit because its shared store did not answer.
	limitFallbacks *prometheus.CounterVec
	// families are the bounded families, by name, for their series gauge.
	families map[string]interface{ size() int }
	log      *slog.Logger
}

// PendingCounter answers how many approvals wait for a person, by
// organization.
type PendingCounter func(ctx context.Context) (map[string]int, error)

// UncertainCounter answers how many uncertain actions are open (claims
// held until a reconciliation), by organization.
type UncertainCounter func(ctx context.Context) (map[string]int, error)

// latencyBuckets span a call that never left the node to one that waited
// on a slow downstream for its whole timeout.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// stageBuckets are finer at the low end: most stages are the platform's
// own work, a fraction of a millisecond when healthy.
var stageBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// waitBuckets span a person answering at once to an approval waiting its
// longest (a day or more).
var waitBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400, 259200}

// New answers the metrics, with approvals pending read from pending at
// each scrape (nil leaves that gauge out).
func New(pending PendingCounter, log *slog.Logger) *Metrics {
	return NewWith(Config{Pending: pending, Log: log})
}

// NewWith answers the metrics built from cfg.
func NewWith(cfg Config) *Metrics {
	maxValues, maxSeries := cfg.MaxLabelValues, cfg.MaxSeries
	if maxValues <= 0 {
		maxValues = DefaultMaxLabelValues
	}
	if maxSeries <= 0 {
		maxSeries = DefaultMaxSeries
	}
	m := &Metrics{reg: prometheus.NewRegistry(), log: cfg.Log,
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolplane_approval_wait_seconds",
			Help:    "How long approvals waited from filing to their decision, by decision (approved, rejected, expired; an escalation expires one level and files the next).",
			Buckets: waitBuckets,
		}, []string{"decision"}),
		drops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolplane_webhook_drops_total",
			Help: "Vendor webhook deliveries answered without moving a provider job, by provider and reason (unknown_job, job_mismatch, not_terminal, duplicate, bad_signature, ...).",
		}, []string{"provider", "reason"}),
		limitFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolplane_ratelimit_fallbacks_total",
			Help: "Rate-limit decisions this node took on its own in-memory limit because the shared rate-limit store (postgres, redis) did not answer in time.",
		}, []string{"store"}),
	}
	overflow := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolplane_metric_label_overflow_total",
		Help: "Observations recorded under the __overflow__ label value because a family had seen as many distinct values of a label, or as many series, as it keeps.",
	}, []string{"family"})
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolplane_tool_calls_total",
		Help: "Tool calls by tool, version, agent and outcome (ok, a stable error code, approval_required, in_flight or fault).",
	}, []string{"tool", "version", "agent", "outcome"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "toolplane_tool_call_seconds",
		Help:    "Tool call latency, platform overhead and handler together, by tool.",
		Buckets: latencyBuckets,
	}, []string{"tool"})
	stages := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "toolplane_call_stage_seconds",
		Help:    "Time each call spent in each stage of the invocation path (validate, approval, policy, claim, handler, boundary, audit); everything but handler is the platform's own overhead.",
		Buckets: stageBuckets,
	}, []string{"stage"})
	spend := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolplane_spend_cents_total",
		Help: "What metered calls cost, in cents as metered, by organization, agent and tool.",
	}, []string{"organization", "agent", "tool"})
	denials := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolplane_authz_denials_total",
		Help: "Calls the policy denied, by organization and agent: a spike is a misconfiguration or an agent trying what it may not.",
	}, []string{"organization", "agent"})
	m.calls = newBounded("toolplane_tool_calls_total", 4, calls.WithLabelValues, maxValues, maxSeries, overflow.WithLabelValues("toolplane_tool_calls_total"))
	m.latency = newBounded("toolplane_tool_call_seconds", 1, latency.WithLabelValues, maxValues, maxSeries, overflow.WithLabelValues("toolplane_tool_call_seconds"))
	m.spend = newBounded("toolplane_spend_cents_total", 3, spend.WithLabelValues, maxValues, maxSeries, overflow.WithLabelValues("toolplane_spend_cents_total"))
	m.denials = newBounded("toolplane_authz_denials_total", 2, denials.WithLabelValues, maxValues, maxSeries, overflow.WithLabelValues("toolplane_authz_denials_total"))
	m.families = map[string]interface{ size() int }{
		m.calls.family: m.calls, m.latency.family: m.latency, m.spend.family: m.spend, m.denials.family: m.denials,
	}
	for s := range invoke.StageCount {
		m.stages[s] = stages.WithLabelValues(s.String())
	}
	m.reg.MustRegister(calls, latency, stages, spend, denials, overflow, m.wait, m.drops, m.limitFallbacks,
		&seriesCollector{m: m, desc: prometheus.NewDesc("toolplane_metric_series",
			"Series each bounded family keeps; at most its series cap, plus one of all labels __overflow__.", []string{"family"}, nil)},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cfg.Pending != nil {
		m.reg.MustRegister(&countCollector{count: cfg.Pending, log: cfg.Log, what: "approvals pending", desc: prometheus.NewDesc("toolplane_approvals_pending",
			"Approvals waiting for a person, by organization (an organization with none has no series).", []string{"organization"}, nil)})
	}
	if cfg.Uncertain != nil {
		m.reg.MustRegister(&countCollector{count: cfg.Uncertain, log: cfg.Log, what: "uncertain actions open", desc: prometheus.NewDesc("toolplane_uncertain_actions_open",
			"Uncertain actions open (writes whose effect is unknown, their key held until reconciled), by organization (an organization with none has no series).", []string{"organization"}, nil)})
	}
	return m
}

// ObserveCall records one call (invoke.Observer). A series seen before
// allocates nothing.
func (m *Metrics) ObserveCall(o *invoke.Observation) {
	m.calls.get(labels{o.Tool, o.Version, o.Agent, o.Outcome}).Inc()
	m.latency.get(labels{o.Tool}).Observe(o.Took.Seconds())
	for s := range invoke.StageCount {
		if o.Reached&(1<<s) != 0 {
			m.stages[s].Observe(o.Stages[s].Seconds())
		}
	}
	if o.CostCents > 0 {
		m.spend.get(labels{o.Organization, o.Agent, o.Tool}).Add(float64(o.CostCents))
	}
	if o.Outcome == string(toolplane.CodeDenied) {
		m.denials.get(labels{o.Organization, o.Agent}).Inc()
	}
}

// ApprovalDecided records how long an approval waited for its decision
// (approval.Config.Decided): from filing to the decision recorded,
// labelled by the decision (approved, rejected, expired).
func (m *Metrics) ApprovalDecided(a *toolplane.Approval) {
	if a.CreatedAt.IsZero() || a.ResolvedAt.Before(a.CreatedAt) {
		return
	}
	m.wait.WithLabelValues(string(a.Status)).Observe(a.ResolvedAt.Sub(a.CreatedAt).Seconds())
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

// Uncertain answers an UncertainCounter over a store's claims, every
// organization's uncertain actions.
func Uncertain(store toolplane.ClaimCounter) UncertainCounter {
	return func(ctx context.Context) (map[string]int, error) {
		return store.CountClaims(ctx, toolplane.ClaimUncertain)
	}
}

// countCollector reads a count by organization at each scrape, one series
// per organization. A failed read is logged and leaves the series out of
// that scrape rather than failing the whole scrape: the calls and latency
// beside it are still worth having.
type countCollector struct {
	count func(ctx context.Context) (map[string]int, error)
	log   *slog.Logger
	what  string
	desc  *prometheus.Desc
}

func (c *countCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *countCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	byOrg, err := c.count(ctx)
	if err != nil {
		if c.log != nil {
			c.log.Warn(c.what+" gauge", "err", err)
		}
		return
	}
	for org, n := range byOrg {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), org)
	}
}

// seriesCollector reports each bounded family's series count.
type seriesCollector struct {
	m    *Metrics
	desc *prometheus.Desc
}

func (c *seriesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *seriesCollector) Collect(ch chan<- prometheus.Metric) {
	for name, f := range c.m.families {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(f.size()), name)
	}
}
