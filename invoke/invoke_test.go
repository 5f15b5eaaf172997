package invoke_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
)

func TestReplayReturnsStoredResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{"updated": true})})
	in := inv("crm.update")
	first := must(t).OK(e.iv.Invoke(context.Background(), "crm.update", args("to", "x"), in))
	second := must(t).OK(e.iv.Invoke(context.Background(), "crm.update", args("to", "x"), in))
	if e.count("crm.update") != 1 {
		t.Fatalf("handler ran %d times", e.count("crm.update"))
	}
	if first.Meta.Replayed || !second.Meta.Replayed {
		t.Fatalf("replayed flags: %v %v", first.Meta.Replayed, second.Meta.Replayed)
	}
	if second.Data.(map[string]any)["updated"] != true {
		t.Fatalf("stored data = %+v", second.Data)
	}
	// A different step is a different action.
	other := inv("crm.update")
	other.StepPath = "node-2"
	must(t).OK(e.iv.Invoke(context.Background(), "crm.update", args("to", "x"), other))
	if e.count("crm.update") != 2 {
		t.Fatalf("a second step did not run: %d", e.count("crm.update"))
	}
}

func TestRetryableFailureLeavesNoClaim(t *testing.T) {
	t.Parallel()
	var n int
	var mu sync.Mutex
	e := newEnv(t, newStore(t), tool{def: def("vendor.push", toolplane.EffectWrite), fn: func(context.Context, handler.Call, any) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 1 {
			return nil, &handler.RetryableUpstream{Err: errors.New("429")}
		}
		return map[string]any{"ok": true}, nil
	}})
	in := inv("vendor.push")
	r, err := e.iv.Invoke(context.Background(), "vendor.push", args("to", "a"), in)
	code(t, r, err, toolplane.CodeRetryableUpstream)
	if !r.Error.Retryable {
		t.Fatal("retryable_upstream not retryable")
	}
	if _, err := claimOf(t, e.store, "vendor.push", in, args("to", "a")); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("a claim was left: %v", err)
	}
	must(t).OK(e.iv.Invoke(context.Background(), "vendor.push", args("to", "a"), in))
	if e.count("vendor.push") != 2 {
		t.Fatalf("the next identical call did not execute: %d", e.count("vendor.push"))
	}
}

func TestBusinessFailureLeavesCompletedClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("crm.update", toolplane.EffectWrite), fn: func(context.Context, handler.Call, any) (any, error) {
		return nil, &handler.NotFound{Message: "no company co_9"}
	}})
	in := inv("crm.update")
	r, err := e.iv.Invoke(context.Background(), "crm.update", args("to", "co_9"), in)
	code(t, r, err, toolplane.CodeNotFound)
	r, err = e.iv.Invoke(context.Background(), "crm.update", args("to", "co_9"), in)
	code(t, r, err, toolplane.CodeNotFound)
	if !r.Meta.Replayed || e.count("crm.update") != 1 {
		t.Fatalf("replayed=%v runs=%d", r.Meta.Replayed, e.count("crm.update"))
	}
	c, err := claimOf(t, e.store, "crm.update", in, args("to", "co_9"))
	if err != nil || c.Status != toolplane.ClaimCompleted {
		t.Fatalf("claim = %+v %v", c, err)
	}
}

func TestLiveClaimRaises(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{})
	e := newEnv(t, newStore(t), tool{def: def("email.send", toolplane.EffectWrite), fn: func(context.Context, handler.Call, any) (any, error) {
		close(started)
		<-release
		return map[string]any{"id": "m1"}, nil
	}})
	in := inv("email.send")
	done := make(chan error, 1)
	go func() {
		_, err := e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), in)
		done <- err
	}()
	<-started
	r, err := e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), in)
	if !errors.Is(err, invoke.ErrInFlight) || r.OK || r.Error != nil {
		t.Fatalf("second call = %+v, %v; want ErrInFlight and no result", r, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if e.count("email.send") != 1 {
		t.Fatalf("handler ran %d times", e.count("email.send"))
	}
}

func TestIdenticalWriteFrom64GoroutinesRunsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("email.send", toolplane.EffectWrite), fn: func(context.Context, handler.Call, any) (any, error) {
		time.Sleep(20 * time.Millisecond)
		return map[string]any{"id": "m1"}, nil
	}})
	in := inv("email.send")
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.iv.Invoke(context.Background(), "email.send", args("to", "jo"), in)
			key := "ok"
			switch {
			case errors.Is(err, invoke.ErrInFlight):
				key = "in_flight"
			case err != nil:
				key = "error: " + err.Error()
			case !r.OK:
				key = string(r.Error.Code)
			case r.Meta.Replayed:
				key = "replayed"
			}
			mu.Lock()
			outcomes[key]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if e.count("email.send") != 1 || outcomes["ok"] != 1 || outcomes["ok"]+outcomes["in_flight"]+outcomes["replayed"] != 64 {
		t.Fatalf("handler ran %d times; outcomes %v", e.count("email.send"), outcomes)
	}
}

