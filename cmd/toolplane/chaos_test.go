package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/canonical"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/sqlite"
)

// chaosLong runs the chaos test for minutes rather than about a minute and
// a half (also set by TOOLPLANE_CHAOS_LONG=1).
var chaosLong = flag.Bool("chaos.long", false, "run TestChaosExactlyOnceAcrossDoors for several minutes with dozens of kills")

const (
	// chaosFlagsEnv adds serve flags to every node (e.g. a lease margin).
	chaosFlagsEnv = "TOOLPLANE_CHAOS_SERVE_FLAGS"
	chaosSlug     = "chaos"
	chaosPlatform = "mcp." + chaosSlug + "." + countingTool // the tool's platform name
	chaosModel    = "mcp_" + chaosSlug + "_" + countingTool // and its model-facing name
	chaosOrg      = "default"
	// chaosUpstreamTimeout bounds each call of the counting tool; a
	// call's claim lease is this plus the node's lease margin.
	chaosUpstreamTimeout = 3 * time.Second
)

// chaosPlan sizes a run.
type chaosPlan struct {
	window      time.Duration // agents start new actions, and nodes are killed, for this long
	maxKills    int
	workers     int // agents per door per cluster, each with a key of its own
	think       time.Duration
	abandonRate float64       // of interrupted actions, those the agent never retries
	answerBy    time.Duration // after the window, how long an action may wait for its answer
	settleBy    time.Duration // then, how long the sweeps get to end every claim in flight
}

func chaosPlanFor(long bool) chaosPlan {
	p := chaosPlan{window: 40 * time.Second, maxKills: 10, workers: 4, think: time.Second, abandonRate: 0.2,
		answerBy: 60 * time.Second, settleBy: 100 * time.Second}
	if long {
		p.window, p.maxKills, p.workers, p.think = 5*time.Minute, 80, 4, 500*time.Millisecond
	}
	return p
}

// chaosCluster is a set of nodes on one database behind one proxy.
type chaosCluster struct {
	name  string // "postgres" or "sqlite"
	nodes []*chaosNode
	proxy *rrProxy
	admin string
	// keys are the agents' keys: door → one per worker.
	keys map[string][]string
	// vendor takes the cluster's provider jobs and calls them back.
	vendor *chaosVendor
	// receiver takes the callbacks of the cluster's asynchronous calls,
	// verified under the organization's secret; callbacks is whether the
	// nodes accept a callback URL, and when they do not, noCallbacks says
	// why.
	receiver    *callbackReceiver
	callbacks   bool
	noCallbacks string
}

// chaosDoors are the doors the agents call through: REST and MCP in the
// request, REST asynchronous calls polled (some with a callback), and
// provider jobs submitted over REST (the vendor calls them back).
var chaosDoors = []string{"rest", "mcp", "async", "provider"}

const (
	// asyncCallbackRate is the share of asynchronous calls submitted with
	// the test's callback URL; asyncCancelRate those the agent asks to
	// cancel once accepted.
	asyncCallbackRate = 0.5
	asyncCancelRate   = 0.1
	// asyncStaleAfter is the nodes' --async-stale-after: short, so a
	// hand-off lost with a killed node is found within the settle time.
	asyncStaleAfter = "15s"
)

// keyRecord is what one action (one idempotency key) went through.
type keyRecord struct {
	id, cluster, door string
	final             answerKind
	code              string
	abandoned         bool // interrupted, and never asked again
	unanswered        bool // no definite answer by the deadline
	attempts          int
	interrupted       time.Time // first interruption, if any
	answered          time.Time
	retries           map[string]int // retry answers by code
	lastRetry         string         // the last retry answer's detail
	async             *asyncRecord   // the async door's submissions and reads
}

// killEvent is one SIGKILL.
type killEvent struct {
	at      time.Time
	cluster string
	node    string
}

// okEvent is an ok (or replayed) answer, for recovery times.
type okEvent struct {
	at            time.Time
	cluster, door string
}

