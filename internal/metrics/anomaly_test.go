package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
)

func TestCountAnomalies(t *testing.T) {
	t.Parallel()
	m := New(nil, nil)
	count := m.CountAnomalies()
	count(toolplane.SignalDenialRate)
	count(toolplane.SignalDenialRate)
	count(toolplane.SignalSpend)
	count("made_up") // not a signal: no series of its own
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	out := string(b)
	for _, want := range []string{
		`toolplane_anomalies_filed_total{signal="denial_rate"} 2`,
		`toolplane_anomalies_filed_total{signal="spend"} 1`,
		`toolplane_anomalies_filed_total{signal="call_rate"} 0`,
		`toolplane_anomalies_filed_total{signal="error_rate"} 0`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(out, "made_up") {
		t.Error("an unknown signal made a series")
	}
}