func TestCrashedWorkerClaimRecovery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		dispatched bool
		replay     int
		wantRuns   int64
		wantCode   toolplane.Code
	}{
		{"crash before dispatch is reclaimed and executed", false, 0, 1, ""},
		{"crash after dispatch is uncertain", true, 0, 0, toolplane.CodeUncertain},
		{"crash after dispatch of a replayable tool runs again", true, 3, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := def("crm.update", toolplane.EffectWrite, func(d *toolplane.Definition) {
				if tt.replay > 0 {
					d.Annotations.Idempotent = true
					d.Replay = &toolplane.Replay{MaxAttempts: tt.replay}
				}
			})
			e := newEnv(t, newStore(t), tool{def: d, fn: ok(map[string]any{"ok": true})})
			in := inv("crm.update")
			a := args("to", "x")
			// A worker that died left this claim behind.
			attempts := 0
			if tt.dispatched {
				attempts = 1
			}
			dead := &toolplane.Claim{
				OrganizationID: "org-1", Tool: "crm.update", Key: invoke.Key(in, hashOf(t, a)), RequestHash: hashOf(t, a),
				Status: toolplane.ClaimProcessing, Owner: "dead-node", LeaseUntil: e.clock.Now().Add(time.Minute),
				Dispatched: tt.dispatched, Attempts: attempts, RunID: "run-1", CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now(),
			}
			if ok, err := e.store.InsertClaim(context.Background(), dead); !ok || err != nil {
				t.Fatal(ok, err)
			}
			// While the lease lives, the call is in flight.
			if _, err := e.iv.Invoke(context.Background(), "crm.update", a, in); !errors.Is(err, invoke.ErrInFlight) {
				t.Fatalf("live lease: %v", err)
			}
			e.clock.Advance(2 * time.Minute)
			r, err := e.iv.Invoke(context.Background(), "crm.update", a, in)
			if tt.wantCode != "" {
				code(t, r, err, tt.wantCode)
			} else {
				must(t).OK(r, err)
			}
			if e.count("crm.update") != tt.wantRuns {
				t.Fatalf("handler ran %d times, want %d", e.count("crm.update"), tt.wantRuns)
			}
		})
	}
}

