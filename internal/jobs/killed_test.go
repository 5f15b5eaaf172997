package jobs_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/webhook"
)

// The environment of a node process the test kills.
const (
	killedDBEnv   = "TOOLPLANE_KILLED_NODE_DB"
	killedHoldEnv = "TOOLPLANE_KILLED_NODE_HOLD" // the test's downstream, fact source and webhook
	killedKeysEnv = "TOOLPLANE_KILLED_NODE_KEYS"
	killedName    = "node-k"
)

// The recovery timings of the nodes under test: a node counts as dead
// two seconds after its last heartbeat, and sweeps every second.
const (
	killedHeartbeat = 200 * time.Millisecond
	killedDeadAfter = 2 * time.Second
	killedSweep     = time.Second
	// leaderFailover is how long River takes to elect a new leader when
	// the leader is killed (its leadership lapses up to 15 s after its last
	// renewal, and the others try every 5 s); the
	// periodic sweeps run on the leader.
	leaderFailover = 22 * time.Second
)

// killedTools are a send whose handler posts to the downstream, and a
// write whose policy reads a fact the fact source answers; both need a
// person's approval.
func killedTools() []toolplane.Definition {
	no := false
	obj := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)
	return []toolplane.Definition{{
		Name: "email.send", Version: "1.0.0", Description: "Send an email.", InputSchema: obj, OutputSchema: json.RawMessage(`{"type":"object"}`),
		Kind: toolplane.KindInternal, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "email.send"}},
		Effect: toolplane.EffectSend, Connection: "mailbox", Repeatable: &no, Timeout: toolplane.Duration(time.Minute),
		Annotations: toolplane.Annotations{RequiresApproval: true},
	}, {
		Name: "payments.refund", Version: "1.0.0", Description: "Refund an order.", InputSchema: obj, OutputSchema: json.RawMessage(`{"type":"object"}`),
		Kind: toolplane.KindInternal, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "payments.refund"}},
		Effect: toolplane.EffectWrite, Repeatable: &no, Timeout: toolplane.Duration(time.Minute),
		Annotations: toolplane.Annotations{RequiresApproval: true}, PolicyFacts: []string{"order_account"},
	}}
}

func killedInv(tool string) *toolplane.Invocation {
	return &toolplane.Invocation{OrganizationID: "org-1", RunID: "run-" + tool, StepPath: "agent",
		Principal: toolplane.Principal{ID: "agent-1", Tools: []string{"email.send", "payments.refund"}}}
}

// killedNode is one node of the test: as a process would wire it, on
// database, its handlers and fact calling hold.
type killedNode struct {
	iv     *invoke.Invoker
	runner backend.Runner
	store  backend.Store
	notes  *notify.Service
	self   *toolplane.Node
}

