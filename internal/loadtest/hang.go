package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The hang scenario: the real-process counterpart of the invoker's
// in-process traffic benchmark. A JSON API process serves a healthy
// endpoint and, on a port of its own, one that accepts every request and
// never answers; toolplane has an http read tool for each. Open-loop
// callers send a steady rate to the healthy tool and a heavy rate to the
// hanging one, so hanging calls pile up as they do in production, and
// the same rounds run against a toolplane with its traffic protections on
// and one with them off (--traffic-protection=off), alternating, each
// round on a fresh toolplane.

// HangTool is the http read tool whose downstream never answers.
const HangTool = "load.get_stuck_item"

// hangAgent is the agent identity of the hanging tool's callers, apart
// from the healthy tool's so that a caller's own in-flight cap never
// stands between the two.
const hangAgent = "toolplane-load-hang"

// The modes of a hang round.
const (
	ModeBaseline = "healthy only"
	ModeOn       = "hanging, protections on"
	ModeOff      = "hanging, protections off"
)

// The outcomes of one call, besides the error codes of toolplane's
// answers: a success, and a call that got no answer of toolplane's.
const (
	outcomeOK        = "ok"
	outcomeTransport = "no answer"
)

// WriteHangTools writes, into dir for serve's --tools, the healthy read
// tool against the API at base and the hanging read tool against hangBase,
// the latter with timeout and, when maxInFlight > 0, that in-flight cap.
func WriteHangTools(dir, base, hangBase string, timeout time.Duration, maxInFlight int) error {
	for _, b := range []string{base, hangBase} {
		if u, err := url.Parse(b); err != nil || u.Scheme != "http" || u.Host == "" || u.Path != "" {
			return fmt.Errorf("hang tools: %q is not an API's base URL", b)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("hang tools: %w", err)
	}
	extra := ""
	if maxInFlight > 0 {
		extra = fmt.Sprintf("execution:\n  max_in_flight: %d\n", maxInFlight)
	}
	for name, text := range map[string]string{
		"get_item.yaml":       httpToolDef(HTTPReadTool, "read", "GET", "", base, 5*time.Second),
		"get_stuck_item.yaml": httpToolDef(HangTool, "read", "GET", extra, hangBase, timeout),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return fmt.Errorf("hang tools: %w", err)
		}
	}
	return nil
}

// HangOptions shape a hang run.
type HangOptions struct {
	// Binary is the toolplane binary each round starts.
	Binary string
	// ToolsDir holds the definitions WriteHangTools wrote.
	ToolsDir string
	// APIToken is the JSON API's bearer token.
	APIToken string
	// ServeArgs are added to every round's serve arguments.
	ServeArgs []string
	// HealthyRate and HangRate are the calls a second sent to each tool.
	HealthyRate, HangRate float64
	// Warmup is the healthy calls' time before the measured window; the
	// hanging calls start with the warm-up, so they pile up inside it.
	Warmup, Duration time.Duration
	// HangTimeout is the hanging tool's timeout; a caller waits it and
	// 10 s more before giving up on a call.
	HangTimeout time.Duration
	// APIPID is the JSON API's process, whose CPU a round reports beside
	// toolplane's and the load generator's; zero leaves it out.
	APIPID int
	// MaxOutstanding bounds the calls of one stream the load generator
	// holds open at once (its own descriptors are limited too); a call
	// due past it is counted as not sent.
	MaxOutstanding int
	// Log, when set, receives a line per round as it ends.
	Log io.Writer
}

// Stream is what the callers of one tool saw in a round.
type Stream struct {
	// Offered is the calls due in the window; Unsent those the load
	// generator could not send (MaxOutstanding).
	Offered, Unsent int
	// ByOutcome holds the latencies (from the time each call was due,
	// so a late sender is not hidden) by outcome: "ok", toolplane's error
	// code, an HTTP status, or "no answer"; sorted.
	ByOutcome map[string][]time.Duration
	// FirstError says, by outcome, what the first such call answered.
	FirstError map[string]string
}

// Count answers the calls that ended with outcome.
func (s Stream) Count(outcome string) int { return len(s.ByOutcome[outcome]) }

