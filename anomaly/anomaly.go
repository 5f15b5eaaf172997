// Package anomaly is the anomaly triage: per organization, agent and tool,
// a rolling baseline of four signals read from the audit trail (calls,
// refusals, errors, spend), and a triage item filed when a window leaves
// its baseline by more than a threshold. It blocks nothing; a person reads
// the items (auditors and platform admins) and acknowledges them.
//
// # Windows and baselines
//
// Time is cut into windows of Config.Window (5 minutes by default) from
// the Unix epoch. A window is folded in once it has ended and a settling
// delay (Config.Settle) has passed, so the audit writer's last events of
// it are stored. Folding a window reads one aggregate of the audit trail
// (toolplane.AnomalyStore.TallyAudit: calls counted and cost summed per
// organization, agent, tool and outcome) and, for every agent and tool
// with a call in it, judges the window against the baseline and then
// updates the baseline. A window with no call of an agent and tool is an
// observation of zero for each signal; it is folded in lazily, when the
// next call comes, so a quiet pair costs nothing per window.
//
// The signals of one window:
//
//   - call_rate: the calls;
//   - denial_rate: the calls refused by policy, grants or a person
//     (outcome denied or rejected);
//   - error_rate: the calls that ended in any other error (every outcome
//     but ok, approval_required, denied and rejected);
//   - spend: the calls' cost, in cents.
//
// A baseline keeps, per signal, an exponentially weighted mean and
// variance. The weight of a new window is α = 2/(N+1) for a baseline of
// N windows (Config.Baseline, 24 by default: two hours of 5-minute
// windows, long enough to be steady and short enough to follow the ramp
// of a working day), and 1/n while fewer than N windows are in, so the
// first windows give the plain mean and variance rather than a mean
// dragged toward its first value.
//
// # The rule
//
// A window's value x of a signal is flagged when all of these hold:
//
//   - the baseline has at least Config.MinWindows windows (12);
//   - z = (x − mean) / σ ≥ Config.Threshold (4), where σ is the
//     baseline's standard deviation floored at the larger of the
//     signal's absolute floor (one call, or 100 cents of spend) and
//     10% of the mean: a baseline that never moved (no refusal in two
//     hours) would otherwise make a single refusal infinitely
//     surprising;
//   - x − mean ≥ the signal's least excess (5 calls, or 500 cents);
//   - and, once the baseline's time-of-day profile holds three days of
//     the window's hour (UTC), x is unusual for that hour too: the same
//     score and excess against the profile's mean and deviation for that
//     hour, weighted over a week of it. A rise that comes every day at
//     that hour (the morning ramp of a working day) is then not flagged,
//     while the same rise at night still is.
//
// Only rises are flagged: a drop in calls is an outage or a quiet hour,
// not an agent misbehaving. A flagged value is folded into the baseline
// clamped at mean + Threshold·σ, so a burst does not teach the baseline
// that bursts are normal at once, and a deviation that goes on stays
// flagged for a few windows while the baseline still adapts to a lasting
// change. A slowly growing workload moves the mean and the variance with
// it, and is not flagged.
//
// # Across nodes
//
// Everything is in the store: the baselines (one row per organization,
// agent and tool, with the last window folded in), the items, and the
// watermark (the end of the last window folded in, advanced compare and
// swap). The background job (internal/jobs) runs Step on one node at a
// time, but two Steps that meet still fold a window once: a baseline is
// stored only over an older one, and an item counts a window once. A
// restart, or another node, continues from the watermark.
//
// # Triage items
//
// One open item per organization, agent, tool and signal: a deviation
// that goes on updates its item (the latest window, its value and score,
// and the count of windows) instead of filing one per window. Once
// acknowledged, the next deviation files a new item.
package anomaly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/toolplane/toolplane"
)

// Store is what the triage keeps its state in.
type Store = toolplane.AnomalyStore

// ErrNotAuthorized: the caller's roles do not allow reading or
// acknowledging the triage.
var ErrNotAuthorized = toolplane.Refine(toolplane.ErrForbidden, "not authorized to triage anomalies")

