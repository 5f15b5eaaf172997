package journal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/testclock"
	"github.com/toolplane/toolplane/journal"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// newClock answers the tests' settable clock at their start time.
func newClock() *testclock.Clock {
	return testclock.New(time.Date(2026, 3, 14, 9, 26, 53, 589000, time.UTC))
}

const lease = time.Minute

// fixture is a journal over a fresh store with a settable clock.
type fixture struct {
	store *sqlite.Store
	clock *testclock.Clock
	j     *journal.Journal
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s := sqlitetest.New(t)
	c := newClock()
	return &fixture{store: s, clock: c, j: journal.New(s, c.Now)}
}

// req answers a request for key under owner, allowing one handler start.
func req(key, owner string) journal.Request {
	return journal.Request{
		OrganizationID: "org-1", Tool: "crm.update", Key: key, RequestHash: "sha256:" + key,
		MaxAttempts: 1, Owner: owner, Lease: lease,
		RunID: "run-1", StepPath: "agent", Arguments: []byte(`{"to":"x"}`),
	}
}

func (f *fixture) read(t *testing.T, r journal.Request) (journal.Outcome, *toolplane.Claim) {
	t.Helper()
	o, c, err := f.j.Read(context.Background(), r)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return o, c
}

func (f *fixture) claim(t *testing.T, r journal.Request) (journal.Outcome, *toolplane.Claim) {
	t.Helper()
	o, c, err := f.j.Claim(context.Background(), r)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return o, c
}

// claimed takes a fresh claim and fails the test unless it is Claimed.
func (f *fixture) claimed(t *testing.T, r journal.Request) *toolplane.Claim {
	t.Helper()
	o, c := f.claim(t, r)
	if o != journal.Claimed {
		t.Fatalf("Claim = %v, want claimed", o)
	}
	return c
}

func (f *fixture) stored(t *testing.T, r journal.Request) *toolplane.Claim {
	t.Helper()
	c, err := f.store.GetClaim(context.Background(), r.OrganizationID, r.Tool, r.Key)
	if err != nil {
		t.Fatalf("GetClaim: %v", err)
	}
	return c
}

func wantOutcome(t *testing.T, op string, got, want journal.Outcome) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", op, got, want)
	}
}

func TestOutcomeString(t *testing.T) {
	t.Parallel()
	for o, want := range map[journal.Outcome]string{
		journal.Absent: "absent", journal.Claimed: "claimed", journal.Completed: "completed",
		journal.Processing: "processing", journal.Conflict: "conflict", journal.Uncertain: "uncertain",
	} {
		if got := o.String(); got != want {
			t.Errorf("Outcome(%d).String() = %q, want %q", int(o), got, want)
		}
	}
}

func TestReadAnswersAbsentWithoutRow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o, c := f.read(t, req("k", "w1"))
	wantOutcome(t, "Read", o, journal.Absent)
	if c != nil {
		t.Fatalf("Read answered a claim for no row: %+v", c)
	}
}

func TestClaimRecordsTheRequestAndLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := req("k", "w1")
	c := f.claimed(t, r)
	got := f.stored(t, r)
	for _, g := range []*toolplane.Claim{c, got} {
		if g.Status != toolplane.ClaimProcessing || g.Owner != "w1" || g.RequestHash != r.RequestHash ||
			!g.LeaseUntil.Equal(f.clock.Now().Add(lease)) || g.Dispatched || g.Attempts != 0 ||
			g.RunID != "run-1" || g.StepPath != "agent" || !bytes.Equal(g.Arguments, r.Arguments) {
			t.Fatalf("claim = %+v", g)
		}
	}
	if c.Version != got.Version {
		t.Fatalf("held version %d, stored %d", c.Version, got.Version)
	}
}

func TestSecondClaimAnswersProcessingWhileTheLeaseLives(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first := f.claimed(t, req("k", "w1"))
	for _, at := range []time.Duration{0, lease - time.Microsecond} {
		f.clock.Advance(at)
		o, c := f.claim(t, req("k", "w2"))
		wantOutcome(t, fmt.Sprintf("Claim by another owner at +%v", at), o, journal.Processing)
		if c.Owner != "w1" {
			t.Fatalf("Processing answered owner %q, want w1", c.Owner)
		}
		o, _ = f.read(t, req("k", "w2"))
		wantOutcome(t, "Read", o, journal.Processing)
	}
	if got := f.stored(t, req("k", "w1")); got.Owner != "w1" || got.Version != first.Version {
		t.Fatalf("a refused claim changed the row: %+v", got)
	}
}

