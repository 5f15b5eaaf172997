// Package traffic answers what an organization's calls did over the last
// hour or day: how many, how many failed and how many were refused, how
// long they took (percentiles), and what they cost, in total, per tool and
// per agent, and step by step for a chart. The figures are read from the
// audit trail (toolplane.TrafficStore), the one record every call's answer
// has, so they agree with it; nothing is stored beside it (a node keeps
// in memory what it counted of a day's steps that are over, see
// Service.read).
//
// Who may read them is who may read the audit trail (audit.MayRead): they
// are the trail counted, per agent, with its costs.
package traffic

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/audit"
)

// Window is the span an overview covers, ending now.
type Window string

// The windows.
const (
	// Hour: the last hour, by the minute.
	Hour Window = "hour"
	// Day: the last day, by the half hour.
	Day Window = "day"
)

// Windows are the windows an overview offers, in order.
var Windows = []Window{Hour, Day}

// span and step answer w's length and the width of its chart's steps.
func (w Window) span() (span, step time.Duration, ok bool) {
	switch w {
	case Hour:
		return time.Hour, time.Minute, true
	case Day:
		return 24 * time.Hour, 30 * time.Minute, true
	}
	return 0, 0, false
}

// Kind is how a call's answer counts.
type Kind int

// The kinds of answers.
const (
	// Answered: the call ran to an answer (ok, or an outcome this
	// package does not know).
	Answered Kind = iota
	// Failed: the platform or the downstream failed the call (a timeout,
	// an unavailable or failing downstream, an uncertain effect, an
	// answer that broke its schema, an internal error).
	Failed
	// Refused: the call was refused before it ran (a denial, a
	// rejection, invalid input, a limit, a missing connection, ...).
	Refused
	// Held: the call waits for a person's approval; its resumption is
	// counted as the call.
	Held
)

// KindOf answers how an answer with outcome counts.
func KindOf(outcome string) Kind {
	switch toolplane.Code(outcome) {
	case toolplane.CodeInvalidOutput, toolplane.CodeUnavailable, toolplane.CodeRetryableUpstream,
		toolplane.CodeTimeout, toolplane.CodeUncertain, toolplane.CodeInternalError:
		return Failed
	}
	if outcome == "approval_required" {
		return Held
	}
	if toolplane.Code(outcome).Valid() {
		return Refused
	}
	return Answered
}

// Figures are what a set of calls did. Calls counts every call answered
// in the window but those held for approval (Held), which are counted when
// they resume; Failed and Refused are among Calls. The percentiles are of
// the calls that ran (answered or failed: a refusal takes no time worth
// measuring), estimated from toolplane.TrafficLatencyBounds' buckets.
type Figures struct {
	Calls, Failed, Refused, Held int64
	CostCents                    int64
	P50, P95, P99                time.Duration
	// ran counts the calls that ran per latency bucket.
	ran []int64
}

// ErrorRate is the share of Calls that failed, 0 without calls.
func (f Figures) ErrorRate() float64 { return rate(f.Failed, f.Calls) }

// RefusalRate is the share of Calls that were refused, 0 without calls.
func (f Figures) RefusalRate() float64 { return rate(f.Refused, f.Calls) }

