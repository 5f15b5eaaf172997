package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// helperEnv makes the test binary the upstream helper process, as
// toolplane-load re-runs itself.
const helperEnv = "LOADTEST_UPSTREAM_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "proxy" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := ServeProxy(ctx, "127.0.0.1:0", os.Getenv(helperProxyTo), os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(helperEnv) == "main" {
		// Run as toolplane-load itself, with the arguments after the
		// test binary's own flags: its api and proxy subcommands.
		args := os.Args[1:]
		for len(args) > 0 && strings.HasPrefix(args[0], "-test.") {
			args = args[1:]
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		os.Exit(Main(ctx, args, os.Stdout, os.Stderr))
	}
	if os.Getenv(helperEnv) == "1" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := ServeUpstream(ctx, "127.0.0.1:0", os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(n ...int) []time.Duration {
		out := make([]time.Duration, len(n))
		for i, v := range n {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"none", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"median of two is the lower", ms(1, 2), 50, time.Millisecond},
		{"median of three", ms(1, 2, 3), 50, 2 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100", ms(hundred...), 100, 100 * time.Millisecond},
		{"p0 is the least", ms(hundred...), 0, time.Millisecond},
	}
	for _, tt := range tests {
		if got := Percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("%s: Percentile(p%v) = %v, want %v", tt.name, tt.p, got, tt.want)
		}
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	run := func(calls int) Result { return Result{Target: "x", Calls: calls, Window: time.Second} }
	tests := []struct {
		name string
		runs []Result
		want int
	}{
		{"one", []Result{run(5)}, 5},
		{"three", []Result{run(9), run(1), run(5)}, 5},
		{"two: the lower", []Result{run(9), run(1)}, 1},
	}
	for _, tt := range tests {
		got, err := Median(tt.runs)
		if err != nil || got.Calls != tt.want {
			t.Errorf("%s: Median = %d calls, %v; want %d", tt.name, got.Calls, err, tt.want)
		}
	}
	if _, err := Median(nil); err == nil {
		t.Error("Median(nil) answered no error")
	}
}

func TestWriteTable(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	err := WriteTable(&b, []Result{
		{Target: "rest", Clients: 16, Calls: 41234, Errors: 2, Window: 5 * time.Second, P50: 1850 * time.Microsecond, P99: 10968 * time.Microsecond, CPUPerCall: 212 * time.Microsecond},
		{Target: "mcp", Clients: 1, Calls: 5, Window: 5 * time.Second, P50: 250 * time.Microsecond, P99: time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "| target | clients | calls/s | p50 | p99 | errors | server CPU/call |\n" +
		"| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n" +
		"| rest | 16 | 8,247 | 1.850 ms | 10.968 ms | 2 | 212 µs |\n" +
		"| mcp | 1 | 1 | 0.250 ms | 1.000 ms | 0 | – |\n"
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	table := []Result{
		{Target: TargetREST, Clients: 16, Calls: 45000, Window: 5 * time.Second},
		{Target: TargetMCP, Clients: 16, Calls: 9000, Window: 5 * time.Second},
		{Target: TargetPlain, Clients: 16, Calls: 10000, Window: 5 * time.Second},
		{Target: TargetPlain, Clients: 1, Calls: 100, Window: time.Second, P50: 300 * time.Microsecond},
		{Target: TargetProxy, Clients: 1, Calls: 100, Window: time.Second, P50: 450 * time.Microsecond},
		{Target: TargetFederated, Clients: 1, Calls: 95, Window: time.Second, P50: 500 * time.Microsecond},
		{Target: TargetAPI, Clients: 1, Calls: 100, Window: time.Second, P50: 100 * time.Microsecond},
		{Target: TargetAPIProxy, Clients: 1, Calls: 100, Window: time.Second, P50: 200 * time.Microsecond},
		{Target: TargetHTTPRead, Clients: 1, Calls: 100, Window: time.Second, P50: 350 * time.Microsecond},
		{Target: TargetAPIProxy, Clients: 16, Calls: 4000, Window: time.Second},
		{Target: TargetHTTPRead, Clients: 16, Calls: 3000, Window: time.Second},
		{Target: TargetHTTPWrite, Clients: 16, Calls: 10500, Window: 5 * time.Second},
	}
	got := strings.Join(Summary(table, []int{1, 16}), "\n")
	for _, want := range []string{
		"(c) federated at 1 client(s): 95% of the bare proxy's throughput",
		"(c) federated at 1 client adds 0.200 ms to the direct p50",
		"(a) REST at 16 client(s): 9,000 calls/s",
		"(b) toolplane MCP at 16 client(s): 90% of the plain server's throughput",
		"(c) proxy at 1 client adds 0.150 ms to the direct p50",
		"http read tool at 16 client(s): 75% of the bare proxy's throughput",
		"httpread at 1 client adds 0.250 ms to the JSON API's direct p50",
		"apiproxy at 1 client adds 0.100 ms to the JSON API's direct p50",
		"http write tool at 16 client(s): 2,100 calls/s",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

func TestRoundRatios(t *testing.T) {
	t.Parallel()
	r := func(calls int) Result { return Result{Calls: calls, Window: time.Second} }
	tests := []struct {
		name       string
		a, b       []Result
		want       []float64
		wantMedian float64
	}{
		{"none", nil, nil, nil, 0},
		{"odd", []Result{r(9), r(8), r(5)}, []Result{r(10), r(10), r(10)}, []float64{0.9, 0.8, 0.5}, 0.8},
		{"even", []Result{r(9), r(8)}, []Result{r(10), r(10)}, []float64{0.9, 0.8}, 0.85},
		{"a zero baseline is skipped", []Result{r(9), r(8)}, []Result{r(0), r(10)}, []float64{0.8}, 0.8},
		{"unequal lengths pair what they can", []Result{r(5)}, []Result{r(10), r(10)}, []float64{0.5}, 0.5},
	}
	for _, tt := range tests {
		got, median := RoundRatios(tt.a, tt.b)
		if fmt.Sprintf("%.3f", got) != fmt.Sprintf("%.3f", tt.want) || fmt.Sprintf("%.3f", median) != fmt.Sprintf("%.3f", tt.wantMedian) {
			t.Errorf("%s: RoundRatios = %v, %v; want %v, %v", tt.name, got, median, tt.want, tt.wantMedian)
		}
	}
}

func TestProcessCPU(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	pid := os.Getpid()
	before, err := ProcessCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the count moves: on a busy machine wall time says little
	// about how much CPU this process got.
	after := before
	for deadline := time.Now().Add(10 * time.Second); after <= before && time.Now().Before(deadline); {
		if after, err = ProcessCPU(pid); err != nil {
			t.Fatal(err)
		}
	}
	if after <= before {
		t.Fatalf("CPU stayed at %v through 10s of spinning", before)
	}
	twice, err := ProcessCPU(pid, pid)
	if err != nil {
		t.Fatal(err)
	}
	if twice < 2*after {
		t.Fatalf("a process counted twice used %v, once %v", twice, after)
	}
	if _, err := ProcessCPU(-1); err == nil {
		t.Fatal("ProcessCPU of no process answered no error")
	}
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	if got, err := parseClients(" 1, 16 ,4"); err != nil || fmt.Sprint(got) != "[1 16 4]" {
		t.Errorf("parseClients = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "x", "1,-2", "5000"} {
		if _, err := parseClients(bad); err == nil {
			t.Errorf("parseClients(%q) answered no error", bad)
		}
	}
	if got, err := parseTargets("rest,federated"); err != nil || len(got) != 2 {
		t.Errorf("parseTargets = %v, %v", got, err)
	}
	if got, err := parseTargets("api,apiproxy,httpread,httpwrite"); err != nil || len(got) != 4 {
		t.Errorf("parseTargets = %v, %v", got, err)
	}
	if _, err := parseTargets("rest,grpc"); err == nil {
		t.Error("parseTargets accepted an unknown target")
	}
}

// fakeREST answers the invoke route like toolplane does for the demo read
// tool, checking the key, and counts the calls.
func fakeREST(t *testing.T, key string, status int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method != http.MethodPost || r.URL.Path != "/v1/tools/demo.search_tickets/invoke":
			http.Error(w, "wrong route "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		case r.Header.Get("Authorization") != "Bearer "+key:
			http.Error(w, "no key", http.StatusUnauthorized)
		case string(body) != `{"arguments":{"query":"cracked"}}`:
			http.Error(w, "body "+string(body), http.StatusBadRequest)
		default:
			w.WriteHeader(status)
			io.WriteString(w, `{"ok":true,"data":[{"id":"t-1001"}],"meta":{}}`+"\n")
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestRunREST(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		status     int
		key        string
		wantErrors bool
	}{
		{"answers", http.StatusOK, "k", false},
		{"refuses the key", http.StatusOK, "wrong", true},
		{"fails", http.StatusServiceUnavailable, "k", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, served := fakeREST(t, "k", tt.status)
			target := &REST{Label: "rest", BaseURL: srv.URL, Key: tt.key, Tool: ReadTool, Arguments: []byte(`{"query":"cracked"}`), Expect: "t-1001"}
			res, err := Run(t.Context(), target, Options{Clients: 3, Warmup: 20 * time.Millisecond, Duration: 150 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantErrors {
				if res.Errors == 0 || res.Calls != 0 || res.FirstError == nil {
					t.Fatalf("Run = %+v; want only errors", res)
				}
				return
			}
			if res.Calls == 0 || res.Errors != 0 || res.P50 <= 0 || res.P99 < res.P50 || res.Clients != 3 {
				t.Fatalf("Run = %+v (first error %v); want calls and no errors", res, res.FirstError)
			}
			if int64(res.Calls) > served.Load() {
				t.Fatalf("counted %d calls, the server saw %d", res.Calls, served.Load())
			}
		})
	}
}

func TestRunRefusesBadOptions(t *testing.T) {
	t.Parallel()
	srv, _ := fakeREST(t, "k", http.StatusOK)
	target := &REST{Label: "rest", BaseURL: srv.URL, Key: "k", Tool: ReadTool}
	for _, o := range []Options{{Clients: 0, Duration: time.Second}, {Clients: 1}, {Clients: 1, Duration: time.Second, Warmup: -1}} {
		if _, err := Run(t.Context(), target, o); err == nil {
			t.Errorf("Run(%+v) answered no error", o)
		}
	}
}

// TestRunMCPPlainAndProxy drives the plain SDK server directly and through
// the bare proxy, as the plain and proxy targets do.
func TestRunMCPPlainAndProxy(t *testing.T) {
	t.Parallel()
	up, err := StartUpstream(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	for _, endpoint := range []string{up.URL, up.ProxyURL} {
		target := &MCP{Label: "mcp", Endpoint: endpoint, Tool: "demo_search_tickets", Arguments: []byte(`{"query":"cracked"}`), Expect: "t-1001"}
		res, err := Run(t.Context(), target, Options{Clients: 2, Warmup: 20 * time.Millisecond, Duration: 150 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if res.Calls == 0 || res.Errors != 0 {
			t.Fatalf("%s: Run = %+v, first error %v", endpoint, res, res.FirstError)
		}
	}
	// A wrong expectation or a wrong tool counts as an error, not a call.
	for _, target := range []*MCP{
		{Label: "mcp", Endpoint: up.URL, Tool: "demo_search_tickets", Arguments: []byte(`{"query":"cracked"}`), Expect: "t-9999"},
		{Label: "mcp", Endpoint: up.URL, Tool: "no_such_tool"},
	} {
		res, err := Run(t.Context(), target, Options{Clients: 1, Duration: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if res.Calls != 0 || res.Errors == 0 {
			t.Fatalf("%s/%s: Run = %+v; want only errors", target.Tool, target.Expect, res)
		}
	}
}

// TestMCPSendsTheKey: an MCP target with a key presents it on every
// request of its session.
func TestMCPSendsTheKey(t *testing.T) {
	t.Parallel()
	plain, err := PlainHandler()
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			refused.Add(1)
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		plain.ServeHTTP(w, r)
	}))
	defer srv.Close()
	target := &MCP{Label: "mcp", Endpoint: srv.URL, Key: "secret", Tool: "demo_search_tickets", Arguments: []byte(`{"query":"cracked"}`), Expect: "t-1001"}
	res, err := Run(t.Context(), target, Options{Clients: 1, Duration: 100 * time.Millisecond})
	if err != nil || res.Errors != 0 || res.Calls == 0 || refused.Load() != 0 {
		t.Fatalf("Run = %+v, %v; %d requests without the key", res, err, refused.Load())
	}
	target.Key = ""
	if _, err := Run(t.Context(), target, Options{Clients: 1, Duration: 50 * time.Millisecond}); err == nil {
		t.Fatal("a session without the key opened")
	}
}

func TestUpstreamProcess(t *testing.T) {
	t.Setenv(helperEnv, "1")
	up, err := StartUpstreamProcess(t.Context(), os.Stderr, os.Args[0], "-test.run=^$")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	target := &MCP{Label: "plain", Endpoint: up.ProxyURL, Tool: "demo_search_tickets", Arguments: []byte(`{"query":"cracked"}`), Expect: "t-1001"}
	res, err := Run(t.Context(), target, Options{Clients: 1, Duration: 200 * time.Millisecond, Processes: serverProcesses(TargetProxy, 0, up, nil, nil, nil)})
	if err != nil || res.Calls == 0 || res.Errors != 0 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil && res.CPUPerCall <= 0 {
		t.Errorf("the helper's CPU per call was not measured: %+v", res)
	}
	if err := up.Close(); err != nil {
		t.Fatal(err)
	}
}

// helperProxyTo names, for a proxy helper, the server it proxies to.
const helperProxyTo = "TOOLPLANE_LOAD_TEST_PROXY_TO"

func TestProxyProcess(t *testing.T) {
	t.Setenv(helperEnv, "1")
	up, err := StartUpstreamProcess(t.Context(), os.Stderr, os.Args[0], "-test.run=^$")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	shared := up.ProxyURL
	t.Setenv(helperEnv, "proxy")
	t.Setenv(helperProxyTo, strings.TrimSuffix(up.URL, upstreamPath))
	if err := up.UseProxyProcess(t.Context(), os.Stderr, os.Args[0], "-test.run=^$"); err != nil {
		t.Fatal(err)
	}
	if up.ProxyURL == shared || len(up.ProxyPIDs()) != 2 || up.ProxyPIDs()[0] == up.PID() {
		t.Fatalf("the proxy is not a process of its own: %s (shared %s), pids %v", up.ProxyURL, shared, up.ProxyPIDs())
	}
	target := &MCP{Label: "proxy", Endpoint: up.ProxyURL, Tool: "demo_search_tickets", Arguments: []byte(`{"query":"cracked"}`), Expect: "t-1001"}
	res, err := Run(t.Context(), target, Options{Clients: 1, Duration: 200 * time.Millisecond, Processes: serverProcesses(TargetProxy, 0, up, nil, nil, nil)})
	if err != nil || res.Calls == 0 || res.Errors != 0 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil && res.CPUPerCall <= 0 {
		t.Errorf("the processes' CPU per call was not measured: %+v", res)
	}
	if err := up.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ServeProxy(t.Context(), "127.0.0.1:0", "not a url", io.Discard); err == nil {
		t.Error("a proxy to no URL served")
	}
}

// TestMainBaselines runs the command on the targets that need no toolplane.
func TestMainBaselines(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"-upstream", "inprocess", "-target", "plain,proxy", "-clients", "1,2",
		"-duration", "100ms", "-warmup", "20ms"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"| target | clients |", "| plain | 1 |", "| proxy | 2 |", "(c) proxy at 1 client adds"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "first error") {
		t.Errorf("calls failed:\n%s", out.String())
	}
}

func TestMainRefusesBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-clients", "0"},
		{"-target", "nope"},
		{"-target", "federated", "-url", "http://127.0.0.1:1", "-key", "k"},
		{"-target", "rest", "-url", "http://127.0.0.1:1", "-key", ""},
		{"-rounds", "0"},
		{"-arguments", "{"},
		{"-target", "plain", "-upstream", "elsewhere"},
		{"-target", "api", "-upstream", "elsewhere"},
		{"-target", "httpread", "-url", "http://127.0.0.1:1", "-key", "k"},
		{"-target", "httpwrite", "-url", "http://127.0.0.1:1", "-key", "k"},
		{"-target", "mcpgateway"},
		{"-target", "mcpgateway", "-mcp-gateway", "/nonexistent/docker-mcp"},
	} {
		var out, errOut bytes.Buffer
		if code := Main(t.Context(), args, &out, &errOut); code == 0 {
			t.Errorf("Main(%q) exited 0", args)
		}
	}
}

// TestToolplaneEndToEnd builds and starts toolplane, and drives its REST
// and MCP doors: what the command does without -url.
func TestToolplaneEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts toolplane")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	tp, err := StartToolplane(ctx, ToolplaneOptions{Source: "../.."})
	if err != nil {
		t.Fatal(err)
	}
	dir := tp.Dir
	defer func() {
		if err := tp.Stop(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the temporary directory %s outlived Stop: %v", dir, err)
		}
	}()
	if !strings.HasPrefix(tp.URL, "http://127.0.0.1:") || !strings.HasPrefix(tp.AgentKey, "tpk_") {
		t.Fatalf("toolplane at %q with key %.8q…", tp.URL, tp.AgentKey)
	}
	args := []byte(`{"query":"cracked"}`)
	for _, target := range []Target{
		&REST{Label: "rest", BaseURL: tp.URL, Key: tp.AgentKey, Tool: ReadTool, Arguments: args, Expect: "t-1001"},
		&MCP{Label: "mcp", Endpoint: tp.URL + "/mcp", Key: tp.AgentKey, Tool: "demo_search_tickets", Arguments: args, Expect: "t-1001"},
	} {
		res, err := Run(ctx, target, Options{Clients: 2, Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if res.Calls == 0 || res.Errors != 0 {
			t.Errorf("%s: Run = %+v, first error %v; log: %s", target.Name(), res, res.FirstError, logTail(filepath.Join(dir, "toolplane.log")))
		}
	}
	// A minted key grants what it names, and only that.
	for _, tt := range []struct {
		grant      string
		wantErrors bool
	}{{"demo.search_*", false}, {"mcp.*", true}} {
		k, err := MintAgentKey(ctx, tp.URL, tp.AdminKey, "load-test", []string{tt.grant})
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(ctx, &REST{Label: "rest", BaseURL: tp.URL, Key: k, Tool: ReadTool, Arguments: args, Expect: "t-1001"},
			Options{Clients: 1, Duration: 50 * time.Millisecond})
		if err != nil || (res.Errors > 0) != tt.wantErrors || (res.Calls > 0) == tt.wantErrors {
			t.Errorf("a key granting %s: Run = %+v, %v (first error %v)", tt.grant, res, err, res.FirstError)
		}
	}
	if _, err := MintAgentKey(ctx, tp.URL, tp.AgentKey, "load-test", []string{"demo.*"}); err == nil {
		t.Error("an agent's key minted a key")
	}

	// A wrong key is refused: the doors authenticate.
	last := "A"
	if strings.HasSuffix(tp.AgentKey, last) {
		last = "E"
	}
	bad := &REST{Label: "rest", BaseURL: tp.URL, Key: tp.AgentKey[:len(tp.AgentKey)-1] + last, Tool: ReadTool, Arguments: args}
	if res, err := Run(ctx, bad, Options{Clients: 1, Duration: 50 * time.Millisecond}); err != nil || res.Calls != 0 || res.Errors == 0 {
		t.Errorf("a wrong key: Run = %+v, %v; want only errors", res, err)
	}
}
