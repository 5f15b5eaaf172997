package journal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/journal"
	"github.com/toolplane/toolplane/postgres/pgtest"
)

// settleEvent answers the audit event a reconciliation by by stores.
func settleEvent(by string) *toolplane.AuditEvent {
	return &toolplane.AuditEvent{ID: toolplane.NewID("aud_"), OrganizationID: "org-1", Tool: "crm.update",
		Source: toolplane.SourceReconcile, Outcome: "reconciled", PrincipalID: by}
}

// backends answers a fresh store on each database a test runs on: a
// SQLite file always, and a fresh PostgreSQL schema when
// TOOLPLANE_TEST_POSTGRES is set.
func backends(t *testing.T) map[string]backend.Store {
	t.Helper()
	ctx := context.Background()
	dsns := map[string]string{"sqlite": filepath.Join(t.TempDir(), "toolplane.db")}
	if dsn, ok := pgtest.LookupDSN(); ok {
		dsns["postgres"] = pgtest.SchemaDSN(t, dsn)
	} else {
		t.Log("PostgreSQL not tested: set " + pgtest.DSNVariable)
	}
	out := map[string]backend.Store{}
	for name, dsn := range dsns {
		b, err := backend.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		if err := b.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		out[name] = b.Store
	}
	return out
}

// onEach runs f on each database, in parallel subtests; each gets its own
// organization, so they may share the database.
func onEach(t *testing.T, f func(t *testing.T, s backend.Store)) {
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, s)
		})
	}
}

// auditedReq is a request whose stored invocation names its caller.
func auditedReq(org, key, node string) journal.Request {
	r := req(key, "w1")
	r.OrganizationID, r.Node = org, node
	r.Invocation, _ = json.Marshal(toolplane.Invocation{OrganizationID: org, RunID: "run-1", AgentID: "agent-7",
		UserID: "user-3", Principal: toolplane.Principal{ID: "agent-7"}})
	return r
}

// events answers the organization's audit events, newest first.
func events(t *testing.T, s toolplane.AuditStore, org string) []toolplane.AuditEvent {
	t.Helper()
	evs, _, err := s.ListAudit(context.Background(), org, toolplane.AuditFilter{}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// wantEvent fails unless evs is exactly one event about r's call with the
// outcome, source and reason given, and never its arguments.
func wantEvent(t *testing.T, evs []toolplane.AuditEvent, r journal.Request, outcome string, source toolplane.Source, reason string) {
	t.Helper()
	if len(evs) != 1 {
		t.Fatalf("audit events = %+v, want one", evs)
	}
	e := evs[0]
	if e.OrganizationID != r.OrganizationID || e.Tool != r.Tool || e.Key != r.Key || e.RunID != r.RunID ||
		e.ArgumentsHash != r.RequestHash || e.AgentID != "agent-7" || e.UserID != "user-3" || e.PrincipalID != "agent-7" ||
		e.Outcome != outcome || e.Source != source || e.Reason != reason {
		t.Fatalf("audit event = %+v; want %s by %s (%q) about %s", e, outcome, source, reason, r.Key)
	}
	if b, _ := json.Marshal(e); strings.Contains(string(b), `"to"`) {
		t.Fatalf("audit event carries the arguments: %s", b)
	}
}

// A call that finds a claim whose worker was lost after dispatch records it
// as uncertain, and the uncertain state has its audit event, written with
// it, whichever of Read and Claim finds it.
func TestTakeoverOfALostClaimIsAudited(t *testing.T) {
	t.Parallel()
	for _, via := range []string{"read", "claim"} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			onEach(t, func(t *testing.T, s backend.Store) {
				ctx := context.Background()
				clk := newClock()
				j := journal.New(s, clk.Now)
				r := auditedReq("org-"+fmt.Sprint(rand.Uint64()), "k", "")
				_, c, err := j.Claim(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				if err := j.Dispatch(ctx, c); err != nil {
					t.Fatal(err)
				}
				clk.Advance(lease + time.Second) // the worker is lost
				var o journal.Outcome
				if via == "read" {
					o, _, err = j.Read(ctx, r)
				} else {
					o, _, err = j.Claim(ctx, auditedReq(r.OrganizationID, "k", ""))
				}
				if err != nil || o != journal.Uncertain {
					t.Fatalf("%s = %v, %v; want uncertain", via, o, err)
				}
				stored, err := s.GetClaim(ctx, r.OrganizationID, r.Tool, r.Key)
				if err != nil || stored.Status != toolplane.ClaimUncertain {
					t.Fatalf("stored = %+v, %v", stored, err)
				}
				wantEvent(t, events(t, s, r.OrganizationID), r, "uncertain", toolplane.SourceTakeover, journal.LostReason)
				// Found again, it is uncertain already: no second event.
				if o, _, _ := j.Read(ctx, r); o != journal.Uncertain {
					t.Fatalf("second read = %v", o)
				}
				if n := len(events(t, s, r.OrganizationID)); n != 1 {
					t.Fatalf("%d events after a second read", n)
				}
			})
		})
	}
}