func TestTimeoutAfterDispatchIsUncertainUntilReconciled(t *testing.T) {
	t.Parallel()
	d := def("payments.refund", toolplane.EffectWrite, func(d *toolplane.Definition) {
		d.Timeout = toolplane.Duration(30 * time.Millisecond)
		d.OutputSchema = []byte(`{"type":"object","required":["refund_id"],"properties":{"refund_id":{"type":"string"}}}`)
	})
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	e := newEnv(t, newStore(t), tool{def: d, fn: func(ctx context.Context, _ handler.Call, _ any) (any, error) {
		<-block
		return nil, ctx.Err()
	}})
	in := inv("payments.refund")
	a := args("to", "ord_1")
	r, err := e.iv.Invoke(context.Background(), "payments.refund", a, in)
	code(t, r, err, toolplane.CodeUncertain)
	r, err = e.iv.Invoke(context.Background(), "payments.refund", a, in)
	code(t, r, err, toolplane.CodeUncertain)
	if e.count("payments.refund") != 1 {
		t.Fatalf("handler ran %d times", e.count("payments.refund"))
	}
	list, _, err := e.iv.Uncertain(context.Background(), "", 10, approverAlice)
	if err != nil || len(list) != 1 || list[0].Tool != "payments.refund" || !strings.Contains(list[0].Reason, "did not answer") {
		t.Fatalf("uncertain = %+v %v", list, err)
	}
	key := list[0].Key

	// An output that breaks the contract is refused, and changes nothing.
	if _, err := e.iv.Reconcile(context.Background(), "payments.refund", key, invoke.Reconciliation{Output: map[string]any{"nope": 1}}, approverAlice); !errors.Is(err, invoke.ErrBadReconciliation) {
		t.Fatalf("bad output reconciled: %v", err)
	}
	if _, err := e.iv.Reconcile(context.Background(), "payments.refund", key, invoke.Reconciliation{Failure: &invoke.Failure{Code: toolplane.CodeDenied, Message: "x"}}, approverAlice); !errors.Is(err, invoke.ErrBadReconciliation) {
		t.Fatalf("platform code reconciled: %v", err)
	}
	if _, err := e.iv.Reconcile(context.Background(), "payments.refund", key, invoke.Reconciliation{Output: map[string]any{"refund_id": "r-7"}}, approverAlice); err != nil {
		t.Fatal(err)
	}
	r = must(t).OK(e.iv.Invoke(context.Background(), "payments.refund", a, in))
	if !r.Meta.Replayed || r.Data.(map[string]any)["refund_id"] != "r-7" || e.count("payments.refund") != 1 {
		t.Fatalf("after reconciliation: %+v runs=%d", r, e.count("payments.refund"))
	}
	if _, err := e.iv.Reconcile(context.Background(), "payments.refund", key, invoke.Reconciliation{Unconfirmed: "again"}, approverAlice); err == nil {
		t.Fatal("a settled action was reconciled twice")
	}
}

func TestReconcileUnconfirmedAndFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rec  invoke.Reconciliation
		want toolplane.Code
	}{
		{"unconfirmed", invoke.Reconciliation{Unconfirmed: "finance is checking with the provider"}, toolplane.CodeUncertain},
		{"definite failure", invoke.Reconciliation{Failure: &invoke.Failure{Code: toolplane.CodeConflict, Message: "the provider refused the refund"}}, toolplane.CodeConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, newStore(t), tool{def: def("payments.refund", toolplane.EffectWrite), fn: func(context.Context, handler.Call, any) (any, error) {
				return nil, errors.New("socket closed after write")
			}, classify: func(error) handler.Ending {
				return handler.Uncertain("the connection dropped after the request was sent")
			}})
			in := inv("payments.refund")
			r, err := e.iv.Invoke(context.Background(), "payments.refund", args("to", "o"), in)
			code(t, r, err, toolplane.CodeUncertain)
			list, _, _ := e.iv.Uncertain(context.Background(), "", 10, approverAlice)
			if len(list) != 1 {
				t.Fatalf("uncertain = %+v", list)
			}
			if _, err := e.iv.Reconcile(context.Background(), "payments.refund", list[0].Key, tc.rec, approverAlice); err != nil {
				t.Fatal(err)
			}
			r, err = e.iv.Invoke(context.Background(), "payments.refund", args("to", "o"), in)
			code(t, r, err, tc.want)
			if !r.Meta.Replayed || (tc.rec.Unconfirmed != "" && !strings.Contains(r.Error.Message, "finance is checking")) {
				t.Fatalf("reconciled answer = %+v", r.Error)
			}
			if list, _, _ := e.iv.Uncertain(context.Background(), "", 10, approverAlice); len(list) != 0 {
				t.Fatalf("still uncertain: %+v", list)
			}
		})
	}
}

func TestLateSettlementResolvesUncertainAction(t *testing.T) {
	t.Parallel()
	d := def("payments.refund", toolplane.EffectWrite, func(d *toolplane.Definition) { d.Timeout = toolplane.Duration(20 * time.Millisecond) })
	e := newEnv(t, newStore(t), tool{def: d, fn: func(context.Context, handler.Call, any) (any, error) {
		time.Sleep(80 * time.Millisecond) // finishes after being stopped
		return map[string]any{"refund_id": "r-late"}, nil
	}, opts: []handler.Option{handler.WithSettlement(2 * time.Second)}})
	in := inv("payments.refund")
	r, err := e.iv.Invoke(context.Background(), "payments.refund", args("to", "o"), in)
	code(t, r, err, toolplane.CodeUncertain)
	e.iv.Wait()
	r = must(t).OK(e.iv.Invoke(context.Background(), "payments.refund", args("to", "o"), in))
	if r.Data.(map[string]any)["refund_id"] != "r-late" || e.count("payments.refund") != 1 {
		t.Fatalf("settled = %+v", r)
	}
}

