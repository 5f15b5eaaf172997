package anomaly

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/toolplane/toolplane"
)

// Report is what one Step did.
type Report struct {
	// Windows is how many windows it folded in; Through the end of the
	// last (the watermark), zero when it folded none.
	Windows int
	Through time.Time
	// Filed are the items it filed; Updated counts the open items a
	// continuing deviation updated.
	Filed   []toolplane.Anomaly
	Updated int
}

// key names one baseline in an organization.
type key struct{ agent, tool string }

// observation is one window's value of every signal, in
// toolplane.AnomalySignals' order.
type observation [len(toolplane.AnomalySignals)]float64

// refusals are the outcomes that count as denials; every outcome but
// these, "ok" and "approval_required" is an error.
var refusals = map[string]bool{"denied": true, "rejected": true}

func (o *observation) add(t toolplane.AuditTally) {
	n := float64(t.Calls)
	o[0] += n
	switch {
	case refusals[t.Outcome]:
		o[1] += n
	case t.Outcome != "ok" && t.Outcome != "approval_required":
		o[2] += n
	}
	o[3] += float64(t.CostCents)
}

// Step folds in every window that has ended and settled since the
// watermark, at most Config.MaxWindows, filing an item for each
// deviation, and drops the baselines idle past Config.Retain. It stops
// early, with no error, when another node advanced the watermark first.
func (s *Service) Step(ctx context.Context) (Report, error) {
	rep, _, err := s.step(ctx, false)
	return rep, err
}

// Pending does what a Step would while the windows settled since the
// watermark hold no call, and answers whether a Step is still needed:
// true at the first window with a call, which it leaves to the Step. A
// window without a call changes no baseline (a quiet pair's zeros are
// folded in with its next call), so moving the watermark over it is all
// a Step does for it. Pending reads nothing while no window has settled
// past the watermark this Service last knew (the watermark only moves
// forward). It is the periodic job's check: the job runs a Step only for
// a window with a call, and an idle deployment runs none.
func (s *Service) Pending(ctx context.Context) (pending bool, err error) {
	if k := s.known.Load(); k != 0 && s.unsettled(time.UnixMicro(k).UTC(), s.cfg.Now()) {
		return false, nil
	}
	_, pending, err = s.step(ctx, true)
	return pending, err
}

// unsettled answers whether the window starting at start has not yet
// ended and settled by now.
func (s *Service) unsettled(start, now time.Time) bool {
	return start.Add(s.cfg.Window + s.cfg.Settle).After(now)
}

// step is Step; quiet (Pending), it stops before the first window with a call and
// answers pending.
func (s *Service) step(ctx context.Context, quiet bool) (rep Report, pending bool, err error) {
	now := s.cfg.Now()
	w := s.cfg.Window
	mark, err := s.store.AnomalyWatermark(ctx)
	if err != nil {
		return rep, false, err
	}
	s.learn(mark)
	from := mark
	if from.IsZero() {
		from = windowStart(now, w).Add(-time.Duration(s.cfg.Backfill) * w)
	}
	cache := map[string]map[key]*toolplane.AnomalyBaseline{}
	for start := from; rep.Windows < s.cfg.MaxWindows && !s.unsettled(start, now); start = start.Add(w) {
		tallies, err := s.store.TallyAudit(ctx, start, start.Add(w))
		if err != nil {
			return rep, false, err
		}
		if quiet && len(tallies) > 0 {
			return rep, true, nil
		}
		if err := s.fold(ctx, start, tallies, cache, &rep); err != nil {
			return rep, false, err
		}
		ok, err := s.store.AdvanceAnomalyWatermark(ctx, mark, start.Add(w))
		if err != nil {
			return rep, false, err
		}
		if !ok {
			return rep, false, nil // another node folds from here
		}
		mark = start.Add(w)
		s.learn(mark)
		rep.Windows++
		rep.Through = mark
	}
	if quiet && rep.Windows == 0 {
		// Nothing settled: the baselines were judged for retention by
		// the pass that last moved the watermark, a window ago at most.
		return rep, false, nil
	}
	if _, err := s.store.DeleteAnomalyBaselines(ctx, now.Add(-s.cfg.Retain), 1000); err != nil {
		return rep, false, err
	}
	return rep, false, nil
}