// A reconciliation and a late settlement store their audit event with the
// change, in one transaction: when the event cannot be stored, the claim is
// not changed either, so neither can exist without the other.
func TestSettleAndDropStoreTheirEventWithTheChange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		end    func(j *journal.Journal, r journal.Request, ev *toolplane.AuditEvent) error
		status toolplane.ClaimStatus // "" for a removed claim
	}{
		{"settle", func(j *journal.Journal, r journal.Request, ev *toolplane.AuditEvent) error {
			_, err := j.Settle(context.Background(), r.OrganizationID, r.Tool, r.Key, []byte(`{"ok":true}`), "alice", "done at the bank", ev)
			return err
		}, toolplane.ClaimCompleted},
		{"drop", func(j *journal.Journal, r journal.Request, ev *toolplane.AuditEvent) error {
			return j.Drop(context.Background(), r.OrganizationID, r.Tool, r.Key, ev)
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			onEach(t, func(t *testing.T, s backend.Store) {
				ctx := context.Background()
				clk := newClock()
				j := journal.New(s, clk.Now)
				r := auditedReq("org-"+fmt.Sprint(rand.Uint64()), "k", "")
				_, c, err := j.Claim(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				if err := j.Hold(ctx, c, "timeout", nil); err != nil {
					t.Fatal(err)
				}
				// An event whose ID is taken cannot be stored: the change
				// must not be stored without it.
				taken := &toolplane.AuditEvent{ID: "aud_taken", OrganizationID: r.OrganizationID, Tool: r.Tool, Outcome: "ok", CreatedAt: clk.Now()}
				if err := s.AppendAudit(ctx, taken); err != nil {
					t.Fatal(err)
				}
				ev := &toolplane.AuditEvent{ID: "aud_taken", OrganizationID: r.OrganizationID, Tool: r.Tool,
					Source: toolplane.SourceReconcile, Outcome: "reconciled", Reason: "done at the bank", CreatedAt: clk.Now()}
				if err := tt.end(j, r, ev); !errors.Is(err, toolplane.ErrExists) {
					t.Fatalf("%s with a taken event ID: %v, want ErrExists", tt.name, err)
				}
				if got, err := s.GetClaim(ctx, r.OrganizationID, r.Tool, r.Key); err != nil || got.Status != toolplane.ClaimUncertain || got.Version != c.Version {
					t.Fatalf("after a failed %s the claim is %+v, %v; want it untouched", tt.name, got, err)
				}
				ev.ID = "aud_settled"
				if err := tt.end(j, r, ev); err != nil {
					t.Fatal(err)
				}
				got, err := s.GetClaim(ctx, r.OrganizationID, r.Tool, r.Key)
				switch {
				case tt.status == "" && !errors.Is(err, toolplane.ErrNotFound):
					t.Fatalf("dropped claim is %+v, %v", got, err)
				case tt.status != "" && (err != nil || got.Status != tt.status):
					t.Fatalf("settled claim is %+v, %v", got, err)
				}
				var mine []toolplane.AuditEvent
				for _, e := range events(t, s, r.OrganizationID) {
					if e.ID == "aud_settled" {
						mine = append(mine, e)
					}
				}
				wantEvent(t, mine, r, "reconciled", toolplane.SourceReconcile, "done at the bank")
			})
		})
	}
}

