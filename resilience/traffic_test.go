package resilience_test

import (
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/resilience"
)

// A target's cap counts each organization's calls apart: a target names a
// kind of downstream (database:PROVIDER) whose real database is each
// organization's own, so one organization's hanging database must not
// refuse another's calls to its healthy one.
func TestTargetCapIsPerOrganization(t *testing.T) {
	t.Parallel()
	tr := resilience.New(resilience.Config{TargetMaxInFlight: 2, Now: newClock().Now})
	req := func(org, tool string) resilience.Request {
		return resilience.Request{Organization: org, Agent: "agent-1", Tool: tool, Target: "database:postgres", Priority: toolplane.PriorityNormal}
	}
	var held []*resilience.Ticket
	for _, tool := range []string{"orders.read", "stock.read"} {
		tk, ref := tr.Admit(req("org-a", tool))
		if ref != nil {
			t.Fatalf("org-a %s refused: %+v", tool, ref)
		}
		held = append(held, tk)
	}
	if _, ref := tr.Admit(req("org-a", "users.read")); ref == nil || ref.Reason != resilience.ReasonTarget {
		t.Fatalf("org-a's third call to its full target: %+v, want %s", ref, resilience.ReasonTarget)
	}
	tk, ref := tr.Admit(req("org-b", "orders.read"))
	if ref != nil {
		t.Fatalf("org-b's call to its own database refused while org-a's holds the target name: %+v", ref)
	}
	if got := tr.Occupancy().Targets; got["org-a/database:postgres"] != 2 || got["org-b/database:postgres"] != 1 {
		t.Fatalf("targets in flight = %v, want org-a 2 and org-b 1", got)
	}
	for _, k := range append(held, tk) {
		k.EndCall()
		k.EndWork()
	}
	if got := tr.Occupancy().Targets; len(got) != 0 {
		t.Fatalf("targets in flight after every call ended = %v", got)
	}
}

// A ticket lets its call attempt the downstream again only while the
// breaker is closed: not once it opened, nor after the half-open probe's
// first attempt.
func TestTicketPassingFollowsTheBreaker(t *testing.T) {
	t.Parallel()
	clock := newClock()
	tr := resilience.New(resilience.Config{Now: clock.Now,
		Breaker: resilience.BreakerConfig{MinSamples: 2, Threshold: 0.5, Cooldown: 30 * time.Second}})
	req := resilience.Request{Organization: "org-1", Agent: "agent-1", Tool: "crm.read", Target: "host:crm.example"}
	end := func(k *resilience.Ticket) { k.EndCall(); k.EndWork() }

	early, ref := tr.Admit(req)
	if ref != nil {
		t.Fatal(ref)
	}
	if ok, _ := early.Passing(); !ok {
		t.Fatal("a closed breaker does not let the call attempt again")
	}
	early.Record(resilience.Failure)
	early.Record(resilience.Failure) // opens it
	if ok, wait := early.Passing(); ok || wait != 30*time.Second {
		t.Fatalf("after the breaker opened: passing %v, wait %v; want not, 30s", ok, wait)
	}
	end(early)

	clock.Advance(30 * time.Second)
	probe, ref := tr.Admit(req)
	if ref != nil {
		t.Fatalf("probe refused: %+v", ref)
	}
	probe.Record(resilience.Failure) // reopens it, for twice the cooldown
	if ok, wait := probe.Passing(); ok || wait != 60*time.Second {
		t.Fatalf("after the probe failed: passing %v, wait %v; want not, 60s", ok, wait)
	}
	end(probe)

	clock.Advance(60 * time.Second)
	probe, _ = tr.Admit(req)
	probe.Record(resilience.Neutral) // says nothing: the breaker stays half-open
	if ok, wait := probe.Passing(); ok || wait < time.Second {
		t.Fatalf("after a neutral probe: passing %v, wait %v; want not, a second or more", ok, wait)
	}
	end(probe)
}
