package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/internal/syncbuf"
)

// A served node keeps vendor ceilings on each store: set, refused with
// the arithmetic, and shown.
func TestVendorCeilingsOnAServedNode(t *testing.T) {
	t.Parallel()
	for name, database := range onePendingBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			e := &e2e{log: &syncbuf.Buffer{}, seen: &traffic{}, ran: make(chan error, 1), conns: map[string]string{}}
			e.cfg = Config{Addr: "127.0.0.1:0", Database: database(t, dir), DataDir: dir, Demo: true}
			e.start(t, dir)
			lanes := `"lanes":[{"name":"interactive","active_runs":20,"shape":{"kind":"parallel","parts":[{"kind":"call","provider":"exa","fanout":3},{"kind":"call","provider":"exa","fanout":3}]}}]`
			refused := e.must(t, "PUT", "/v1/vendor-ceilings/exa", e.admin, `{"account_limit":100,`+lanes+`}`, http.StatusBadRequest)
			if msg, _ := refused["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "interactive: 20 runs × 6 calls = 120; sum 120 > account limit 100") {
				t.Fatalf("refusal: %v", refused)
			}
			e.must(t, "PUT", "/v1/vendor-ceilings/exa", e.admin, `{"account_limit":120,`+lanes+`}`, http.StatusOK)
			shown := e.must(t, "GET", "/v1/vendor-ceilings/exa", e.admin, "", http.StatusOK)
			if c, _ := shown["vendor_ceiling"].(map[string]any); c["version"] != 1.0 || c["arithmetic"].(map[string]any)["sum"] != 120.0 {
				t.Fatalf("show: %v", shown)
			}
		})
	}
}
