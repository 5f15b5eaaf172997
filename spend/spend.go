// Package spend is the organization's view of what its metered calls
// cost: the daily ceiling an administrator sets on the whole
// organization's spend (which the invoker enforces beside each run's own
// ceiling), and reports of the usage rows by agent, tool and day.
//
// The invoker checks the ceiling; this package only keeps it. Both read
// the same per-day counter, written in the transaction of each usage row,
// so what a report or the ceiling's status shows is what the next call
// is checked against.
package spend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// ErrNotAuthorized refines toolplane.ErrForbidden: the credential may not
// read or change the organization's spend.
var ErrNotAuthorized = toolplane.Refine(toolplane.ErrForbidden, "not authorized for spend")

// InvalidError is a request refused for its form: Field names the part at
// fault as the API spells it, Why says what it must be. It is of kind
// toolplane.ErrInvalid.
type InvalidError struct {
	Field, Why string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Why }

// Unwrap answers toolplane.ErrInvalid, the kind of the error.
func (e *InvalidError) Unwrap() error { return toolplane.ErrInvalid }

// Store is what the service reads and writes.
type Store interface {
	toolplane.SpendStore
}

// Service keeps an organization's daily ceiling and reports its spend. A
// platform administrator changes the ceiling; an administrator or an
// auditor reads the ceiling and the reports, as they read the audit
// trail.
type Service struct {
	store Store
	now   func() time.Time
	known *Known
}

// Tell makes s tell k of each change of a ceiling it makes, so the node's
// own calls see it at once.
func (s *Service) Tell(k *Known) { s.known = k }

// changed tells the Known, if any, that org's ceiling changed.
func (s *Service) changed(org string) {
	if s.known != nil {
		s.known.Forget(org)
	}
}

// New answers a service over store; now is its clock, time.Now when nil.
func New(store Store, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, now: now}
}

// MayRead refuses a caller who may not read the organization's spend
// (its reports and its daily ceiling): a platform_admin or an auditor.
func MayRead(by *toolplane.Credential) error {
	if !by.HasAnyRole(toolplane.RolePlatformAdmin, toolplane.RoleAuditor) {
		return toolplane.Refuse(by, ErrNotAuthorized, "reading the organization's spend needs the platform_admin or auditor role")
	}
	return nil
}

func mayWrite(by *toolplane.Credential) error {
	if !by.HasAnyRole(toolplane.RolePlatformAdmin) {
		return toolplane.Refuse(by, ErrNotAuthorized, "changing the organization's daily spend ceiling needs the platform_admin role")
	}
	return nil
}

// Status is the organization's daily ceiling (nil when it has none) and
// what it spent today, UTC.
type Status struct {
	Ceiling *toolplane.SpendCeiling `json:"ceiling"`
	// Day is today, UTC (YYYY-MM-DD).
	Day        string `json:"day"`
	SpentCents int64  `json:"spent_cents"`
	Calls      int64  `json:"calls"`
	// Exhausted is set when today's spend reached the ceiling: metered
	// calls are refused (budget_exhausted) until the next UTC day, or
	// until the ceiling is raised.
	Exhausted bool `json:"exhausted"`
}

// SetCeiling creates or replaces the credential's organization's daily
// ceiling, recorded in the change log.
func (s *Service) SetCeiling(ctx context.Context, by *toolplane.Credential, dailyCents int64) (*Status, error) {
	if err := mayWrite(by); err != nil {
		return nil, err
	}
	if dailyCents < 1 || dailyCents > toolplane.MaxDailyCeilingCents {
		return nil, &InvalidError{"daily_cents", fmt.Sprintf("want the most the organization's metered calls may cost in one UTC day, in cents, 1 to %d", toolplane.MaxDailyCeilingCents)}
	}
	now := s.now()
	c := &toolplane.SpendCeiling{OrganizationID: by.OrganizationID, DailyCents: dailyCents, UpdatedBy: by.Subject, UpdatedAt: now}
	if err := s.store.PutSpendCeiling(ctx, c, s.change(by, "spend_ceiling.set", map[string]any{"daily_cents": dailyCents})); err != nil {
		return nil, fmt.Errorf("set the daily spend ceiling: %w", err)
	}
	s.changed(by.OrganizationID)
	return s.status(ctx, by.OrganizationID)
}

// Ceiling answers the credential's organization's daily ceiling and
// today's spend.
func (s *Service) Ceiling(ctx context.Context, by *toolplane.Credential) (*Status, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	return s.status(ctx, by.OrganizationID)
}

