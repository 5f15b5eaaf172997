package resilience_test

import (
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/testclock"
	"github.com/toolplane/toolplane/resilience"
)

func newClock() *testclock.Clock {
	return testclock.New(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
}

// step is one move of a breaker test: record endings, advance the clock,
// or ask Allow and check its answer.
type step struct {
	record  resilience.Outcome
	n       int  // how many endings to record (0: none)
	probe   bool // record as the probe
	advance time.Duration
	// allow, when set, asks Allow and expects ok == want, probe == wantProbe.
	allow, want, wantProbe bool
	// is, when set, is the state expected after the step.
	is string
}

func TestBreakerStates(t *testing.T) {
	t.Parallel()
	const F, S, N = resilience.Failure, resilience.Success, resilience.Neutral
	cases := []struct {
		name  string
		steps []step
	}{
		{"19 failures are too few samples", []step{
			{record: F, n: 19, is: "closed"},
			{allow: true, want: true, is: "closed"},
		}},
		{"20 failures open", []step{
			{record: F, n: 20, is: "open"},
			{allow: true, want: false, is: "open"},
		}},
		{"exactly half failing opens", []step{
			{record: S, n: 10}, {record: F, n: 10, is: "open"},
		}},
		{"under half failing stays closed", []step{
			{record: S, n: 11}, {record: F, n: 10, is: "closed"},
		}},
		{"business answers are successes", []step{
			{record: S, n: 100}, {record: F, n: 20, is: "closed"},
		}},
		{"neutral endings are not samples", []step{
			{record: N, n: 100}, {record: F, n: 19, is: "closed"}, {record: F, n: 1, is: "open"},
		}},
		{"failures older than the window are forgotten", []step{
			{record: F, n: 19}, {advance: 31 * time.Second}, {record: F, n: 1, is: "closed"},
		}},
		{"open until the cooldown, then one probe", []step{
			{record: F, n: 20, is: "open"},
			{advance: 29 * time.Second}, {allow: true, want: false, is: "open"},
			{advance: time.Second}, {allow: true, want: true, wantProbe: true, is: "half_open"},
			{allow: true, want: false, is: "half_open"},
			{allow: true, want: false, is: "half_open"},
		}},
		{"a probe that succeeds closes", []step{
			{record: F, n: 20}, {advance: 30 * time.Second}, {allow: true, want: true, wantProbe: true},
			{record: S, n: 1, probe: true, is: "closed"},
			{allow: true, want: true, is: "closed"},
			// the failures before are history: one more does not reopen
			{record: F, n: 1, is: "closed"},
		}},
		{"a probe that fails reopens with the cooldown doubled", []step{
			{record: F, n: 20}, {advance: 30 * time.Second}, {allow: true, want: true, wantProbe: true},
			{record: F, n: 1, probe: true, is: "open"},
			{advance: 59 * time.Second}, {allow: true, want: false, is: "open"},
			{advance: time.Second}, {allow: true, want: true, wantProbe: true, is: "half_open"},
		}},
		{"a neutral probe lets another probe", []step{
			{record: F, n: 20}, {advance: 30 * time.Second}, {allow: true, want: true, wantProbe: true},
			{record: N, n: 1, probe: true, is: "half_open"},
			{allow: true, want: true, wantProbe: true, is: "half_open"},
		}},
		{"a late ending of a call before the trip does not decide", []step{
			{record: F, n: 20}, {advance: 30 * time.Second}, {allow: true, want: true, wantProbe: true},
			{record: S, n: 5, is: "half_open"},
			{allow: true, want: false, is: "half_open"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			b := resilience.NewBreaker(resilience.BreakerConfig{}, clock.Now)
			for i, s := range tc.steps {
				for range s.n {
					b.Record(s.record, s.probe)
				}
				clock.Advance(s.advance)
				if s.allow {
					ok, probe, wait := b.Allow()
					if ok != s.want || probe != s.wantProbe {
						t.Fatalf("step %d: Allow = %v, probe %v (wait %v); want %v, probe %v", i, ok, probe, wait, s.want, s.wantProbe)
					}
					if !ok && wait <= 0 {
						t.Fatalf("step %d: a refusal without a wait", i)
					}
				}
				if got := b.Status().State.String(); s.is != "" && got != s.is {
					t.Fatalf("step %d: state %v, want %v", i, got, s.is)
				}
			}
		})
	}
}

func TestBreakerCooldownCapped(t *testing.T) {
	t.Parallel()
	clock := newClock()
	b := resilience.NewBreaker(resilience.BreakerConfig{}, clock.Now)
	for range 20 {
		b.Record(resilience.Failure, false)
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		st := b.Status()
		if got := st.NextProbe.Sub(st.OpenedAt); got != w {
			t.Fatalf("trip %d: cooldown %v, want %v", i, got, w)
		}
		clock.Advance(w)
		if ok, probe, _ := b.Allow(); !ok || !probe {
			t.Fatalf("trip %d: no probe after the cooldown", i)
		}
		b.Record(resilience.Failure, true)
	}
	if st := b.Status(); st.Trips != int64(len(want)+1) {
		t.Fatalf("trips = %d", st.Trips)
	}
}

func TestBreakerWaitIsTimeToProbe(t *testing.T) {
	t.Parallel()
	clock := newClock()
	b := resilience.NewBreaker(resilience.BreakerConfig{}, clock.Now)
	for range 20 {
		b.Record(resilience.Failure, false)
	}
	clock.Advance(12 * time.Second)
	if _, _, wait := b.Allow(); wait != 18*time.Second {
		t.Fatalf("wait = %v, want 18s", wait)
	}
}
