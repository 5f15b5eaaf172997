package toolplane

import (
	"context"
	"time"
)

// AnomalySignal names what an anomaly's baseline measures, per agent and
// tool and window.
type AnomalySignal string

// The signals the anomaly triage watches.
const (
	// SignalCallRate: how many calls the agent made of the tool.
	SignalCallRate AnomalySignal = "call_rate"
	// SignalDenialRate: how many of them policy, grants or a person
	// refused (outcome denied or rejected).
	SignalDenialRate AnomalySignal = "denial_rate"
	// SignalErrorRate: how many ended in an error other than a refusal.
	SignalErrorRate AnomalySignal = "error_rate"
	// SignalSpend: what they cost, in cents.
	SignalSpend AnomalySignal = "spend"
)

// AnomalySignals are the signals in the order a baseline keeps them.
var AnomalySignals = [...]AnomalySignal{SignalCallRate, SignalDenialRate, SignalErrorRate, SignalSpend}

// AnomalyStatus is where a triage item stands.
type AnomalyStatus string

// The triage states. An item is filed open and stays open, updated by
// every later window that deviates the same way, until a person
// acknowledges it; a deviation after that files a new item.
const (
	AnomalyOpen         AnomalyStatus = "open"
	AnomalyAcknowledged AnomalyStatus = "acknowledged"
)

// Anomaly is one triage item: an agent's use of a tool that left its
// baseline on one signal. It explains itself: what was observed in the
// window, the baseline's mean and standard deviation it was judged
// against, and the score (how many deviations above the mean). It blocks
// nothing; a person reads and acknowledges it.
type Anomaly struct {
	ID             string        `json:"id"`
	OrganizationID string        `json:"organization_id"`
	AgentID        string        `json:"agent_id"`
	Tool           string        `json:"tool"`
	Signal         AnomalySignal `json:"signal"`
	// Observed is the signal's value in the window; Mean and StdDev the
	// baseline's before the window; Score the deviation in standard
	// deviations (of the floored StdDev the rule used).
	Observed float64 `json:"observed"`
	Mean     float64 `json:"mean"`
	StdDev   float64 `json:"stddev"`
	Score    float64 `json:"score"`
	// WindowStart and WindowEnd are the latest window that deviated;
	// Windows counts the windows that did while the item was open.
	WindowStart time.Time     `json:"window_start"`
	WindowEnd   time.Time     `json:"window_end"`
	Windows     int           `json:"windows"`
	Status      AnomalyStatus `json:"status"`
	// AcknowledgedBy and AcknowledgedAt say who acknowledged it, and
	// when; empty while open.
	AcknowledgedBy string    `json:"acknowledged_by,omitempty"`
	AcknowledgedAt time.Time `json:"acknowledged_at,omitzero"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// AnomalyStat is one signal's exponentially weighted mean and variance.
type AnomalyStat struct {
	Mean     float64 `json:"m"`
	Variance float64 `json:"v"`
}

// AnomalyBaseline is the rolling baseline of one organization's agent and
// tool: per signal, the weighted mean and variance of the windows folded
// in so far. Baselines live in the store, so a restart or another node
// continues them.
type AnomalyBaseline struct {
	OrganizationID string
	AgentID        string
	Tool           string
	// Bucket is the start of the last window folded in; Buckets how many
	// windows were, idle ones included.
	Bucket  time.Time
	Buckets int64
	// LastActive is the start of the last window with a call.
	LastActive time.Time
	// Stats holds one AnomalyStat per signal, in AnomalySignals' order.
	Stats [len(AnomalySignals)]AnomalyStat
	// Hours is the time-of-day profile: per hour of the day (UTC), the
	// windows of that hour folded in and their weighted statistics, so a
	// rise that happens every day at that hour is known for what it is.
	Hours [24]AnomalyHour
}

// AnomalyHour is one hour of the day's profile in a baseline.
type AnomalyHour struct {
	Windows int64                            `json:"n"`
	Stats   [len(AnomalySignals)]AnomalyStat `json:"s"`
}

// AuditTally counts an organization's calls of one agent and tool with
// one outcome in a time range, and sums their cost: what a baseline is
// fed, read from the audit trail.
type AuditTally struct {
	OrganizationID string
	AgentID        string
	Tool           string
	Outcome        string
	Calls          int64
	CostCents      int64
}

// AnomalyStore is the storage of the anomaly triage: the audit trail's
// tallies it reads, the baselines it keeps and the items it files. Items
// and baselines are scoped to one organization; the tallies, the
// watermark and the baselines' retention are the deployment's
// background work, across organizations.
type AnomalyStore interface {
	// TallyAudit answers the call events (Kind AuditCall) created at or
	// after from and before until, of every organization, counted and
	// their cost summed per organization, agent, tool and outcome.
	TallyAudit(ctx context.Context, from, until time.Time) ([]AuditTally, error)
	// AnomalyWatermark answers the end of the last window the triage
	// folded in, or the zero time when none was.
	AnomalyWatermark(ctx context.Context) (time.Time, error)
	// AdvanceAnomalyWatermark moves the watermark from from (the zero
	// time: none stored) to to, and reports whether it did: two nodes
	// folding the same window never both advance past it.
	AdvanceAnomalyWatermark(ctx context.Context, from, to time.Time) (bool, error)
	// ListAnomalyBaselines answers the organization's baselines, by
	// agent and tool.
	ListAnomalyBaselines(ctx context.Context, org string) ([]AnomalyBaseline, error)
	// PutAnomalyBaseline stores b unless the stored baseline of its
	// organization, agent and tool has folded in b.Bucket or a later
	// window, and reports whether it stored it: a window is folded in
	// once, however often it is run.
	PutAnomalyBaseline(ctx context.Context, b *AnomalyBaseline) (bool, error)
	// DeleteAnomalyBaselines removes up to limit baselines, of any
	// organization, last active before before, and answers how many.
	DeleteAnomalyBaselines(ctx context.Context, before time.Time, limit int) (int, error)
	// FileAnomaly stores a as a new open item, unless the organization
	// has an open item of the same agent, tool and signal: then that one
	// takes a's Observed, Mean, StdDev, Score, window and UpdatedAt, its
	// Windows grows by one unless a's window is the one it holds, and it
	// is answered instead. It answers the item stored, and whether it is
	// new.
	FileAnomaly(ctx context.Context, a *Anomaly) (*Anomaly, bool, error)
	// GetAnomaly answers the organization's item, or an error wrapping
	// ErrNotFound.
	GetAnomaly(ctx context.Context, org, id string) (*Anomaly, error)
	// ListAnomalies answers the organization's items in a state ("" for
	// every state), newest first (ties by ID, descending), after the
	// cursor.
	ListAnomalies(ctx context.Context, org string, status AnomalyStatus, after string, limit int) ([]Anomaly, string, error)
	// AcknowledgeAnomaly marks the organization's open item acknowledged
	// by by at at, and reports whether it did (false, nil: acknowledged
	// already, or no such item).
	AcknowledgeAnomaly(ctx context.Context, org, id, by string, at time.Time) (bool, error)
	// CountAnomalies answers how many of the organization's items are in
	// a state, counting at most limit (a positive bound): past it, limit.
	CountAnomalies(ctx context.Context, org string, status AnomalyStatus, limit int) (int, error)
}
