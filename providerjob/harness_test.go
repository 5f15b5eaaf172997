package providerjob_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/journal"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/providerjob"
	"github.com/toolplane/toolplane/registry"
)

// The two vendors the tests call back as: a body-signed one (no delivery
// id, no timestamp) and a timestamped one.
const (
	enrich      = "enrich"
	enrichKey   = "enrich-signing-key"
	payments    = "payments"
	paymentsKey = "payments-signing-key"
)

// databases answers the databases a test runs on: a SQLite file always,
// and a fresh PostgreSQL schema when TOOLPLANE_TEST_POSTGRES is set (the
// PostgreSQL half skips, visibly, without it).
func databases(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{"sqlite": filepath.Join(t.TempDir(), "toolplane.db")}
	dsn, ok := pgtest.LookupDSN()
	if !ok {
		t.Run("postgres", func(t *testing.T) { t.Skip("PostgreSQL not tested: set " + pgtest.DSNVariable) })
		return out
	}
	out["postgres"] = pgtest.SchemaDSN(t, dsn)
	return out
}

// onEach runs test on every database, as subtests named for it.
func onEach(t *testing.T, test func(t *testing.T, h *harness)) {
	t.Helper()
	for name, database := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, newHarness(t, database))
		})
	}
}

// vendor is a provider's submission endpoint: it counts submissions and
// answers a vendor id, or (refuse set) takes the submission and answers
// 503, as a lost or failed answer after the vendor acted.
type vendor struct {
	srv    *httptest.Server
	posts  atomic.Int64
	refuse atomic.Bool
	mu     sync.Mutex
	// names and hooks are the batch names and callback URLs submitted.
	names, hooks []string
}

