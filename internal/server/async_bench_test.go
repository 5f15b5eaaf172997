package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkAsyncSubmitToDone measures, on the embedded store of a whole
// server, how long a no-op read takes from its submission (202) to the
// moment a waiting reader learns it ended (GET ?wait), beside the same
// call made in its request. It reports the median and the 90th
// percentile in ms per call, and the process's CPU (server and client,
// user and system) per call.
func BenchmarkAsyncSubmitToDone(b *testing.B) {
	dir := b.TempDir()
	s, err := New(context.Background(), Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db"), DataDir: dir, Demo: true, RateLimit: -1})
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	b.Cleanup(func() { stop(); <-ran })
	base := "http://" + s.Addr()
	agent := readCreds(b, dir)["TOOLPLANE_DEMO_AGENT_KEY"]
	client := &http.Client{Timeout: 30 * time.Second}
	do := func(method, path, body string) (int, []byte) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+agent)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, raw
	}
	call := `{"arguments":{"query":"cracked"},"run_id":"run-bench"%s}`
	for _, mode := range []string{"sync", "async"} {
		b.Run(mode, func(b *testing.B) {
			var took []time.Duration
			cpu0 := processCPU(b)
			for b.Loop() {
				start := time.Now()
				if mode == "sync" {
					if status, raw := do("POST", "/v1/tools/demo.search_tickets/invoke", fmt.Sprintf(call, "")); status != http.StatusOK {
						b.Fatalf("%d %s", status, raw)
					}
				} else {
					status, raw := do("POST", "/v1/tools/demo.search_tickets/invoke", fmt.Sprintf(call, `,"mode":"async"`))
					var acc struct{ ID string }
					if status != http.StatusAccepted || json.Unmarshal(raw, &acc) != nil {
						b.Fatalf("%d %s", status, raw)
					}
					status, raw = do("GET", "/v1/invocations/"+acc.ID+"?wait=20s", "")
					var got struct{ Status string }
					if status != http.StatusOK || json.Unmarshal(raw, &got) != nil || got.Status != "succeeded" {
						b.Fatalf("%d %s", status, raw)
					}
				}
				took = append(took, time.Since(start))
			}
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(len(took)), "cpu-µs/op")
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-p50")
			b.ReportMetric(float64(took[len(took)*9/10].Microseconds())/1000, "ms-p90")
		})
	}
}

// processCPU answers the CPU time, user and system, this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
