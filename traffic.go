package toolplane

import (
	"context"
	"time"
)

// TrafficSources are the sources of a call's answer: the doors and the
// workers that run calls. An event of another source (a sweep, a
// takeover, a late settlement, a reconciliation, a vendor's callback)
// records a state a call reached after it was answered, not a call, so
// traffic never counts it.
var TrafficSources = []Source{SourceREST, SourceMCP, SourceSDK, SourceResume, SourceWorker}

// TrafficLatencyBounds are the upper bounds, in microseconds and
// exclusive, of the buckets traffic sorts call latencies into: bucket i
// holds latencies below TrafficLatencyBounds[i] (and at or above the
// bound before), and bucket len(TrafficLatencyBounds) everything slower.
// Each bound is one and a half to two and a half times the one before,
// so a percentile read from them (interpolated within its bucket) is off
// by at most its bucket's width, whatever the scale: the store counts per
// bucket rather than answering every latency, which keeps a day's
// percentiles one indexed read.
var TrafficLatencyBounds = []int64{
	100, 250, 500, 1_000, 1_500, 2_500, 4_000, 6_000, 10_000, 15_000, 25_000, 40_000, 60_000,
	100_000, 150_000, 250_000, 400_000, 600_000, 1_000_000, 1_500_000, 2_500_000, 4_000_000,
	6_000_000, 10_000_000, 15_000_000, 25_000_000, 40_000_000, 60_000_000,
}

// TrafficQuery is the range of an organization's calls a traffic read
// covers: created at or after From and before Until, of Tool when it is
// set. Step is the width of a series' buckets.
type TrafficQuery struct {
	OrganizationID string
	Tool           string
	From, Until    time.Time
	Step           time.Duration
}

// TrafficCell counts the calls of one tool and agent answered with one
// outcome whose latency fell in one bucket (an index into
// TrafficLatencyBounds), and sums their cost.
type TrafficCell struct {
	Tool      string
	AgentID   string
	Outcome   string
	Latency   int
	Calls     int64
	CostCents int64
}

// TrafficPoint counts the calls answered with one outcome in one step of
// a series (Step 0 starts at the query's From), and sums their cost.
type TrafficPoint struct {
	Step      int
	Outcome   string
	Calls     int64
	CostCents int64
}

// TrafficStore reads an organization's traffic from its audit trail: the
// call events (Kind AuditCall) of TrafficSources, each the answer of one
// call, filtered by organization. Nothing is kept beside the trail, so
// the figures are the trail's, never a copy that could disagree with it.
type TrafficStore interface {
	// TrafficCells answers q's calls counted per tool, agent, outcome
	// and latency bucket, with their cost summed, in no set order.
	TrafficCells(ctx context.Context, q TrafficQuery) ([]TrafficCell, error)
	// TrafficSeries answers q's calls counted per step of q.Step and
	// outcome, with their cost summed, in no set order; a step with no
	// call has no point.
	TrafficSeries(ctx context.Context, q TrafficQuery) ([]TrafficPoint, error)
}

// TrafficLatencyBucket answers the bucket of TrafficLatencyBounds a
// latency of micros falls in: what a store's query computes.
func TrafficLatencyBucket(micros int64) int {
	for i, b := range TrafficLatencyBounds {
		if micros < b {
			return i
		}
	}
	return len(TrafficLatencyBounds)
}
