package server

import (
	"context"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// hangingCollector answers no request it is sent until the test ends: a
// collector that accepted the connection and went silent. It answers its
// URL and counts the exports it was sent.
func hangingCollector(t *testing.T) (string, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var mu sync.Mutex
	n := 0
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		select {
		case <-done:
		case <-r.Context().Done():
		}
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { close(done); hs.Close() })
	return "http://" + ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// A span's end never waits on the collector: with one that never answers,
// spans past the queue are dropped and counted, each end takes no longer
// than a channel send, and a shutdown is bounded by its context.
func TestSpanQueueDropsRatherThanWaits(t *testing.T) {
	t.Parallel()
	url, exports := hangingCollector(t)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(url+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	q := newSpanQueue(exp, 8, 4, 10*time.Millisecond, time.Hour)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q))
	tr := tp.Tracer("test")
	// The first batch is sent and hangs: the rest fill the queue.
	for deadline := time.Now().Add(10 * time.Second); exports() == 0; {
		_, sp := tr.Start(context.Background(), "first")
		sp.End()
		if time.Now().After(deadline) {
			t.Fatal("the collector was never sent a batch")
		}
		time.Sleep(5 * time.Millisecond)
	}
	const n = 1000
	var slowest time.Duration
	for range n {
		_, sp := tr.Start(context.Background(), "span")
		start := time.Now()
		sp.End()
		slowest = max(slowest, time.Since(start))
	}
	if slowest > 50*time.Millisecond {
		t.Errorf("a span's end took %v with the collector hanging", slowest)
	}
	full, _ := q.Dropped()
	if full < n-8 {
		t.Errorf("dropped %d at the full queue, want at least %d", full, n-8)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = tp.Shutdown(ctx)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("shutdown took %v past its context", took)
	}
}

// A collector that answers gets every span, and none is counted dropped.
func TestSpanQueueExportsEverySpan(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(rc.url+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	q := newSpanQueue(exp, 64, 16, time.Hour, 10*time.Second)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q))
	tr := tp.Tracer("test")
	for range 50 {
		_, sp := tr.Start(context.Background(), "span")
		sp.End()
		// Within the queue's room: the exporter keeps up at this rate.
		time.Sleep(time.Millisecond)
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	got := len(rc.spans)
	rc.mu.Unlock()
	full, failed := q.Dropped()
	if got != 50 || full != 0 || failed != 0 {
		t.Errorf("received %d of 50, dropped %d full and %d failed", got, full, failed)
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A collector that never answers does not slow calls: every call through
// a server exporting to one answers within a bound far below the export's
// own timeout, and /metrics counts the spans dropped at the full queue.
func TestCollectorDownNeverSlowsCalls(t *testing.T) {
	t.Parallel()
	url, _ := hangingCollector(t)
	base, agent, _ := tracedServer(t, url)
	invoke := base + "/v1/tools/demo.search_tickets/invoke"
	// Enough calls (a dozen spans each) to fill the queue and the batch
	// the exporter holds.
	const calls = 400
	var slowest time.Duration
	var total time.Duration
	for i := range calls {
		start := time.Now()
		status, raw := doREST(t, "POST", invoke, agent, "", `{"arguments":{"query":"cracked"},"run_id":"run-`+strconv.Itoa(i)+`"}`)
		took := time.Since(start)
		if status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, status, raw)
		}
		slowest, total = max(slowest, took), total+took
	}
	// The export's own bound is spanExportLimit (10s): a call that waited
	// on it would take that long.
	if slowest > 2*time.Second {
		t.Errorf("the slowest call took %v with the collector down", slowest)
	}
	t.Logf("%d calls, mean %v, slowest %v", calls, total/calls, slowest)
	status, raw := doREST(t, "GET", base+"/metrics", "", "", "")
	if status != http.StatusOK {
		t.Fatalf("metrics: %d", status)
	}
	m := regexp.MustCompile(`toolplane_trace_spans_dropped_total\{reason="queue_full"\} (\d+)`).FindStringSubmatch(string(raw))
	if m == nil {
		t.Fatalf("no dropped spans counter in /metrics:\n%s", grepLines(string(raw), "toolplane_trace"))
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Errorf("no span counted dropped: %s", m[0])
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
