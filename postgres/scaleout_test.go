package postgres_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/registry"
)

const (
	benchNodeEnv = "TOOLPLANE_BENCH_NODE" // schema, for a benchmark node process
	benchOutEnv  = "TOOLPLANE_BENCH_OUT"  // where the node writes its latencies
	benchRunEnv  = "TOOLPLANE_BENCH_NODES"
	benchFor     = 5 * time.Second
	benchWorkers = 16
)

// benchNode calls a no-op write tool with fresh keys from 16 workers for
// benchFor and writes one latency (µs) per line.
func benchNode(t *testing.T) {
	ctx := context.Background()
	pool, err := chaosPool(ctx, os.Getenv("TOOLPLANE_TEST_POSTGRES"), os.Getenv(benchNodeEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := postgres.New(pool)
	hs := handler.NewRegistry()
	b, _ := handler.BindFunc(chaosTool, func(context.Context, handler.Call, any) (any, error) {
		return map[string]any{"ok": true}, nil
	}, nil)
	_ = hs.Register(b)
	reg, _, err := registry.Build([]toolplane.Definition{chaosDef()}, registry.Options{Bindings: chaosBindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{},
		Node: "pid-" + strconv.Itoa(os.Getpid()), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lat []int64
	deadline := time.Now().Add(benchFor)
	var wg sync.WaitGroup
	base := rand.Int64N(1 << 40)
	for w := range benchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				k := base + int64(w)<<20 + int64(i)
				start := time.Now()
				r, err := iv.Invoke(ctx, chaosTool, map[string]any{"key": json.Number(strconv.FormatInt(k, 10))}, chaosInvocation())
				if err != nil || !r.OK {
					panic(fmt.Sprintf("write call: %+v %v", r, err))
				}
				mu.Lock()
				lat = append(lat, time.Since(start).Microseconds())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	f, err := os.Create(os.Getenv(benchOutEnv))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for _, l := range lat {
		fmt.Fprintln(w, l)
	}
	w.Flush()
	f.Close()
	os.Exit(0)
}

// TestScaleOutWriteThroughput measures write-call throughput and latency
// with 1, 2 and 3 node processes on one PostgreSQL. It prints a table for
// BENCHMARKS.md and asserts nothing about speed.
func TestScaleOutWriteThroughput(t *testing.T) {
	if os.Getenv(benchNodeEnv) != "" {
		benchNode(t)
		return
	}
	dsn := os.Getenv("TOOLPLANE_TEST_POSTGRES")
	if dsn == "" || os.Getenv(benchRunEnv) == "" {
		t.Skip("set TOOLPLANE_TEST_POSTGRES to a PostgreSQL DSN and TOOLPLANE_BENCH_NODES=1 to measure write throughput with 1, 2 and 3 nodes")
	}
	ctx := context.Background()
	fmt.Printf("| nodes | calls | calls/s | p50 | p99 |\n| --- | --- | --- | --- | --- |\n")
	for nodes := 1; nodes <= 3; nodes++ {
		schema := pgtest.Schema(t, dsn)
		pool, err := chaosPool(ctx, dsn, schema)
		if err != nil {
			t.Fatal(err)
		}
		if err := postgres.New(pool).Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		pool.Close()
		dir := t.TempDir()
		var cmds []*exec.Cmd
		for i := range nodes {
			cmd := exec.Command(os.Args[0], "-test.run=^TestScaleOutWriteThroughput$", "-test.count=1")
			cmd.Env = append(os.Environ(), benchNodeEnv+"="+schema, benchOutEnv+"="+filepath.Join(dir, strconv.Itoa(i)))
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, cmd)
		}
		for _, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("node: %v", err)
			}
		}
		var lat []int64
		for i := range nodes {
			b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i)))
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Fields(string(b)) {
				v, _ := strconv.ParseInt(line, 10, 64)
				lat = append(lat, v)
			}
		}
		slices.Sort(lat)
		p := func(q float64) time.Duration {
			return time.Duration(lat[int(q*float64(len(lat)-1))]) * time.Microsecond
		}
		fmt.Printf("| %d | %d | %.0f | %v | %v |\n", nodes, len(lat), float64(len(lat))/benchFor.Seconds(), p(0.50).Round(10*time.Microsecond), p(0.99).Round(10*time.Microsecond))
	}
}
