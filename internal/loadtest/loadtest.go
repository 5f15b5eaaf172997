// Package loadtest drives concurrent clients against toolplane's doors and
// against baselines beside them, and reports throughput and latency per
// target and client count as a markdown table.
//
// A target is anything a client can call in a loop: REST invokes a tool
// through /v1, MCP calls a tool through any Streamable HTTP endpoint with an
// optional bearer key. Toolplane's own /mcp, a plain SDK server, a bare
// reverse proxy and a federated upstream behind toolplane are all MCP
// targets that differ only in URL and key, so a new door is one more entry
// in the target list rather than new driver code.
//
// Each client holds its own connection (REST: its own keep-alive
// transport; MCP: one session) and calls strictly one after another, so N
// clients keep at most N calls in flight: a closed loop, where throughput
// and latency are two views of one measurement. Connection and session
// setup, and a warm-up period, are excluded from the figures.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Target is what clients call.
type Target interface {
	// Name labels the target in the results.
	Name() string
	// NewClient opens one client (its connection or session). Opening is
	// not timed.
	NewClient(ctx context.Context) (Client, error)
}

// Client makes calls one at a time; it is used by one goroutine.
type Client interface {
	// Call makes one call and answers an error unless it succeeded with
	// the answer expected.
	Call(ctx context.Context) error
	Close() error
}

// Options shape one run.
type Options struct {
	Clients  int
	Warmup   time.Duration
	Duration time.Duration
	// During, when set, runs beside the measured window (after the
	// warm-up) with its length, e.g. to take a CPU profile of the server;
	// Run waits for it.
	During func(ctx context.Context, window time.Duration) error
	// ServerCPU, when set, answers the CPU time the server processes have
	// used so far (see ProcessCPU); Run reads it at both ends of the
	// window and reports the difference per call.
	ServerCPU func() (time.Duration, error)
	// Processes, when set, are the server processes the calls pass
	// through, each read on its own (see ProcessCPU) at both ends of the
	// window; Result.Processes holds each one's CPU per call and
	// Result.CPUPerCall their sum. It takes the place of ServerCPU.
	Processes []Process
}

// Process is one server process a target's calls pass through.
type Process struct {
	// Role names it in the results: one of the Role constants.
	Role string
	PID  int
}

// The roles of the server processes the targets' calls pass through.
const (
	// RoleToolplane is toolplane.
	RoleToolplane = "toolplane"
	// RoleGoProxy is a bare httputil.ReverseProxy of its own.
	RoleGoProxy = "goproxy"
	// RoleNginx is nginx as a reverse proxy.
	RoleNginx = "nginx"
	// RoleMCPGateway is docker/mcp-gateway.
	RoleMCPGateway = "mcpgateway"
	// RoleAPI is the JSON API's helper process.
	RoleAPI = "api"
	// RolePlain is the plain MCP server's helper process.
	RolePlain = "plain"
)

// Roles lists the roles in the order the tables show them: the
// processes in front (toolplane and the proxies) first, then the servers
// they forward to.
var Roles = []string{RoleToolplane, RoleGoProxy, RoleNginx, RoleMCPGateway, RoleAPI, RolePlain}

// ProcessCost is one process's CPU per call in a run.
type ProcessCost struct {
	Role    string
	PerCall time.Duration
}

// Result is one run's figures. Latencies are of successful calls only;
// failed calls are counted in Errors and not in Calls.
type Result struct {
	Target   string
	Clients  int
	Calls    int
	Errors   int
	Window   time.Duration
	P50, P99 time.Duration
	// FirstError is the first failed call's error, to say what failed.
	FirstError error
	// DuringError is what Options.During answered.
	DuringError error
	// CPUPerCall is the servers' CPU time over the window divided by the
	// calls (failed ones included, since they cost the server too); zero
	// when not measured.
	CPUPerCall time.Duration
	// Processes is each server process's CPU per call, in the order of
	// Options.Processes; empty when not measured.
	Processes []ProcessCost
}

// RoleCPU answers the CPU per call of the process in role, and whether it
// was measured.
func (r Result) RoleCPU(role string) (time.Duration, bool) {
	for _, p := range r.Processes {
		if p.Role == role {
			return p.PerCall, true
		}
	}
	return 0, false
}

// Rate answers successful calls per second.
func (r Result) Rate() float64 {
	if r.Window <= 0 {
		return 0
	}
	return float64(r.Calls) / r.Window.Seconds()
}

// callTimeout bounds one call, so a stuck server ends a run with errors
// rather than hanging it.
const callTimeout = 10 * time.Second