func newVendor(t *testing.T) *vendor {
	v := &vendor{}
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Name    string `json:"name"`
			Webhook string `json:"webhook_url"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		n := v.posts.Add(1)
		v.mu.Lock()
		v.names, v.hooks = append(v.names, in.Name), append(v.hooks, in.Webhook)
		v.mu.Unlock()
		if v.refuse.Load() {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, `{"id":"v-%d"}`, n)
	}))
	t.Cleanup(v.srv.Close)
	return v
}

// harness is one node: a store, an invoker with a submit and a collect
// tool, the River runner settling jobs, and the webhook route on a real
// HTTP server.
type harness struct {
	store   backend.Store
	svc     *providerjob.Service
	iv      *invoke.Invoker
	runner  backend.Runner
	vendor  *vendor
	hooks   *httptest.Server
	dropped sync.Map // provider/reason -> *atomic.Int64
	// settleFails, while positive, fails that many settlements (a meter
	// outage), counting down.
	settleFails atomic.Int64
}

type submitIn struct {
	Refs []string `json:"refs"`
}

type collectIn struct {
	JobID string `json:"job_id"`
}

type bindings struct{ *handler.Registry }

func (bindings) Connection(string) bool   { return false }
func (bindings) FactResolver(string) bool { return false }

// failingMeter is the store with its settlement failing while the
// harness says so: a meter outage, beside the real store's settlement.
type failingMeter struct {
	backend.Store
	h *harness
}

func (f failingMeter) SettleProviderJob(ctx context.Context, jobID string, u *toolplane.Usage, e *toolplane.AuditEvent) (bool, error) {
	if f.h.settleFails.Add(-1) >= 0 {
		return false, fmt.Errorf("meter unavailable")
	}
	return f.Store.SettleProviderJob(ctx, jobID, u, e)
}

func newHarness(t *testing.T, database string) *harness {
	t.Helper()
	ctx := context.Background()
	b, err := backend.Open(ctx, database)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	h := &harness{store: b.Store, vendor: newVendor(t)}
	quiet := slog.New(slog.DiscardHandler)
	mux := http.NewServeMux()
	h.hooks = httptest.NewServer(mux)
	t.Cleanup(h.hooks.Close)
	h.svc, err = providerjob.New(providerjob.Config{Store: failingMeter{b.Store, h}, PublicURL: h.hooks.URL, Poll: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}

	no := false
	submitDef, err := handler.Define[submitIn, providerjob.Submitted](toolplane.Definition{
		Name: "enrich.submit", Version: "1.0.0", Description: "Submit contacts for enrichment.",
		Kind: toolplane.KindInternal, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "enrich.submit"}},
		Effect: toolplane.EffectWrite, Repeatable: &no,
	})
	if err != nil {
		t.Fatal(err)
	}
	collectDef, err := handler.Define[collectIn, providerjob.Collected](toolplane.Definition{
		Name: "enrich.collect", Version: "1.0.0", Description: "Read an enrichment job.",
		Kind: toolplane.KindInternal, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "enrich.collect"}},
		Effect: toolplane.EffectRead,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := handler.NewRegistry()
	submit, _ := handler.Bind("enrich.submit", func(ctx context.Context, call handler.Call, in submitIn) (providerjob.Submitted, error) {
		out, err := h.svc.Submit(ctx, call, providerjob.Submission{Provider: enrich, Refs: in.Refs}, h.send)
		if err != nil {
			return providerjob.Submitted{}, err
		}
		return *out, nil
	}, nil)
	collect, _ := handler.Bind("enrich.collect", func(ctx context.Context, call handler.Call, in collectIn) (providerjob.Collected, error) {
		out, err := h.svc.Collect(ctx, call, enrich, in.JobID)
		if err != nil {
			return providerjob.Collected{}, err
		}
		return *out, nil
	}, nil)
	for _, hb := range []*handler.Binding{submit, collect} {
		if err := hs.Register(hb); err != nil {
			t.Fatal(err)
		}
	}
	reg, _, err := registry.Build([]toolplane.Definition{submitDef, collectDef}, registry.Options{Bindings: bindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	approvals := approval.New(approval.Config{Store: b.Store})
	h.iv, err = invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: b.Store, Policy: policy.Grants{}, Approvals: approvals, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	h.runner, err = b.Runner(jobs.Deps{Invoker: h.iv, Approvals: approvals, Store: b.Store, Maint: b.Store, ProviderJobs: h.svc},
		jobs.Options{Poll: 50 * time.Millisecond, SweepEvery: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	h.iv.UseScheduler(h.runner)
	if err := h.runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.runner.Stop(stop)
	})
	mux.Handle(providerjob.Route, &providerjob.Receiver{Jobs: h.svc, Journal: journal.New(b.Store, time.Now), Settler: h.runner,
		Adapters: map[string]providerjob.Adapter{
			enrich:   &providerjob.BodySigned{Name: enrich, Secret: enrichKey, CentsPerCredit: 10},
			payments: &providerjob.Timestamped{Name: payments, Secret: paymentsKey},
		},
		Dropped: func(provider, reason string) {
			n, _ := h.dropped.LoadOrStore(provider+"/"+reason, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		},
		Node: "node-1", Log: quiet})
	return h
}

// send is the submit tool's one vendor call: the batch named for the job,
// the callback URL the platform built.
func (h *harness) send(ctx context.Context, job *toolplane.ProviderJob, callback string) (string, error) {
	body, _ := json.Marshal(map[string]any{"name": providerjob.BatchName(job.ID), "webhook_url": callback, "refs": job.Refs})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.vendor.srv.URL+"/batches", bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", &handler.RetryableUpstream{Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", &handler.RetryableUpstream{Err: fmt.Errorf("vendor answered %d", resp.StatusCode)}
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", &handler.RetryableUpstream{Err: err}
	}
	return out.ID, nil
}

// org answers a fresh organization's invocation of run.
func call(org, run string) *toolplane.Invocation {
	return &toolplane.Invocation{OrganizationID: org, RunID: run, StepPath: "agent",
		Principal: toolplane.Principal{ID: "agent-1", Tools: []string{"enrich.submit", "enrich.collect"}}}
}

var orgSeq atomic.Int64

func newOrg() string { return fmt.Sprintf("org-%d-%d", time.Now().UnixNano(), orgSeq.Add(1)) }

// submit calls the submit tool and answers its job.
func (h *harness) submit(t *testing.T, inv *toolplane.Invocation, refs ...string) (providerjob.Submitted, toolplane.Result) {
	t.Helper()
	args, _ := json.Marshal(submitIn{Refs: refs})
	r, err := h.iv.InvokeJSON(context.Background(), "enrich.submit", args, inv)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	var out providerjob.Submitted
	if r.OK {
		data, _ := json.Marshal(r.Data)
		_ = json.Unmarshal(data, &out)
	}
	return out, r
}

// collect calls the collect tool.
func (h *harness) collect(t *testing.T, inv *toolplane.Invocation, jobID string) (providerjob.Collected, toolplane.Result) {
	t.Helper()
	args, _ := json.Marshal(collectIn{JobID: jobID})
	r, err := h.iv.InvokeJSON(context.Background(), "enrich.collect", args, inv)
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	var out providerjob.Collected
	if r.OK {
		data, _ := json.Marshal(r.Data)
		_ = json.Unmarshal(data, &out)
	}
	return out, r
}

// batchBody answers the body-signed vendor's callback for a batch.
func batchBody(vendorID, jobID, status string, credits int64, data string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"name":%q,"status":%q,"cost":{"credits":%d},"data":%s}`,
		vendorID, providerjob.BatchName(jobID), status, credits, data)
}