func TestCompletedClaimAnswersTheStoredResult(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := req("k", "w1")
	c := f.claimed(t, r)
	result := []byte{0x00, '{', '"', 'o', 'k', '"', '}', 0xff}
	if err := f.j.Complete(context.Background(), c, result, nil); err != nil {
		t.Fatal(err)
	}
	if c.Status != toolplane.ClaimCompleted || c.Owner != "" || !bytes.Equal(c.Result, result) {
		t.Fatalf("held claim after Complete = %+v", c)
	}
	// What only a replay, a takeover's event or a reconciliation reads is
	// not kept once the call is answered.
	if got := f.stored(t, r); len(got.Arguments) != 0 || len(got.Invocation) != 0 || !bytes.Equal(got.Result, result) {
		t.Fatalf("stored claim after Complete keeps arguments %q, invocation %q (result %q)", got.Arguments, got.Invocation, got.Result)
	}
	// A completed claim answers its result long after the lease, to anyone.
	f.clock.Advance(10 * lease)
	o, got := f.read(t, req("k", "w2"))
	wantOutcome(t, "Read", o, journal.Completed)
	if !bytes.Equal(got.Result, result) {
		t.Fatalf("Read result = %q, want %q", got.Result, result)
	}
	o, got = f.claim(t, req("k", "w2"))
	wantOutcome(t, "Claim", o, journal.Completed)
	if !bytes.Equal(got.Result, result) || got.Status != toolplane.ClaimCompleted || got.Owner != "" {
		t.Fatalf("Claim answered %+v", got)
	}
}

func TestDifferentRequestHashAnswersConflict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, f *fixture, c *toolplane.Claim)
	}{
		{"processing", func(*testing.T, *fixture, *toolplane.Claim) {}},
		{"completed", func(t *testing.T, f *fixture, c *toolplane.Claim) {
			if err := f.j.Complete(context.Background(), c, []byte(`{}`), nil); err != nil {
				t.Fatal(err)
			}
		}},
		{"uncertain", func(t *testing.T, f *fixture, c *toolplane.Claim) {
			if err := f.j.Hold(context.Background(), c, "timeout", nil); err != nil {
				t.Fatal(err)
			}
		}},
		{"lease expired", func(_ *testing.T, f *fixture, _ *toolplane.Claim) { f.clock.Advance(2 * lease) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			c := f.claimed(t, req("k", "w1"))
			tt.setup(t, f, c)
			before := f.stored(t, req("k", "w1"))
			other := req("k", "w2")
			other.RequestHash = "sha256:other"
			o, got := f.read(t, other)
			wantOutcome(t, "Read", o, journal.Conflict)
			if got.RequestHash != "sha256:k" {
				t.Fatalf("Read answered hash %q", got.RequestHash)
			}
			o, got = f.claim(t, other)
			wantOutcome(t, "Claim", o, journal.Conflict)
			if got.RequestHash != "sha256:k" {
				t.Fatalf("Claim answered hash %q", got.RequestHash)
			}
			if after := f.stored(t, req("k", "w1")); after.Version != before.Version || after.Owner != before.Owner {
				t.Fatalf("a conflict changed the row: %+v -> %+v", before, after)
			}
		})
	}
}

func TestReleaseDeletesTheClaim(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := req("k", "w1")
	c := f.claimed(t, r)
	if err := f.j.Release(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.GetClaim(context.Background(), r.OrganizationID, r.Tool, r.Key); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetClaim after Release: %v, want ErrNotFound", err)
	}
	o, _ := f.read(t, r)
	wantOutcome(t, "Read", o, journal.Absent)
	c2 := f.claimed(t, req("k", "w2"))
	if c2.Owner != "w2" || c2.Attempts != 0 || c2.Dispatched {
		t.Fatalf("fresh claim after Release = %+v", c2)
	}
	// The new row's versions never meet the released row's: a holder of
	// the old claim can act on the new one neither by Dispatch nor Release.
	if c2.Version == c.Version || c2.Version == c.Version+1 {
		t.Fatalf("a claimed-again row reused the version %d", c2.Version)
	}
	stale := *c
	if err := f.j.Dispatch(context.Background(), &stale); !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("a stale holder dispatched the new claim: %v", err)
	}
	if err := f.j.Release(context.Background(), c); !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("a stale holder released the new claim: %v", err)
	}
}

