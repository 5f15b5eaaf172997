package main_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// An operator reads a serving node's database once with the system sqlite3
// command: every write the node acknowledged, before and after the look,
// is in the file after the node is killed and the file opened again. The
// node runs on a file an earlier run made, as it does after a restart:
// that is where the look used to delete the node's -wal and -shm, and the
// writes after it were lost.
func TestSQLite3LookAtAServingNodeLosesNoWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	cli, err := exec.LookPath("sqlite3")
	if err != nil {
		if v := os.Getenv("CI"); v != "" && v != "false" && v != "0" {
			t.Fatal("no sqlite3 command under CI: .ci/run installs Debian's sqlite3, and this test must run there")
		}
		t.Skip("no sqlite3 command (apt-get install sqlite3): this test runs it against a serving node's file")
	}
	t.Parallel()
	bin, err := build()
	if err != nil {
		t.Fatalf("go build: %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "toolplane.db")
	n := &chaosNode{name: "node", addr: freeAddr(t), database: path, dataDir: dir, args: []string{"--demo"}}
	t.Cleanup(func() {
		if n.running() {
			n.kill()
		}
		if t.Failed() {
			t.Logf("node output:\n%s", n.logs())
		}
	})
	if err := n.start(bin); err != nil {
		t.Fatal(err)
	}
	creds, err := readCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{base: "http://" + n.addr, agent: creds["TOOLPLANE_DEMO_AGENT_KEY"]}
	acknowledged := 0
	note := func(run string) {
		t.Helper()
		body := fmt.Sprintf(`{"arguments":{"ticket_id":"t-1001","text":"note %s"},"run_id":%q}`, run, run)
		if status, _, raw := restCall(t, s, "demo.add_note", body); status != http.StatusOK {
			t.Fatalf("%s: %d %s", run, status, raw)
		}
		acknowledged++
	}
	note("first-life")
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
	if err := n.start(bin); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		note(fmt.Sprintf("before-%d", i))
	}
	if out, err := exec.Command(cli, path, "SELECT count(*) FROM audit_events").CombinedOutput(); err != nil {
		t.Fatalf("sqlite3: %v: %s", err, out)
	}
	for _, f := range []string{path + "-wal", path + "-shm"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("after the look: %v", err)
		}
	}
	for i := range 10 {
		note(fmt.Sprintf("after-%d", i))
	}
	if err := n.kill(); err != nil {
		t.Fatal(err)
	}

	store := sqlitetest.Open(t, path)
	evs, _, err := store.ListAudit(context.Background(), "default", toolplane.AuditFilter{Tool: "demo.add_note", Outcome: "ok"}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != acknowledged {
		t.Errorf("after the kill the file holds %d of the %d writes the node acknowledged", len(evs), acknowledged)
	}
}