// newKilledNode wires a node. With a name it registers under it and
// heartbeats, as serve does; without one it only files and answers
// approvals (its runner is never started).
func newKilledNode(t *testing.T, database, hold, keyring, name string, log *slog.Logger) *killedNode {
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
	store := b.Store
	post := func(ctx context.Context, path, id string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hold+path+"?id="+id, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", path, resp.Status)
		}
		return nil
	}
	idOf := func(args any) string { s, _ := args.(map[string]any)["id"].(string); return s }
	hs := handler.NewRegistry()
	send, _ := handler.BindFunc("email.send", func(ctx context.Context, _ handler.Call, args any) (any, error) {
		if err := post(ctx, "/downstream", idOf(args)); err != nil {
			return nil, err
		}
		return map[string]any{"sent": true}, nil
	}, nil)
	refund, _ := handler.BindFunc("payments.refund", func(ctx context.Context, _ handler.Call, args any) (any, error) {
		if err := post(ctx, "/downstream", idOf(args)); err != nil {
			return nil, err
		}
		return map[string]any{"refunded": true}, nil
	}, nil, handler.WithFact("order_account", func(ctx context.Context, _ *toolplane.Invocation, _ *toolplane.Definition, args any) (any, error) {
		return "acct-1", post(ctx, "/fact", idOf(args))
	}))
	_ = hs.Register(send)
	_ = hs.Register(refund)
	reg, _, err := registry.Build(killedTools(), registry.Options{Bindings: bindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	n := &killedNode{store: store}
	opt := jobs.Options{SweepEvery: killedSweep, DeadAfter: killedDeadAfter, Poll: 100 * time.Millisecond,
		NotifyBackoff: 50 * time.Millisecond, Logger: log}
	if name != "" {
		if n.self, err = jobs.Register(ctx, store, name, time.Now()); err != nil {
			t.Fatal(err)
		}
		opt.Node = n.self.ID
		beat, stop := context.WithCancel(ctx)
		t.Cleanup(stop)
		go jobs.Heartbeat(beat, store, n.self, killedHeartbeat, nil, log)
	}
	keys, err := secret.ParseKeyring(keyring)
	if err != nil {
		t.Fatal(err)
	}
	approvals := approval.New(approval.Config{Store: store, TTL: time.Hour})
	n.iv, err = invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Approvals: approvals,
		Logger: log, Node: opt.Node, NodeDeadAfter: killedDeadAfter, FactTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if n.notes, err = notify.New(notify.Config{Store: store, Keys: keys, PublicURL: "https://toolplane.example", Timeout: 5 * time.Second, AllowCIDRs: []string{"127.0.0.0/8"}}); err != nil {
		t.Fatal(err)
	}
	if n.runner, err = b.Runner(jobs.Deps{Invoker: n.iv, Approvals: approvals, Store: store, Maint: store, Notifier: n.notes}, opt); err != nil {
		t.Fatal(err)
	}
	n.iv.UseScheduler(n.runner)
	n.iv.UseNotice(n.runner)
	return n
}

// serve starts the node's background work as serve does: the lost
// claims and jobs first, then the runner.
func (n *killedNode) serve(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := n.runner.SettleLost(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = n.runner.Stop(stop)
	})
}

// killedChild is the node process the test kills: it serves until then.
func killedChild(t *testing.T) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	n := newKilledNode(t, os.Getenv(killedDBEnv), os.Getenv(killedHoldEnv), os.Getenv(killedKeysEnv), killedName, log)
	n.serve(t)
	fmt.Println("serving")
	time.Sleep(2 * time.Minute)
	t.Fatal("the node was not killed")
}

// holds is the world outside the nodes: a downstream that records every
// call's effect, the fact source, and the webhook receiver. Until
// released, the downstream holds every request, the fact source every
// request once armed, and the receiver the first delivery of a filing of
// holdFiled's.
type holds struct {
	mu        sync.Mutex
	released  chan struct{}
	effects   map[string]int // argument id -> calls that reached the downstream
	armed     bool           // the fact source holds
	holdFiled string         // the tool whose first filing the receiver holds
	held      bool
	delivered []notify.Payload    // answered 200
	deliverID map[string][]string // approval id + event -> X-Toolplane-Delivery of every request
	reached   chan string
}

func newHolds(t *testing.T) (*holds, string) {
	h := &holds{released: make(chan struct{}), effects: map[string]int{}, holdFiled: "email.send",
		deliverID: map[string][]string{}, reached: make(chan string, 100)}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.release) // a held request ends before the server closes
	return h, srv.URL
}

func (h *holds) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.released:
	default:
		close(h.released)
	}
}

// wait tells that what was reached and holds the request until the
// release, or until its sender is gone.
func (h *holds) wait(req *http.Request, what string) {
	select {
	case h.reached <- what:
	default: // nobody looks any more
	}
	select {
	case <-h.released:
	case <-req.Context().Done():
	}
}

func (h *holds) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	id := req.URL.Query().Get("id")
	switch req.URL.Path {
	case "/downstream":
		h.mu.Lock()
		h.effects[id]++
		h.mu.Unlock()
		h.wait(req, "downstream "+id)
	case "/fact":
		h.mu.Lock()
		armed := h.armed
		h.mu.Unlock()
		if armed {
			h.wait(req, "fact "+id)
		}
	case "/hook":
		body, _ := io.ReadAll(req.Body)
		if err := webhook.Check([][]byte{[]byte(webhookKey)}, req.Header.Get(webhook.HeaderTimestamp), req.Header.Get(webhook.HeaderSignature), body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var p notify.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		subject := ""
		if p.Approval != nil {
			subject = p.Approval.ID
		} else if p.Call != nil {
			subject = p.Call.Tool
		}
		h.mu.Lock()
		h.deliverID[subject+" "+string(p.Event)] = append(h.deliverID[subject+" "+string(p.Event)], req.Header.Get(webhook.HeaderDelivery))
		hold := p.Event == notify.ApprovalFiled && p.Approval != nil && p.Approval.Tool == h.holdFiled && !h.held
		if hold {
			h.held = true
		}
		h.mu.Unlock()
		if hold {
			h.wait(req, "filed "+subject)
			select {
			case <-h.released:
				http.Error(w, "held until its sender was gone", http.StatusServiceUnavailable)
			default:
			}
			return
		}
		h.mu.Lock()
		h.delivered = append(h.delivered, p)
		h.mu.Unlock()
	}
}