func TestHoldAnswersUncertain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.claimed(t, req("k", "w1"))
	if err := f.j.Dispatch(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if err := f.j.Hold(context.Background(), c, "handler timed out", nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range []journal.Request{req("k", "w1"), req("k", "w2")} {
		o, got := f.read(t, r)
		wantOutcome(t, "Read", o, journal.Uncertain)
		if got.Reason != "handler timed out" {
			t.Fatalf("Read reason = %q", got.Reason)
		}
		o, got = f.claim(t, r)
		wantOutcome(t, "Claim", o, journal.Uncertain)
		// The owner stays, naming the worker that held the call.
		if got.Status != toolplane.ClaimUncertain || got.Owner != "w1" || got.Reason != "handler timed out" {
			t.Fatalf("Claim answered %+v", got)
		}
	}
	// Uncertain is not a lease: its expiry changes nothing.
	f.clock.Advance(10 * lease)
	r := req("k", "w3")
	r.MaxAttempts = 5
	o, _ := f.claim(t, r)
	wantOutcome(t, "Claim after the lease", o, journal.Uncertain)
}

func TestExpiredLeaseBeforeDispatchIsReclaimed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first := f.claimed(t, req("k", "w1"))
	f.clock.Advance(lease) // the lease ends at exactly this instant
	o, got := f.read(t, req("k", "w2"))
	wantOutcome(t, "Read", o, journal.Absent)
	if got == nil || got.Owner != "w1" {
		t.Fatalf("Read answered %+v, want the dead worker's row", got)
	}
	o, c := f.claim(t, req("k", "w2"))
	wantOutcome(t, "Claim", o, journal.Claimed)
	if c.Owner != "w2" || c.Attempts != first.Attempts || c.Dispatched ||
		!c.LeaseUntil.Equal(f.clock.Now().Add(lease)) || c.Version != first.Version+1 {
		t.Fatalf("reclaimed claim = %+v", c)
	}
	if got := f.stored(t, req("k", "w2")); got.Owner != "w2" || got.Version != c.Version {
		t.Fatalf("stored after reclaim = %+v", got)
	}
	// The dead worker holds nothing any more.
	if err := f.j.Dispatch(context.Background(), first); !errors.Is(err, journal.ErrLeaseLost) {
		t.Fatalf("Dispatch by the lost worker: %v, want ErrLeaseLost", err)
	}
}

func TestReclaimKeepsTheAttemptsOfEarlierWorkers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := req("k", "w1")
	r.MaxAttempts = 3
	c := f.claimed(t, r)
	if err := f.j.Dispatch(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	// w1 is lost after its dispatch; w2 reclaims and is lost before its own.
	f.clock.Advance(2 * lease)
	r.Owner = "w2"
	o, c2 := f.claim(t, r)
	wantOutcome(t, "Claim by w2", o, journal.Claimed)
	f.clock.Advance(2 * lease)
	r.Owner = "w3"
	o, _ = f.read(t, r)
	wantOutcome(t, "Read", o, journal.Absent)
	o, c3 := f.claim(t, r)
	wantOutcome(t, "Claim by w3", o, journal.Claimed)
	if c3.Owner != "w3" || c3.Attempts != 1 || c3.Dispatched || c3.Version != c2.Version+1 {
		t.Fatalf("claim by w3 = %+v, want w3's with the one earlier attempt", c3)
	}
}

// A claim reclaimed after its worker was lost before dispatch runs under
// the invocation of the caller who reclaimed it (whose agent and user its
// audit events name), and keeps the lost one's when the new caller sends
// none.
func TestReclaimRunsUnderItsOwnCallersInvocation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := req("k", "w1")
	r.Invocation = []byte(`{"agent_id":"agent-1"}`)
	f.claimed(t, r)
	f.clock.Advance(2 * lease)
	r.Owner, r.Invocation = "w2", []byte(`{"agent_id":"agent-2"}`)
	o, c := f.claim(t, r)
	wantOutcome(t, "Claim by w2", o, journal.Claimed)
	if got := f.stored(t, r); string(c.Invocation) != `{"agent_id":"agent-2"}` || string(got.Invocation) != string(c.Invocation) {
		t.Fatalf("reclaimed claim runs under %s (stored %s); want agent-2's invocation", c.Invocation, got.Invocation)
	}
	f.clock.Advance(2 * lease)
	r.Owner, r.Invocation = "w3", nil
	o, c = f.claim(t, r)
	wantOutcome(t, "Claim by w3", o, journal.Claimed)
	if string(c.Invocation) != `{"agent_id":"agent-2"}` {
		t.Fatalf("a reclaim sending no invocation runs under %s; want the one stored", c.Invocation)
	}
}

func TestExpiredLeaseAfterDispatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		maxAttempts int
		dispatches  int
		// reclaim: the next claim runs the call again (Read answers
		// Absent); otherwise the claim is an uncertain action.
		reclaim bool
	}{
		{"one attempt allowed and used", 1, 1, false},
		{"max attempts below one means one", 0, 1, false},
		{"attempts left", 3, 1, true},
		{"two of three attempts used", 3, 2, true},
		{"all attempts used", 3, 3, false},
	}
	for _, tt := range tests {
		for _, readFirst := range []bool{true, false} {
			name := tt.name + "/claim"
			if readFirst {
				name = tt.name + "/read then claim"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t)
				r := req("k", "w1")
				r.MaxAttempts = tt.maxAttempts
				c := f.claimed(t, r)
				for range tt.dispatches {
					if err := f.j.Dispatch(context.Background(), c); err != nil {
						t.Fatal(err)
					}
				}
				f.clock.Advance(lease + time.Second)
				next := r
				next.Owner = "w2"

				if readFirst {
					o, got := f.read(t, next)
					stored := f.stored(t, r)
					if tt.reclaim {
						wantOutcome(t, "Read", o, journal.Absent)
						if !reflect.DeepEqual(stored, c) {
							t.Fatalf("Read changed a claim it answers Absent for:\n%+v\n%+v", c, stored)
						}
					} else {
						wantOutcome(t, "Read", o, journal.Uncertain)
						wantLost(t, stored, tt.dispatches, c.Version+1)
						if !reflect.DeepEqual(got, stored) {
							t.Fatalf("Read answered %+v, stored %+v", got, stored)
						}
					}
				}

				o, got := f.claim(t, next)
				stored := f.stored(t, r)
				if tt.reclaim {
					wantOutcome(t, "Claim", o, journal.Claimed)
					if got.Owner != "w2" || got.Attempts != tt.dispatches || got.Dispatched ||
						!got.LeaseUntil.Equal(f.clock.Now().Add(lease)) || got.Version != c.Version+1 {
						t.Fatalf("reclaimed claim = %+v", got)
					}
					if !reflect.DeepEqual(got, stored) {
						t.Fatalf("Claim answered %+v, stored %+v", got, stored)
					}
					return
				}
				wantOutcome(t, "Claim", o, journal.Uncertain)
				wantLost(t, stored, tt.dispatches, c.Version+1)
				if !reflect.DeepEqual(got, stored) {
					t.Fatalf("Claim answered %+v, stored %+v", got, stored)
				}
				// Once uncertain, it stays so, unchanged.
				o, _ = f.claim(t, req("k", "w3"))
				wantOutcome(t, "Claim again", o, journal.Uncertain)
				o, _ = f.read(t, req("k", "w3"))
				wantOutcome(t, "Read again", o, journal.Uncertain)
				if again := f.stored(t, r); again.Version != stored.Version {
					t.Fatalf("an uncertain row changed: %+v", again)
				}
				if list, _, err := f.j.Uncertain(context.Background(), "org-1", "", 10); err != nil || len(list) != 1 || list[0].Key != "k" {
					t.Fatalf("Uncertain = %+v, %v; want the lost claim", list, err)
				}
			})
		}
	}
}

// wantLost fails unless c is the row of a call whose worker, w1, was lost
// after dispatch, recorded uncertain in one update that keeps the lost
// worker's name.
func wantLost(t *testing.T, c *toolplane.Claim, attempts int, version int64) {
	t.Helper()
	if c.Status != toolplane.ClaimUncertain || c.Reason != journal.LostReason || c.Owner != "w1" ||
		c.Attempts != attempts || !c.Dispatched || c.Version != version {
		t.Fatalf("lost claim = %+v, want uncertain (%q) with %d attempts at version %d", c, journal.LostReason, attempts, version)
	}
}

