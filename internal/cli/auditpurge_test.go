package cli

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A purge through the command line takes two platform admins: the
// proposer's own confirmation is refused, another admin's drops the
// range, and `audit verify` holds before and after. The export's sink is
// listed and dropped.
func TestAuditPurgeAndSinksThroughTheCommandLine(t *testing.T) {
	t.Parallel()
	r := startServe(t, "--audit-export-dir", t.TempDir())
	body := `{"kind":"person","subject":"grace","roles":["platform_admin"]}`
	req, _ := http.NewRequest("POST", r.base+"/v1/keys", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var minted struct {
		Key string `json:"key"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&minted); err != nil || minted.Key == "" {
		t.Fatalf("grace's key: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	grace := minted.Key
	if v := r.call(t, "demo.search_tickets", `{"query":"refund"}`); code(v) != "ok" {
		t.Fatalf("a call: %v", v)
	}
	verify := func(when string) {
		t.Helper()
		if c, out, errOut := r.run(t, r.admin, "audit", "verify"); c != 0 || !strings.Contains(out, `"ok": true`) {
			t.Fatalf("audit verify %s: %d %s %s", when, c, out, errOut)
		}
	}
	verify("before the purge")
	time.Sleep(10 * time.Millisecond)
	before := time.Now().UTC().Format(time.RFC3339Nano)
	c, out, errOut := r.run(t, r.admin, "audit", "purge", "--before", before)
	if c != 0 {
		t.Fatalf("audit purge --before: %d %s %s", c, out, errOut)
	}
	var proposed struct {
		Purge struct {
			ID string `json:"id"`
		} `json:"purge"`
	}
	if err := json.Unmarshal([]byte(out), &proposed); err != nil || proposed.Purge.ID == "" {
		t.Fatalf("the proposal: %s %v", out, err)
	}
	if c, _, errOut := r.run(t, r.admin, "audit", "purge", "--confirm", proposed.Purge.ID); c == 0 || !strings.Contains(errOut, "another platform admin") {
		t.Fatalf("the proposer's own confirmation: %d %s", c, errOut)
	}
	c, out, errOut = r.run(t, grace, "audit", "purge", "--confirm", proposed.Purge.ID)
	if c != 0 {
		t.Fatalf("grace's confirmation: %d %s %s", c, out, errOut)
	}
	var confirmed struct {
		Drops []struct {
			From, Through, Deleted int64
		} `json:"drops"`
	}
	if err := json.Unmarshal([]byte(out), &confirmed); err != nil || len(confirmed.Drops) != 1 || confirmed.Drops[0].From != 1 || confirmed.Drops[0].Deleted < 2 {
		t.Fatalf("the purge: %s %v", out, err)
	}
	verify("after the purge")
	// Done: resuming it, or confirming it again, says so.
	for _, args := range [][]string{{"--resume", proposed.Purge.ID}, {"--confirm", proposed.Purge.ID}} {
		if c, _, errOut := r.run(t, r.admin, append([]string{"audit", "purge"}, args...)...); c == 0 || !strings.Contains(errOut, "the purge is done") {
			t.Fatalf("audit purge %v of a done purge: %d %s", args, c, errOut)
		}
	}
	if c, out, errOut := r.run(t, r.admin, "audit", "purge", "--list"); c != 0 || !strings.Contains(out, `"confirmed_by": "grace"`) || !strings.Contains(out, `"done_at"`) {
		t.Fatalf("audit purge --list: %d %s %s", c, out, errOut)
	}
	if c, _, _ := r.run(t, r.admin, "audit", "purge", "--list", "--confirm", "x"); c == 0 {
		t.Fatal("--list with --confirm was accepted")
	}

	if c, out, errOut := r.run(t, r.admin, "audit", "sinks", "list"); c != 0 || !strings.Contains(out, `"name": "files"`) {
		t.Fatalf("audit sinks list: %d %s %s", c, out, errOut)
	}
	if c, out, errOut := r.run(t, grace, "audit", "sinks", "drop", "files"); c != 0 {
		t.Fatalf("audit sinks drop: %d %s %s", c, out, errOut)
	}
	if c, out, errOut := r.run(t, r.admin, "audit", "sinks", "list"); c != 0 || strings.Contains(out, `"files"`) {
		t.Fatalf("audit sinks list after the drop: %d %s %s", c, out, errOut)
	}
	verify("after the sink's drop")
}
