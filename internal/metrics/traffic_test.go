package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/resilience"
)

func TestMetricsShowTraffic(t *testing.T) {
	t.Parallel()
	m := New(nil, nil)
	tr := resilience.New(resilience.Config{AgentMaxInFlight: 1, ToolMaxInFlight: 4})
	m.WatchTraffic(tr)
	br := tr.Breaker("acme", "crm.read", "host:crm.example")
	for range 20 {
		br.Record(resilience.Failure, false)
	}
	tk, ref := tr.Admit(resilience.Request{Organization: "acme", Agent: "a", Tool: "other.read", Target: "other"})
	if ref != nil {
		t.Fatal(ref)
	}
	defer tk.EndWork()
	defer tk.EndCall()
	if _, ref := tr.Admit(resilience.Request{Organization: "acme", Agent: "a", Tool: "other.read", Target: "other", Priority: toolplane.PriorityNormal}); ref == nil {
		t.Fatal("the agent's cap let a second call in")
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	out := string(b)
	for _, want := range []string{
		`toolplane_breaker_state{organization="acme",target="host:crm.example",tool="crm.read"} 1`,
		`toolplane_breaker_trips_total{organization="acme",target="host:crm.example",tool="crm.read"} 1`,
		`toolplane_in_flight{name="",scope="node"} 1`,
		`toolplane_in_flight{name="acme/other.read",scope="tool"} 1`,
		`toolplane_in_flight{name="acme/other",scope="target"} 1`,
		`toolplane_traffic_refused_total{reason="agent_in_flight"} 1`,
		`toolplane_in_flight_node_max 2000`,
		`toolplane_in_flight_cap{name="acme/other.read",scope="tool"} 4`,
		`toolplane_bulkhead_saturation{name="acme/other.read",scope="tool"} 0.25`,
		`toolplane_bulkhead_saturation{name="",scope="node"} 0.0005`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