// Failed answers the calls that did not succeed.
func (s Stream) Failed() int {
	n := 0
	for k, v := range s.ByOutcome {
		if k != outcomeOK {
			n += len(v)
		}
	}
	return n
}

// HangRound is one round's figures.
type HangRound struct {
	Round int
	Mode  string
	// Window is the healthy stream's measured time.
	Window time.Duration
	// Healthy counts the healthy calls due in the window; Hang every
	// hanging call of the round.
	Healthy, Hang Stream
	// CPUPerCall is toolplane's CPU over the round divided by every call
	// it was sent (both tools, warm-up included).
	CPUPerCall time.Duration
	// PeakRSSKiB is toolplane's VmHWM; PeakGoroutines its highest
	// go_goroutines scraped from /metrics; PeakFDs its highest count of
	// /proc/PID/fd; ScrapeErrors the samples that failed.
	PeakRSSKiB     int64
	PeakGoroutines int
	PeakFDs        int
	ScrapeErrors   int
	// CPU is the CPU time, over the round, of toolplane, of the JSON API
	// and of the load generator (this process): on two shared cores they
	// take from one another.
	CPU [3]time.Duration
	// BreakerTrips is toolplane_breaker_trips_total at the round's end.
	BreakerTrips int
	// Log is the tail of toolplane's log when it said something worth
	// quoting (a line holding "too many open files").
	Log string
}

// HealthyRate answers the healthy calls a second that succeeded.
func (r HangRound) HealthyRate() float64 {
	if r.Window <= 0 {
		return 0
	}
	return float64(r.Healthy.Count(outcomeOK)) / r.Window.Seconds()
}

// RunHangRound starts a toolplane (protections off for ModeOff), sends
// the round's traffic, samples the process, stops it and answers the
// figures.
func RunHangRound(ctx context.Context, o HangOptions, round int, mode string) (HangRound, error) {
	res := HangRound{Round: round, Mode: mode, Window: o.Duration}
	protection := "on"
	if mode == ModeOff {
		protection = "off"
	}
	args := append(slices.Clone(o.ServeArgs), "--tools", o.ToolsDir, "--traffic-protection="+protection,
		// The hanging calls stand for many callers: one agent's own cap
		// (20 by default) would refuse them before the tool's cap or
		// breaker is asked.
		"--agent-max-in-flight", "1000000")
	tp, err := StartToolplane(ctx, ToolplaneOptions{Binary: o.Binary, Args: args})
	if err != nil {
		return res, err
	}
	defer tp.Stop()
	healthyKey, err := SetUpHTTPTools(ctx, tp.URL, tp.AdminKey, o.APIToken)
	if err != nil {
		return res, err
	}
	hangKey, err := MintAgentKey(ctx, tp.URL, tp.AdminKey, hangAgent, []string{HangTool})
	if err != nil {
		return res, err
	}
	pid := tp.PID()
	args0 := []byte(`{"arguments":{"id":"` + ItemID + `"}}`)
	healthy := newInvoker(tp.URL, healthyKey, HTTPReadTool, args0, 1024, 15*time.Second)
	hang := newInvoker(tp.URL, hangKey, HangTool, args0, max(o.MaxOutstanding, 1), o.HangTimeout+10*time.Second)
	defer healthy.close()
	defer hang.close()
	// A healthy call before the round, so a broken set-up fails here.
	if out, msg := healthy.call(ctx); out != outcomeOK {
		return res, fmt.Errorf("hang round: the healthy tool answered %s: %s; log: %s", out, msg, logTail(filepath.Join(tp.Dir, "toolplane.log")))
	}

	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		sampleProcess(sctx, tp.URL, pid, &res)
	}()
	cpu0, cpuErr := ProcessCPU(pid)
	others0 := otherCPU(o.APIPID)
	start := time.Now().Add(50 * time.Millisecond)
	measureFrom := start.Add(o.Warmup)
	var wg sync.WaitGroup
	var sent atomic.Int64
	hs := newTally()
	wg.Go(func() {
		openLoop(ctx, o.HealthyRate, start, o.Warmup+o.Duration, 1024, healthy, &sent, func(due time.Time, out, msg string, d time.Duration) {
			if !due.Before(measureFrom) {
				hs.add(out, msg, d)
			}
		}, func(due time.Time) {
			if !due.Before(measureFrom) {
				hs.unsent.Add(1)
			}
		})
	})
	ht := newTally()
	if mode != ModeBaseline {
		wg.Go(func() {
			openLoop(ctx, o.HangRate, start, o.Warmup+o.Duration, o.MaxOutstanding, hang, &sent,
				func(_ time.Time, out, msg string, d time.Duration) { ht.add(out, msg, d) },
				func(time.Time) { ht.unsent.Add(1) })
		})
	}
	wg.Wait()
	cpu1, cpuErr2 := ProcessCPU(pid)
	others1 := otherCPU(o.APIPID)
	res.CPU = [3]time.Duration{cpu1 - cpu0, others1[0] - others0[0], others1[1] - others0[1]}
	{
		hc := &http.Client{Transport: newTransport(1), Timeout: 2 * time.Second}
		// No series yet is no trip yet.
		res.BreakerTrips, _ = scrapeMetric(ctx, hc, tp.URL, "toolplane_breaker_trips_total", nil)
		hc.CloseIdleConnections()
	}
	stopSampling()
	<-sampled
	res.PeakRSSKiB = max(res.PeakRSSKiB, procStatusKiB(pid, "VmHWM"))
	res.Healthy, res.Hang = hs.stream(), ht.stream()
	res.Healthy.Offered = int(o.HealthyRate * o.Duration.Seconds())
	if mode != ModeBaseline {
		res.Hang.Offered = int(o.HangRate * (o.Warmup + o.Duration).Seconds())
	}
	if n := sent.Load(); cpuErr == nil && cpuErr2 == nil && n > 0 {
		res.CPUPerCall = (cpu1 - cpu0) / time.Duration(n)
	}
	if b, err := os.ReadFile(filepath.Join(tp.Dir, "toolplane.log")); err == nil && bytes.Contains(b, []byte("too many open files")) {
		res.Log = "toolplane logged \"too many open files\""
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("hang round: %w", err)
	}
	return res, nil
}

