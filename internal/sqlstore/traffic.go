package sqlstore

import (
	"strconv"
	"strings"

	"github.com/toolplane/toolplane"
)

// trafficWhere selects a traffic query's calls: the organization's call
// events of a door's source in [from, until). The empty kind is written as a
// literal so both databases use the partial index migration 0044 keeps
// for these reads (organization and time first, every column read
// after): the read touches the index alone, never the events' rows. (On
// SQLite the index holds every event since migration 0049, the kind in
// it, so the condition is read from the index too.)
var trafficWhere = func() string {
	var b strings.Builder
	b.WriteString(` FROM audit_events WHERE organization_id = ? AND kind = '' AND created_at >= ? AND created_at < ? AND source IN (`)
	for i, s := range toolplane.TrafficSources {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + string(s) + "'")
	}
	b.WriteString(")")
	return b.String()
}()

// latencyBucket is the SQL of toolplane.TrafficLatencyBucket: the bucket
// of latency_micros among toolplane.TrafficLatencyBounds.
var latencyBucket = func() string {
	var b strings.Builder
	b.WriteString("CASE")
	for i, bound := range toolplane.TrafficLatencyBounds {
		b.WriteString(" WHEN latency_micros < " + strconv.FormatInt(bound, 10) + " THEN " + strconv.Itoa(i))
	}
	b.WriteString(" ELSE " + strconv.Itoa(len(toolplane.TrafficLatencyBounds)) + " END")
	return b.String()
}()

// TrafficCells answers the statement of toolplane.TrafficStore's
// TrafficCells in d, and its arguments; it scans tool, agent, outcome,
// latency bucket, calls and cost. ok is false when q's tool cannot be
// bound in d (see Dialect.Text): no call is of it.
func TrafficCells(d Dialect, q toolplane.TrafficQuery) (text string, args []any, ok bool) {
	text = `SELECT tool, agent_id, outcome, ` + latencyBucket + ` AS bucket, COUNT(*), COALESCE(SUM(cost_cents), 0)` + trafficWhere
	args = []any{q.OrganizationID, q.From.UnixMicro(), q.Until.UnixMicro()}
	if q.Tool != "" {
		if !d.Text(q.Tool) {
			return "", nil, false
		}
		text += ` AND tool = ?`
		args = append(args, q.Tool)
	}
	text += ` GROUP BY tool, agent_id, outcome, bucket`
	return Numbered(d, text), args, true
}

// TrafficSeries answers the statement of toolplane.TrafficStore's
// TrafficSeries in d, and its arguments; it scans step, outcome, calls
// and cost. ok is as TrafficCells'.
func TrafficSeries(d Dialect, q toolplane.TrafficQuery) (text string, args []any, ok bool) {
	from, step := q.From.UnixMicro(), q.Step.Microseconds()
	if step <= 0 {
		step = 1
	}
	// Both databases divide integers by truncating, and created_at is at
	// or after from: the quotient is the step, counted from 0.
	text = `SELECT (created_at - ?) / ? AS step, outcome, COUNT(*), COALESCE(SUM(cost_cents), 0)` + trafficWhere
	args = []any{from, step, q.OrganizationID, from, q.Until.UnixMicro()}
	if q.Tool != "" {
		if !d.Text(q.Tool) {
			return "", nil, false
		}
		text += ` AND tool = ?`
		args = append(args, q.Tool)
	}
	text += ` GROUP BY step, outcome`
	return Numbered(d, text), args, true
}