// learn records mark as a watermark known to be stored.
func (s *Service) learn(mark time.Time) {
	if !mark.IsZero() {
		s.known.Store(mark.UnixMicro())
	}
}

// windowStart answers the start of the window holding t.
func windowStart(t time.Time, w time.Duration) time.Time {
	return time.UnixMicro(t.UnixMicro() - t.UnixMicro()%w.Microseconds()).UTC()
}

// fold folds the window starting at start, its tallies, into the
// baselines of every agent and tool with a call in it, filing what
// deviates.
func (s *Service) fold(ctx context.Context, start time.Time, tallies []toolplane.AuditTally, cache map[string]map[key]*toolplane.AnomalyBaseline, rep *Report) error {
	seen := map[string]map[key]*observation{}
	for _, t := range tallies {
		byKey := seen[t.OrganizationID]
		if byKey == nil {
			byKey = map[key]*observation{}
			seen[t.OrganizationID] = byKey
		}
		k := key{t.AgentID, t.Tool}
		o := byKey[k]
		if o == nil {
			o = new(observation)
			byKey[k] = o
		}
		o.add(t)
	}
	for org, byKey := range seen {
		baselines, err := s.baselines(ctx, org, cache)
		if err != nil {
			return err
		}
		stale := false
		for k, o := range byKey {
			prev := baselines[k]
			next, flagged := s.judge(org, k, prev, start, o)
			ok, err := s.store.PutAnomalyBaseline(ctx, next)
			if err != nil {
				return err
			}
			if !ok {
				// Another run folded this window first, and filed what
				// it found: the organization's baselines are read again
				// for the next window.
				stale = true
				continue
			}
			baselines[k] = next
			for i := range flagged {
				if err := s.file(ctx, &flagged[i], rep); err != nil {
					return err
				}
			}
		}
		if stale {
			delete(cache, org)
		}
	}
	return nil
}

// baselines answers the organization's baselines, read once a Step.
func (s *Service) baselines(ctx context.Context, org string, cache map[string]map[key]*toolplane.AnomalyBaseline) (map[key]*toolplane.AnomalyBaseline, error) {
	if b, ok := cache[org]; ok {
		return b, nil
	}
	rows, err := s.store.ListAnomalyBaselines(ctx, org)
	if err != nil {
		return nil, err
	}
	out := make(map[key]*toolplane.AnomalyBaseline, len(rows))
	for i := range rows {
		out[key{rows[i].AgentID, rows[i].Tool}] = &rows[i]
	}
	cache[org] = out
	return out, nil
}

// file stores one deviation's item, and tells of a new one.
func (s *Service) file(ctx context.Context, a *toolplane.Anomaly, rep *Report) error {
	got, isNew, err := s.store.FileAnomaly(ctx, a)
	if err != nil {
		return fmt.Errorf("file anomaly of %s/%s: %w", a.AgentID, a.Tool, err)
	}
	if !isNew {
		rep.Updated++
		return nil
	}
	rep.Filed = append(rep.Filed, *got)
	s.cfg.Logger.InfoContext(ctx, "anomaly filed", "organization", got.OrganizationID, "id", got.ID, "agent", got.AgentID,
		"tool", got.Tool, "signal", got.Signal, "observed", got.Observed, "mean", got.Mean, "score", got.Score)
	if s.cfg.Notice != nil {
		if err := s.cfg.Notice(ctx, got); err != nil {
			s.cfg.Logger.ErrorContext(ctx, "anomaly notice not sent", "id", got.ID, "err", err)
		}
	}
	return nil
}

// maxIdle bounds the idle windows folded in one by one: past it a
// baseline has decayed to nothing whatever it held.
func (s *Service) maxIdle() int64 { return int64(10 * s.cfg.Baseline) }

