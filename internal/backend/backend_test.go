package backend

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// A node's embedded file, opened as serve opens it (the store's pool and
// River's), stays in use in the eyes of every other SQLite process: the
// system sqlite3 command, run against it while the node writes, leaves
// its -wal and -shm files where they are, and the node's writes after the
// look are in the file a restart opens. (A node that dropped its lock on
// the file saw sqlite3 checkpoint and delete both under it, and lost the
// writes it made next; see sqlite.TestLookingWithSQLite3KeepsCommittedWrites.)
func TestSQLiteStaysInUseWhileSQLite3Looks(t *testing.T) {
	cli, err := exec.LookPath("sqlite3")
	if err != nil {
		if v := os.Getenv("CI"); v != "" && v != "false" && v != "0" {
			t.Fatal("no sqlite3 command under CI: .ci/run installs Debian's sqlite3, and this test must run there")
		}
		t.Skip("no sqlite3 command (apt-get install sqlite3): this test runs it against a live node's file")
	}
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "toolplane.db")
	// A file an earlier run made.
	b, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()

	b, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	appendEvent := func(id string) {
		t.Helper()
		ev := &toolplane.AuditEvent{ID: id, OrganizationID: "org-1", Tool: "demo.add_note", Outcome: "ok", CreatedAt: at}
		if err := b.Store.AppendAudit(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	appendEvent("aud_before")
	inodes := func() [2]uint64 {
		t.Helper()
		var out [2]uint64
		for i, p := range []string{path + "-wal", path + "-shm"} {
			var st syscall.Stat_t
			if err := syscall.Stat(p, &st); err != nil {
				t.Fatalf("%s: %v", filepath.Base(p), err)
			}
			out[i] = st.Ino
		}
		return out
	}
	before := inodes()
	if out, err := exec.Command(cli, path, "SELECT count(*) FROM audit_events").CombinedOutput(); err != nil {
		t.Fatalf("sqlite3: %v: %s", err, out)
	}
	if after := inodes(); after != before {
		t.Fatalf("sqlite3 replaced the live node's -wal and -shm (inodes %v, were %v)", after, before)
	}
	appendEvent("aud_after")
	b.Close()

	b, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, id := range []string{"aud_before", "aud_after"} {
		if _, err := b.Store.GetAudit(ctx, "org-1", id); err != nil {
			t.Errorf("%s after a restart: %v", id, err)
		}
	}
}