// told reports whether event about subject (an approval id, or a tool for
// an uncertain call) was delivered.
func (h *holds) told(subject string, event notify.Event) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.delivered {
		if p.Event != event {
			continue
		}
		if (p.Approval != nil && p.Approval.ID == subject) || (p.Call != nil && p.Call.Tool == subject) {
			return true
		}
	}
	return false
}

func (h *holds) effectsOf(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.effects[id]
}

// TestWorkOfAKilledNodeIsTakenUpWithinItsBound kills (SIGKILL) a node
// process while it delivers an approval's "filed" notification (the
// receiver holds it), executes one approved call inside its handler (the
// downstream holds it: dispatched), and executes another before its claim
// (its policy fact holds it: nothing reached the downstream). Another node
// then takes the work up without anyone asking again: the filing is
// delivered, the dispatched send is held uncertain (it may have acted, and
// is not safe to repeat) and that is notified, and the undispatched refund
// runs, once. On SQLite the node restarts under its name, and the work is
// taken up at its start; on PostgreSQL a node of another name takes it up
// once the killed one has been silent for its dead-after, River's
// leadership having lapsed if the killed node held it.
func TestWorkOfAKilledNodeIsTakenUpWithinItsBound(t *testing.T) {
	if os.Getenv(killedDBEnv) != "" {
		killedChild(t)
		return
	}
	if testing.Short() {
		t.Skip("runs and kills node processes")
	}
	for name, database := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			takenUpAfterKill(t, name, database)
		})
	}
}

