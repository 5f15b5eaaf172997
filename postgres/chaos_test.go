package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/canonical"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/registry"
)

const (
	chaosNodeEnv   = "TOOLPLANE_CHAOS_NODE" // the schema a node process works in
	chaosKeysEnv   = "TOOLPLANE_CHAOS_KEYS" // how many write keys
	chaosEnableEnv = "TOOLPLANE_CHAOS"      // set to run the chaos test
	chaosTool      = "chaos.write"
)

// chaosPool connects to the test database with search_path set to schema.
func chaosPool(ctx context.Context, dsn, schema string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 16
	return pgxpool.NewWithConfig(ctx, cfg)
}

func chaosDef() toolplane.Definition {
	no := false
	return toolplane.Definition{
		Name: chaosTool, Version: "1.0.0", Description: "Record one effect for a key.",
		InputSchema:  json.RawMessage(`{"type":"object","required":["key"],"properties":{"key":{"type":"integer"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Kind:         toolplane.KindInternal, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: chaosTool}},
		Effect: toolplane.EffectWrite, Repeatable: &no, Timeout: toolplane.Duration(8 * time.Second),
	}
}

type chaosBindings struct{ *handler.Registry }

func (chaosBindings) Connection(string) bool   { return true }
func (chaosBindings) FactResolver(string) bool { return true }

func chaosInvocation() *toolplane.Invocation {
	return &toolplane.Invocation{OrganizationID: "org-chaos", RunID: "run-chaos", StepPath: "agent",
		Principal: toolplane.Principal{ID: "agent", Tools: []string{chaosTool}}}
}

// chaosNode is one node process: it calls every key, with eight workers,
// until each call has an answer (completed or uncertain), then exits 0.
func chaosNode(t *testing.T) {
	ctx := context.Background()
	pool, err := chaosPool(ctx, os.Getenv("TOOLPLANE_TEST_POSTGRES"), os.Getenv(chaosNodeEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := postgres.New(pool)
	pid := os.Getpid()
	hs := handler.NewRegistry()
	b, _ := handler.BindFunc(chaosTool, func(ctx context.Context, _ handler.Call, args any) (any, error) {
		key := args.(map[string]any)["key"].(json.Number).String()
		if _, err := pool.Exec(ctx, `INSERT INTO chaos_in_handler (key, pid) VALUES ($1, $2)`, key, pid); err != nil {
			return nil, err
		}
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		if _, err := pool.Exec(ctx, `INSERT INTO chaos_effects (key, pid) VALUES ($1, $2)`, key, pid); err != nil {
			return nil, err
		}
		time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
		return map[string]any{"done": key}, nil
	}, nil)
	_ = hs.Register(b)
	reg, _, err := registry.Build([]toolplane.Definition{chaosDef()}, registry.Options{Bindings: chaosBindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{},
		// The timeout is far above a handler's few milliseconds, even under
		// the race detector on a loaded machine: an uncertain key must come
		// from a kill, never from a slow handler.
		Node: "pid-" + strconv.Itoa(pid), LeaseMargin: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(os.Getenv(chaosKeysEnv))
	keys := make(chan int)
	go func() {
		for k := range n {
			keys <- k
		}
		close(keys)
	}()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				for {
					_, err := iv.Invoke(ctx, chaosTool, map[string]any{"key": json.Number(strconv.Itoa(k))}, chaosInvocation())
					if err == nil {
						break
					}
					time.Sleep(50 * time.Millisecond) // in flight elsewhere, or a transient fault
				}
			}
		}()
	}
	wg.Wait()
	os.Exit(0)
}

// closedDone answers the done channel of a node that already finished.
func closedDone() chan error {
	c := make(chan error, 1)
	c <- nil
	return c
}

// TestChaosThreeNodesOneKilled runs three node processes on one PostgreSQL
// schema, every node calling the same write keys at once, while one node
// after another is SIGKILLed and restarted at random moments. Afterwards no
// key has two effects, every key ended completed or uncertain, every
// uncertain key was in a handler of a killed node, and every effect has an
// audit row.
func TestChaosThreeNodesOneKilled(t *testing.T) {
	if os.Getenv(chaosNodeEnv) != "" {
		chaosNode(t)
		return
	}
	dsn := pgtest.DSN(t)
	if testing.Short() {
		t.Skip("the chaos test runs three node processes for several seconds; it is left out of -short")
	}
	const nKeys = 1000
	ctx := context.Background()
	schema := pgtest.Schema(t, dsn)
	pool, err := chaosPool(ctx, dsn, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := postgres.New(pool)
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE chaos_effects (key bigint NOT NULL, pid int NOT NULL);
		CREATE TABLE chaos_in_handler (key bigint NOT NULL, pid int NOT NULL)`); err != nil {
		t.Fatal(err)
	}

	type proc struct {
		cmd  *exec.Cmd
		done chan error
	}
	start := func() *proc {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChaosThreeNodesOneKilled$", "-test.count=1")
		cmd.Env = append(os.Environ(), chaosNodeEnv+"="+schema, chaosKeysEnv+"="+strconv.Itoa(nKeys))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &proc{cmd: cmd, done: make(chan error, 1)}
		go func() {
			err := cmd.Wait()
			if err != nil && !strings.Contains(err.Error(), "killed") {
				err = fmt.Errorf("%w:\n%s", err, out.String())
			}
			p.done <- err
		}()
		return p
	}
	began := time.Now()
	nodes := []*proc{start(), start(), start()}
	killed := map[int]bool{}
	kills := 0
	// Kill one node after another at random moments for as long as the
	// calls go on: until a node that was never killed finishes its pass
	// over every key, or 40 kills.
	finished := false
	for !finished && kills < 40 {
		time.Sleep(time.Duration(150+rand.IntN(600)) * time.Millisecond)
		for i, n := range nodes {
			select {
			case err := <-n.done:
				if err != nil {
					t.Fatalf("node exited: %v", err)
				}
				finished = true
				nodes[i] = &proc{done: closedDone()}
			default:
			}
		}
		if finished {
			break
		}
		i := rand.IntN(len(nodes))
		pid := nodes[i].cmd.Process.Pid
		if err := nodes[i].cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-nodes[i].done
		killed[pid] = true
		kills++
		nodes[i] = start()
	}
	for _, n := range nodes {
		select {
		case err := <-n.done:
			if err != nil {
				t.Fatalf("node failed: %v", err)
			}
		case <-time.After(3 * time.Minute):
			t.Fatal("a node did not finish")
		}
	}

	// No key has two effects.
	var doubled int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT key FROM chaos_effects GROUP BY key HAVING count(*) > 1) d`).Scan(&doubled); err != nil {
		t.Fatal(err)
	}
	var effects int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM chaos_effects`).Scan(&effects); err != nil {
		t.Fatal(err)
	}
	// Every key ended completed or uncertain.
	keyOf := map[string]int{}
	for k := range nKeys {
		h, _ := canonical.Hash(map[string]any{"key": json.Number(strconv.Itoa(k))})
		keyOf[invoke.Key(chaosInvocation(), h)] = k
	}
	status := map[toolplane.ClaimStatus][]int{}
	// An uncertain claim keeps the owner that was running it: the node
	// ("pid-<pid>/...") must be one that was killed.
	strayUncertain := 0
	for _, st := range []toolplane.ClaimStatus{toolplane.ClaimCompleted, toolplane.ClaimUncertain, toolplane.ClaimProcessing} {
		after := ""
		for {
			cs, next, err := store.ListClaims(ctx, "org-chaos", st, after, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				status[st] = append(status[st], keyOf[c.Key])
				if st == toolplane.ClaimUncertain {
					pidText, _, _ := strings.Cut(strings.TrimPrefix(c.Owner, "pid-"), "/")
					if pid, err := strconv.Atoi(pidText); err != nil || !killed[pid] || !c.Dispatched {
						strayUncertain++
						t.Logf("uncertain key %d: owner %q dispatched=%v reason %q", keyOf[c.Key], c.Owner, c.Dispatched, c.Reason)
					}
				}
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	ended := len(status[toolplane.ClaimCompleted]) + len(status[toolplane.ClaimUncertain])
	// How many of them had their handler's first statement run, for the
	// record: a kill can land between the dispatch mark and the handler.
	inHandler := 0
	for _, k := range status[toolplane.ClaimUncertain] {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM chaos_in_handler WHERE key = $1`, k).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			inHandler++
		}
	}
	// Every effect has its audit row: an ok answer for its arguments, or the
	// uncertain answer another node gave when the effect's node died.
	audited := map[string]bool{}
	after := ""
	for {
		evs, next, err := store.ListAudit(ctx, "org-chaos", toolplane.AuditFilter{Tool: chaosTool}, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Outcome == "ok" || ev.Outcome == string(toolplane.CodeUncertain) {
				audited[ev.ArgumentsHash] = true
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	unaudited := 0
	rows, err := pool.Query(ctx, `SELECT DISTINCT key FROM chaos_effects`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var key int
		if err := rows.Scan(&key); err != nil {
			t.Fatal(err)
		}
		h, _ := canonical.Hash(map[string]any{"key": json.Number(strconv.Itoa(key))})
		if !audited[h] {
			unaudited++
		}
	}
	rows.Close()

	t.Logf("chaos: %d keys, 3 nodes, %d SIGKILLs, %s: %d effects, %d keys with two effects, %d completed, %d uncertain (%d past their handler's first statement; %d not dispatched on a killed node), %d still processing, %d effects without an audit row",
		nKeys, kills, time.Since(began).Round(time.Second), effects, doubled, len(status[toolplane.ClaimCompleted]), len(status[toolplane.ClaimUncertain]), inHandler, strayUncertain, len(status[toolplane.ClaimProcessing]), unaudited)
	fmt.Printf("chaos: keys=%d nodes=3 sigkills=%d effects=%d doubled=%d completed=%d uncertain=%d uncertain_in_handler_body=%d uncertain_not_dispatched_on_killed_node=%d processing=%d effects_without_audit=%d\n",
		nKeys, kills, effects, doubled, len(status[toolplane.ClaimCompleted]), len(status[toolplane.ClaimUncertain]), inHandler, strayUncertain, len(status[toolplane.ClaimProcessing]), unaudited)
	if doubled != 0 || ended != nKeys || strayUncertain != 0 || unaudited != 0 {
		t.Fatal("a guarantee failed; see the counts above")
	}
}