func TestReplayableToolRunsAgainUpToMaxAttempts(t *testing.T) {
	t.Parallel()
	d := def("crm.sync", toolplane.EffectWrite, func(d *toolplane.Definition) {
		d.Timeout = toolplane.Duration(20 * time.Millisecond)
		d.Annotations.Idempotent = true
		d.Replay = &toolplane.Replay{MaxAttempts: 2}
	})
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	var keys []string
	var mu sync.Mutex
	e := newEnv(t, newStore(t), tool{def: d, fn: func(_ context.Context, c handler.Call, _ any) (any, error) {
		mu.Lock()
		keys = append(keys, c.Key)
		mu.Unlock()
		<-block
		return nil, nil
	}})
	in := inv("crm.sync")
	r, err := e.iv.Invoke(context.Background(), "crm.sync", args("to", "o"), in)
	code(t, r, err, toolplane.CodeTimeout)
	r, err = e.iv.Invoke(context.Background(), "crm.sync", args("to", "o"), in)
	code(t, r, err, toolplane.CodeUncertain) // the second attempt was the last
	r, err = e.iv.Invoke(context.Background(), "crm.sync", args("to", "o"), in)
	code(t, r, err, toolplane.CodeUncertain)
	mu.Lock()
	defer mu.Unlock()
	if e.count("crm.sync") != 2 || len(keys) != 2 || keys[0] != keys[1] {
		t.Fatalf("runs=%d keys=%v (the same key must reach every attempt)", e.count("crm.sync"), keys)
	}
}

func TestRefusalBeforeDispatchReleases(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{})})
	in := inv("crm.update")
	in.Deadline = e.clock.Now().Add(-time.Second)
	r, err := e.iv.Invoke(context.Background(), "crm.update", args("to", "x"), in)
	code(t, r, err, toolplane.CodeDeadlineExceeded)
	if e.count("crm.update") != 0 {
		t.Fatal("handler ran past the deadline")
	}
	if _, err := claimOf(t, e.store, "crm.update", in, args("to", "x")); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("claim left behind: %v", err)
	}
}

func TestHandlerOffSchemaAnswersInvalidOutput(t *testing.T) {
	t.Parallel()
	d := def("crm.get", toolplane.EffectRead, func(d *toolplane.Definition) {
		d.OutputSchema = []byte(`{"type":"object","required":["id"]}`)
	})
	e := newEnv(t, newStore(t), tool{def: d, fn: ok(map[string]any{"name": "no id"})})
	r, err := e.iv.Invoke(context.Background(), "crm.get", args(), inv("crm.get"))
	code(t, r, err, toolplane.CodeInvalidOutput)
}

func TestHandlerRaiseStopsTheCaller(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("crm.update", toolplane.EffectWrite), fn: func(context.Context, handler.Call, any) (any, error) {
		return nil, errors.New("database connection refused")
	}})
	in := inv("crm.update")
	r, err := e.iv.Invoke(context.Background(), "crm.update", args("to", "x"), in)
	if !errors.Is(err, invoke.ErrFault) || r.OK || r.Error != nil {
		t.Fatalf("result = %+v err = %v; want a fault and no result", r, err)
	}
	if _, err := claimOf(t, e.store, "crm.update", in, args("to", "x")); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("a raise must release the claim: %v", err)
	}
}

func TestHandlerPanicIsAFault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("crm.get", toolplane.EffectRead), fn: func(context.Context, handler.Call, any) (any, error) {
		panic("nil map")
	}})
	if _, err := e.iv.Invoke(context.Background(), "crm.get", args(), inv("crm.get")); !errors.Is(err, invoke.ErrFault) {
		t.Fatalf("err = %v", err)
	}
}

func TestReusedCallerKeyWithOtherArgumentsIsConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{})})
	in := inv("crm.update")
	in.IdempotencyKey = "client-key-1"
	must(t).OK(e.iv.Invoke(context.Background(), "crm.update", args("to", "a"), in))
	r, err := e.iv.Invoke(context.Background(), "crm.update", args("to", "b"), in)
	code(t, r, err, toolplane.CodeConflict)
	if e.count("crm.update") != 1 {
		t.Fatal("conflicting call ran")
	}
}