func takenUpAfterKill(t *testing.T, kind, database string) {
	ctx := context.Background()
	h, hold := newHolds(t)
	key := make([]byte, secret.KeySize)
	rand.Read(key)
	keyring := "k1 " + base64.StdEncoding.EncodeToString(key)
	out := &syncbuf.Buffer{}
	logs := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node output:\n%s", out)
		}
	})
	// The client files and answers approvals, as the doors of any node
	// would; it works no job.
	client := newKilledNode(t, database, hold, keyring, "", logs)
	_, err := client.notes.Create(ctx, notify.NewChannel{Name: "approvers", Kind: toolplane.ChannelWebhook,
		Config: toolplane.ChannelConfig{URL: hold + "/hook"}, Secrets: toolplane.ChannelSecrets{HMACKey: webhookKey}}, platformAdmin)
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkOfAKilledNodeIsTakenUpWithinItsBound$", "-test.v")
	cmd.Env = append(os.Environ(), killedDBEnv+"="+database, killedHoldEnv+"="+hold, killedKeysEnv+"="+keyring)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	serving := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(out, sc.Text())
			if sc.Text() == "serving" {
				serving <- true
			}
		}
	}()
	select {
	case <-serving:
	case <-time.After(30 * time.Second):
		t.Fatal("the node process did not start")
	}

	// Two approvals; the receiver holds the first one's filing.
	file := func(tool, id string) *toolplane.Approval {
		_, err := client.iv.Invoke(ctx, tool, map[string]any{"id": id}, killedInv(tool))
		var ar *invoke.ApprovalRequired
		if !errors.As(err, &ar) {
			t.Fatalf("%s: %v; want an approval filed", tool, err)
		}
		a, err := client.store.GetApproval(ctx, "org-1", ar.ID)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	send := file("email.send", "send-1")
	refund := file("payments.refund", "refund-1")
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
	approver := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "alice", Roles: []string{toolplane.RoleApprover}}
	for _, id := range []string{send.ID, refund.ID} {
		if _, err := client.iv.Resolve(ctx, id, approval.Decision{Approve: true}, approver); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]bool{"filed " + send.ID: true, "downstream send-1": true, "fact refund-1": true}
	for deadline := time.After(20 * time.Second); len(want) > 0; {
		select {
		case what := <-h.reached:
			delete(want, what)
		case <-deadline:
			t.Fatalf("the node never reached %v", want)
		}
	}

	// The node dies with all three in hand.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	at := time.Now()
	h.release()

	// SQLite: the node restarts under its name and takes the work up as
	// it starts (the bound leaves a loaded machine time to start it).
	// PostgreSQL: another node takes it up once the killed one is dead
	// and River's lead has passed to it, then sweeps.
	bound := killedDeadAfter + killedSweep + leaderFailover + 4*time.Second
	name := "node-p"
	if kind == "sqlite" {
		name, bound = killedName, 8*time.Second
	}
	next := newKilledNode(t, database, hold, keyring, name, logs)
	next.serve(t)
	t.Logf("%s: the next node serves %.1fs after the kill", kind, time.Since(at).Seconds())

	type check struct {
		what string
		done func() bool
	}
	checks := []check{
		{"the held filing delivered", func() bool { return h.told(send.ID, notify.ApprovalFiled) }},
		{"the dispatched send held uncertain", func() bool {
			c, err := next.store.GetClaim(ctx, "org-1", send.Tool, send.Key)
			return err == nil && c.Status == toolplane.ClaimUncertain
		}},
		{"the uncertain send notified", func() bool { return h.told("email.send", notify.CallUncertain) }},
		{"the undispatched refund run", func() bool {
			c, err := next.store.GetClaim(ctx, "org-1", refund.Tool, refund.Key)
			return err == nil && c.Status == toolplane.ClaimCompleted
		}},
	}
	took := map[string]time.Duration{}
	for deadline := at.Add(bound); len(took) < len(checks); time.Sleep(20 * time.Millisecond) {
		for _, c := range checks {
			if _, ok := took[c.what]; !ok && c.done() {
				took[c.what] = time.Since(at)
			}
		}
		if time.Now().After(deadline) {
			break
		}
	}
	for _, c := range checks {
		if d, ok := took[c.what]; ok {
			t.Logf("%s: %s: %.1fs after the kill (bound %s)", kind, c.what, d.Seconds(), bound)
		} else {
			t.Errorf("%s: not within %s of the kill", c.what, bound)
		}
	}

	// At most once: the send reached the downstream once (before the
	// kill), the refund once (after it).
	time.Sleep(killedSweep + 500*time.Millisecond)
	if n := h.effectsOf("send-1"); n != 1 {
		t.Errorf("the send reached the downstream %d times; want 1", n)
	}
	if n := h.effectsOf("refund-1"); n != 1 {
		t.Errorf("the refund reached the downstream %d times; want 1", n)
	}
	// A filing delivered again after the kill carries the same delivery
	// id as the attempt cut short: a receiver may drop the repeat.
	h.mu.Lock()
	ids := h.deliverID[send.ID+" "+string(notify.ApprovalFiled)]
	h.mu.Unlock()
	if len(ids) < 2 || ids[0] != ids[len(ids)-1] {
		t.Errorf("deliveries of the filing carried %q; want one id, sent again after the kill", ids)
	}
}

// riverExecutor opens River's driver on database, for a test to look at
// and change jobs as a lost process would have left them.
func riverExecutor(t *testing.T, database string) riverdriver.Executor {
	t.Helper()
	ctx := context.Background()
	if backend.IsPostgres(database) {
		pool, err := pgxpool.New(ctx, database)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return riverpgxv5.New(pool).GetExecutor()
	}
	db, err := sqlite.Open(ctx, database)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return riversqlite.New(db).GetExecutor()
}

// How a node's background work takes back executions River holds
// running: a job of a client no node registered once it has run longer
// than the largest worker timeout plus a margin (not after River's
// default hour); a job of a node retired by a restart at once, even one
// that used its attempts (it gets that one run), unless it was killed past
// them; a job of a node that heartbeats only once it has run past its
// timeout, however often the lease sweep looks.
func TestStuckJobsAreTakenBackByWhoRanThem(t *testing.T) {
	for name, database := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stuckJobsTakenBack(t, database)
		})
	}
}

