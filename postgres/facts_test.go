package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/canonical"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/registry"
)

// A policy fact that runs past its deadline on a PostgreSQL node answers
// internal_error: the handler never runs, no claim is left on the key,
// and the call's audit event records internal_error.
func TestFactTimeoutLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	pool, err := chaosPool(ctx, dsn, pgtest.Schema(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := postgres.New(pool)
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	hs := handler.NewRegistry()
	b, err := handler.BindFunc("payments.refund", func(context.Context, handler.Call, any) (any, error) {
		ran.Add(1)
		return map[string]any{"done": true}, nil
	}, nil, handler.WithFact("order_account", func(ctx context.Context, _ *toolplane.Invocation, _ *toolplane.Definition, _ any) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.Register(b); err != nil {
		t.Fatal(err)
	}
	no := false
	d := toolplane.Definition{Name: "payments.refund", Version: "1.0.0", Description: "Refund an order.", Kind: toolplane.KindInternal,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}}}`), OutputSchema: json.RawMessage(`{"type":"object"}`),
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "payments.refund"}}, Effect: toolplane.EffectWrite, Repeatable: &no,
		Timeout: toolplane.Duration(2 * time.Second), PolicyFacts: []string{"order_account"}}
	reg, _, err := registry.Build([]toolplane.Definition{d}, registry.Options{Bindings: chaosBindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, FactTimeout: 30 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	inv := &toolplane.Invocation{OrganizationID: "org-f", RunID: "run-f", AgentID: "agent", StepPath: "agent",
		Principal: toolplane.Principal{ID: "agent", Tools: []string{"payments.refund"}}}
	args := map[string]any{"order_id": "o-1"}
	r, err := iv.Invoke(ctx, "payments.refund", args, inv)
	if err != nil || r.OK || r.Error == nil || r.Error.Code != toolplane.CodeInternalError || r.Stop != toolplane.StopFault {
		t.Fatalf("Invoke = %+v, %v; want internal_error, stop fault", r, err)
	}
	if ran.Load() != 0 {
		t.Fatal("the handler ran after its fact timed out")
	}
	raw, _ := json.Marshal(args)
	h, err := canonical.HashJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	if cl, err := store.GetClaim(ctx, "org-f", "payments.refund", invoke.Key(inv, h)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("a claim was left behind: %+v, %v", cl, err)
	}
	evs, _, err := store.ListAudit(ctx, "org-f", toolplane.AuditFilter{Tool: "payments.refund"}, "", 10)
	if err != nil || len(evs) != 1 || evs[0].Outcome != string(toolplane.CodeInternalError) {
		t.Fatalf("audit = %+v, %v; want one internal_error event", evs, err)
	}
}