func TestExpireKeepsAttemptsAndLetsTheNextClaimReclaim(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		maxAttempts int
		want        journal.Outcome
	}{
		{"attempts left", 3, journal.Claimed},
		{"out of attempts", 1, journal.Uncertain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			r := req("k", "w1")
			r.MaxAttempts = tt.maxAttempts
			c := f.claimed(t, r)
			if err := f.j.Dispatch(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			if err := f.j.Expire(context.Background(), c, nil); err != nil {
				t.Fatal(err)
			}
			if stored := f.stored(t, r); stored.Attempts != 1 || !stored.Dispatched || !stored.LeaseUntil.Before(f.clock.Now()) {
				t.Fatalf("stored after Expire = %+v", stored)
			}
			// No time passes: the lease is already over.
			next := r
			next.Owner = "w2"
			o, got := f.claim(t, next)
			wantOutcome(t, "Claim", o, tt.want)
			if got.Attempts != 1 {
				t.Fatalf("Attempts = %d, want 1 kept", got.Attempts)
			}
			if tt.want == journal.Claimed && got.Owner != "w2" {
				t.Fatalf("reclaimed by %q, want w2", got.Owner)
			}
		})
	}
}

func TestDispatchCountsTheAttempt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := req("k", "w1")
	c := f.claimed(t, r)
	for i := 1; i <= 3; i++ {
		before := c.Version
		f.clock.Advance(time.Second)
		if err := f.j.Dispatch(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		stored := f.stored(t, r)
		if !c.Dispatched || c.Attempts != i || c.Version != before+1 {
			t.Fatalf("held after dispatch %d = %+v", i, c)
		}
		if !stored.Dispatched || stored.Attempts != i || stored.Version != c.Version || !stored.UpdatedAt.Equal(f.clock.Now()) {
			t.Fatalf("stored after dispatch %d = %+v", i, stored)
		}
	}
}

func TestStaleHolderLosesTheLease(t *testing.T) {
	t.Parallel()
	ops := []struct {
		name    string
		audited bool // the operation carries an audit event
		op      func(j *journal.Journal, c *toolplane.Claim, ev *toolplane.AuditEvent) error
	}{
		{"Dispatch", false, func(j *journal.Journal, c *toolplane.Claim, _ *toolplane.AuditEvent) error {
			return j.Dispatch(context.Background(), c)
		}},
		{"Complete", false, func(j *journal.Journal, c *toolplane.Claim, _ *toolplane.AuditEvent) error {
			return j.Complete(context.Background(), c, []byte(`{}`), nil)
		}},
		{"Complete with its audit event", true, func(j *journal.Journal, c *toolplane.Claim, ev *toolplane.AuditEvent) error {
			return j.Complete(context.Background(), c, []byte(`{}`), ev)
		}},
		{"Hold", false, func(j *journal.Journal, c *toolplane.Claim, _ *toolplane.AuditEvent) error {
			return j.Hold(context.Background(), c, "x", nil)
		}},
		{"Hold with its audit event", true, func(j *journal.Journal, c *toolplane.Claim, ev *toolplane.AuditEvent) error {
			return j.Hold(context.Background(), c, "x", ev)
		}},
		{"Expire", false, func(j *journal.Journal, c *toolplane.Claim, _ *toolplane.AuditEvent) error {
			return j.Expire(context.Background(), c, nil)
		}},
		{"Release", false, func(j *journal.Journal, c *toolplane.Claim, _ *toolplane.AuditEvent) error {
			return j.Release(context.Background(), c)
		}},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			r := req("k", "w1")
			stale := f.claimed(t, r)
			held := *stale
			// Another worker takes the claim over after the lease expired.
			f.clock.Advance(2 * lease)
			next := r
			next.Owner = "w2"
			o, taken := f.claim(t, next)
			wantOutcome(t, "takeover", o, journal.Claimed)

			err := op.op(f.j, stale, auditEvent("aud_stale", f.clock.Now()))
			if !errors.Is(err, journal.ErrLeaseLost) {
				t.Fatalf("%s by the stale holder: %v, want ErrLeaseLost", op.name, err)
			}
			if !reflect.DeepEqual(*stale, held) {
				// A refused update leaves the holder's copy as it was.
				t.Fatalf("%s changed the stale copy: %+v", op.name, stale)
			}
			stored := f.stored(t, r)
			if stored.Owner != "w2" || stored.Version != taken.Version || stored.Status != toolplane.ClaimProcessing || stored.Dispatched {
				t.Fatalf("the stale holder changed the row: %+v", stored)
			}
			if got := f.auditIDs(t); len(got) != 0 {
				t.Fatalf("the stale holder stored audit events %v", got)
			}
			// The new holder still can.
			if err := op.op(f.j, taken, auditEvent("aud_holder", f.clock.Now())); err != nil {
				t.Fatalf("%s by the holder: %v", op.name, err)
			}
			want := "[]"
			if op.audited {
				want = "[aud_holder]"
			}
			if got := fmt.Sprint(f.auditIDs(t)); got != want {
				t.Fatalf("audit events after the holder's %s = %s, want %s", op.name, got, want)
			}
		})
	}
}