// otherCPU answers the CPU used so far by the API's process (zero when
// pid is) and by this one.
func otherCPU(apiPID int) [2]time.Duration {
	var out [2]time.Duration
	if apiPID != 0 {
		out[0], _ = ProcessCPU(apiPID)
	}
	out[1], _ = ProcessCPU(os.Getpid())
	return out
}

// invoker sends REST invokes of one tool over a pool of keep-alive
// connections with no cap on their number, as many independent callers
// would.
type invoker struct {
	hc   *http.Client
	url  string
	auth string
	body []byte
}

func newInvoker(base, key, tool string, body []byte, idle int, timeout time.Duration) *invoker {
	tr := newTransport(idle)
	tr.MaxIdleConns = 0
	return &invoker{hc: &http.Client{Transport: tr, Timeout: timeout},
		url: base + "/v1/tools/" + url.PathEscape(tool) + "/invoke", auth: "Bearer " + key, body: body}
}

func (c *invoker) close() { c.hc.CloseIdleConnections() }

// call makes one invoke and answers its outcome and, unless it
// succeeded, what it answered.
func (c *invoker) call(ctx context.Context) (outcome, msg string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return outcomeTransport, err.Error()
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return outcomeTransport, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return outcomeTransport, err.Error()
	}
	var env struct {
		OK    bool `json:"ok"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &env) != nil {
		return "status " + strconv.Itoa(resp.StatusCode), clip(b)
	}
	if env.OK && resp.StatusCode == http.StatusOK {
		return outcomeOK, ""
	}
	if env.Error.Code == "" {
		return "status " + strconv.Itoa(resp.StatusCode), clip(b)
	}
	return env.Error.Code, clip(b)
}

// openLoop sends calls at rate a second from start for d, each in its own
// goroutine whatever the earlier ones are doing (an open loop: hanging
// calls pile up instead of slowing the sender), and waits for them. A call
// due while max are outstanding is not sent (unsent). done gets each
// call's outcome and its latency from when it was due.
func openLoop(ctx context.Context, rate float64, start time.Time, d time.Duration, limit int, c *invoker, sent *atomic.Int64,
	done func(due time.Time, outcome, msg string, lat time.Duration), unsent func(due time.Time)) {
	if rate <= 0 {
		return
	}
	interval := time.Duration(float64(time.Second) / rate)
	var outstanding atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * interval)
		if due.Sub(start) >= d || ctx.Err() != nil {
			return
		}
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		if outstanding.Load() >= int64(limit) {
			unsent(due)
			continue
		}
		outstanding.Add(1)
		sent.Add(1)
		wg.Go(func() {
			defer outstanding.Add(-1)
			out, msg := c.call(ctx)
			done(due, out, msg, time.Since(due))
		})
	}
}

// tally gathers a stream's outcomes from many goroutines.
type tally struct {
	mu     sync.Mutex
	lat    map[string][]time.Duration
	first  map[string]string
	unsent atomic.Int64
}

func newTally() *tally {
	return &tally{lat: map[string][]time.Duration{}, first: map[string]string{}}
}

func (t *tally) add(outcome, msg string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lat[outcome] = append(t.lat[outcome], d)
	if _, ok := t.first[outcome]; !ok && msg != "" {
		msg = strings.TrimSpace(msg)
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		t.first[outcome] = msg
	}
}

func (t *tally) stream() Stream {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Stream{Unsent: int(t.unsent.Load()), ByOutcome: map[string][]time.Duration{}, FirstError: t.first}
	for k, v := range t.lat {
		s.ByOutcome[k] = slices.Sorted(slices.Values(v))
	}
	return s
}

// sampleProcess records into res, every 250 ms until ctx ends, the
// process's resident memory, open descriptors and goroutines (from
// /metrics over a connection of its own, opened before the pile-up).
func sampleProcess(ctx context.Context, base string, pid int, res *HangRound) {
	hc := &http.Client{Transport: newTransport(1), Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		res.PeakRSSKiB = max(res.PeakRSSKiB, procStatusKiB(pid, "VmRSS"))
		if n, err := countFDs(pid); err == nil {
			res.PeakFDs = max(res.PeakFDs, n)
		}
		if g, err := scrapeGoroutines(ctx, hc, base); err == nil {
			res.PeakGoroutines = max(res.PeakGoroutines, g)
		} else if ctx.Err() == nil {
			res.ScrapeErrors++
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// procStatusKiB answers a "kB" field of /proc/PID/status (VmRSS, VmHWM),
// or zero.
func procStatusKiB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// countFDs answers how many descriptors the process holds open.
func countFDs(pid int) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	return len(names), err
}

// scrapeGoroutines answers go_goroutines from toolplane's /metrics.
func scrapeGoroutines(ctx context.Context, hc *http.Client, base string) (int, error) {
	return scrapeMetric(ctx, hc, base, "go_goroutines", nil)
}

// scrapeMetric answers the sum of the series of the metric name on
// toolplane's /metrics whose labels hold every one of labels (e.g.
// `scope="tool"`), and an error if there is none.
func scrapeMetric(ctx context.Context, hc *http.Client, base, name string, labels []string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	sum, found := 0.0, false
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest == "" || rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if !all(labels, func(l string) bool { return strings.Contains(rest, l) }) {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		sum, found = sum+f, true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("no %s in /metrics", name)
	}
	return int(sum), nil
}

func all[T any](s []T, f func(T) bool) bool {
	for _, v := range s {
		if !f(v) {
			return false
		}
	}
	return true
}

// StampedeResult is what a stampede at the hanging tool saw.
type StampedeResult struct {
	// Cap is the tool's in-flight cap, Held the calls holding it, Calls
	// the stampede's concurrent calls (10 × Cap).
	Cap, Held, Calls int
	// ByOutcome holds the stampede's latencies by outcome, sorted.
	ByOutcome map[string][]time.Duration
	// RSS before the stampede, after it, and the process's peak, KiB;
	// goroutines before and after.
	RSSBeforeKiB, RSSAfterKiB, PeakRSSKiB int64
	GoroutinesBefore, GoroutinesAfter     int
}

// RunStampede starts a toolplane with its protections on, fills the
// hanging tool's in-flight cap with calls its downstream never answers,
// then sends 10 × cap calls at it at once, each over a keep-alive
// connection of its own opened beforehand, and answers how they were
// refused.
func RunStampede(ctx context.Context, o HangOptions, cap int) (StampedeResult, error) {
	res := StampedeResult{Cap: cap, Calls: 10 * cap}
	args := append(slices.Clone(o.ServeArgs), "--tools", o.ToolsDir, "--traffic-protection=on", "--agent-max-in-flight", "1000000")
	tp, err := StartToolplane(ctx, ToolplaneOptions{Binary: o.Binary, Args: args})
	if err != nil {
		return res, err
	}
	defer tp.Stop()
	if _, err := SetUpHTTPTools(ctx, tp.URL, tp.AdminKey, o.APIToken); err != nil {
		return res, err
	}
	key, err := MintAgentKey(ctx, tp.URL, tp.AdminKey, hangAgent, []string{HangTool, HTTPReadTool})
	if err != nil {
		return res, err
	}
	pid := tp.PID()
	body := []byte(`{"arguments":{"id":"` + ItemID + `"}}`)
	holders := newInvoker(tp.URL, key, HangTool, body, cap, o.HangTimeout+10*time.Second)
	defer holders.close()
	hctx, release := context.WithCancel(ctx)
	var held sync.WaitGroup
	for range cap {
		held.Go(func() { holders.call(hctx) })
	}
	defer func() { release(); held.Wait() }()
	// The callers' connections are opened, and the healthy tool called
	// once on each, before the stampede.
	callers := make([]*invoker, res.Calls)
	for i := range callers {
		callers[i] = newInvoker(tp.URL, key, HTTPReadTool, body, 1, o.HangTimeout+10*time.Second)
		defer callers[i].close()
		if out, msg := callers[i].call(ctx); out != outcomeOK {
			return res, fmt.Errorf("stampede: warming caller %d: %s: %s", i, out, msg)
		}
		callers[i].url = tp.URL + "/v1/tools/" + url.PathEscape(HangTool) + "/invoke"
	}
	hc := &http.Client{Transport: newTransport(1), Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	// Wait until the cap is full, as /metrics reports it.
	deadline := time.Now().Add(10 * time.Second)
	for res.Held < cap && time.Now().Before(deadline) {
		res.Held, _ = scrapeMetric(ctx, hc, tp.URL, "toolplane_in_flight", []string{`scope="tool"`, "/" + HangTool + `"`})
		time.Sleep(50 * time.Millisecond)
	}
	if res.Held < cap {
		return res, fmt.Errorf("stampede: %d of the tool's %d slots held after 10 s", res.Held, cap)
	}
	res.RSSBeforeKiB = procStatusKiB(pid, "VmRSS")
	res.GoroutinesBefore, _ = scrapeGoroutines(ctx, hc, tp.URL)
	tl := newTally()
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range callers {
		wg.Go(func() {
			<-gate
			t0 := time.Now()
			out, msg := c.call(ctx)
			tl.add(out, msg, time.Since(t0))
		})
	}
	time.Sleep(100 * time.Millisecond) // every caller waits at the gate
	close(gate)
	wg.Wait()
	res.ByOutcome = tl.stream().ByOutcome
	time.Sleep(200 * time.Millisecond)
	res.RSSAfterKiB = procStatusKiB(pid, "VmRSS")
	res.PeakRSSKiB = procStatusKiB(pid, "VmHWM")
	res.GoroutinesAfter, _ = scrapeGoroutines(ctx, hc, tp.URL)
	return res, nil
}