// Run opens opts.Clients clients of t, lets them call for the warm-up and
// then the measured window, and answers the figures of calls started in
// the window.
func Run(ctx context.Context, t Target, opts Options) (Result, error) {
	res := Result{Target: t.Name(), Clients: opts.Clients, Window: opts.Duration}
	if opts.Clients < 1 || opts.Duration <= 0 || opts.Warmup < 0 {
		return res, fmt.Errorf("loadtest: %d clients for %v after %v: need at least one client and a positive duration", opts.Clients, opts.Duration, opts.Warmup)
	}
	clients := make([]Client, 0, opts.Clients)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for i := range opts.Clients {
		c, err := t.NewClient(ctx)
		if err != nil {
			return res, fmt.Errorf("loadtest: %s: client %d of %d: %w", t.Name(), i+1, opts.Clients, err)
		}
		clients = append(clients, c)
	}

	type tally struct {
		lat      []time.Duration
		errs     int
		firstErr error
	}
	tallies := make([]tally, len(clients))
	start := time.Now()
	measureFrom := start.Add(opts.Warmup)
	end := measureFrom.Add(opts.Duration)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			tl := &tallies[i]
			// Sized for about 20k calls/s per client, so appending
			// rarely copies inside the window.
			tl.lat = make([]time.Duration, 0, int(opts.Duration.Seconds()*20000)/len(clients)+16)
			for {
				t0 := time.Now()
				if !t0.Before(end) || ctx.Err() != nil {
					return
				}
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				err := c.Call(cctx)
				cancel()
				d := time.Since(t0)
				if t0.Before(measureFrom) {
					continue
				}
				if err != nil {
					if tl.errs == 0 {
						tl.firstErr = err
					}
					tl.errs++
					continue
				}
				tl.lat = append(tl.lat, d)
			}
		})
	}
	serverCPU := opts.ServerCPU
	if len(opts.Processes) > 0 {
		serverCPU = nil
	}
	readProcs := func() ([]time.Duration, error) {
		out := make([]time.Duration, len(opts.Processes))
		for i, p := range opts.Processes {
			d, err := ProcessCPU(p.PID)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Role, err)
			}
			out[i] = d
		}
		return out, nil
	}
	var procStart []time.Duration
	var procErr error
	if len(opts.Processes) > 0 {
		wg.Go(func() {
			select {
			case <-time.After(time.Until(measureFrom)):
			case <-ctx.Done():
				return
			}
			procStart, procErr = readProcs()
		})
	}
	var cpuStart time.Duration
	cpuOK := false
	if serverCPU != nil {
		wg.Go(func() {
			select {
			case <-time.After(time.Until(measureFrom)):
			case <-ctx.Done():
				return
			}
			var err error
			cpuStart, err = serverCPU()
			cpuOK = err == nil
		})
	}
	var duringErr error
	if opts.During != nil {
		wg.Go(func() {
			select {
			case <-time.After(time.Until(measureFrom)):
			case <-ctx.Done():
				return
			}
			duringErr = opts.During(ctx, opts.Duration)
		})
	}
	wg.Wait()
	var cpuEnd time.Duration
	if cpuOK {
		var err error
		cpuEnd, err = serverCPU()
		cpuOK = err == nil
	}
	var procEnd []time.Duration
	if procStart != nil && procErr == nil {
		procEnd, procErr = readProcs()
	}

	var all []time.Duration
	for _, tl := range tallies {
		all = append(all, tl.lat...)
		res.Errors += tl.errs
		if res.FirstError == nil {
			res.FirstError = tl.firstErr
		}
	}
	slices.Sort(all)
	res.Calls = len(all)
	res.P50, res.P99 = Percentile(all, 50), Percentile(all, 99)
	res.DuringError = duringErr
	if n := res.Calls + res.Errors; cpuOK && n > 0 {
		res.CPUPerCall = (cpuEnd - cpuStart) / time.Duration(n)
	}
	if n := res.Calls + res.Errors; procEnd != nil && n > 0 {
		var total time.Duration
		for i, p := range opts.Processes {
			d := procEnd[i] - procStart[i]
			total += d
			res.Processes = append(res.Processes, ProcessCost{Role: p.Role, PerCall: d / time.Duration(n)})
		}
		res.CPUPerCall = total / time.Duration(n)
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("loadtest: %s: %w", t.Name(), err)
	}
	return res, nil
}

// Percentile answers the nearest-rank p-th percentile of sorted, or zero
// for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// Median answers, of several runs of one target and client count, the run
// with the median throughput (the lower middle one of an even count), so
// one disturbed round on a shared machine does not set the figure.
func Median(runs []Result) (Result, error) {
	if len(runs) == 0 {
		return Result{}, errors.New("loadtest: no runs")
	}
	s := slices.Clone(runs)
	slices.SortStableFunc(s, func(a, b Result) int {
		switch ra, rb := a.Rate(), b.Rate(); {
		case ra < rb:
			return -1
		case ra > rb:
			return 1
		}
		return 0
	})
	return s[(len(s)-1)/2], nil
}

// WriteTable writes results as a markdown table, in the order given. The
// last column is the servers' CPU per call, "–" where not measured.
func WriteTable(w io.Writer, results []Result) error {
	var b strings.Builder
	b.WriteString("| target | clients | calls/s | p50 | p99 | errors | server CPU/call |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range results {
		cpu := "–"
		if r.CPUPerCall > 0 {
			cpu = fmt.Sprintf("%d µs", r.CPUPerCall.Microseconds())
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %d | %s |\n", r.Target, r.Clients, thousands(int64(r.Rate()+0.5)), ms(r.P50), ms(r.P99), r.Errors, cpu)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("loadtest: write table: %w", err)
	}
	return nil
}

// ms renders d in milliseconds to the microsecond, the resolution the
// targets are stated in.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond))
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Find answers the result for target at clients.
func Find(results []Result, target string, clients int) (Result, bool) {
	for _, r := range results {
		if r.Target == target && r.Clients == clients {
			return r, true
		}
	}
	return Result{}, false
}
