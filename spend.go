package toolplane

import (
	"context"
	"time"
)

// SpendCeiling is an organization's ceiling on what its metered calls may
// cost in one UTC day, beside the per-run ceiling each call carries
// (Ceilings.MaxCostCents): a run cannot spend past its own budget, and the
// organization's runs together cannot spend past this one.
type SpendCeiling struct {
	OrganizationID string `json:"organization_id"`
	// DailyCents is the most the organization's metered calls may cost
	// in one UTC day, in cents (1..MaxDailyCeilingCents).
	DailyCents int64     `json:"daily_cents"`
	UpdatedBy  string    `json:"updated_by"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// MaxDailyCeilingCents bounds a daily ceiling: ten million dollars a day
// is past any deployment's spend, so a larger figure is a typing mistake,
// not a ceiling.
const MaxDailyCeilingCents int64 = 1_000_000_000

// DaySpend is what an organization spent in one UTC day, with its daily
// ceiling (0 when it has none).
type DaySpend struct {
	CeilingCents int64
	SpentCents   int64
	Calls        int64
}

// SpendDay answers the UTC day t falls in, as days since the Unix epoch:
// how the daily counters are keyed.
func SpendDay(t time.Time) int64 {
	s := t.UTC().Unix()
	d := s / 86400
	if s < 0 && s%86400 != 0 {
		d--
	}
	return d
}

// SpendBy is what a spend report groups by.
type SpendBy string

// The groupings of a spend report.
const (
	SpendByAgent SpendBy = "agent"
	SpendByTool  SpendBy = "tool"
	SpendByDay   SpendBy = "day"
)

// Valid reports whether b is one of the groupings.
func (b SpendBy) Valid() bool {
	return b == SpendByAgent || b == SpendByTool || b == SpendByDay
}

// SpendLine is one group of a spend report: the agent, the tool or the
// UTC day (YYYY-MM-DD) Key names, how many usage rows it holds and what
// they cost.
type SpendLine struct {
	Key       string `json:"key"`
	Calls     int64  `json:"calls"`
	CostCents int64  `json:"cost_cents"`
}

// MaxSpendLines bounds the lines one spend report answers; a report cut
// there says so.
const MaxSpendLines = 1000

// SpendStore keeps the organization-wide daily ceilings and answers what
// the meter recorded. Every method is scoped to one organization. The
// daily counters it reads are written by InsertUsage (and a provider
// job's settlement) in the same transaction as the usage row, so a
// ceiling check never reads a sum that lags a row.
type SpendStore interface {
	// PutSpendCeiling creates or replaces the organization's ceiling and
	// appends ch, its record in the change log, in one transaction.
	PutSpendCeiling(ctx context.Context, c *SpendCeiling, ch *Change) error
	// GetSpendCeiling answers the organization's ceiling, or an error
	// wrapping ErrNotFound.
	GetSpendCeiling(ctx context.Context, org string) (*SpendCeiling, error)
	// DeleteSpendCeiling removes the organization's ceiling and appends
	// ch in one transaction; false with a nil error, and nothing
	// recorded, when there was none.
	DeleteSpendCeiling(ctx context.Context, org string, ch *Change) (bool, error)
	// DaySpend answers the organization's spend on the UTC day day
	// (SpendDay) with its ceiling, in one read.
	DaySpend(ctx context.Context, org string, day int64) (DaySpend, error)
	// SpendReport answers the organization's usage rows created in
	// [from, to), grouped by, ordered by key, at most limit lines (1 to
	// MaxSpendLines).
	SpendReport(ctx context.Context, org string, from, to time.Time, by SpendBy, limit int) ([]SpendLine, error)
}