func TestOversizedBatchReachesNothing(t *testing.T) {
	t.Parallel()
	d := def("crm.bulk", toolplane.EffectWrite, func(d *toolplane.Definition) {
		d.BatchArgument, d.MaxBatchSize, d.Metered = "items", 2, true
		d.Annotations.RequiresApproval = true
	})
	e := newEnv(t, newStore(t), tool{def: d, fn: ok(map[string]any{})})
	in := inv("crm.bulk")
	r, err := e.iv.Invoke(context.Background(), "crm.bulk", map[string]any{"items": []any{"a", "b", "c"}}, in)
	code(t, r, err, toolplane.CodeBatchTooLarge)
	if e.count("crm.bulk") != 0 || e.policy.n.Load() != 0 {
		t.Fatalf("handler %d, policy %d", e.count("crm.bulk"), e.policy.n.Load())
	}
	if cs, _, _ := e.store.ListClaims(context.Background(), "org-1", toolplane.ClaimProcessing, "", 10); len(cs) != 0 {
		t.Fatal("a claim was taken")
	}
	if as, _, _ := e.store.ListApprovals(context.Background(), "org-1", toolplane.ApprovalPending, "", 10); len(as) != 0 {
		t.Fatal("an approval was filed")
	}
	if cost, _ := e.store.RunTreeCost(context.Background(), "org-1", "run-1"); cost != 0 {
		t.Fatal("usage written")
	}
}

func TestInvalidInputAnswersEveryViolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{})})
	r, err := e.iv.Invoke(context.Background(), "crm.update", map[string]any{"to": 5, "extra": true}, inv("crm.update"))
	code(t, r, err, toolplane.CodeInvalidInput)
	if len(r.Error.Violations) != 2 || r.Error.FieldPath != "/extra" || e.policy.n.Load() != 0 {
		t.Fatalf("error = %+v", r.Error)
	}
	r, err = e.iv.InvokeJSON(context.Background(), "crm.update", []byte(`{"to":`), inv("crm.update"))
	code(t, r, err, toolplane.CodeInvalidInput)
}

func TestUnknownToolAndChangedContract(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{})})
	r, err := e.iv.Invoke(context.Background(), "crm.nothing", args(), inv("crm.nothing"))
	code(t, r, err, toolplane.CodeToolUnavailable)
	in := inv("crm.get")
	in.Contracts = map[string]string{"crm.get": "sha256:old"}
	r, err = e.iv.Invoke(context.Background(), "crm.get", args(), in)
	code(t, r, err, toolplane.CodeToolChanged)
	if e.count("crm.get") != 0 {
		t.Fatal("ran on a changed contract")
	}
}

func TestPrincipalWithoutTheToolIsDenied(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{})})
	r, err := e.iv.Invoke(context.Background(), "crm.get", args(), inv("crm.other"))
	code(t, r, err, toolplane.CodeDenied)
	r, err = e.iv.Invoke(context.Background(), "crm.get", args(), inv())
	code(t, r, err, toolplane.CodeDenied)
	if e.count("crm.get") != 0 {
		t.Fatal("handler ran")
	}
}

func TestAuditRecordsEveryOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{})})
	in := inv("crm.update")
	must(t).OK(e.iv.Invoke(context.Background(), "crm.update", args("to", "a"), in))
	e.clock.Advance(time.Millisecond)
	must(t).OK(e.iv.Invoke(context.Background(), "crm.update", args("to", "a"), in))
	e.clock.Advance(time.Millisecond)
	// A principal without the grant still reads the replay: the journal
	// answers before policy is asked about an effect that already happened.
	must(t).OK(e.iv.Invoke(context.Background(), "crm.update", args("to", "a"), inv()))
	e.clock.Advance(time.Millisecond)
	r, err := e.iv.Invoke(context.Background(), "crm.update", map[string]any{"to": 1}, in)
	code(t, r, err, toolplane.CodeInvalidInput)
	evs, _, err := e.store.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{}, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, ev := range evs {
		outcomes = append(outcomes, ev.Outcome)
		if ev.Tool != "crm.update" || ev.RunID != "run-1" {
			t.Errorf("event = %+v", ev)
		}
	}
	got := strings.Join(outcomes, ",")
	if got != "invalid_input,ok,ok,ok" {
		t.Fatalf("outcomes newest first = %s", got)
	}
	if !evs[1].Replayed || !evs[2].Replayed || evs[3].Replayed {
		t.Fatalf("replayed flags wrong: %+v", evs)
	}
}

