package loadtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane/toolfile"
)

// TestServeAPIWithHang starts the API with its hanging listener and checks
// the line it prints, the healthy endpoint, and that the hanging one
// answers nothing until its caller gives up.
func TestServeAPIWithHang(t *testing.T) {
	t.Setenv(APITokenEnv, "tok")
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- ServeAPIWithHang(ctx, "127.0.0.1:0", "127.0.0.1:0", pw); pw.Close() }()
	buf := make([]byte, 256)
	n, err := pr.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	m := apiHangLine.FindStringSubmatch(strings.TrimSpace(string(buf[:n])))
	if m == nil {
		t.Fatalf("the API printed %q", buf[:n])
	}
	go io.Copy(io.Discard, pr)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m[1]+itemPath+ItemID, nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the healthy endpoint answered %d", resp.StatusCode)
	}
	hc := &http.Client{Timeout: 200 * time.Millisecond}
	t0 := time.Now()
	if resp, err := hc.Get(m[2] + itemPath + ItemID); err == nil {
		resp.Body.Close()
		t.Fatalf("the hanging endpoint answered %d", resp.StatusCode)
	}
	if d := time.Since(t0); d < 150*time.Millisecond {
		t.Errorf("the hanging endpoint's caller gave up after %v, before its timeout", d)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// TestWriteHangTools checks that both definitions parse, with the hanging
// tool's timeout and cap, and that bad URLs are refused.
func TestWriteHangTools(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := WriteHangTools(dir, "http://127.0.0.1:1", "http://127.0.0.1:2", 12*time.Second, 7); err != nil {
		t.Fatal(err)
	}
	healthy, _, err := toolfile.ReadFile(filepath.Join(dir, "get_item.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	stuck, _, err := toolfile.ReadFile(filepath.Join(dir, "get_stuck_item.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if healthy.Name != HTTPReadTool || stuck.Name != HangTool {
		t.Fatalf("names %q, %q", healthy.Name, stuck.Name)
	}
	if got := time.Duration(stuck.Timeout); got != 12*time.Second {
		t.Errorf("the hanging tool's timeout is %v", got)
	}
	if stuck.Execution == nil || stuck.Execution.MaxInFlight != 7 {
		t.Errorf("the hanging tool's execution block is %+v", stuck.Execution)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "get_stuck_item.yaml"))
	if !strings.Contains(string(b), "http://127.0.0.1:2"+itemPath) {
		t.Errorf("the hanging tool does not call the hanging endpoint:\n%s", b)
	}
	for _, bad := range [][2]string{{"", "http://127.0.0.1:2"}, {"http://127.0.0.1:1", "http://127.0.0.1:2/x"}} {
		if err := WriteHangTools(t.TempDir(), bad[0], bad[1], time.Second, 0); err == nil {
			t.Errorf("WriteHangTools(%q, %q) answered no error", bad[0], bad[1])
		}
	}
}

// TestOpenLoop drives the open loop against a fake invoke endpoint whose
// answers cycle through a success, a refusal, a timeout after a delay and
// a dropped connection, and checks the rate kept, the outcomes, that a
// slow call does not hold back the next ones, and the generator's limit.
func TestOpenLoop(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" || r.URL.Path != "/v1/tools/t.x/invoke" {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		switch n.Add(1) % 4 {
		case 0:
			w.Write([]byte(`{"ok":true,"result":{}}`))
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"ok":false,"error":{"code":"unavailable"}}`))
		case 2:
			time.Sleep(300 * time.Millisecond)
			w.WriteHeader(http.StatusGatewayTimeout)
			w.Write([]byte(`{"ok":false,"error":{"code":"timeout"}}`))
		case 3:
			panic(http.ErrAbortHandler)
		}
	}))
	defer srv.Close()
	c := newInvoker(srv.URL, "k", "t.x", []byte(`{}`), 16, 5*time.Second)
	defer c.close()
	tl := newTally()
	var sent atomic.Int64
	t0 := time.Now()
	openLoop(t.Context(), 100, t0, 400*time.Millisecond, 1000, c, &sent,
		func(_ time.Time, out, msg string, d time.Duration) { tl.add(out, msg, d) }, func(time.Time) { tl.unsent.Add(1) })
	s := tl.stream()
	if sent.Load() != 40 || s.Unsent != 0 {
		t.Fatalf("sent %d, unsent %d; want 40 and 0", sent.Load(), s.Unsent)
	}
	for _, out := range []string{outcomeOK, "unavailable", "timeout", outcomeTransport} {
		if s.Count(out) != 10 {
			t.Errorf("%d calls ended %q, want 10 (%v)", s.Count(out), out, s.FirstError)
		}
	}
	if s.Failed() != 30 {
		t.Errorf("Failed = %d, want 30", s.Failed())
	}
	// The 40 calls were due over 400 ms and the slow ones take 300 ms:
	// sent one after another they would take 3.4 s.
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("the open loop took %v: the slow calls held the others back", d)
	}
	if p := Percentile(s.ByOutcome["timeout"], 50); p < 300*time.Millisecond {
		t.Errorf("the slow calls' p50 is %v, under their 300 ms", p)
	}

	// With one call outstanding at most, the calls due during a slow one
	// are not sent.
	tl, sent = newTally(), atomic.Int64{}
	n.Store(1) // the next answer is the slow one
	openLoop(t.Context(), 100, time.Now(), 200*time.Millisecond, 1, c, &sent,
		func(_ time.Time, out, msg string, d time.Duration) { tl.add(out, msg, d) }, func(time.Time) { tl.unsent.Add(1) })
	if s := tl.stream(); s.Unsent < 15 || int(sent.Load())+s.Unsent != 20 {
		t.Errorf("with a limit of 1: sent %d, unsent %d", sent.Load(), s.Unsent)
	}
}

// TestSampleProcess samples this process, its goroutines from a fake
// /metrics.
func TestSampleProcess(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			fmt.Fprint(w, "# HELP go_goroutines x\ngo_goroutines 42\n"+`toolplane_in_flight{name="org_1/t.x",scope="tool"} 3`+"\n")
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	var r HangRound
	sampleProcess(ctx, srv.URL, os.Getpid(), &r)
	if r.PeakGoroutines != 42 || r.PeakRSSKiB <= 0 || r.PeakFDs <= 0 || r.ScrapeErrors != 0 {
		t.Errorf("sampled %+v", r)
	}
	if n, err := scrapeMetric(t.Context(), http.DefaultClient, srv.URL, "toolplane_in_flight", []string{`scope="tool"`, `/t.x"`}); err != nil || n != 3 {
		t.Errorf("scrapeMetric(toolplane_in_flight) = %d, %v", n, err)
	}
	if _, err := scrapeMetric(t.Context(), http.DefaultClient, srv.URL, "go_goroutines_x", nil); err == nil {
		t.Error("scrapeMetric found a metric /metrics does not hold")
	}
}