// DeleteCeiling removes the credential's organization's daily ceiling,
// recorded in the change log; an error wrapping toolplane.ErrNotFound
// when there is none.
func (s *Service) DeleteCeiling(ctx context.Context, by *toolplane.Credential) error {
	if err := mayWrite(by); err != nil {
		return err
	}
	ok, err := s.store.DeleteSpendCeiling(ctx, by.OrganizationID, s.change(by, "spend_ceiling.delete", map[string]any{}))
	s.changed(by.OrganizationID)
	if err != nil {
		return fmt.Errorf("delete the daily spend ceiling: %w", err)
	}
	if !ok {
		return fmt.Errorf("daily spend ceiling: %w: the organization has none", toolplane.ErrNotFound)
	}
	return nil
}

func (s *Service) status(ctx context.Context, org string) (*Status, error) {
	now := s.now()
	day, err := s.store.DaySpend(ctx, org, toolplane.SpendDay(now))
	if err != nil {
		return nil, fmt.Errorf("read today's spend: %w", err)
	}
	st := &Status{Day: now.UTC().Format(time.DateOnly), SpentCents: day.SpentCents, Calls: day.Calls}
	if day.CeilingCents > 0 {
		c, err := s.store.GetSpendCeiling(ctx, org)
		switch {
		case errors.Is(err, toolplane.ErrNotFound): // deleted meanwhile
		case err != nil:
			return nil, fmt.Errorf("read the daily spend ceiling: %w", err)
		default:
			st.Ceiling = c
			st.Exhausted = day.SpentCents >= c.DailyCents
		}
	}
	return st, nil
}

func (s *Service) change(by *toolplane.Credential, kind string, detail map[string]any) *toolplane.Change {
	b, _ := json.Marshal(detail)
	return &toolplane.Change{ID: toolplane.NewID("chg_"), OrganizationID: by.OrganizationID, Kind: kind,
		Subject: "spend", Actor: by.Subject, Detail: b, CreatedAt: s.now()}
}

// MaxReportDays bounds a report's range: a year of days answers at most
// 366 lines by day, and a range past it is a mistake, not a question.
const MaxReportDays = 366

// Query is what a report asks: the usage rows created in [From, To),
// grouped By. A zero To is now; a zero From is 30 days before To.
type Query struct {
	From, To time.Time
	By       toolplane.SpendBy
}

// Report is what the meter recorded of the organization's calls in a
// range: the total, and one line per agent, tool or day.
type Report struct {
	From       time.Time             `json:"from"`
	To         time.Time             `json:"to"`
	By         toolplane.SpendBy     `json:"by"`
	Lines      []toolplane.SpendLine `json:"lines"`
	Calls      int64                 `json:"calls"`
	TotalCents int64                 `json:"total_cents"`
	// Truncated is set when the report holds the most lines it can
	// (toolplane.MaxSpendLines): there may be more groups, and the total
	// is then of the lines shown.
	Truncated bool `json:"truncated,omitempty"`
}

// Report answers the credential's organization's spend in q's range,
// grouped as q asks.
func (s *Service) Report(ctx context.Context, by *toolplane.Credential, q Query) (*Report, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	if q.By == "" {
		q.By = toolplane.SpendByDay
	}
	if !q.By.Valid() {
		return nil, &InvalidError{"by", "want agent, tool or day"}
	}
	if q.To.IsZero() {
		q.To = s.now()
	}
	if q.From.IsZero() {
		q.From = q.To.AddDate(0, 0, -30)
	}
	switch {
	case !q.From.Before(q.To):
		return nil, &InvalidError{"from", "want a time before to"}
	case q.To.Sub(q.From) > MaxReportDays*24*time.Hour:
		return nil, &InvalidError{"from", fmt.Sprintf("a report covers at most %d days", MaxReportDays)}
	}
	lines, err := s.store.SpendReport(ctx, by.OrganizationID, q.From, q.To, q.By, toolplane.MaxSpendLines)
	if err != nil {
		return nil, fmt.Errorf("spend report: %w", err)
	}
	r := &Report{From: q.From.UTC(), To: q.To.UTC(), By: q.By, Lines: lines, Truncated: len(lines) == toolplane.MaxSpendLines}
	if r.Lines == nil {
		r.Lines = []toolplane.SpendLine{}
	}
	for _, l := range r.Lines {
		r.Calls += l.Calls
		r.TotalCents += l.CostCents
	}
	return r, nil
}