// A claim whose node stopped heartbeating is decided once the node is
// known dead, long before its lease ends: released when it never reached
// its handler, uncertain (with its event) when it did. Before that, a
// caller is told the node went silent and when the claim will be decided.
func TestClaimOfADeadNodeIsDecidedBeforeItsLease(t *testing.T) {
	t.Parallel()
	const deadAfter = 10 * time.Second
	for _, dispatched := range []bool{false, true} {
		t.Run(fmt.Sprintf("dispatched=%v", dispatched), func(t *testing.T) {
			t.Parallel()
			onEach(t, func(t *testing.T, s backend.Store) {
				ctx := context.Background()
				clk := newClock()
				j := journal.New(s, clk.Now)
				j.WatchNodes(s, deadAfter)
				node := "node-" + fmt.Sprint(rand.Uint64())
				beat := func() {
					t.Helper()
					if err := s.InsertNode(ctx, &toolplane.Node{ID: node, Name: "a", StartedAt: clk.Now(), HeartbeatAt: clk.Now()}); err != nil {
						t.Fatal(err)
					}
				}
				beat()
				r := auditedReq("org-"+fmt.Sprint(rand.Uint64()), "k", node)
				_, c, err := j.Claim(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				if dispatched {
					if err := j.Dispatch(ctx, c); err != nil {
						t.Fatal(err)
					}
				}
				last := clk.Now()
				clk.Advance(deadAfter / 4)
				if o, cl, _ := j.Read(ctx, r); o != journal.Processing || !j.Holder(ctx, cl).SilentSince.IsZero() {
					t.Fatalf("read with a live node = %v, %+v", o, j.Holder(ctx, cl))
				}
				clk.Advance(deadAfter / 2) // silent for 3/4 of deadAfter
				o, cl, err := j.Read(ctx, r)
				if err != nil || o != journal.Processing {
					t.Fatalf("read with a silent node = %v, %v", o, err)
				}
				if h := j.Holder(ctx, cl); !h.SilentSince.Equal(last.Truncate(time.Microsecond)) || !h.DecidedBy.Equal(last.Truncate(time.Microsecond).Add(deadAfter)) {
					t.Fatalf("holder of a silent node = %+v; want silent since %v, decided by %v", h, last, last.Add(deadAfter))
				}
				clk.Advance(deadAfter) // dead now; the lease (a minute) is not over
				next := auditedReq(r.OrganizationID, "k", "node-other")
				o, cl, err = j.Claim(ctx, next)
				if err != nil {
					t.Fatal(err)
				}
				if !dispatched {
					if o != journal.Claimed || cl.Node != "node-other" {
						t.Fatalf("claim of an undispatched key of a dead node = %v, %+v; want claimed", o, cl)
					}
					return
				}
				if o != journal.Uncertain {
					t.Fatalf("claim of a dispatched key of a dead node = %v; want uncertain", o)
				}
				wantEvent(t, events(t, s, r.OrganizationID), r, "uncertain", toolplane.SourceTakeover, journal.LostReason)
			})
		})
	}
}

// A node never judges its own claims dead: its heartbeat can fall behind
// (a long pause, a slow disk) while the handler it runs is alive, so an
// identical call on that node waits for the holder, and the holder
// completes its call, past the time the node would count as dead to
// others.
func TestANodeDoesNotJudgeItsOwnClaimsDead(t *testing.T) {
	t.Parallel()
	const deadAfter = 10 * time.Second
	onEach(t, func(t *testing.T, s backend.Store) {
		ctx := context.Background()
		clk := newClock()
		j := journal.New(s, clk.Now)
		j.WatchNodes(s, deadAfter)
		node := "node-" + fmt.Sprint(rand.Uint64())
		if err := s.InsertNode(ctx, &toolplane.Node{ID: node, Name: "a", StartedAt: clk.Now(), HeartbeatAt: clk.Now()}); err != nil {
			t.Fatal(err)
		}
		r := auditedReq("org-"+fmt.Sprint(rand.Uint64()), "k", node)
		_, c, err := j.Claim(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Dispatch(ctx, c); err != nil {
			t.Fatal(err)
		}
		clk.Advance(deadAfter + time.Second) // past deadAfter, within the lease
		if o, _, err := j.Read(ctx, r); err != nil || o != journal.Processing {
			t.Fatalf("the node reads its own live claim: %v, %v; want processing", o, err)
		}
		if o, _, err := j.Claim(ctx, r); err != nil || o != journal.Processing {
			t.Fatalf("the node claims its own live key: %v, %v; want processing", o, err)
		}
		if err := j.Complete(ctx, c, []byte(`{}`), nil); err != nil {
			t.Fatalf("the live holder completes: %v", err)
		}
		if o, _, err := j.Read(ctx, r); err != nil || o != journal.Completed {
			t.Fatalf("after completion: %v, %v; want completed", o, err)
		}
	})
}