var _ = approval.ErrExpired

func TestLateRetryableSettlementIsNotRemembered(t *testing.T) {
	t.Parallel()
	// The first call is stopped at its caller's deadline, 20 ms after it
	// was sent; the tool's own time is long, so the identical call after
	// the settlement, whose handler answers at once, is never cut on a
	// loaded machine. The deadline is read on the env's still clock, so
	// the first call is always sent before it passes.
	d := def("payments.refund", toolplane.EffectWrite, func(d *toolplane.Definition) { d.Timeout = toolplane.Duration(time.Minute) })
	var calls sync.Mutex
	first := true
	// The first call's handler answers only once the call was answered
	// uncertain: stopped, then it answers that nothing was done. Waiting
	// on that, not sleeping past the timeout, keeps its answer late on a
	// loaded machine, where the invoker may not look before both are ready.
	stopped := make(chan struct{})
	e := newEnv(t, newStore(t), tool{def: d, fn: func(context.Context, handler.Call, any) (any, error) {
		calls.Lock()
		defer calls.Unlock()
		if first {
			first = false
			select {
			case <-stopped:
			case <-time.After(time.Minute): // the invoker waited for it: a bug the test reports
			}
			return nil, &handler.RetryableUpstream{Err: errors.New("503")}
		}
		return map[string]any{"refund_id": "r-2"}, nil
	}, opts: []handler.Option{handler.WithSettlement(time.Minute)}})
	in := inv("payments.refund")
	cut := *in
	cut.Deadline = e.clock.Now().Add(20 * time.Millisecond)
	r, err := e.iv.Invoke(context.Background(), "payments.refund", args("to", "o"), &cut)
	close(stopped)
	code(t, r, err, toolplane.CodeUncertain)
	e.iv.Wait()
	r = must(t).OK(e.iv.Invoke(context.Background(), "payments.refund", args("to", "o"), in))
	if r.Meta.Replayed || e.count("payments.refund") != 2 {
		t.Fatalf("after a late retryable settlement: %+v runs=%d", r, e.count("payments.refund"))
	}
	evs, _, _ := e.store.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{Outcome: "settled_released"}, "", 10)
	if len(evs) != 1 {
		t.Fatalf("settlement audit = %+v", evs)
	}
}

func TestReconciliationIsAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("payments.refund", toolplane.EffectWrite), fn: func(context.Context, handler.Call, any) (any, error) {
		return nil, errors.New("socket closed after write")
	}, classify: func(error) handler.Ending { return handler.Uncertain("the connection dropped") }})
	r, err := e.iv.Invoke(context.Background(), "payments.refund", args("to", "o"), inv("payments.refund"))
	code(t, r, err, toolplane.CodeUncertain)
	list, _, _ := e.iv.Uncertain(context.Background(), "", 10, approverAlice)
	if _, err := e.iv.Reconcile(context.Background(), "payments.refund", list[0].Key, invoke.Reconciliation{Unconfirmed: "checking"}, approverAlice); err != nil {
		t.Fatal(err)
	}
	evs, _, _ := e.store.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{Outcome: "reconciled"}, "", 10)
	if len(evs) != 1 || evs[0].PrincipalID != "alice" || evs[0].ArgumentsHash != list[0].RequestHash {
		t.Fatalf("reconciliation audit = %+v", evs)
	}
}

func TestAnotherPrincipalNeverReadsBackAnEffect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{"secret": "note"})})
	a := inv("crm.update")
	must(t).OK(e.iv.Invoke(context.Background(), "crm.update", args("to", "x"), a))
	// Same run id, same arguments, another principal without the grant:
	// decided live (denied), never answered from a's journal row.
	w := inv("crm.search")
	w.Principal.ID = "agent-w"
	r, err := e.iv.Invoke(context.Background(), "crm.update", args("to", "x"), w)
	code(t, r, err, toolplane.CodeDenied)
	// Another principal with the grant is another action.
	b := inv("crm.update")
	b.Principal.ID = "agent-b"
	r = must(t).OK(e.iv.Invoke(context.Background(), "crm.update", args("to", "x"), b))
	if r.Meta.Replayed || e.count("crm.update") != 2 {
		t.Fatalf("replayed=%v runs=%d", r.Meta.Replayed, e.count("crm.update"))
	}
}