func auditEvent(id string, at time.Time) *toolplane.AuditEvent {
	return &toolplane.AuditEvent{
		ID: id, OrganizationID: "org-1", RunID: "run-1", AgentID: "agent-1", PrincipalID: "agent-1",
		Tool: "crm.update", ToolVersion: "1.0.0", Source: toolplane.SourceSDK, Outcome: "ok",
		ArgumentsHash: "sha256:k", LatencyMicros: 1200, CreatedAt: at,
	}
}

// auditIDs answers the ids of the organization's stored audit events.
func (f *fixture) auditIDs(t *testing.T) []string {
	t.Helper()
	evs, _, err := f.store.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

func TestCompleteAndHoldStoreTheAuditEventWithTheClaim(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		end        func(j *journal.Journal, c *toolplane.Claim, ev *toolplane.AuditEvent) error
		wantStatus toolplane.ClaimStatus
		wantRead   journal.Outcome
	}{
		{"Complete", func(j *journal.Journal, c *toolplane.Claim, ev *toolplane.AuditEvent) error {
			return j.Complete(context.Background(), c, []byte(`{"ok":true}`), ev)
		}, toolplane.ClaimCompleted, journal.Completed},
		{"Hold", func(j *journal.Journal, c *toolplane.Claim, ev *toolplane.AuditEvent) error {
			return j.Hold(context.Background(), c, "handler timed out", ev)
		}, toolplane.ClaimUncertain, journal.Uncertain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			t.Run("stored together", func(t *testing.T) {
				t.Parallel()
				f := newFixture(t)
				r := req("k", "w1")
				c := f.claimed(t, r)
				ev := auditEvent("aud_1", f.clock.Now())
				if err := tt.end(f.j, c, ev); err != nil {
					t.Fatal(err)
				}
				if c.Status != tt.wantStatus || f.stored(t, r).Status != tt.wantStatus {
					t.Fatalf("held %s, stored %s; want %s", c.Status, f.stored(t, r).Status, tt.wantStatus)
				}
				evs, _, err := f.store.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{}, "", 10)
				if err != nil {
					t.Fatal(err)
				}
				if len(evs) != 1 || !reflect.DeepEqual(evs[0], *ev) {
					t.Fatalf("audit events %+v, want exactly %+v", evs, *ev)
				}
			})
			t.Run("a failing event stores neither", func(t *testing.T) {
				t.Parallel()
				f := newFixture(t)
				r := req("k", "w1")
				taken := auditEvent("aud_1", f.clock.Now())
				taken.Outcome = "earlier"
				if err := f.store.AppendAudit(context.Background(), taken); err != nil {
					t.Fatal(err)
				}
				c := f.claimed(t, r)
				held := *c
				err := tt.end(f.j, c, auditEvent("aud_1", f.clock.Now()))
				if !errors.Is(err, toolplane.ErrExists) || errors.Is(err, journal.ErrLeaseLost) {
					t.Fatalf("end with a duplicate audit id: %v, want ErrExists", err)
				}
				if !reflect.DeepEqual(*c, held) {
					t.Fatalf("a failed end changed the held claim: %+v", c)
				}
				stored := f.stored(t, r)
				if stored.Status != toolplane.ClaimProcessing || stored.Version != held.Version || stored.Owner != "w1" {
					t.Fatalf("a failed end changed the row: %+v", stored)
				}
				o, _ := f.read(t, req("k", "w2"))
				wantOutcome(t, "Read", o, journal.Processing)
				// The holder can still end the call, with a fresh event.
				if err := tt.end(f.j, c, auditEvent("aud_2", f.clock.Now())); err != nil {
					t.Fatal(err)
				}
				o, _ = f.read(t, req("k", "w2"))
				wantOutcome(t, "Read after the retry", o, tt.wantRead)
			})
		})
	}
}

