package auditexport_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolplane/toolplane/auditexport"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// TestRestartTakesOverAtOnce: on SQLite (one process serves a file), the
// entries a killed process held under a lease that has not ended are
// claimed at once by the node started again, not a lease later; entries
// an exporter of this process holds are still skipped until their lease
// ends, and every event reaches the sink once.
func TestRestartTakesOverAtOnce(t *testing.T) {
	t.Parallel()
	s, db := sqlitetest.NewDB(t)
	dir := t.TempDir()
	sink, err := auditexport.NewFiles(auditexport.FileConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	x := auditexport.New(auditexport.Config{Store: s, Sink: sink, Batch: 100, Lease: time.Hour})
	t.Cleanup(func() { x.Close() })
	if err := x.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs := appendEvents(t, s, "org-a", "ev", 500)
	now := time.Now()
	// A live exporter of this process holds the first 50 entries.
	held, err := s.ClaimAuditOutbox(context.Background(), x.Sink(), "exporter-alive", 0, now, now.Add(time.Hour), 50)
	if err != nil || len(held) != 50 {
		t.Fatalf("claim = %d entries, %v; want 50", len(held), err)
	}
	// The killed process held the next 100, for another hour: an owner
	// that never claimed in this process.
	if _, err := db.Exec(`UPDATE audit_outbox SET owner = 'exporter-killed', lease_until = ?
		WHERE seq IN (SELECT seq FROM audit_outbox WHERE seq > ? ORDER BY seq LIMIT 100)`,
		now.Add(time.Hour).UnixMicro(), held[len(held)-1].Seq); err != nil {
		t.Fatal(err)
	}
	n, err := x.DrainBacklog(context.Background())
	if err != nil || n != 450 {
		t.Fatalf("DrainBacklog = %d, %v; want the 450 entries the live exporter does not hold", n, err)
	}
	lag, err := x.Lag(context.Background(), nil)
	if err != nil || lag.Pending != 50 {
		t.Fatalf("lag = %+v, %v; want the live exporter's 50", lag, err)
	}
	got, _ := readDir(t, dir)
	seen := map[string]int{}
	for _, ev := range got {
		seen[ev.ID]++
	}
	for i, ev := range evs {
		want := 1
		if i < 50 {
			want = 0
		}
		if seen[ev.ID] != want {
			t.Fatalf("event %s written %d times, want %d", ev.ID, seen[ev.ID], want)
		}
	}
}