// judge answers the baseline after the window starting at start, whose
// values are o, and the items of the signals that deviate from prev (nil:
// the pair's first window).
func (s *Service) judge(org string, k key, prev *toolplane.AnomalyBaseline, start time.Time, o *observation) (*toolplane.AnomalyBaseline, []toolplane.Anomaly) {
	next := &toolplane.AnomalyBaseline{OrganizationID: org, AgentID: k.agent, Tool: k.tool, Bucket: start, LastActive: start}
	if prev == nil {
		hour := &next.Hours[start.UTC().Hour()]
		for i, x := range o {
			next.Stats[i] = toolplane.AnomalyStat{Mean: x}
			hour.Stats[i] = toolplane.AnomalyStat{Mean: x}
		}
		next.Buckets, hour.Windows = 1, 1
		return next, nil
	}
	next.Buckets, next.Stats = prev.Buckets, prev.Stats
	// The windows without a call since the last one folded in are
	// observations of zero.
	next.Hours = prev.Hours
	idle := int64(start.Sub(prev.Bucket)/s.cfg.Window) - 1
	for i := int64(0); i < min(idle, s.maxIdle()); i++ {
		next.Buckets++
		hour := &next.Hours[prev.Bucket.Add(time.Duration(i+1)*s.cfg.Window).UTC().Hour()]
		hour.Windows++
		for j := range next.Stats {
			s.update(&next.Stats[j], 0, next.Buckets, s.alpha)
			s.update(&hour.Stats[j], 0, hour.Windows, s.hourAlpha)
		}
	}
	if idle > s.maxIdle() {
		next.Buckets += idle - s.maxIdle()
	}
	var flagged []toolplane.Anomaly
	judging := next.Buckets >= int64(s.cfg.MinWindows)
	hour := &next.Hours[start.UTC().Hour()]
	// The time-of-day profile has a say once it holds a few days of this
	// hour: a rise that comes every day at this hour is not flagged.
	daily := hour.Windows >= s.minHourWindows
	next.Buckets++
	hour.Windows++
	for i, x := range o {
		st := &next.Stats[i]
		signal := toolplane.AnomalySignals[i]
		floor := s.cfg.Floors[signal]
		z, sdUsed, sd := s.score(st, floor, x)
		folded := x
		usual := false
		if daily {
			zh, _, _ := s.score(&hour.Stats[i], floor, x)
			usual = zh < s.cfg.Threshold || x-hour.Stats[i].Mean < floor.Excess
		}
		if judging && !usual && z >= s.cfg.Threshold && x-st.Mean >= floor.Excess {
			flagged = append(flagged, toolplane.Anomaly{
				ID: toolplane.NewID("ano_"), OrganizationID: org, AgentID: k.agent, Tool: k.tool, Signal: signal,
				Observed: x, Mean: st.Mean, StdDev: sd, Score: z,
				WindowStart: start, WindowEnd: start.Add(s.cfg.Window), Windows: 1, Status: toolplane.AnomalyOpen,
				CreatedAt: s.cfg.Now(), UpdatedAt: s.cfg.Now(),
			})
			// A burst does not teach the baseline that bursts are
			// normal at once.
			folded = st.Mean + s.cfg.Threshold*sdUsed
		}
		s.update(st, folded, next.Buckets, s.alpha)
		s.update(&hour.Stats[i], folded, hour.Windows, s.hourAlpha)
	}
	return next, flagged
}

// score answers how far x is above st, in floored standard deviations,
// with the floored and the plain standard deviation.
func (s *Service) score(st *toolplane.AnomalyStat, floor Floor, x float64) (z, floored, sd float64) {
	sd = math.Sqrt(max(st.Variance, 0))
	floored = max(sd, floor.StdDev, relativeFloor*st.Mean)
	return (x - st.Mean) / floored, floored, sd
}

// update folds x into st as the n-th window: weighted by 1/n while n is
// below the baseline's length (the plain running mean and variance), by
// alpha after.
func (s *Service) update(st *toolplane.AnomalyStat, x float64, n int64, alpha float64) {
	a := max(alpha, 1/float64(n))
	d := x - st.Mean
	inc := a * d
	st.Mean += inc
	st.Variance = (1 - a) * (st.Variance + d*inc)
}
