package sqlite

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/journal"
	"github.com/toolplane/toolplane/storetest"
)

// BenchmarkStore runs the shared store benchmarks on a SQLite file.
func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) toolplane.Store { return newTestStore(b) })
}

// BenchmarkAppendAuditBatch is the audit writer's commit under load: 32
// read calls' events in one transaction. ns/op and cpu-µs/op are per batch.
func BenchmarkAppendAuditBatch(b *testing.B) {
	s := newTestStore(b)
	now := time.Now()
	appendBatches(b, s, func(n int) *toolplane.AuditEvent {
		return &toolplane.AuditEvent{
			ID: "ev-" + strconv.Itoa(n), OrganizationID: "org-bench", RunID: "mcp:tpk_1:SESSION", AgentID: "agent-billing",
			PrincipalID: "agent-billing", Tool: "demo.search_tickets", ToolVersion: "1.0.0", Source: toolplane.SourceMCP,
			Outcome: "ok", ArgumentsHash: "sha256:4f2a9c0e7b1d3e5f", LatencyMicros: 234, CreatedAt: now.Add(time.Duration(n) * time.Microsecond),
		}
	})
}

// BenchmarkAppendAuditBatchDecided is BenchmarkAppendAuditBatch with
// each event carrying its policy decision and the document it was decided
// on, as a call the grants allow does: the row as the store packs it
// (sqlstore.PackDocument).
func BenchmarkAppendAuditBatchDecided(b *testing.B) {
	s := newTestStore(b)
	now := time.Now()
	appendBatches(b, s, func(n int) *toolplane.AuditEvent {
		return &toolplane.AuditEvent{
			ID: "ev-" + strconv.Itoa(n), OrganizationID: "org-bench", RunID: "mcp:tpk_1:SESSION", AgentID: "agent-billing",
			PrincipalID: "agent-billing", Tool: "demo.search_tickets", ToolVersion: "1.0.0", Source: toolplane.SourceMCP,
			Outcome: "ok", ArgumentsHash: "sha256:4f2a9c0e7b1d3e5f", LatencyMicros: 234, CreatedAt: now.Add(time.Duration(n) * time.Microsecond),
			PolicyDecision: "allow", PolicyInput: benchPolicyInput,
		}
	})
}

// BenchmarkAppendAuditBatchHashed is BenchmarkAppendAuditBatchDecided
// with each event carrying the hex fields a traced call's event carries,
// each its own: the arguments' hash, the output's, the trace and span
// ids, and a derived idempotency key (stored as bytes: sqlstore.PackHex).
func BenchmarkAppendAuditBatchHashed(b *testing.B) {
	s := newTestStore(b)
	now := time.Now()
	appendBatches(b, s, func(n int) *toolplane.AuditEvent {
		h := fmt.Sprintf("%064x", n)
		return &toolplane.AuditEvent{
			ID: "ev-" + strconv.Itoa(n), OrganizationID: "org-bench", RunID: "mcp:tpk_1:SESSION", AgentID: "agent-billing",
			PrincipalID: "agent-billing", Tool: "demo.search_tickets", ToolVersion: "1.0.0", Source: toolplane.SourceMCP,
			Outcome: "ok", ArgumentsHash: h, OutputHash: "sha256:" + h, TraceID: h[32:], SpanID: h[48:],
			Key:           "3:run,13:agent-billing,17:mcp:tpk_1:SESSION,5:agent,64:" + h,
			LatencyMicros: 234, CreatedAt: now.Add(time.Duration(n) * time.Microsecond),
			PolicyDecision: "allow", PolicyInput: benchPolicyInput,
		}
	})
}

// appendBatches appends batches of 32 events, event n made by event(n),
// for as long as b runs, and reports the process's CPU per batch.
func appendBatches(b *testing.B, s *Store, event func(n int) *toolplane.AuditEvent) {
	appendBatchesOf(b, s, 32, event)
}

// appendBatchesOf is appendBatches with batches of size events; it also
// reports the CPU per event.
func appendBatchesOf(b *testing.B, s *Store, size int, event func(n int) *toolplane.AuditEvent) {
	b.ReportAllocs()
	cpu0 := processCPU(b)
	n := 0
	for b.Loop() {
		evs := make([]*toolplane.AuditEvent, size)
		for j := range evs {
			evs[j] = event(n)
			n++
		}
		if err := s.AppendAuditBatch(b.Context(), evs); err != nil {
			b.Fatal(err)
		}
	}
	cpu := float64((processCPU(b) - cpu0).Microseconds())
	b.ReportMetric(cpu/float64(b.N), "cpu-µs/op")
	b.ReportMetric(cpu/float64(b.N*size), "cpu-µs/event")
}