// ErrStatus: a status filter that is not a triage state.
var ErrStatus = toolplane.Refine(toolplane.ErrInvalid, "status must be open or acknowledged")

// Defaults of Config.
const (
	DefaultWindow     = 5 * time.Minute
	DefaultThreshold  = 4.0
	DefaultBaseline   = 24
	DefaultMinWindows = 12
	DefaultSettle     = time.Minute
	DefaultRetain     = 7 * 24 * time.Hour
	// DefaultBackfill is how many windows before the current one the
	// first Step of a deployment folds in, so a baseline is ready soon.
	DefaultBackfill = 24
	// DefaultMaxWindows bounds the windows one Step folds in; a node
	// that was down longer catches up over the next Steps.
	DefaultMaxWindows = 288
)

// Floor is a signal's guard against a quiet baseline: the least
// standard deviation a score divides by, and the least rise over the
// mean that may be flagged.
type Floor struct {
	StdDev float64
	Excess float64
}

// DefaultFloors are the floors of each signal: a count's are calls, the
// spend's cents.
var DefaultFloors = map[toolplane.AnomalySignal]Floor{
	toolplane.SignalCallRate:   {StdDev: 1, Excess: 5},
	toolplane.SignalDenialRate: {StdDev: 1, Excess: 5},
	toolplane.SignalErrorRate:  {StdDev: 1, Excess: 5},
	toolplane.SignalSpend:      {StdDev: 100, Excess: 500},
}

// relativeFloor is the share of the mean the standard deviation is
// floored at.
const relativeFloor = 0.1

// hourDays is how many days the time-of-day profile's weights span, and
// minHourDays how many of an hour's days it holds before it has a say.
const (
	hourDays    = 7
	minHourDays = 3
)