func rate(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// add counts c in f.
func (f *Figures) add(c toolplane.TrafficCell) {
	f.CostCents += c.CostCents
	switch KindOf(c.Outcome) {
	case Held:
		f.Held += c.Calls
		return
	case Refused:
		f.Refused += c.Calls
		f.Calls += c.Calls
		return
	case Failed:
		f.Failed += c.Calls
	}
	f.Calls += c.Calls
	if f.ran == nil {
		f.ran = make([]int64, len(toolplane.TrafficLatencyBounds)+1)
	}
	if c.Latency >= 0 && c.Latency < len(f.ran) {
		f.ran[c.Latency] += c.Calls
	}
}

// settle computes f's percentiles from its buckets.
func (f *Figures) settle() {
	f.P50, f.P95, f.P99 = Quantile(f.ran, 0.50), Quantile(f.ran, 0.95), Quantile(f.ran, 0.99)
}

// Quantile estimates the q-quantile (0 < q <= 1) of the latencies counted
// per bucket of toolplane.TrafficLatencyBounds in counts (one more than the
// bounds: the last is unbounded), interpolating linearly within the
// bucket it falls in; the unbounded bucket answers its lower bound. No
// latency answers 0.
func Quantile(counts []int64, q float64) time.Duration {
	var total int64
	for _, n := range counts {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	var seen int64
	for i, n := range counts {
		if n == 0 || float64(seen+n) < rank {
			seen += n
			continue
		}
		var lower int64
		if i > 0 {
			lower = toolplane.TrafficLatencyBounds[i-1]
		}
		if i >= len(toolplane.TrafficLatencyBounds) {
			return time.Duration(lower) * time.Microsecond
		}
		upper := toolplane.TrafficLatencyBounds[i]
		micros := float64(lower) + (rank-float64(seen))/float64(n)*float64(upper-lower)
		return time.Duration(micros * float64(time.Microsecond))
	}
	return time.Duration(toolplane.TrafficLatencyBounds[len(toolplane.TrafficLatencyBounds)-1]) * time.Microsecond
}

// Line is the figures of one tool or one agent ("" when the calls named
// none).
type Line struct {
	Name string
	Figures
}

// Step is one bar of an overview's chart: the calls answered from Start
// for the overview's Step, by how they ended, and their cost.
type Step struct {
	Start                             time.Time
	Calls, Failed, Refused, CostCents int64
}

// MaxLines bounds the tools and the agents an overview lists, the busiest
// first; Overview.Truncated says when more were counted.
const MaxLines = 50

// Overview is what an organization's calls did in a window: in total, per
// tool and per agent (the busiest first), and per step.
type Overview struct {
	Window      Window
	From, Until time.Time
	Step        time.Duration
	// Tool is the one tool the overview counts, "" for every tool.
	Tool      string
	Total     Figures
	Tools     []Line
	Agents    []Line
	Steps     []Step
	Truncated bool
}

// Service answers overviews from the store.
type Service struct {
	store toolplane.TrafficStore
	now   func() time.Time
	// sealed keeps, per organization, the counted calls of the day's
	// steps that are over (see read).
	mu     sync.Mutex
	sealed map[string]*orgSteps
}

// orgSteps are one organization's sealed steps: each step's cells (of
// every tool) by its start, and when they were last read.
type orgSteps struct {
	cells map[time.Time][]toolplane.TrafficCell
	used  time.Time
}

// sealAfter is how long after a step ends it is taken as complete: an
// event is stored with the time its call was answered, within moments
// (the audit writer's flush), so a step this long over gains no more.
const sealAfter = 2 * time.Minute

// maxSealedOrgs bounds the organizations whose sealed steps a node keeps;
// the one read longest ago makes room for another.
const maxSealedOrgs = 64

// maxSealedCells bounds the cells one sealed step keeps: past it, the
// step is counted at each view instead (see sealedStep), so one
// organization's cache is at most 48 steps of it.
const maxSealedCells = 4096

// New answers the service reading store; now is its clock (nil:
// time.Now).
func New(store toolplane.TrafficStore, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, now: now, sealed: map[string]*orgSteps{}}
}

// read answers q's cells and series points. The hour is read from the
// trail whole: a few thousand calls at most are one short index range.
// A day can hold a million calls, too many to count on every view: its
// steps that are over (sealAfter) are counted once each, from the trail,
// and kept by the service; only the steps since are counted on each view.
// A sealed step counts what the trail held when it was sealed: a range
// of the trail dropped later (retention) is still counted until the step
// leaves the day.
func (s *Service) read(ctx context.Context, w Window, q toolplane.TrafficQuery) ([]toolplane.TrafficCell, []toolplane.TrafficPoint, error) {
	live := q
	var cells []toolplane.TrafficCell
	var points []toolplane.TrafficPoint
	if w == Day {
		horizon := s.now().Add(-sealAfter)
		i := 0
		for start := q.From; !start.Add(q.Step).After(horizon) && start.Before(q.Until); start = start.Add(q.Step) {
			sc, err := s.sealedStep(ctx, q.OrganizationID, start, q.Step, q.From)
			if err != nil {
				return nil, nil, err
			}
			byOutcome := map[string]*toolplane.TrafficPoint{}
			for _, c := range sc {
				if q.Tool != "" && c.Tool != q.Tool {
					continue
				}
				cells = append(cells, c)
				p := byOutcome[c.Outcome]
				if p == nil {
					p = &toolplane.TrafficPoint{Step: i, Outcome: c.Outcome}
					byOutcome[c.Outcome] = p
				}
				p.Calls += c.Calls
				p.CostCents += c.CostCents
			}
			for _, p := range byOutcome {
				points = append(points, *p)
			}
			live.From = start.Add(q.Step)
			i++
		}
	}
	if !live.From.Before(live.Until) {
		return cells, points, nil
	}
	lc, err := s.store.TrafficCells(ctx, live)
	if err != nil {
		return nil, nil, fmt.Errorf("traffic of %s: %w", w, err)
	}
	lp, err := s.store.TrafficSeries(ctx, live)
	if err != nil {
		return nil, nil, fmt.Errorf("traffic series of %s: %w", w, err)
	}
	offset := int(live.From.Sub(q.From) / q.Step)
	for _, p := range lp {
		p.Step += offset
		points = append(points, p)
	}
	return append(cells, lc...), points, nil
}

// sealedStep answers the cells of org's step starting at start, of every
// tool: kept, or counted from the trail and kept. Steps before dayFrom
// (out of the day) are forgotten.
func (s *Service) sealedStep(ctx context.Context, org string, start time.Time, step time.Duration, dayFrom time.Time) ([]toolplane.TrafficCell, error) {
	s.mu.Lock()
	kept := s.sealed[org]
	if kept != nil {
		kept.used = s.now()
		if c, ok := kept.cells[start]; ok {
			s.mu.Unlock()
			return c, nil
		}
	}
	s.mu.Unlock()
	c, err := s.store.TrafficCells(ctx, toolplane.TrafficQuery{OrganizationID: org, From: start, Until: start.Add(step), Step: step})
	if err != nil {
		return nil, fmt.Errorf("traffic of the step at %s: %w", start.Format(time.RFC3339), err)
	}
	if c == nil {
		c = []toolplane.TrafficCell{}
	}
	if len(c) > maxSealedCells {
		// A step of more tools × agents × outcomes than a cache should
		// hold is counted again at each view: slower, never wrong, and
		// an organization with thousands of agents cannot grow a node's
		// memory through it.
		return c, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kept = s.sealed[org]
	if kept == nil {
		if len(s.sealed) >= maxSealedOrgs {
			var oldest string
			for o, v := range s.sealed {
				if oldest == "" || v.used.Before(s.sealed[oldest].used) {
					oldest = o
				}
			}
			delete(s.sealed, oldest)
		}
		kept = &orgSteps{cells: map[time.Time][]toolplane.TrafficCell{}}
		s.sealed[org] = kept
	}
	kept.used = s.now()
	for t := range kept.cells {
		if t.Before(dayFrom) {
			delete(kept.cells, t)
		}
	}
	kept.cells[start] = c
	return c, nil
}

// MayRead answers nil when by may read the traffic figures: who may read
// the audit trail they are counted from.
func MayRead(by *toolplane.Credential) error { return audit.MayRead(by) }

// Overview answers what the calls of by's organization did in the window
// ending now, of tool alone when it is not "", to a person who may read
// them (MayRead).
func (s *Service) Overview(ctx context.Context, by *toolplane.Credential, w Window, tool string) (*Overview, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	span, step, ok := w.span()
	if !ok {
		return nil, fmt.Errorf("%w: window %q: one of hour, day", toolplane.ErrInvalid, w)
	}
	if err := toolplane.CheckLen("tool", tool, toolplane.MaxNameLen); err != nil {
		return nil, err
	}
	// The chart's steps are whole steps of the clock: the last one is
	// the step now is in.
	until := s.now().UTC().Truncate(step).Add(step)
	q := toolplane.TrafficQuery{OrganizationID: by.OrganizationID, Tool: tool, From: until.Add(-span), Until: until, Step: step}
	cells, points, err := s.read(ctx, w, q)
	if err != nil {
		return nil, err
	}
	o := &Overview{Window: w, From: q.From, Until: q.Until, Step: step, Tool: tool}
	tools, agents := map[string]*Line{}, map[string]*Line{}
	for _, c := range cells {
		o.Total.add(c)
		lineOf(tools, c.Tool).add(c)
		lineOf(agents, c.AgentID).add(c)
	}
	o.Total.settle()
	var cut bool
	o.Tools, cut = ranked(tools)
	o.Agents, o.Truncated = ranked(agents)
	o.Truncated = o.Truncated || cut
	o.Steps = make([]Step, span/step)
	for i := range o.Steps {
		o.Steps[i].Start = q.From.Add(time.Duration(i) * step)
	}
	for _, p := range points {
		if p.Step < 0 || p.Step >= len(o.Steps) {
			continue
		}
		st := &o.Steps[p.Step]
		st.CostCents += p.CostCents
		switch KindOf(p.Outcome) {
		case Held:
			continue
		case Failed:
			st.Failed += p.Calls
		case Refused:
			st.Refused += p.Calls
		}
		st.Calls += p.Calls
	}
	return o, nil
}

func lineOf(m map[string]*Line, name string) *Line {
	l := m[name]
	if l == nil {
		l = &Line{Name: name}
		m[name] = l
	}
	return l
}

// ranked answers m's lines, the busiest first (ties by name), at most
// MaxLines of them, and whether there were more.
func ranked(m map[string]*Line) ([]Line, bool) {
	out := make([]Line, 0, len(m))
	for _, l := range m {
		l.settle()
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b Line) int {
		return cmp.Or(cmp.Compare(b.Calls+b.Held, a.Calls+a.Held), cmp.Compare(a.Name, b.Name))
	})
	if len(out) > MaxLines {
		return out[:MaxLines], true
	}
	return out, false
}