func TestSettleCompletesOnlyAnUncertainClaim(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(t *testing.T, f *fixture, c *toolplane.Claim)
		wantErr error
	}{
		{"uncertain", func(t *testing.T, f *fixture, c *toolplane.Claim) {
			if err := f.j.Hold(context.Background(), c, "timeout", nil); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"processing", func(*testing.T, *fixture, *toolplane.Claim) {}, journal.ErrNotUncertain},
		{"completed", func(t *testing.T, f *fixture, c *toolplane.Claim) {
			if err := f.j.Complete(context.Background(), c, []byte(`{"first":true}`), nil); err != nil {
				t.Fatal(err)
			}
		}, journal.ErrNotUncertain},
		{"released", func(t *testing.T, f *fixture, c *toolplane.Claim) {
			if err := f.j.Release(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		}, toolplane.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			r := req("k", "w1")
			c := f.claimed(t, r)
			tt.setup(t, f, c)
			before, _ := f.store.GetClaim(context.Background(), r.OrganizationID, r.Tool, r.Key)
			f.clock.Advance(time.Hour)
			result := []byte(`{"settled":true}`)
			got, err := f.j.Settle(context.Background(), r.OrganizationID, r.Tool, r.Key, result, "alice", "refund confirmed at the bank", settleEvent("alice"))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || got != nil {
					t.Fatalf("Settle = %+v, %v; want %v", got, err, tt.wantErr)
				}
				if before != nil {
					if after := f.stored(t, r); after.Version != before.Version || after.Status != before.Status {
						t.Fatalf("a refused settle changed the row: %+v", after)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			stored := f.stored(t, r)
			for _, s := range []*toolplane.Claim{got, stored} {
				if s.Status != toolplane.ClaimCompleted || !bytes.Equal(s.Result, result) ||
					s.ReconciledBy != "alice" || s.Note != "refund confirmed at the bank" ||
					s.Reason != "timeout" || !s.UpdatedAt.Equal(f.clock.Now()) {
					t.Fatalf("settled claim = %+v", s)
				}
			}
			if got.Version != stored.Version {
				t.Fatalf("answered version %d, stored %d", got.Version, stored.Version)
			}
			o, rc := f.claim(t, req("k", "w2"))
			wantOutcome(t, "Claim after Settle", o, journal.Completed)
			if !bytes.Equal(rc.Result, result) {
				t.Fatalf("Claim after Settle answered %q", rc.Result)
			}
			if _, err := f.j.Settle(context.Background(), r.OrganizationID, r.Tool, r.Key, result, "bob", "", settleEvent("bob")); !errors.Is(err, journal.ErrNotUncertain) {
				t.Fatalf("second Settle: %v, want ErrNotUncertain", err)
			}
		})
	}
}

// Drop removes only an uncertain claim: a claim still processing or
// completed is refused and left as it was, so a completed call's answer is
// never dropped and its next identical call answers it rather than running
// it again.
func TestDropRemovesOnlyAnUncertainClaim(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		settle func(t *testing.T, f *fixture, c *toolplane.Claim)
		want   journal.Outcome
	}{
		{"processing", func(*testing.T, *fixture, *toolplane.Claim) {}, journal.Processing},
		{"completed", func(t *testing.T, f *fixture, c *toolplane.Claim) {
			if err := f.j.Complete(context.Background(), c, []byte(`{"first":true}`), nil); err != nil {
				t.Fatal(err)
			}
		}, journal.Completed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			r := req("k", "w1")
			tt.settle(t, f, f.claimed(t, r))
			before := f.stored(t, r)
			if err := f.j.Drop(context.Background(), r.OrganizationID, r.Tool, r.Key, settleEvent("alice")); !errors.Is(err, journal.ErrNotUncertain) {
				t.Fatalf("Drop of a %s claim: %v, want ErrNotUncertain", tt.name, err)
			}
			if after := f.stored(t, r); after.Version != before.Version || after.Status != before.Status {
				t.Fatalf("a refused drop changed the row: %+v", after)
			}
			if ids := f.auditIDs(t); len(ids) != 0 {
				t.Fatalf("a refused drop stored audit events %v", ids)
			}
			o, _ := f.claim(t, req("k", "w2"))
			wantOutcome(t, "Claim after a refused drop", o, tt.want)
		})
	}
}

