package sqlstore

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/cursor"
)

// The anomaly triage's columns and statements, written with ?
// placeholders (see Numbered for PostgreSQL's).
const (
	BaselineColumns = `organization_id, agent_id, tool, bucket, buckets, last_active,
	calls_mean, calls_var, denials_mean, denials_var, errors_mean, errors_var, spend_mean, spend_var, hours`
	AnomalyColumns = `organization_id, id, agent_id, tool, signal, observed, mean, stddev, score,
	window_start, window_end, windows, status, acknowledged_by, acknowledged_at, created_at, updated_at`

	// TallyAudit counts the call events of a time range per
	// organization, agent, tool and outcome, and sums their cost.
	TallyAudit = `SELECT organization_id, agent_id, tool, outcome, COUNT(*), COALESCE(SUM(cost_cents), 0)
	FROM audit_events WHERE created_at >= ? AND created_at < ? AND kind = ''
	GROUP BY organization_id, agent_id, tool, outcome`

	// TallyAuditByOrganization is TallyAudit read organization by
	// organization, from the organizations with a chain (every one that
	// stored an event since the chain began), each by the index that
	// leads with the organization and time and holds every column read
	// (SQLite's audit_events_traffic): SQLite keeps no index of the
	// trail by time alone, which every event paid for (issue 35).
	TallyAuditByOrganization = `SELECT e.organization_id, e.agent_id, e.tool, e.outcome, COUNT(*), COALESCE(SUM(e.cost_cents), 0)
	FROM audit_organizations o CROSS JOIN audit_events e
	WHERE e.organization_id = o.organization_id AND e.created_at >= ? AND e.created_at < ? AND e.kind = ''
	GROUP BY e.organization_id, e.agent_id, e.tool, e.outcome`

	// PutBaseline upserts a baseline unless the stored one has folded in
	// its window or a later one: the WHERE of the update leaves such a
	// row alone, and the statement then changes nothing.
	PutBaseline = `INSERT INTO anomaly_baselines (` + BaselineColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (organization_id, agent_id, tool) DO UPDATE SET
		bucket = excluded.bucket, buckets = excluded.buckets, last_active = excluded.last_active,
		calls_mean = excluded.calls_mean, calls_var = excluded.calls_var,
		denials_mean = excluded.denials_mean, denials_var = excluded.denials_var,
		errors_mean = excluded.errors_mean, errors_var = excluded.errors_var,
		spend_mean = excluded.spend_mean, spend_var = excluded.spend_var, hours = excluded.hours
	WHERE anomaly_baselines.bucket < excluded.bucket`

	// FileAnomaly inserts an open item, or updates the open item of the
	// same organization, agent, tool and signal (the partial unique
	// index anomalies_one_open), and answers the row stored. A window
	// already counted (the same window_start) does not count again.
	FileAnomaly = `INSERT INTO anomalies (` + AnomalyColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (organization_id, agent_id, tool, signal) WHERE status = 'open' DO UPDATE SET
		observed = excluded.observed, mean = excluded.mean, stddev = excluded.stddev, score = excluded.score,
		windows = anomalies.windows + CASE WHEN anomalies.window_start = excluded.window_start THEN 0 ELSE 1 END,
		window_start = excluded.window_start, window_end = excluded.window_end, updated_at = excluded.updated_at
	RETURNING ` + AnomalyColumns

	// AcknowledgeAnomaly acknowledges an open item: by, at, org, id.
	AcknowledgeAnomaly = `UPDATE anomalies SET status = 'acknowledged', acknowledged_by = ?, acknowledged_at = ?
	WHERE organization_id = ? AND id = ? AND status = 'open'`
)

// Numbered answers text, a statement with ? placeholders, as d writes
// it: $1, $2, … in order for PostgreSQL, unchanged for SQLite.
func Numbered(d Dialect, text string) string {
	if !d.numbered {
		return text
	}
	var b strings.Builder
	n := 0
	for {
		i := strings.IndexByte(text, '?')
		if i < 0 {
			break
		}
		n++
		b.WriteString(text[:i])
		d.placeholder(&b, n)
		text = text[i+1:]
	}
	b.WriteString(text)
	return b.String()
}

// BaselineArgs answers PutBaseline's arguments for b.
func BaselineArgs(b *toolplane.AnomalyBaseline) ([]any, error) {
	s := &b.Stats
	hours, err := EncodeHours(&b.Hours)
	if err != nil {
		return nil, err
	}
	return []any{b.OrganizationID, b.AgentID, b.Tool, b.Bucket.UnixMicro(), b.Buckets, b.LastActive.UnixMicro(),
		s[0].Mean, s[0].Variance, s[1].Mean, s[1].Variance, s[2].Mean, s[2].Variance, s[3].Mean, s[3].Variance, hours}, nil
}

// EncodeHours answers a baseline's time-of-day profile as its column
// keeps it: JSON, or "" when no hour holds a window.
func EncodeHours(h *[24]toolplane.AnomalyHour) (string, error) {
	if *h == ([24]toolplane.AnomalyHour{}) {
		return "", nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("time-of-day profile: %w", err)
	}
	return string(b), nil
}

// DecodeHours reads a time-of-day profile EncodeHours wrote into h.
func DecodeHours(s string, h *[24]toolplane.AnomalyHour) error {
	if s == "" {
		*h = [24]toolplane.AnomalyHour{}
		return nil
	}
	if err := json.Unmarshal([]byte(s), h); err != nil {
		return fmt.Errorf("time-of-day profile: %w", err)
	}
	return nil
}

// AnomalyArgs answers FileAnomaly's arguments for a.
func AnomalyArgs(a *toolplane.Anomaly) []any {
	return []any{a.OrganizationID, a.ID, a.AgentID, a.Tool, string(a.Signal), a.Observed, a.Mean, a.StdDev, a.Score,
		a.WindowStart.UnixMicro(), a.WindowEnd.UnixMicro(), a.Windows, string(a.Status), a.AcknowledgedBy,
		a.AcknowledgedAt.UnixMicro(), a.CreatedAt.UnixMicro(), a.UpdatedAt.UnixMicro()}
}

// ListAnomalies is the page of an organization's triage items in a
// state ("" for every state), newest first (ties by ID, descending),
// before the cursor; Empty when org or status is one no stored row
// holds.
func ListAnomalies(q *Query, d Dialect, org string, status toolplane.AnomalyStatus, after string, limit int) error {
	if err := CheckLimit(limit); err != nil {
		return err
	}
	q.Start(d, `SELECT `+AnomalyColumns+` FROM anomalies WHERE organization_id = ?`, org)
	q.Eq("status", string(status))
	if err := q.AfterCursor(after, cursor.Anomalies, "<"); err != nil {
		return err
	}
	if q.Unbindable() {
		q.empty = true
	}
	q.Page("created_at DESC, id DESC", limit)
	return nil
}

// AnomalyCursor is the cursor of ListAnomalies after a.
func AnomalyCursor(a *toolplane.Anomaly) string {
	return cursor.Encode(cursor.Anomalies, a.CreatedAt.UnixMicro(), a.ID)
}