// BenchmarkAppendAuditBatchFilled is BenchmarkAppendAuditBatch on a table
// that already holds 100,000 events, as a long-lived database's does, with
// ids as NewID mints them and the events of 16 clients' runs: the b-trees
// are deep, and each batch lands on pages of every run's part of the run
// index. Each event carries a policy decision and the document it was
// decided on, as every call the grants allow does, which makes a row two
// to three times the size of one without. ns/op and cpu-µs/op are per
// batch of 32.
func BenchmarkAppendAuditBatchFilled(b *testing.B) {
	var runs [16]string
	for i := range runs {
		runs[i] = fmt.Sprintf("run-%02d", i)
	}
	s := filledAudit(b, runs[:])
	appendBatches(b, s, filledEvent(runs[:]))
}

// BenchmarkAppendAuditBatchRuns is the audit writer's commit on a filled
// table by the two things that set a read's share of it apart from call
// to call: how many events one commit holds (the writer gathers what a
// linger brings, so the call rate decides it) and the runs the events
// name. "none" is a read through the REST door outside a run, whose
// events all land on one place of the run index; "sessions16" is 16 MCP
// clients, each session its own run ("mcp:<key id>:<session>", as the
// MCP door names it), whose events land on 16. cpu-µs/event is the
// process's CPU per event stored.
func BenchmarkAppendAuditBatchRuns(b *testing.B) {
	for _, size := range []int{9, 18, 52, 82} {
		for _, runs := range []struct {
			name string
			ids  []string
		}{{"none", []string{""}}, {"sessions16", sessionRuns(16)}} {
			b.Run(fmt.Sprintf("batch%d/%s", size, runs.name), func(b *testing.B) {
				// A table of its own, so that each reads as large.
				s := filledAudit(b, runs.ids)
				appendBatchesOf(b, s, size, filledEvent(runs.ids))
			})
		}
	}
}

// sessionRuns answers n runs named as the MCP door names a session's.
func sessionRuns(n int) []string {
	runs := make([]string, n)
	for i := range runs {
		runs[i] = fmt.Sprintf("mcp:tpk_d330e31871b202c8634ed6b7:RF6SPS37LY7O5MWM2V65O25P%02d", i)
	}
	return runs
}

// auditFilled is how many events filledAudit stores first.
const auditFilled = 100_000

// filledEvent answers the events of the filled benchmarks: a read call's
// that the grants allowed, its run taken in turn from runs.
func filledEvent(runs []string) func(n int) *toolplane.AuditEvent {
	return func(n int) *toolplane.AuditEvent {
		return &toolplane.AuditEvent{
			ID: toolplane.NewID("aud_"), OrganizationID: "org-bench", RunID: runs[n%len(runs)], AgentID: "agent-billing",
			PrincipalID: "agent-billing", Tool: "demo.search_tickets", ToolVersion: "1.0.0", Source: toolplane.SourceREST,
			Outcome: "ok", ArgumentsHash: "sha256:4f2a9c0e7b1d3e5f", LatencyMicros: 234, CreatedAt: time.Now(),
			PolicyDecision: "allow", PolicyInput: benchPolicyInput,
		}
	}
}