// TestChaosExactlyOnceAcrossDoors drives write actions through three doors
// (REST with an idempotency key; MCP with the SDK client, reconnecting
// after each failure, with the key in _meta; REST asynchronous calls under
// an idempotency key, submitted again after a lost answer and polled
// until they end, half with a callback URL the test receives, a few
// cancelled) against three `toolplane
// serve` nodes on one PostgreSQL behind a round-robin proxy with no
// stickiness, and one node on SQLite, while nodes are SIGKILLed at random
// and started again. Every write reaches a counting upstream MCP server.
// Each agent retries an action until it gets a definite answer (ok,
// replayed, uncertain or a definite failure), except that a few actions
// interrupted by a failure are abandoned, as a crashed agent would leave
// them, so that only the platform can account for them.
//
// Afterwards: no action has two effects (doubled); every action answered
// ok has exactly one effect, and every action with an effect was answered
// ok, or is listed uncertain, or (abandoned) has a completed claim a retry
// would read back (lost); every action answered uncertain is listed
// (unlisted); every action got a definite answer in time (unanswered);
// every effect has exactly one audit event of its own (audit; see the
// rule where it is checked); no claim is left processing once the sweeps
// had their time (settle).
//
// Asynchronous actions are judged by their record as the store holds it
// after the settle time, abandoned ones included (only the platform moved
// those on): one invocation per key, and every submission of the key
// answered its id (forked); every accepted invocation still stored
// (lost_invocation) and ended (stuck), in the state the agent read
// (changed); an ended call succeeded has exactly one effect, and one
// failed or cancelled none (lost, doubled as above); one ended uncertain
// is listed (unlisted). Each cluster's callbacks reach a receiver that
// checks them with the shipped verifier under the organization's secret
// (a rotation made at the start): a callback is delivered, or expired,
// never pending once the settle time is over (callback); every delivery
// verifies (callback_unverified); a call is acted on once, any repeat
// carrying the delivery id already acted on, which the verifier refuses
// as a replay (callback_twice; the replays are counted as
// duplicate_deliveries); only an ended call's, with its state and result
// (callback_mismatch); and only to a call that named it (callback_stray).
//
// Provider jobs: the nodes are the toolplane binary with a submit tool
// compiled in (internal/chaosnode), whose agents submit over REST under an
// idempotency key; a vendor in the test process counts its submissions
// (they are the effects the rules above hold: one per action at most) and
// calls each job back, signed, during the kills, at random nodes,
// sometimes twice, sometimes after a progress report, until acknowledged.
// Afterwards every job the vendor ended is in that state and settled
// once: usage_id set to its one usage row, at the reported cost
// (unsettled); no other usage row of the tool (usage_doubled); every
// delivery acknowledged, none refused (webhook_refused); one audit event
// of its ending and one of its settlement (job_audit).
//
// The figures are logged as "chaos door=… cluster=…", "chaos kills:" and
// "chaos figures:" lines of key=value pairs. Each broken guarantee is an
// error of its own.
func TestChaosExactlyOnceAcrossDoors(t *testing.T) {
	dsn := pgtest.DSN(t)
	if testing.Short() {
		t.Skip("the chaos test runs four nodes for about a minute and a half; it is left out of -short")
	}
	plan := chaosPlanFor(*chaosLong || os.Getenv("TOOLPLANE_CHAOS_LONG") != "")
	bin, err := buildChaosNode()
	if err != nil {
		t.Fatalf("go build: %v", err)
	}
	ctx := context.Background()
	up := newCountingUpstream(t)
	dir := t.TempDir()

	// The counting tool is a write that needs no approval; the upstream
	// does not declare that it honours the idempotency key.
	upstreams := filepath.Join(dir, "upstreams.yaml")
	if err := os.WriteFile(upstreams, fmt.Appendf(nil, `upstreams:
  - slug: %s
    url: %s
    timeout: %s
    tools:
      %s: {effect: write, destructive: false, requires_approval: false}
`, chaosSlug, up.URL, chaosUpstreamTimeout, countingTool), 0o600); err != nil {
		t.Fatal(err)
	}

	// One PostgreSQL schema for this test.
	pgDSN := pgtest.SchemaDSN(t, dsn)

	flags := []string{"--upstreams", upstreams,
		// Sessions a client abandons on a live node stay until they idle
		// out; the cap is not what this test measures.
		"--mcp-sessions-per-key", "100000",
		// The callback receiver is the test process, on loopback.
		"--notify-allow-cidr", "127.0.0.1/32",
		"--async-stale-after", asyncStaleAfter,
		// The vendor of the compiled-in submit tool, and its deliveries,
		// all from loopback.
		"--provider-webhook", vendorName + "=body-sha1:" + strconv.Itoa(centsPerCredit), "--provider-webhook-rate-limit", "0"}
	flags = append(flags, strings.Fields(os.Getenv(chaosFlagsEnv))...)

	pg := &chaosCluster{name: "postgres"}
	for i := range 3 {
		pg.nodes = append(pg.nodes, &chaosNode{name: fmt.Sprintf("pg%d", i), addr: freeAddr(t), database: pgDSN,
			dataDir: filepath.Join(dir, fmt.Sprintf("pg%d", i)), args: flags})
	}
	sq := &chaosCluster{name: "sqlite", nodes: []*chaosNode{{name: "sqlite", addr: freeAddr(t),
		database: filepath.Join(dir, "sqlite", "toolplane.db"), dataDir: filepath.Join(dir, "sqlite"), args: flags}}}
	clusters := []*chaosCluster{pg, sq}
	all := append(slices.Clone(pg.nodes), sq.nodes...)
	for _, c := range clusters {
		var addrs []string
		for _, n := range c.nodes {
			addrs = append(addrs, n.addr)
		}
		c.vendor = newChaosVendor(t, addrs)
		for _, n := range c.nodes {
			n.env = []string{vendorEnv + "=" + c.vendor.URL, vendorSecretEv + "=" + vendorSecret}
		}
	}
	t.Cleanup(func() {
		for _, n := range all {
			if err := n.stop(); err != nil {
				t.Errorf("stop: %v", err)
			}
			if t.Failed() {
				t.Logf("%s", n.logs())
			}
		}
	})
	// The first node of each database makes its first credentials; the
	// others start on a database that has them.
	for _, c := range clusters {
		if err := c.nodes[0].start(bin); err != nil {
			t.Fatal(err)
		}
		creds, err := readCredentials(c.nodes[0].dataDir)
		if err != nil {
			t.Fatal(err)
		}
		c.admin = creds["TOOLPLANE_ADMIN_KEY"]
		for _, n := range c.nodes[1:] {
			// Nodes sharing a database share the keys its secrets (the
			// callback signing secret among them) are sealed under, as a
			// deployment of several nodes must: the first node's.
			n.args = append(slices.Clone(n.args), "--kek-file", filepath.Join(c.nodes[0].dataDir, "kek"))
			if err := n.start(bin); err != nil {
				t.Fatal(err)
			}
		}
		var addrs []string
		for _, n := range c.nodes {
			addrs = append(addrs, n.addr)
		}
		c.proxy = newRRProxy(t, addrs...)
		c.keys = map[string][]string{}
		for _, door := range chaosDoors {
			pattern := "mcp." + chaosSlug + ".*"
			if door == "provider" {
				pattern = "vendor.*"
			}
			c.keys[door] = chaosAgentKeys(t, c.nodes[0].addr, c.admin, "chaos-"+door, pattern, plan.workers)
		}
		// Every node has ingested the upstream before the run starts.
		for _, n := range c.nodes {
			waitForTool(t, n.addr, c.keys["rest"][0], chaosPlatform)
		}
		c.receiver = newCallbackReceiver(t)
		c.callbacks, c.noCallbacks = callbacksAccepted(t, c.nodes[0].addr, c.keys["async"][0], c.receiver.URL)
		if c.callbacks {
			c.receiver.useSecret(t, rotateCallbackSecret(t, c.nodes[0].addr, c.admin))
		} else {
			t.Logf("chaos callbacks cluster=%s off: %s", c.name, c.noCallbacks)
		}
	}

	var (
		mu      sync.Mutex
		records []*keyRecord
		oks     []okEvent
		kills   []killEvent
		mcpSess = map[string]int{}
	)
	began := time.Now()
	windowEnd := began.Add(plan.window)
	answerBy := windowEnd.Add(plan.answerBy)
	for _, c := range clusters {
		// A vendor retries a delivery as long as an agent may wait.
		c.vendor.until = answerBy
	}

	// The agents.
	var wg sync.WaitGroup
	for _, c := range clusters {
		for _, door := range chaosDoors {
			for w, key := range c.keys[door] {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Half the MCP agents open a connection per request, so
					// the proxy sends each request of a session to the next
					// node, as a per-request load balancer would; the others
					// keep their connections alive, pinning a session to a
					// node until that node dies.
					perRequest := door == "mcp" && w%2 == 1
					hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableKeepAlives: perRequest}}
					defer hc.CloseIdleConnections()
					var call func(context.Context, string) attempt
					var async *asyncDoor
					switch door {
					case "async":
						async = &asyncDoor{base: c.proxy.URL(), key: key, tool: chaosPlatform, client: hc,
							callbackRate: asyncCallbackRate, cancelRate: asyncCancelRate}
						if c.callbacks {
							async.callbackURL = c.receiver.URL
						}
					case "rest":
						call = (&restDoor{base: c.proxy.URL(), key: key, tool: chaosPlatform, client: hc}).call
					case "provider":
						call = (&restDoor{base: c.proxy.URL(), key: key, tool: vendorTool, client: hc}).call
					case "mcp":
						d := &mcpDoor{endpoint: c.proxy.URL() + "/mcp", tool: chaosModel,
							client:     mcp.NewClient(&mcp.Implementation{Name: "chaos-agent", Version: "1"}, nil),
							httpClient: &http.Client{Transport: bearer{key, hc.Transport}}}
						defer func() {
							d.close()
							mu.Lock()
							mcpSess[c.name] += d.sessions
							mu.Unlock()
						}()
						call = d.call
					}
					for n := 0; time.Now().Before(windowEnd); n++ {
						rec := &keyRecord{id: fmt.Sprintf("%s-%s-w%d-%d", c.name, door, w, n), cluster: c.name, door: door, retries: map[string]int{}}
						if async != nil {
							async.act(rec, plan.abandonRate, answerBy)
						} else {
							chaosAct(rec, call, plan.abandonRate, answerBy)
						}
						mu.Lock()
						records = append(records, rec)
						if rec.final == answerOK || rec.final == answerReplayed {
							oks = append(oks, okEvent{at: rec.answered, cluster: c.name, door: door})
						}
						mu.Unlock()
						time.Sleep(plan.think/2 + rand.N(plan.think))
					}
				}()
			}
		}
	}

	// The killer: one node at a time, SIGKILLed at a random moment and
	// started again a moment later on the same address and database.
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		every := (plan.window - 5*time.Second) / time.Duration(plan.maxKills+1)
		first := rand.IntN(len(clusters))
		for i := range plan.maxKills {
			time.Sleep(every/2 + rand.N(every))
			// The last kills leave the agents a few seconds of new
			// actions, so every kill has a recovery to measure.
			if !time.Now().Before(windowEnd.Add(-5 * time.Second)) {
				return
			}
			// The clusters take turns, from a random first one; the node
			// within a cluster is random.
			c := clusters[(first+i)%len(clusters)]
			n, cluster := c.nodes[rand.IntN(len(c.nodes))], c.name
			if err := n.kill(); err != nil {
				t.Errorf("kill %s: %v", n.name, err)
				return
			}
			mu.Lock()
			kills = append(kills, killEvent{at: time.Now(), cluster: cluster, node: n.name})
			mu.Unlock()
			time.Sleep(200*time.Millisecond + rand.N(800*time.Millisecond))
			if err := n.start(bin); err != nil {
				t.Errorf("restart %s: %v", n.name, err)
				return
			}
		}
	}()
	wg.Wait()
	<-killerDone
	loadTime := time.Since(began)
	for _, n := range all {
		if !n.running() {
			if err := n.start(bin); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Let the sweeps end every claim still in flight: an abandoned call
	// is ended only by the platform.
	pgPool, err := pgxpool.New(ctx, pgDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pgPool.Close()
	sqDB, err := sqlite.Open(ctx, sq.nodes[0].database)
	if err != nil {
		t.Fatal(err)
	}
	defer sqDB.Close()
	stores := map[string]toolplane.Store{"postgres": postgres.New(pgPool), "sqlite": sqlite.New(sqDB)}
	// The same for asynchronous calls still moving and callbacks still
	// due: an abandoned call is moved on only by the platform; and for
	// provider jobs, once their vendor's deliveries were acknowledged.
	settleStart := time.Now()
	vendorsDone := true
	for _, c := range clusters {
		vendorsDone = c.vendor.Wait(time.Until(answerBy.Add(15*time.Second))) && vendorsDone
	}
	queries := map[string]rowQuery{"postgres": pgQuery(pgPool), "sqlite": sqliteQuery(sqDB)}
	var processing, asyncLive, callbacksDue, unsettledJobs int
	for {
		processing, asyncLive, callbacksDue, unsettledJobs = 0, 0, 0, 0
		for _, q := range queries {
			err := q(ctx, `SELECT count(*) FROM provider_jobs WHERE usage_id IS NULL AND state IN ('completed', 'failed', 'cancelled')`,
				func(scan func(...any) error) error {
					var n int
					err := scan(&n)
					unsettledJobs += n
					return err
				})
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, st := range stores {
			cs, _, err := st.ListClaims(ctx, chaosOrg, toolplane.ClaimProcessing, "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			processing += len(cs)
			// Every call still moving or owed a callback, however recently
			// touched.
			stale, err := st.StaleAsyncCalls(ctx, time.Now().Add(time.Hour), 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range stale {
				if c.Status.Terminal() {
					callbacksDue++
				} else {
					asyncLive++
				}
			}
		}
		if processing+asyncLive+callbacksDue+unsettledJobs == 0 || time.Since(settleStart) > plan.settleBy {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	settleTime := time.Since(settleStart)

	// The uncertain list, as an approver reads it.
	listed := map[string]bool{}
	for _, c := range clusters {
		for _, id := range chaosUncertainList(t, c.proxy.URL(), c.admin) {
			listed[id] = true
		}
	}
	// Stop every node gracefully, so queued audit events are stored, and
	// read the audit trail from the stores.
	for _, n := range all {
		if err := n.stop(); err != nil {
			t.Fatal(err)
		}
	}
	asyncByAction, err := asyncRows(ctx, pgPool, sqDB)
	if err != nil {
		t.Fatalf("asynchronous calls: %v", err)
	}
	idOfHash := map[string]string{}
	for _, r := range records {
		h, _ := canonical.Hash(map[string]any{"id": r.id})
		idOfHash[h] = r.id
	}
	// The actions whose claims completed: one an agent abandoned may have
	// been answered after its connection was gone; a retry would read
	// that answer back.
	completed := map[string]bool{}
	for _, st := range stores {
		after := ""
		for {
			cs, next, err := st.ListClaims(ctx, chaosOrg, toolplane.ClaimCompleted, after, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				if id, ok := idOfHash[c.RequestHash]; ok && (c.Tool == chaosPlatform || c.Tool == vendorTool) {
					completed[id] = true
				}
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	type auditCount struct{ ok, replayed, uncertain, other int }
	audits := map[string]*auditCount{}
	strayEvents := 0
	// The provider jobs' own events (their transitions and settlement),
	// by job and outcome.
	jobEvents := map[string]map[string]int{}
	for _, st := range stores {
		for _, tool := range []string{chaosPlatform, vendorTool} {
			after := ""
			for {
				evs, next, err := st.ListAudit(ctx, chaosOrg, toolplane.AuditFilter{Tool: tool}, after, 1000)
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs {
					if job, ok := strings.CutPrefix(ev.Reason, "provider job "); ok && strings.HasPrefix(ev.Outcome, "provider_job_") {
						if jobEvents[job] == nil {
							jobEvents[job] = map[string]int{}
						}
						jobEvents[job][ev.Outcome]++
						continue
					}
					id, ok := idOfHash[ev.ArgumentsHash]
					if !ok {
						strayEvents++
						continue
					}
					a := audits[id]
					if a == nil {
						a = &auditCount{}
						audits[id] = a
					}
					switch {
					case ev.Outcome == "ok" && ev.Replayed:
						a.replayed++
					case ev.Outcome == "ok":
						a.ok++
					case ev.Outcome == string(toolplane.CodeUncertain):
						a.uncertain++
					default:
						a.other++
					}
				}
				if next == "" {
					break
				}
				after = next
			}
		}
	}

	// The verdicts, per action: the effects of the actions' writes are
	// the counting upstream's and the vendors' submissions.
	effects := up.Effects()
	for _, c := range clusters {
		maps.Copy(effects, c.vendor.Effects())
	}
	type tally struct {
		keys, ok, replayed, uncertain, failed, abandoned, unanswered                                            int
		doubled, lost, unlisted, unaudited, interruptedKeys, inFlight, rateLimited, lostSession, sessionMissing int
		keyRecovery                                                                                             []time.Duration
		// The async door's: calls accepted, by the state their record
		// ended in; submissions answered existing; and the broken rules.
		accepted, succeeded, asyncFailed, asyncUncertain, cancelled, cancelAsked, existing, notFound int
		forked, lostInvocations, stuck, changed                                                      int
	}
	tallies := map[string]*tally{}
	var violations []string
	violate := func(kind string, r *keyRecord, format string, a ...any) {
		violations = append(violations, fmt.Sprintf("%s: %s (%s over %s): %s", kind, r.id, r.door, r.cluster, fmt.Sprintf(format, a...)))
	}
	for _, r := range records {
		tl := tallies[r.door+"/"+r.cluster]
		if tl == nil {
			tl = &tally{}
			tallies[r.door+"/"+r.cluster] = tl
		}
		tl.keys++
		tl.inFlight += r.retries["in_flight"]
		tl.rateLimited += r.retries["rate_limited"]
		tl.lostSession += r.retries["session_lost"] + r.retries["transport"]
		tl.sessionMissing += r.retries["session_missing"]
		switch {
		case r.abandoned:
			tl.abandoned++
		case r.unanswered:
			tl.unanswered++
		case r.final == answerOK:
			tl.ok++
		case r.final == answerReplayed:
			tl.replayed++
		case r.final == answerUncertain:
			tl.uncertain++
		case r.final == answerFailed:
			tl.failed++
		}
		if !r.interrupted.IsZero() {
			tl.interruptedKeys++
			if !r.abandoned && !r.unanswered {
				tl.keyRecovery = append(tl.keyRecovery, r.answered.Sub(r.interrupted))
			}
		}
		es := effects[r.id]
		answeredOK := !r.abandoned && !r.unanswered && (r.final == answerOK || r.final == answerReplayed)
		// An asynchronous action is judged by its record, which the
		// platform ends whether or not the agent is still there.
		var row *asyncRow
		if ar := r.async; ar != nil {
			rows := asyncByAction[r.id]
			if ar.cancel {
				tl.cancelAsked++
			}
			tl.existing += ar.existing
			tl.notFound += ar.notFound
			if len(rows) > 1 || len(ar.forked) > 0 {
				tl.forked++
				var ids []string
				for _, w := range rows {
					ids = append(ids, w.id)
				}
				violate("forked", r, "one key, invocations %v stored and %v answered to a submission after %s", ids, ar.forked, ar.invocation)
			}
			for i := range rows {
				if ar.invocation == "" || rows[i].id == ar.invocation {
					row = &rows[i]
				}
			}
			switch {
			case ar.invocation != "" && row == nil:
				tl.lostInvocations++
				violate("lost_invocation", r, "invocation %s was accepted (202) and is not stored", ar.invocation)
			case row != nil && !row.status.Terminal():
				tl.stuck++
				violate("stuck", r, "invocation %s still %s %s after the load ended", row.id, row.status, plan.settleBy)
			case row != nil && ar.status != "" && ar.status != row.status:
				tl.changed++
				violate("changed", r, "invocation %s read %s, stored %s", row.id, ar.status, row.status)
			}
			if row != nil {
				tl.accepted++
				switch row.status {
				case toolplane.AsyncSucceeded:
					tl.succeeded++
				case toolplane.AsyncFailed:
					tl.asyncFailed++
				case toolplane.AsyncUncertain:
					tl.asyncUncertain++
				case toolplane.AsyncCancelled:
					tl.cancelled++
				}
				answeredOK = row.status == toolplane.AsyncSucceeded
			}
		}
		if len(es) > 1 {
			tl.doubled++
			keys := map[string]bool{}
			for _, e := range es {
				keys[e.Key] = true
			}
			violate("doubled", r, "%d effects, under %d distinct downstream keys; final answer %s after %d attempt(s)", len(es), len(keys), r.final, r.attempts)
		}
		switch {
		case answeredOK && len(es) == 0:
			tl.lost++
			violate("lost", r, "answered %s without an effect", r.final)
		case len(es) > 0 && row != nil && !answeredOK && !listed[r.id]:
			tl.lost++
			violate("lost", r, "%d effect(s), invocation %s ended %s (%s), not listed uncertain", len(es), row.id, row.status, row.code)
		case len(es) > 0 && row == nil && !answeredOK && !listed[r.id] && !(r.abandoned && completed[r.id]):
			tl.lost++
			violate("lost", r, "%d effect(s), answered %s (abandoned %v, unanswered %v, claim completed %v), not listed uncertain",
				len(es), r.final, r.abandoned, r.unanswered, completed[r.id])
		}
		if row != nil && row.status == toolplane.AsyncUncertain && !listed[r.id] {
			tl.unlisted++
			violate("unlisted", r, "invocation %s ended uncertain but missing from /v1/uncertain", row.id)
		} else if row == nil && !r.abandoned && !r.unanswered && r.final == answerUncertain && !listed[r.id] {
			tl.unlisted++
			violate("unlisted", r, "answered uncertain but missing from /v1/uncertain")
		}
		if r.unanswered {
			violate("unanswered", r, "no definite answer within %s of the last new action; retries %v, the last %q", plan.answerBy, r.retries, r.lastRetry)
		}
		// Every effect has exactly one audit event of its own: the ok
		// event of the call that made it, or the uncertain event of the
		// state its call was left in. An abandoned action is never asked
		// again, so every event it has is its own: the count must match.
		// An action retried until answered also has the events of the
		// answers to its retries (an uncertain action read back answers
		// uncertain again), so there the test can require only that no
		// effect lacks an event and that no ok event lacks an effect.
		a := audits[r.id]
		if a == nil {
			a = &auditCount{}
		}
		if len(es) > 0 || a.ok > 0 {
			var bad string
			switch {
			// An asynchronous call's worker, run again after a kill, reads
			// the journal again: its events are a retry's.
			case r.abandoned && r.async == nil && a.ok+a.uncertain != len(es):
				bad = fmt.Sprintf("%d effect(s) but %d ok and %d uncertain event(s); abandoned, so no answer of a retry is among them", len(es), a.ok, a.uncertain)
			case a.ok > len(es):
				bad = fmt.Sprintf("%d ok event(s) for %d effect(s)", a.ok, len(es))
			case a.ok < len(es) && a.uncertain == 0:
				bad = fmt.Sprintf("%d effect(s), %d ok event(s) and no uncertain event", len(es), a.ok)
			}
			if bad != "" {
				tl.unaudited++
				violate("audit", r, "%s", bad)
			}
		}
	}

	// Recovery: from each kill to the first ok answer through that
	// cluster's proxy, per door.
	recovery := func(cluster, door string) (p50, max time.Duration, never int) {
		var ds []time.Duration
		for _, k := range kills {
			if k.cluster != cluster {
				continue
			}
			first := time.Time{}
			for _, o := range oks {
				if o.cluster == cluster && o.door == door && o.at.After(k.at) && (first.IsZero() || o.at.Before(first)) {
					first = o.at
				}
			}
			if first.IsZero() {
				never++
				continue
			}
			ds = append(ds, first.Sub(k.at))
		}
		return percentile(ds, 0.5), percentile(ds, 1), never
	}

	pjTallies := map[string]*providerTally{}
	for _, c := range clusters {
		rows, usage, err := providerJobsOf(ctx, queries[c.name])
		if err != nil {
			t.Fatal(err)
		}
		tl, vs := judgeProviderJobs(c.name, c.vendor.Jobs(), c.vendor.Effects(), rows, usage, jobEvents)
		pjTallies[c.name] = tl
		violations = append(violations, vs...)
	}
	cbTallies := map[string]*callbackTally{}
	refusedDeliveries := 0
	for _, c := range clusters {
		f := c.receiver.Figures()
		tl, vs := judgeCallbacks(c.name, asyncByAction, f)
		cbTallies[c.name] = tl
		refusedDeliveries += f.refused
		violations = append(violations, vs...)
	}
	strayAsync := 0
	for action, rows := range asyncByAction {
		if !slices.ContainsFunc(records, func(r *keyRecord) bool { return r.id == action && r.async != nil }) {
			strayAsync += len(rows)
			violations = append(violations, fmt.Sprintf("stray_async: %d asynchronous call(s) for %s, which no agent submitted asynchronously", len(rows), action))
		}
	}

	var sum tally
	for _, door := range chaosDoors {
		for _, c := range clusters {
			tl := tallies[door+"/"+c.name]
			if tl == nil {
				tl = &tally{}
			}
			p50, max, never := recovery(c.name, door)
			nk := 0
			for _, k := range kills {
				if k.cluster == c.name {
					nk++
				}
			}
			sessions := ""
			switch door {
			case "mcp":
				sessions = fmt.Sprintf(" sessions=%d session_missing_answers=%d", mcpSess[c.name], tl.sessionMissing)
			case "provider":
				pj := pjTallies[c.name]
				sessions = fmt.Sprintf(" jobs=%d vendor_posts=%d webhook_deliveries=%d duplicate_webhooks=%d progress_webhooks=%d webhook_retries=%d webhook_refused=%d settled=%d unsettled=%d usage_rows=%d usage_doubled=%d reserved_unsent=%d job_events=%d job_audit=%d",
					pj.jobs, pj.vendorPosts, pj.deliveries, pj.duplicates, pj.progress, pj.retries, pj.refused, pj.settled, pj.unsettled, pj.usageRows, pj.doubled, pj.unsent,
					pj.events, pj.unaudited)
			case "async":
				cb := cbTallies[c.name]
				sessions = fmt.Sprintf(" accepted=%d succeeded=%d async_failed=%d async_uncertain=%d cancelled=%d cancel_asked=%d existing_answers=%d not_found_reads=%d forked=%d lost_invocations=%d stuck=%d changed=%d callbacks=%v callbacks_named=%d callbacks_delivered=%d callbacks_expired=%d callbacks_pending=%d callbacks_acted=%d duplicate_deliveries=%d callback_max_attempts=%d",
					tl.accepted, tl.succeeded, tl.asyncFailed, tl.asyncUncertain, tl.cancelled, tl.cancelAsked, tl.existing, tl.notFound,
					tl.forked, tl.lostInvocations, tl.stuck, tl.changed, c.callbacks, cb.named, cb.delivered, cb.expired, cb.pending,
					cb.acted, cb.replays, cb.maxAttempts)
			}
			t.Logf("chaos door=%s cluster=%s keys=%d ok=%d replayed=%d uncertain=%d failed=%d abandoned=%d unanswered=%d doubled=%d lost=%d unlisted=%d unaudited=%d interrupted_keys=%d in_flight_answers=%d rate_limited_answers=%d lost_connections=%d%s kills=%d recovery_p50=%s recovery_max=%s recovery_never=%d key_recovery_p50=%s key_recovery_max=%s",
				door, c.name, tl.keys, tl.ok, tl.replayed, tl.uncertain, tl.failed, tl.abandoned, tl.unanswered, tl.doubled, tl.lost, tl.unlisted, tl.unaudited,
				tl.interruptedKeys, tl.inFlight, tl.rateLimited, tl.lostSession, sessions, nk, p50.Round(time.Millisecond), max.Round(time.Millisecond), never,
				percentile(tl.keyRecovery, 0.5).Round(time.Millisecond), percentile(tl.keyRecovery, 1).Round(time.Millisecond))
			sum.keys += tl.keys
			sum.uncertain += tl.uncertain
			sum.doubled += tl.doubled
			sum.lost += tl.lost
			sum.unlisted += tl.unlisted
			sum.unaudited += tl.unaudited
			sum.abandoned += tl.abandoned
			sum.unanswered += tl.unanswered
			sum.failed += tl.failed
			sum.accepted += tl.accepted
			sum.forked += tl.forked
			sum.lostInvocations += tl.lostInvocations
			sum.stuck += tl.stuck
			sum.changed += tl.changed
			sum.keyRecovery = append(sum.keyRecovery, tl.keyRecovery...)
		}
	}
	var allRecovery []time.Duration
	for _, k := range kills {
		first := time.Time{}
		for _, o := range oks {
			if o.cluster == k.cluster && o.at.After(k.at) && (first.IsZero() || o.at.Before(first)) {
				first = o.at
			}
		}
		if !first.IsZero() {
			allRecovery = append(allRecovery, first.Sub(k.at))
		}
	}
	nEffects := 0
	for _, es := range effects {
		nEffects += len(es)
	}
	var killed []string
	for _, k := range kills {
		killed = append(killed, fmt.Sprintf("%s@%s", k.node, k.at.Sub(began).Round(100*time.Millisecond)))
	}
	t.Logf("chaos kills: %s", strings.Join(killed, " "))
	t.Logf("chaos figures: keys=%d kills=%d effects=%d doubled=%d lost=%d uncertain=%d answered_uncertain=%d unlisted=%d unaudited=%d abandoned=%d unanswered=%d failed=%d recovery_p50=%s recovery_max=%s key_recovery_p50=%s key_recovery_max=%s load=%s settle=%s still_processing=%d stray_audit_events=%d async_accepted=%d forked=%d lost_invocations=%d stuck=%d changed=%d async_still_live=%d callbacks_still_due=%d callbacks_refused_by_receiver=%d stray_async=%d unsettled_jobs=%d vendors_done=%v",
		sum.keys, len(kills), nEffects, sum.doubled, sum.lost, len(listed), sum.uncertain, sum.unlisted, sum.unaudited, sum.abandoned, sum.unanswered, sum.failed,
		percentile(allRecovery, 0.5).Round(time.Millisecond), percentile(allRecovery, 1).Round(time.Millisecond),
		percentile(sum.keyRecovery, 0.5).Round(time.Millisecond), percentile(sum.keyRecovery, 1).Round(time.Millisecond),
		loadTime.Round(time.Second), settleTime.Round(time.Second), processing, strayEvents,
		sum.accepted, sum.forked, sum.lostInvocations, sum.stuck, sum.changed, asyncLive, callbacksDue, refusedDeliveries, strayAsync, unsettledJobs, vendorsDone)

	if len(kills) == 0 {
		t.Fatal("no node was killed: the run proves nothing")
	}
	if !vendorsDone {
		violations = append(violations, "webhook_refused: a vendor's deliveries were still being retried after the agents' time")
	}
	if processing > 0 {
		violations = append(violations, fmt.Sprintf("settle: %d claim(s) still processing %s after the load ended", processing, plan.settleBy))
	}
	for _, v := range violations {
		t.Error(v)
	}
}

// chaosAct calls one action until it has a definite answer, abandoning
// it, at the given rate, after a call is interrupted, and giving up at
// answerBy.
func chaosAct(rec *keyRecord, call func(context.Context, string) attempt, abandonRate float64, answerBy time.Time) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		a := call(ctx, rec.id)
		cancel()
		rec.attempts++
		if a.kind != answerRetry {
			rec.final, rec.code, rec.answered = a.kind, a.code, time.Now()
			return
		}
		rec.retries[a.code]++
		rec.lastRetry = a.code + ": " + a.detail
		if a.interrupted {
			if rec.interrupted.IsZero() {
				rec.interrupted = time.Now()
			}
			if rand.Float64() < abandonRate {
				rec.abandoned = true
				return
			}
		}
		if time.Now().After(answerBy) {
			rec.unanswered = true
			return
		}
		time.Sleep(50*time.Millisecond + rand.N(100*time.Millisecond))
	}
}

// chaosAgentKeys grants the agent identity the counting tool and mints it
// n keys, one per agent worker: the rate limit is per key, and each
// worker is one agent.
func chaosAgentKeys(t *testing.T, addr, admin, subject, pattern string, n int) []string {
	t.Helper()
	post := func(path string, body any) []byte {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %d %s %v", path, resp.StatusCode, raw, err)
		}
		return raw
	}
	post("/v1/grants", map[string]any{"agent_id": subject, "pattern": pattern})
	var keys []string
	for range n {
		var k struct {
			Key string `json:"key"`
		}
		if err := json.Unmarshal(post("/v1/keys", map[string]any{"kind": "agent", "subject": subject, "label": "chaos"}), &k); err != nil || k.Key == "" {
			t.Fatalf("POST /v1/keys answered no key: %v", err)
		}
		keys = append(keys, k.Key)
	}
	return keys
}

// waitForTool waits until the node at addr shows tool: it has ingested
// its upstream's tool list.
func waitForTool(t *testing.T, addr, key, tool string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/tools/"+tool, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not show %s within 30s", addr, tool)
		}
	}
}

// chaosUncertainList answers the action ids of every uncertain action
// GET /v1/uncertain lists.
func chaosUncertainList(t *testing.T, base, admin string) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/uncertain?limit=1000&cursor="+url.QueryEscape(cursor), nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Items []struct {
				Tool      string          `json:"tool"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"items"`
			Next string `json:"next_cursor"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/uncertain: %d %v", resp.StatusCode, err)
		}
		for _, it := range page.Items {
			var args struct {
				ID string `json:"id"`
			}
			if (it.Tool == chaosPlatform || it.Tool == vendorTool) && json.Unmarshal(it.Arguments, &args) == nil {
				ids = append(ids, args.ID)
			}
		}
		if page.Next == "" {
			return ids
		}
		cursor = page.Next
	}
}

// percentile answers the q-quantile of ds (0 when empty).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}