// deliver posts body to the job's callback URL of provider, signed with
// sign (nil: unsigned), and answers the status.
func (h *harness) deliver(t *testing.T, provider, jobID string, body []byte, sign func(http.Header)) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.hooks.URL+"/v1/webhooks/"+provider+"/"+jobID, bytes.NewReader(body))
	if sign != nil {
		sign(req.Header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// sha1Signed signs a body-signed delivery with key.
func sha1Signed(key string, body []byte) func(http.Header) {
	return func(hd http.Header) { hd.Set("X-Signature-SHA1", hex.EncodeToString(providerjob.SignSHA1(key, body))) }
}

// stamped signs a timestamped delivery with key at at.
func stamped(key string, at time.Time, body []byte) func(http.Header) {
	return func(hd http.Header) { hd.Set("Stripe-Signature", providerjob.SignTimestamped(key, at, body)) }
}

// drops answers how many deliveries of provider were dropped for reason.
func (h *harness) drops(provider, reason string) int64 {
	n, ok := h.dropped.Load(provider + "/" + reason)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// job reads the organization's job.
func (h *harness) job(t *testing.T, org, id string) *toolplane.ProviderJob {
	t.Helper()
	j, err := h.store.GetProviderJob(context.Background(), org, id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// settled waits for the job's settlement and answers it.
func (h *harness) settled(t *testing.T, org, id string) *toolplane.ProviderJob {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		j := h.job(t, org, id)
		if j.UsageID != "" {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not settled: %+v", id, j)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// audited answers how many of the organization's audit events have
// outcome.
func (h *harness) audited(t *testing.T, org, outcome string) int {
	t.Helper()
	evs, _, err := h.store.ListAudit(context.Background(), org, toolplane.AuditFilter{Outcome: outcome}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// cost answers the run tree's metered cost.
func (h *harness) cost(t *testing.T, org, root string) int64 {
	t.Helper()
	c, err := h.store.RunTreeCost(context.Background(), org, root)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// submitCall answers a submit call of the organization as a handler sees
// it, for a test that calls Submit directly.
func submitCall(org string) handler.Call {
	return handler.Call{Invocation: call(org, "run-1"), Tool: "payments.charge", Version: "1.0.0", Key: "key-" + org, Attempt: 1}
}