// filledAudit answers a store holding auditFilled events of runs, stored
// as the writer stores them: the chain's trigger refuses a row without
// its place in the chain, so they cannot be inserted by one statement.
func filledAudit(b *testing.B, runs []string) *Store {
	s := newTestStore(b)
	event := filledEvent(runs)
	for i := 0; i < auditFilled; i += maxFill {
		evs := make([]*toolplane.AuditEvent, maxFill)
		for j := range evs {
			evs[j] = event(i + j)
		}
		if err := s.AppendAuditBatch(b.Context(), evs); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// maxFill is the batch filledAudit stores at a time.
const maxFill = 250

// benchPolicyInput is a read call's policy document in the shape the
// rules record it (rules.record): the request, credentials redacted.
var benchPolicyInput = []byte(`{"grants":"allow","request":{"principal":{"agent":"agent-billing","key":"tpk_1",` +
	`"roles":["support"],"team":"billing","tenant":"org-bench","attributes":{}},"tool":{"name":"demo.search_tickets",` +
	`"version":"1.0.0","effect":"read","labels":["tickets"],"sensitive":[]},"arguments":{"query":"refund for order 1234",` +
	`"limit":10},"facts":{},"context":{"time":"2026-12-02T04:00:00Z","weekday":"Wednesday","hour":4,"zone":"UTC",` +
	`"run_cost_cents":0}}}`)

// BenchmarkClaimLifecycleParallel is the journal's writes of a write call
// (the claim, the dispatch mark, and the completion with its audit event,
// each as journal writes it)
// from 16 callers at once, each call on a key of its own: the writes that
// contend for SQLite's one writer. ns/op is per call; cpu-µs/op is the
// process's CPU per call, the steadier figure on a shared machine.
func BenchmarkClaimLifecycleParallel(b *testing.B) {
	s := newTestStore(b)
	ctx := b.Context()
	var seq atomic.Int64
	b.SetParallelism(8) // 16 callers on two cores
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			now := time.Now()
			c := &toolplane.Claim{
				OrganizationID: "org-bench", Tool: "load.put_item", Key: "key-" + strconv.FormatInt(n, 10),
				RequestHash: "sha256:4f2a9c0e7b1d3e5f", Status: toolplane.ClaimProcessing, Owner: "node/1/1",
				LeaseUntil: now.Add(time.Minute), Node: "node-1", RunID: "run-" + strconv.FormatInt(n, 10), StepPath: "agent",
				Arguments: []byte(`{"id":"item-1","name":"a name","price_cents":1999}`), Version: n, CreatedAt: now, UpdatedAt: now,
			}
			if ok, err := s.InsertClaim(ctx, c); !ok || err != nil {
				b.Fatal(ok, err)
			}
			// The dispatch mark and the completion as the journal writes
			// them (journal.Dispatch, journal.Complete).
			c.Dispatched, c.Attempts = true, 1
			if ok, err := s.DispatchClaim(ctx, c); !ok || err != nil {
				b.Fatal(ok, err)
			}
			c.Status, c.Owner, c.Result = toolplane.ClaimCompleted, "", []byte(`{"ok":true,"content":{"id":"item-1"}}`)
			c.Arguments, c.Invocation = nil, nil
			e := &toolplane.AuditEvent{
				ID: toolplane.NewID("aud_"), OrganizationID: "org-bench", RunID: c.RunID, AgentID: "agent-load",
				PrincipalID: "agent-load", Tool: c.Tool, ToolVersion: "1.0.0", Source: toolplane.SourceREST,
				Outcome: "ok", ArgumentsHash: c.RequestHash, LatencyMicros: 900, CreatedAt: now, Key: c.Key,
			}
			if ok, err := s.UpdateClaimAudited(ctx, c, e); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU answers the CPU time, user and system, this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkVerifyStore is online verification on SQLite: an
// organization's chain of 20,000 events (TOOLPLANE_BENCH_CHAIN sets
// another length) read from the store in pages of a thousand and verified
// (auditchain.VerifyStore). events/s counts what it verified; cpu-ns/event
// is the process's CPU, user and system, over the timed loop.
func BenchmarkVerifyStore(b *testing.B) {
	s := newTestStore(b)
	n := benchChain(b)
	now := time.Now()
	for i := 0; i < n; i += 500 {
		evs := make([]*toolplane.AuditEvent, min(500, n-i))
		for j := range evs {
			evs[j] = &toolplane.AuditEvent{
				ID: "ev-" + strconv.Itoa(i+j), OrganizationID: "org-bench", RunID: "run-1", AgentID: "agent-billing",
				Tool: "payments.refund_order", ToolVersion: "2.1.0", Source: toolplane.SourceMCP, Outcome: "ok",
				ArgumentsHash: "sha256:4f2a9c0e7b1d3e5f", Arguments: []byte(`{"order_id":"ord_8d1c","amount_cents":1250}`),
				LatencyMicros: 234, CreatedAt: now.Add(time.Duration(i+j) * time.Microsecond),
			}
		}
		if err := s.AppendAuditBatch(b.Context(), evs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for b.Loop() {
		r, err := auditchain.VerifyStore(b.Context(), s, &auditchain.KeySet{}, "org-bench", 0, 0)
		if err != nil || !r.OK || r.Events != n {
			b.Fatalf("verify = %+v, %v", r, err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(n*b.N), "cpu-ns/event")
}

// benchChain is the length of BenchmarkVerifyStore's chain:
// TOOLPLANE_BENCH_CHAIN, or 20,000.
func benchChain(b *testing.B) int {
	n := 20_000
	if v := os.Getenv("TOOLPLANE_BENCH_CHAIN"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("TOOLPLANE_BENCH_CHAIN=%q is not a length", v)
		}
	}
	return n
}

// BenchmarkWriteStorage is what one write call leaves on disk: a claim
// taken, marked dispatched and completed through the journal, with its
// audit event, as invoke writes them (the arguments, the caller's
// invocation, a short result). After the loop the WAL is checkpointed
// into the file; claim-B/op is the pages of the claims table and its
// indexes per call, audit-B/op those of everything else (the audit
// events, their indexes and chain), file-B/op the file's growth.
func BenchmarkWriteStorage(b *testing.B) {
	s := newTestStore(b)
	ctx := b.Context()
	j := journal.New(s, nil)
	inv, err := json.Marshal(toolplane.Invocation{
		OrganizationID: "org-bench", RunID: "run-1", AgentID: "agent-load", StepPath: "agent",
		Principal: toolplane.Principal{ID: "agent-load"}, Source: toolplane.SourceREST, CredentialID: "key_01J9ZX3Q",
	})
	if err != nil {
		b.Fatal(err)
	}
	before, fileBefore := storageBytes(b, s)
	n := 0
	for b.Loop() {
		n++
		key := "key-" + strconv.Itoa(n)
		out, c, err := j.Claim(ctx, journal.Request{
			OrganizationID: "org-bench", Tool: "load.put_item", Key: key, RequestHash: "sha256:4f2a9c0e7b1d3e5f0a",
			MaxAttempts: 1, Owner: "node-1/1", Lease: time.Minute, Node: "node-1", RunID: "run-1", StepPath: "agent",
			Arguments: []byte(`{"id":"item-` + strconv.Itoa(n) + `","name":"a name","price_cents":1999}`), Invocation: inv,
		})
		if err != nil || out != journal.Claimed {
			b.Fatal(out, err)
		}
		if err := j.Dispatch(ctx, c); err != nil {
			b.Fatal(err)
		}
		ev := &toolplane.AuditEvent{
			ID: toolplane.NewID("aud_"), OrganizationID: "org-bench", RunID: c.RunID, AgentID: "agent-load",
			PrincipalID: "agent-load", Tool: c.Tool, ToolVersion: "1.0.0", Source: toolplane.SourceREST,
			Outcome: "ok", ArgumentsHash: c.RequestHash, LatencyMicros: 900, CreatedAt: time.Now(), Key: key,
		}
		if err := j.Complete(ctx, c, []byte(`{"ok":true,"content":{"id":"item-1"}}`), ev); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	after, file := storageBytes(b, s)
	for name, v := range map[string]int64{"claim-B/op": after.claims - before.claims, "audit-B/op": after.rest - before.rest} {
		b.ReportMetric(float64(v)/float64(n), name)
	}
	b.ReportMetric(float64(file-fileBefore)/float64(n), "file-B/op")
}

// storedBytes is what the pages of a database hold, by what they hold.
type storedBytes struct{ claims, rest int64 }

// storageBytes checkpoints s's WAL into its file and answers the bytes of
// the pages of the claims table and its indexes, of all else, and the
// file's size.
func storageBytes(b *testing.B, s *Store) (storedBytes, int64) {
	ctx := b.Context()
	if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT d.name, SUM(d.pgsize), COALESCE(m.tbl_name, '')
		FROM dbstat d LEFT JOIN sqlite_master m ON m.name = d.name GROUP BY d.name`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var sb storedBytes
	for rows.Next() {
		var name, table string
		var size int64
		if err := rows.Scan(&name, &size, &table); err != nil {
			b.Fatal(err)
		}
		if testing.Verbose() {
			b.Logf("%s %d", name, size)
		}
		if table == "claims" {
			sb.claims += size
		} else {
			sb.rest += size
		}
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	var pages, pageSize int64
	if err := s.db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		b.Fatal(err)
	}
	if err := s.db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		b.Fatal(err)
	}
	return sb, pages * pageSize
}