// Config tunes the triage; every zero field takes its default.
type Config struct {
	// Window is the width of one window.
	Window time.Duration
	// Threshold is the score (deviations above the mean) that flags.
	Threshold float64
	// Baseline is the number of windows the weighted baseline spans.
	Baseline int
	// MinWindows is how many windows a baseline holds before it judges.
	MinWindows int
	// Floors are the signals' floors; a signal missing takes its
	// DefaultFloors entry.
	Floors map[toolplane.AnomalySignal]Floor
	// Settle is how long after a window's end it is folded in.
	Settle time.Duration
	// Backfill is how many windows the first Step of a deployment reads
	// back; MaxWindows how many one Step folds in at most.
	Backfill   int
	MaxWindows int
	// Retain is how long a baseline without a call is kept.
	Retain time.Duration
	// Notice, when set, is told of every item filed (not of updates of an
	// open one); it must not block for long, and its failure is only
	// logged.
	Notice func(ctx context.Context, a *toolplane.Anomaly) error
	Logger *slog.Logger
	Now    func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.Threshold <= 0 || math.IsNaN(c.Threshold) || math.IsInf(c.Threshold, 0) {
		c.Threshold = DefaultThreshold
	}
	if c.Baseline <= 0 {
		c.Baseline = DefaultBaseline
	}
	if c.MinWindows <= 0 {
		c.MinWindows = DefaultMinWindows
	}
	floors := make(map[toolplane.AnomalySignal]Floor, len(DefaultFloors))
	for s, f := range DefaultFloors {
		floors[s] = f
	}
	for s, f := range c.Floors {
		floors[s] = f
	}
	c.Floors = floors
	if c.Settle <= 0 {
		c.Settle = DefaultSettle
	}
	if c.Backfill <= 0 {
		c.Backfill = DefaultBackfill
	}
	if c.MaxWindows <= 0 {
		c.MaxWindows = DefaultMaxWindows
	}
	if c.Retain <= 0 {
		c.Retain = DefaultRetain
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Service runs the triage: Step folds the audit trail in (the background
// job), List and Acknowledge serve people.
type Service struct {
	store Store
	cfg   Config
	alpha float64
	// hourAlpha weighs a window in its hour of the day's profile (a week
	// of that hour's windows); minHourWindows is how many of them (three
	// days') the profile holds before it has a say.
	hourAlpha      float64
	minHourWindows int64
	// known is a watermark this Service read or moved (Unix
	// microseconds; zero: none yet). The stored watermark only moves
	// forward, so it is at or past known, and Pending needs no read while
	// no window past known has settled.
	known atomic.Int64
}

// New answers the triage over store.
func New(store Store, cfg Config) (*Service, error) {
	if store == nil {
		return nil, errors.New("anomaly: a store is required")
	}
	cfg = cfg.withDefaults()
	perHour := max(int64(time.Hour/cfg.Window), 1)
	return &Service{store: store, cfg: cfg, alpha: 2 / float64(cfg.Baseline+1),
		hourAlpha: 2 / float64(hourDays*perHour+1), minHourWindows: minHourDays * perHour}, nil
}

// Window answers the width of one window.
func (s *Service) Window() time.Duration { return s.cfg.Window }

// MayTriage refuses a caller who may not read or acknowledge anomalies:
// only an auditor (and a platform admin, who holds every role) may. An
// agent's key never may: the triage is about agents.
func MayTriage(by *toolplane.Credential) error {
	if !by.HasAnyRole(toolplane.RoleAuditor) {
		return toolplane.Refuse(by, ErrNotAuthorized, "the anomaly triage needs the auditor or platform_admin role")
	}
	return nil
}

// List answers the caller's organization's items in a state ("" for
// every state), newest first, after the cursor.
func (s *Service) List(ctx context.Context, status toolplane.AnomalyStatus, after string, limit int, by *toolplane.Credential) ([]toolplane.Anomaly, string, error) {
	if err := MayTriage(by); err != nil {
		return nil, "", err
	}
	switch status {
	case "", toolplane.AnomalyOpen, toolplane.AnomalyAcknowledged:
	default:
		return nil, "", fmt.Errorf("%w, not %q", ErrStatus, status)
	}
	items, next, err := s.store.ListAnomalies(ctx, by.OrganizationID, status, after, limit)
	if err != nil {
		return nil, "", fmt.Errorf("list anomalies: %w", err)
	}
	return items, next, nil
}

// Get answers the caller's organization's item, or an error wrapping
// toolplane.ErrNotFound.
func (s *Service) Get(ctx context.Context, id string, by *toolplane.Credential) (*toolplane.Anomaly, error) {
	if err := MayTriage(by); err != nil {
		return nil, err
	}
	return s.store.GetAnomaly(ctx, by.OrganizationID, id)
}

// Acknowledge marks the caller's organization's item acknowledged by the
// caller, and answers it. An item acknowledged already is answered as it
// stands (who acknowledged it first stays); no such item is an error
// wrapping toolplane.ErrNotFound.
func (s *Service) Acknowledge(ctx context.Context, id string, by *toolplane.Credential) (*toolplane.Anomaly, error) {
	if err := MayTriage(by); err != nil {
		return nil, err
	}
	if _, err := s.store.AcknowledgeAnomaly(ctx, by.OrganizationID, id, by.Subject, s.cfg.Now()); err != nil {
		return nil, fmt.Errorf("acknowledge anomaly: %w", err)
	}
	a, err := s.store.GetAnomaly(ctx, by.OrganizationID, id)
	if err != nil {
		return nil, fmt.Errorf("acknowledge anomaly: %w", err)
	}
	return a, nil
}

// Count answers how many of the caller's organization's items are in a
// state, counting at most limit (past it, limit), to those who may read
// them (MayTriage): the navigation's count, at a bounded cost.
func (s *Service) Count(ctx context.Context, status toolplane.AnomalyStatus, limit int, by *toolplane.Credential) (int, error) {
	if err := MayTriage(by); err != nil {
		return 0, err
	}
	n, err := s.store.CountAnomalies(ctx, by.OrganizationID, status, limit)
	if err != nil {
		return 0, fmt.Errorf("count anomalies: %w", err)
	}
	return n, nil
}
