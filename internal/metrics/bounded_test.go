package metrics

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// heapInUse answers the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A flood of 100,000 distinct tool and agent names (a caller inventing
// them, a bug minting ids) keeps every family at its caps: the series,
// the scrape and the heap stop growing once the caps are reached, and the
// flood is counted under __overflow__.
func TestLabelFloodKeepsMemoryBounded(t *testing.T) {
	// Not parallel: the heap is measured.
	const capValues, flood = 1000, 100_000
	m := NewWith(Config{MaxLabelValues: capValues})
	observe := func(i int) {
		o := call(fmt.Sprintf("flood.tool_%06d", i), fmt.Sprintf("agent-%06d", i), "denied", time.Millisecond)
		o.CostCents = 1
		o.Reached = 1
		m.ObserveCall(o)
	}
	// Fill every cap first: what the family legitimately keeps.
	for i := range capValues {
		observe(i)
	}
	filled := scrape(t, m)
	before := heapInUse()
	for i := capValues; i < capValues+flood; i++ {
		observe(i)
	}
	after := heapInUse()
	out := scrape(t, m)

	for name, f := range m.families {
		if n := f.size(); n > capValues+1 {
			t.Errorf("%s keeps %d series after the flood, want at most %d", name, n, capValues+1)
		}
	}
	// A growth of 100,000 series would be tens of megabytes; what the
	// flood may leave is noise.
	if grew := int64(after) - int64(before); grew > 2<<20 {
		t.Errorf("the heap grew by %d bytes over a flood of %d names (%d before, %d after)", grew, flood, before, after)
	}
	if len(out) > 2*len(filled) {
		t.Errorf("the scrape grew from %d to %d bytes", len(filled), len(out))
	}
	for _, want := range []string{
		fmt.Sprintf(`toolplane_tool_calls_total{agent="__overflow__",outcome="denied",tool="__overflow__",version="1.0.0"} %d`, flood),
		fmt.Sprintf(`toolplane_tool_call_seconds_count{tool="__overflow__"} %d`, flood),
		fmt.Sprintf(`toolplane_authz_denials_total{agent="__overflow__",organization="acme"} %d`, flood),
		fmt.Sprintf(`toolplane_spend_cents_total{agent="__overflow__",organization="acme",tool="__overflow__"} %d`, flood),
		fmt.Sprintf(`toolplane_metric_label_overflow_total{family="toolplane_tool_calls_total"} %d`, flood),
		`toolplane_tool_calls_total{agent="agent-000999",outcome="denied",tool="flood.tool_000999",version="1.0.0"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(out, "flood.tool_001000") {
		t.Error("a name past the cap has a series of its own")
	}
	t.Logf("heap %d -> %d bytes over %d names; scrape %d -> %d bytes", before, after, flood, len(filled), len(out))
}

// The series cap bounds the product of the labels, which the per-label
// caps alone do not: past it, every label overflows into one series.
func TestSeriesCapBoundsLabelProduct(t *testing.T) {
	t.Parallel()
	m := NewWith(Config{MaxLabelValues: 100, MaxSeries: 50})
	for i := range 100 {
		for j := range 10 {
			m.ObserveCall(call(fmt.Sprintf("t.%d", i), fmt.Sprintf("a%d", j), "ok", time.Millisecond))
		}
	}
	if n := m.calls.size(); n != 51 {
		t.Errorf("calls keep %d series, want the cap of 50 and one overflow", n)
	}
	out := scrape(t, m)
	if want := `toolplane_tool_calls_total{agent="__overflow__",outcome="__overflow__",tool="__overflow__",version="__overflow__"} 950`; !strings.Contains(out, want) {
		t.Errorf("scrape lacks %s", want)
	}
	// A series kept before the cap was reached still counts its own.
	m.ObserveCall(call("t.0", "a0", "ok", time.Millisecond))
	if want := `toolplane_tool_calls_total{agent="a0",outcome="ok",tool="t.0",version="1.0.0"} 2`; !strings.Contains(scrape(t, m), want) {
		t.Errorf("scrape lacks %s", want)
	}
}

// Without caps the same flood would grow without bound: the measure
// above can fail. This proves it on a family built with caps far above
// the flood.
func TestLabelFloodWithoutCapGrows(t *testing.T) {
	const flood = 20_000
	m := NewWith(Config{MaxLabelValues: 10 * flood, MaxSeries: 10 * flood})
	before := heapInUse()
	for i := range flood {
		m.ObserveCall(call(fmt.Sprintf("flood.tool_%06d", i), "a", "ok", time.Millisecond))
	}
	after := heapInUse()
	if grew := int64(after) - int64(before); grew < 2<<20 {
		t.Errorf("%d uncapped series grew the heap by only %d bytes: the bounded test's threshold proves nothing", flood, grew)
	}
	runtime.KeepAlive(m)
}