// TestWriteHangTable renders two rounds against their baseline.
func TestWriteHangTable(t *testing.T) {
	t.Parallel()
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	base := HangRound{Round: 1, Mode: ModeBaseline, Window: time.Second, Healthy: Stream{Offered: 4, ByOutcome: map[string][]time.Duration{outcomeOK: ms(1, 1, 1, 2)}}}
	on := HangRound{Round: 1, Mode: ModeOn, Window: time.Second, PeakFDs: 250,
		Healthy: Stream{Offered: 4, ByOutcome: map[string][]time.Duration{outcomeOK: ms(1, 1, 2, 4)}},
		Hang:    Stream{Offered: 10, Unsent: 2, ByOutcome: map[string][]time.Duration{"unavailable": ms(1, 1, 1), "timeout": ms(10000)}, FirstError: map[string]string{"timeout": "did not answer"}}}
	var b bytes.Buffer
	if err := WriteHangTable(&b, []HangRound{base, on}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 1 | hanging, protections on | 4 | 4 | 100% | 1.000 ms | 4.000 ms | 2.00 | 0 | – | 0 | 0 | 250 | 0 | 0.0 / 0.0 / 0.0 |",
		"| 1 | hanging, protections on | 8 | not sent (generator's limit) | 2 |",
		"| 1 | hanging, protections on | 8 | timeout | 1 | 10000.000 ms |",
		`first "timeout": did not answer`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestMainHangEndToEnd builds toolplane and runs the whole scenario, one
// short round of each run and a small stampede, through the command.
func TestMainHangEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts toolplane")
	}
	t.Setenv(helperEnv, "main")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	bin, err := BuildToolplane(ctx, "../..", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The api helper is this test binary, run as toolplane-load.
	// The api helper writes to errs from a goroutine of exec's.
	var out bytes.Buffer
	var errs lockedBuffer
	code := MainHang(ctx, []string{"-binary", bin, "-rounds", "1", "-healthy-rate", "20", "-hang-rate", "40",
		"-hang-timeout", "1s", "-warmup", "200ms", "-duration", "1500ms", "-hang-cap", "5"}, &out, &errs)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs.String(), out.String())
	}
	for _, want := range []string{
		"| 1 | healthy only | 20 |", "| 1 | hanging, protections on |", "| 1 | hanging, protections off |",
		"| unavailable | 50 |", "protections on | 68 | unavailable |", "protections off | 68 | timeout | 68 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