// MainHang is `toolplane-load hang`: the hang scenario's rounds and its
// stampede, printed as markdown.
func MainHang(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("toolplane-load hang", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rounds := fs.Int("rounds", 2, "paired rounds; each runs a healthy-only baseline, then protections on and off (their order alternating)")
	healthyRate := fs.Float64("healthy-rate", 200, "calls a second to the healthy tool")
	hangRate := fs.Float64("hang-rate", 1200, "calls a second to the hanging tool")
	timeout := fs.Duration("hang-timeout", 10*time.Second, "the hanging tool's timeout")
	warmup := fs.Duration("warmup", 2*time.Second, "time before the healthy calls are counted (the hanging calls start with it)")
	duration := fs.Duration("duration", 20*time.Second, "measured time per round")
	maxOut := fs.Int("max-outstanding", 15000, "the most hanging calls the load generator holds open at once (its descriptors are limited too)")
	hangCap := fs.Int("hang-cap", 100, "the hanging tool's execution.max_in_flight (100 is toolplane's default); the stampede sends 10× it at once")
	stampede := fs.Bool("stampede", true, "after the rounds, a stampede of 10× -hang-cap concurrent calls at the hanging tool")
	src := fs.String("src", ".", "the toolplane module to build ./cmd/toolplane from")
	binary := fs.String("binary", "", "a prebuilt toolplane binary to start instead of building one")
	var serveArgs stringList
	fs.Var(&serveArgs, "serve-arg", "an extra argument for every `toolplane serve` (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "toolplane-load hang: "+format+"\n", a...)
		return 1
	}
	if *rounds < 0 || *healthyRate <= 0 || *hangRate <= 0 || *timeout <= 0 || *duration <= 0 || *warmup < 0 || *maxOut < 1 || *hangCap < 1 {
		return fail("-rounds, -healthy-rate, -hang-rate, -hang-timeout, -duration, -warmup, -max-outstanding and -hang-cap must be positive")
	}
	token, err := randomToken()
	if err != nil {
		return fail("%v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fail("find this program to run its api helper: %v", err)
	}
	h, err := startHelper(ctx, stderr, apiHangLine, []string{APITokenEnv + "=" + token}, exe, "api", "-addr", "127.0.0.1:0", "-hang-addr", "127.0.0.1:0")
	if err != nil {
		return fail("api process: %v", err)
	}
	defer h.stop()
	dir, err := os.MkdirTemp("", "toolplane-load-hang-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(dir)
	if *binary == "" {
		if *binary, err = BuildToolplane(ctx, *src, dir); err != nil {
			return fail("%v", err)
		}
	}
	tools := filepath.Join(dir, "tools")
	if err := WriteHangTools(tools, h.match[0], h.match[1], *timeout, *hangCap); err != nil {
		return fail("%v", err)
	}
	o := HangOptions{Binary: *binary, ToolsDir: tools, APIToken: token, ServeArgs: serveArgs,
		HealthyRate: *healthyRate, HangRate: *hangRate, Warmup: *warmup, Duration: *duration,
		HangTimeout: *timeout, MaxOutstanding: *maxOut, APIPID: h.pid}
	var results []HangRound
	for i := range *rounds {
		modes := []string{ModeBaseline, ModeOn, ModeOff}
		if i%2 == 1 {
			modes = []string{ModeBaseline, ModeOff, ModeOn}
		}
		for _, m := range modes {
			r, err := RunHangRound(ctx, o, i+1, m)
			if err != nil {
				return fail("round %d, %s: %v", i+1, m, err)
			}
			fmt.Fprintf(stderr, "round %d, %s: healthy %.0f/s\n", i+1, m, r.HealthyRate())
			results = append(results, r)
		}
	}
	if len(results) > 0 {
		if err := WriteHangTable(stdout, results); err != nil {
			return fail("%v", err)
		}
	}
	if *stampede {
		s, err := RunStampede(ctx, o, *hangCap)
		if err != nil {
			return fail("%v", err)
		}
		WriteStampede(stdout, s)
	}
	return 0
}

// WriteHangTable writes the rounds as two markdown tables, the healthy
// tool's and the node's, then the hanging tool's answers; each round's
// healthy figures are set against its own baseline.
func WriteHangTable(w io.Writer, results []HangRound) error {
	var b strings.Builder
	base := map[int]HangRound{}
	for _, r := range results {
		if r.Mode == ModeBaseline {
			base[r.Round] = r
		}
	}
	b.WriteString("| round | run | healthy offered/s | ok/s | vs base | p50 | p99 | p99 × base | failed | toolplane CPU/call | peak RSS MiB | peak goroutines | peak fds | breaker trips | CPU s toolplane / api / generator |\n")
	b.WriteString("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range results {
		ok := r.Healthy.ByOutcome[outcomeOK]
		vs, px := "–", "–"
		if bl, found := base[r.Round]; found && bl.HealthyRate() > 0 {
			vs = fmt.Sprintf("%.0f%%", 100*r.HealthyRate()/bl.HealthyRate())
			if bp := Percentile(bl.Healthy.ByOutcome[outcomeOK], 99); bp > 0 && len(ok) > 0 {
				px = fmt.Sprintf("%.2f", float64(Percentile(ok, 99))/float64(bp))
			}
		}
		cpu := "–"
		if r.CPUPerCall > 0 {
			cpu = fmt.Sprintf("%d µs", r.CPUPerCall.Microseconds())
		}
		fmt.Fprintf(&b, "| %d | %s | %.0f | %.0f | %s | %s | %s | %s | %d | %s | %d | %d | %d | %d | %.1f / %.1f / %.1f |\n",
			r.Round, r.Mode, float64(r.Healthy.Offered)/r.Window.Seconds(), r.HealthyRate(), vs,
			ms(Percentile(ok, 50)), ms(Percentile(ok, 99)), px, r.Healthy.Failed()+r.Healthy.Unsent, cpu,
			r.PeakRSSKiB/1024, r.PeakGoroutines, r.PeakFDs, r.BreakerTrips, r.CPU[0].Seconds(), r.CPU[1].Seconds(), r.CPU[2].Seconds())
	}
	b.WriteString("\nThe hanging tool's answers (latency from when each call was due):\n\n")
	b.WriteString("| round | run | sent | outcome | calls | p50 | p99 | max |\n| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |\n")
	for _, r := range results {
		if r.Mode == ModeBaseline {
			continue
		}
		sent := r.Hang.Offered - r.Hang.Unsent
		if r.Hang.Unsent > 0 {
			fmt.Fprintf(&b, "| %d | %s | %d | not sent (generator's limit) | %d | – | – | – |\n", r.Round, r.Mode, sent, r.Hang.Unsent)
		}
		for _, k := range slices.Sorted(maps.Keys(r.Hang.ByOutcome)) {
			l := r.Hang.ByOutcome[k]
			fmt.Fprintf(&b, "| %d | %s | %d | %s | %d | %s | %s | %s |\n", r.Round, r.Mode, sent, k, len(l), ms(Percentile(l, 50)), ms(Percentile(l, 99)), ms(l[len(l)-1]))
		}
	}
	for _, r := range results {
		for _, s := range []struct {
			name string
			st   Stream
		}{{"healthy", r.Healthy}, {"hanging", r.Hang}} {
			for _, k := range slices.Sorted(maps.Keys(s.st.FirstError)) {
				msg := s.st.FirstError[k]
				fmt.Fprintf(&b, "- round %d, %s, %s tool, first %q: %s\n", r.Round, r.Mode, s.name, k, msg)
			}
		}
		if r.ScrapeErrors > 0 {
			fmt.Fprintf(&b, "- round %d, %s: %d /metrics scrapes failed\n", r.Round, r.Mode, r.ScrapeErrors)
		}
		if r.Log != "" {
			fmt.Fprintf(&b, "- round %d, %s: %s\n", r.Round, r.Mode, r.Log)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("loadtest: write hang table: %w", err)
	}
	return nil
}

// WriteStampede writes the stampede's figures.
func WriteStampede(w io.Writer, s StampedeResult) {
	fmt.Fprintf(w, "\nStampede: %d concurrent calls at the hanging tool, its cap of %d held by %d hanging calls:\n\n", s.Calls, s.Cap, s.Held)
	fmt.Fprintf(w, "| outcome | calls | p50 | p99 | max |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, k := range slices.Sorted(maps.Keys(s.ByOutcome)) {
		l := s.ByOutcome[k]
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", k, len(l), ms(Percentile(l, 50)), ms(Percentile(l, 99)), ms(l[len(l)-1]))
	}
	fmt.Fprintf(w, "\nRSS %.1f MiB before, %.1f MiB after (peak %.1f MiB); goroutines %d before, %d after.\n",
		float64(s.RSSBeforeKiB)/1024, float64(s.RSSAfterKiB)/1024, float64(s.PeakRSSKiB)/1024, s.GoroutinesBefore, s.GoroutinesAfter)
}