// The person a call acts for, and the tenant, are part of what the call
// is: an agent making the same write in one run for one person and then
// for another (each through their own connection), or for two tenants,
// makes two effects, and never answers the second from the first's
// result, whether the key is derived or the caller's own.
func TestAnotherPersonOrTenantNeverReadsBackAnEffect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		first   func(*toolplane.Invocation)
		second  func(*toolplane.Invocation)
		replays bool
	}{
		{"another person", func(i *toolplane.Invocation) { i.UserID = "sam" }, func(i *toolplane.Invocation) { i.UserID = "ann" }, false},
		{"a person, then the agent alone", func(i *toolplane.Invocation) { i.UserID = "sam" }, func(*toolplane.Invocation) {}, false},
		{"another tenant", func(i *toolplane.Invocation) { i.TenantID = "t-1" }, func(i *toolplane.Invocation) { i.TenantID = "t-2" }, false},
		{"another person, the caller's key", func(i *toolplane.Invocation) { i.UserID, i.IdempotencyKey = "sam", "k-1" },
			func(i *toolplane.Invocation) { i.UserID, i.IdempotencyKey = "ann", "k-1" }, false},
		{"the same person again", func(i *toolplane.Invocation) { i.UserID = "sam" }, func(i *toolplane.Invocation) { i.UserID = "sam" }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, newStore(t), tool{def: def("crm.update", toolplane.EffectWrite), fn: func(_ context.Context, c handler.Call, _ any) (any, error) {
				return map[string]any{"for": c.Invocation.UserID + "/" + c.Invocation.TenantID}, nil
			}})
			a, b := inv("crm.update"), inv("crm.update")
			tt.first(a)
			tt.second(b)
			must(t).OK(e.iv.Invoke(context.Background(), "crm.update", args("to", "x"), a))
			r := must(t).OK(e.iv.Invoke(context.Background(), "crm.update", args("to", "x"), b))
			runs := int64(2)
			if tt.replays {
				runs = 1
			}
			if r.Meta.Replayed != tt.replays || e.count("crm.update") != runs {
				t.Fatalf("replayed=%v runs=%d, want replayed=%v runs=%d (answer %v)", r.Meta.Replayed, e.count("crm.update"), tt.replays, runs, r.Data)
			}
		})
	}
}

// A read whose handler its deadline stops runs on the caller's goroutine;
// it must end exactly as it would on a goroutine of its own.
func TestContextBoundReadEndsAsAnyRead(t *testing.T) {
	t.Parallel()
	slow := func(ctx context.Context, _ handler.Call, _ any) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	tests := []struct {
		name string
		fn   handler.Func
		want toolplane.Code // "" for an answer, "fault" for ErrFault
	}{
		{"an answer", ok(map[string]any{"name": "Ada"}), ""},
		{"past its deadline", slow, toolplane.CodeTimeout},
		{"a panic", func(context.Context, handler.Call, any) (any, error) { panic("nil map") }, "fault"},
		{"a refusal", func(context.Context, handler.Call, any) (any, error) {
			return nil, &handler.Invalid{Message: "no such customer"}
		}, toolplane.CodeInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := def("crm.get", toolplane.EffectRead, func(d *toolplane.Definition) { d.Timeout = toolplane.Duration(30 * time.Millisecond) })
			e := newEnv(t, newStore(t), tool{def: d, fn: tt.fn, opts: []handler.Option{handler.WithContextBound()}})
			r, err := e.iv.Invoke(context.Background(), "crm.get", args(), inv("crm.get"))
			switch tt.want {
			case "":
				mustOK(t, r, err)
			case "fault":
				if !errors.Is(err, invoke.ErrFault) {
					t.Fatalf("err = %v, want a fault", err)
				}
			default:
				code(t, r, err, tt.want)
			}
		})
	}
}
