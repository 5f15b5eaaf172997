package auditexport_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditexport"
)

// readDir answers the events of every file in dir, files in name order,
// and the file names.
func readDir(t *testing.T, dir string) ([]toolplane.AuditEvent, []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var out []toolplane.AuditEvent
	for _, e := range entries { // ReadDir sorts by name
		names = append(names, e.Name())
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev toolplane.AuditEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("%s: a line that is not an event: %v", e.Name(), err)
			}
			out = append(out, ev)
		}
		f.Close()
	}
	return out, names
}

// TestFilesRotateAndResume: the files sink writes every queued event once,
// in the order stored, rotating by size; an exporter started anew over
// the same directory (a restart) resumes with the events queued
// meanwhile in a new file, and the outbox is empty after.
func TestFilesRotateAndResume(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		dir := t.TempDir()
		newExporter := func() *auditexport.Exporter {
			sink, err := auditexport.NewFiles(auditexport.FileConfig{Dir: dir, MaxBytes: 4096})
			if err != nil {
				t.Fatal(err)
			}
			x := auditexport.New(auditexport.Config{Store: s, Sink: sink, Batch: 25})
			if err := x.Register(context.Background()); err != nil {
				t.Fatal(err)
			}
			return x
		}
		x := newExporter()
		first := appendEvents(t, s, "org-a", "ev-a", 120)
		drainAll(t, x)
		x.Close()
		_, before := readDir(t, dir)
		if len(before) < 3 {
			t.Fatalf("%d files for 120 events of 4 KiB files: no rotation", len(before))
		}
		// Events stored while no exporter ran wait in the outbox.
		second := appendEvents(t, s, "org-b", "ev-b", 40)
		if lag, err := s.AuditOutboxLag(context.Background(), "files", nil); err != nil || lag.Pending != 40 || lag.Oldest.IsZero() {
			t.Fatalf("lag while stopped = %+v, %v; want 40 pending", lag, err)
		}
		x = newExporter()
		drainAll(t, x)
		x.Close()
		got, names := readDir(t, dir)
		if !slices.IsSorted(names) || len(names) <= len(before) {
			t.Fatalf("files %v after the restart (before: %v): want a new file after the old ones", names, before)
		}
		var ids []string
		for _, e := range got {
			ids = append(ids, e.OrganizationID+"/"+e.ID)
		}
		var want []string
		for _, e := range append(first, second...) {
			want = append(want, e.OrganizationID+"/"+e.ID)
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("the files hold %d events, want each of %d once in order", len(ids), len(want))
		}
		if string(got[0].Arguments) != `{"amount_cents":100,"card":"[sensitive]"}` {
			t.Fatalf("arguments %s: not as stored", got[0].Arguments)
		}
		if lag, err := s.AuditOutboxLag(context.Background(), "files", nil); err != nil || lag.Pending != 0 || !lag.Oldest.IsZero() {
			t.Fatalf("lag after = %+v, %v; want none", lag, err)
		}
	})
}

// TestFilesRotateByAge: a file older than MaxAge is closed for the next
// batch, however small.
func TestFilesRotateByAge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sink, err := auditexport.NewFiles(auditexport.FileConfig{Dir: dir, MaxAge: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	ev := &toolplane.AuditEvent{ID: "ev-1", OrganizationID: "org-a"}
	for range 2 {
		if err := sink.Send(context.Background(), []*toolplane.AuditEvent{ev}); err != nil {
			t.Fatal(err)
		}
	}
	if _, names := readDir(t, dir); len(names) != 1 {
		t.Fatalf("files %v within a minute; want one", names)
	}
	now = now.Add(time.Minute)
	if err := sink.Send(context.Background(), []*toolplane.AuditEvent{ev}); err != nil {
		t.Fatal(err)
	}
	if _, names := readDir(t, dir); len(names) != 2 || names[0] >= names[1] {
		t.Fatalf("files %v after a minute; want a second, sorting after the first", names)
	}
}

// drainAll drains x until nothing waits.
func drainAll(t testing.TB, x *auditexport.Exporter) {
	t.Helper()
	for {
		n, err := x.Drain(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}