func TestUncertainListsOnlyUncertainClaimsOldestFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	hold := func(r journal.Request) {
		t.Helper()
		c := f.claimed(t, r)
		if err := f.j.Hold(ctx, c, "reason "+r.Key, nil); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Second)
	}
	hold(req("u1", "w"))
	c := f.claimed(t, req("done", "w"))
	if err := f.j.Complete(ctx, c, []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	f.claimed(t, req("busy", "w"))
	hold(req("u2", "w"))
	other := req("u-other-org", "w")
	other.OrganizationID = "org-2"
	hold(other)
	hold(req("u3", "w"))

	got, next, err := f.j.Uncertain(ctx, "org-1", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if next != "" {
		t.Fatalf("cursor = %q after the last page", next)
	}
	var keys []string
	for _, c := range got {
		if c.Status != toolplane.ClaimUncertain || c.Reason != "reason "+c.Key {
			t.Fatalf("listed %+v", c)
		}
		keys = append(keys, c.Key)
	}
	if fmt.Sprint(keys) != "[u1 u2 u3]" {
		t.Fatalf("Uncertain keys = %v, want [u1 u2 u3]", keys)
	}

	// Paged one at a time, the same order.
	keys = nil
	after := ""
	for range 4 {
		page, n, err := f.j.Uncertain(ctx, "org-1", after, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page {
			keys = append(keys, c.Key)
		}
		if after = n; after == "" {
			break
		}
	}
	if fmt.Sprint(keys) != "[u1 u2 u3]" {
		t.Fatalf("paged Uncertain keys = %v, want [u1 u2 u3]", keys)
	}
}

func TestConcurrentClaimsHaveExactlyOneWinner(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const n = 32
	outcomes := make([]journal.Outcome, n)
	owners := make([]string, n)
	versions := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			o, c, err := f.j.Claim(context.Background(), req("k", fmt.Sprintf("w%02d", i)))
			outcomes[i], errs[i] = o, err
			if c != nil {
				owners[i], versions[i] = c.Owner, c.Version
			}
		})
	}
	close(start)
	wg.Wait()
	winner, winnerVersion := "", int64(0)
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		switch outcomes[i] {
		case journal.Claimed:
			if winner != "" {
				t.Fatalf("two winners: %s and %s", winner, owners[i])
			}
			winner, winnerVersion = owners[i], versions[i]
			if winner != fmt.Sprintf("w%02d", i) {
				t.Fatalf("claim %d won as %q", i, winner)
			}
		case journal.Processing:
		default:
			t.Fatalf("claim %d = %v, want claimed or processing", i, outcomes[i])
		}
	}
	if winner == "" {
		t.Fatal("no claim won")
	}
	for i := range n {
		if outcomes[i] == journal.Processing && owners[i] != winner {
			t.Fatalf("claim %d saw owner %q, want the winner %q", i, owners[i], winner)
		}
	}
	if got := f.stored(t, req("k", "")); got.Owner != winner || got.Version != winnerVersion {
		t.Fatalf("stored = %+v, want the winner's untouched claim", got)
	}
}

func TestClaimRacingAReleaseAnswersClaimedOrProcessing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for round := range 100 {
		held := f.claimed(t, req("k", "holder"))
		start := make(chan struct{})
		var wg sync.WaitGroup
		var o journal.Outcome
		var c *toolplane.Claim
		var claimErr, releaseErr error
		wg.Go(func() { <-start; releaseErr = f.j.Release(ctx, held) })
		wg.Go(func() { <-start; o, c, claimErr = f.j.Claim(ctx, req("k", "racer")) })
		close(start)
		wg.Wait()
		if releaseErr != nil || claimErr != nil {
			t.Fatalf("round %d: release %v, claim %v", round, releaseErr, claimErr)
		}
		switch {
		case o == journal.Claimed && c.Owner == "racer":
		case o == journal.Processing && c.Owner == "holder":
			// The claim read the holder's row before it was released.
		default:
			t.Fatalf("round %d: Claim = %v, %+v; want claimed by the racer or processing by the holder", round, o, c)
		}
		// Clean up for the next round: the racer's claim, if any.
		if got, err := f.store.GetClaim(ctx, "org-1", "crm.update", "k"); err == nil {
			if err := f.j.Release(ctx, got); err != nil {
				t.Fatal(err)
			}
		}
	}
}