func stuckJobsTakenBack(t *testing.T, database string) {
	ctx := context.Background()
	var effects atomic.Int64
	filer := startNode(t, database, time.Hour, &effects)
	quiet := slog.New(slog.DiscardHandler)

	live, err := jobs.Register(ctx, filer.store, "node-live", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	beat, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go jobs.Heartbeat(beat, filer.store, live, 100*time.Millisecond, nil, quiet)
	retired, err := jobs.Register(ctx, filer.store, "node-old", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Register(ctx, filer.store, "node-old", time.Now()); err != nil {
		t.Fatal(err)
	}

	const maxAttempts = 5 // Options.ExecuteAttempts' default
	cases := []struct {
		to      string
		by      string
		ago     time.Duration
		attempt int
		want    rivertype.JobState // once the node has worked
		runs    bool
	}{
		{"unknown@acme.test", "gone-client", 2 * time.Minute, 1, rivertype.JobStateCompleted, true},
		{"unknown-recent@acme.test", "gone-client", 5 * time.Second, 1, rivertype.JobStateRunning, false},
		{"retired@acme.test", retired.ID, 5 * time.Second, 1, rivertype.JobStateCompleted, true},
		{"retired-last@acme.test", retired.ID, 5 * time.Second, maxAttempts, rivertype.JobStateCompleted, true},
		{"retired-past@acme.test", retired.ID, 5 * time.Second, maxAttempts + 1, rivertype.JobStateDiscarded, false},
		{"live@acme.test", live.ID, 10 * time.Second, 1, rivertype.JobStateRunning, false},
		// A worker of a live node that hung past its timeout.
		{"live-hung@acme.test", live.ID, 2 * time.Minute, 1, rivertype.JobStateCompleted, true},
	}
	approver := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "alice", Roles: []string{toolplane.RoleApprover}}
	exec := riverExecutor(t, database)
	ids := map[string]int64{}
	for _, c := range cases {
		_, err := filer.iv.Invoke(ctx, "email.send", map[string]any{"to": c.to}, callInv())
		var ar *invoke.ApprovalRequired
		if !errors.As(err, &ar) {
			t.Fatalf("%s: err = %v", c.to, err)
		}
		if _, err := filer.iv.Resolve(ctx, ar.ID, approval.Decision{Approve: true}, approver); err != nil {
			t.Fatal(err)
		}
		// The execution was taken by c.by, c.ago, and is still running.
		execs, err := exec.JobGetByKindMany(ctx, &riverdriver.JobGetByKindManyParams{Kind: []string{"toolplane_execute_approved"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range execs {
			if j.State != rivertype.JobStateAvailable {
				continue
			}
			at := time.Now().Add(-c.ago)
			if _, err := exec.JobUpdateFull(ctx, &riverdriver.JobUpdateFullParams{ID: j.ID, StateDoUpdate: true, State: rivertype.JobStateRunning,
				AttemptDoUpdate: true, Attempt: c.attempt, AttemptedAtDoUpdate: true, AttemptedAt: &at,
				AttemptedByDoUpdate: true, AttemptedBy: []string{c.by}}); err != nil {
				t.Fatal(err)
			}
			ids[c.to] = j.ID
		}
	}
	if len(ids) != len(cases) {
		t.Fatalf("executions = %v; want one per case", ids)
	}

	n := startNode(t, database, time.Hour, &effects, func(o *jobs.Options) {
		o.DeadAfter, o.SweepEvery = 2*time.Second, 300*time.Millisecond
	})
	if err := n.runner.SettleLost(ctx); err != nil {
		t.Fatal(err)
	}
	n.start(t)
	began := time.Now()
	state := func(id int64) rivertype.JobState {
		j, err := exec.JobGetByID(ctx, &riverdriver.JobGetByIDParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return j.State
	}
	want := 0
	for _, c := range cases {
		if c.want != rivertype.JobStateRunning {
			eventually(t, c.to+" to be "+string(c.want), func() bool { return state(ids[c.to]) == c.want })
			t.Logf("%s: %s %.1fs after the node started", c.to, c.want, time.Since(began).Seconds())
		}
		if c.runs {
			want++
		}
	}
	time.Sleep(time.Second) // sweeps come by
	if int(effects.Load()) != want {
		t.Errorf("effects = %d; want %d", effects.Load(), want)
	}
	for _, c := range cases {
		if got := state(ids[c.to]); got != c.want {
			t.Errorf("%s: %s; want %s", c.to, got, c.want)
		}
	}
}
