package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// sqlite3CLI answers the path of the system sqlite3 command. Without one
// the test is skipped, or fails under CI, where .ci/run installs it.
func sqlite3CLI(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("sqlite3")
	if err != nil {
		if v := os.Getenv("CI"); v != "" && v != "false" && v != "0" {
			t.Fatal("no sqlite3 command under CI: .ci/run installs Debian's sqlite3, and this test must run there")
		}
		t.Skip("no sqlite3 command (apt-get install sqlite3): this test runs it against a live store's file")
	}
	return p
}

// The node process of TestLookingWithSQLite3KeepsCommittedWrites: the test
// binary run again with these set in its environment.
const (
	nodeEnvPath  = "TOOLPLANE_TEST_SQLITE_NODE_PATH"
	nodeEnvEnd   = "TOOLPLANE_TEST_SQLITE_NODE_END"
	nodeEnvCLI   = "TOOLPLANE_TEST_SQLITE_NODE_CLI"
	nodeEnvLooks = "TOOLPLANE_TEST_SQLITE_NODE_LOOKS"
)

// TestLookingWithSQLite3KeepsCommittedWrites runs the system sqlite3
// command, as an operator would, against the file of a live node that
// writes before and after each look, and then opens the file as the node
// restarted would: every write the node was told was committed must be
// there, whether the node stopped cleanly or was killed.
//
// The node runs in a process of its own, as a real one does: SQLite's
// locks are a process's, and a look can only do harm from another process.
func TestLookingWithSQLite3KeepsCommittedWrites(t *testing.T) {
	cli := sqlite3CLI(t)
	t.Parallel()
	for _, tc := range []struct {
		name  string
		looks [][]string // each look's sqlite3 arguments, the file's name as "DB"
		end   string     // how the node ends: "killed" or "closed"
	}{
		{"read then killed", [][]string{{"DB", "SELECT count(*) FROM w"}}, "killed"},
		{"read then closed", [][]string{{"DB", "SELECT count(*) FROM w"}}, "closed"},
		{"schema then killed", [][]string{{"DB", ".tables"}}, "killed"},
		{"two reads then closed", [][]string{{"DB", "SELECT count(*) FROM w"}, {"DB", "SELECT max(n) FROM w"}}, "closed"},
		{"read only then killed", [][]string{{"-readonly", "DB", "SELECT count(*) FROM w"}}, "killed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			// The node starts on a file an earlier run made.
			path := filepath.Join(t.TempDir(), "toolplane.db")
			db, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `CREATE TABLE w (n INTEGER PRIMARY KEY)`); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteNodeProcess$", "-test.count=1")
			looks, err := json.Marshal(tc.looks)
			if err != nil {
				t.Fatal(err)
			}
			cmd.Env = append(os.Environ(),
				nodeEnvPath+"="+path,
				nodeEnvEnd+"="+tc.end,
				nodeEnvCLI+"="+cli,
				nodeEnvLooks+"="+string(looks))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("node: %v\n%s", err, out)
			}
			committed, failed := -1, ""
			for line := range strings.Lines(string(out)) {
				line = strings.TrimSpace(line)
				if v, ok := strings.CutPrefix(line, "committed "); ok {
					committed, _ = strconv.Atoi(v)
				}
				if strings.Contains(line, " failed: ") {
					failed = line
				}
			}
			if committed <= 0 {
				t.Fatalf("the node reported no commits:\n%s", out)
			}

			db, err = Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var n, top int
			if err := db.QueryRowContext(ctx, `SELECT count(*), coalesce(max(n), 0) FROM w`).Scan(&n, &top); err != nil {
				t.Fatal(err)
			}
			if n != committed || top != committed {
				t.Errorf("after a restart the file holds %d rows (the last %d) of the %d writes committed", n, top, committed)
			}
			if failed != "" {
				t.Errorf("the node's store failed after the look: %s", failed)
			}
		})
	}
}

// TestSQLiteNodeProcess is the node of
// TestLookingWithSQLite3KeepsCommittedWrites, and skips when run on its own.
// It opens the file as a serving node does (the store's pool and River's),
// writes, lets sqlite3 look between its writes, prints how many writes were
// committed, and either closes the file or ends without closing it, as a
// killed process would.
func TestSQLiteNodeProcess(t *testing.T) {
	path := os.Getenv(nodeEnvPath)
	if path == "" {
		t.Skip("run by TestLookingWithSQLite3KeepsCommittedWrites")
	}
	var looks [][]string
	if err := json.Unmarshal([]byte(os.Getenv(nodeEnvLooks)), &looks); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	rdb.SetMaxOpenConns(1)
	committed := 0
	// write makes k writes, and reports whether they all committed; a
	// write that fails ends the node's writes.
	write := func(k int) bool {
		for range k {
			if _, err := db.ExecContext(ctx, `INSERT INTO w (n) VALUES (?)`, committed+1); err != nil {
				fmt.Printf("write failed: %v\n", err)
				return false
			}
			committed++
		}
		var n int
		if err := rdb.QueryRowContext(ctx, `SELECT count(*) FROM w`).Scan(&n); err != nil {
			fmt.Printf("read failed: %v\n", err)
			return false
		}
		return true
	}
	ok := write(50)
	for _, look := range looks {
		if !ok {
			break
		}
		args := slices.Clone(look)
		for i, a := range args {
			if a == "DB" {
				args[i] = path
			}
		}
		if out, err := exec.Command(os.Getenv(nodeEnvCLI), args...).CombinedOutput(); err != nil {
			t.Fatalf("sqlite3 %q: %v\n%s", args, err, out)
		}
		// On the connections open during the look, then on new ones: a
		// pool opens and closes connections as its load changes.
		ok = write(50)
		db.SetMaxIdleConns(0)
		db.SetMaxIdleConns(maxIdleConns)
		ok = ok && write(50)
	}
	fmt.Printf("committed %d\n", committed)
	if os.Getenv(nodeEnvEnd) == "killed" {
		os.Exit(0) // no close: SQLite's files are left as a kill leaves them
	}
	rdb.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRefusesSideFilesItCannotShare: a -wal or -shm file another user
// owns, or this process cannot write, is refused at Open with a message
// naming the file, before SQLite opens it; the database and the files are
// left as they were.
func TestOpenRefusesSideFilesItCannotShare(t *testing.T) {
	t.Parallel()
	root := os.Geteuid() == 0
	tests := []struct {
		name string
		side string // "-wal" or "-shm"
		// skip says why the case cannot run as this user, or "".
		skip    func() string
		prepare func(t *testing.T, p string)
	}{
		{"wal of another user", "-wal", needRoot(root), func(t *testing.T, p string) { chownOther(t, p) }},
		{"shm of another user", "-shm", needRoot(root), func(t *testing.T, p string) { chownOther(t, p) }},
		{"wal not writable", "-wal", needNotRoot(root), func(t *testing.T, p string) { chmod(t, p, 0o400) }},
		{"shm not writable", "-shm", needNotRoot(root), func(t *testing.T, p string) { chmod(t, p, 0o400) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if why := tt.skip(); why != "" {
				t.Skip(why)
			}
			t.Parallel()
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "toolplane.db")
			// A node's file, stopped with its -wal and -shm in place: a
			// killed node leaves them.
			db, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `CREATE TABLE w (n INTEGER PRIMARY KEY); INSERT INTO w VALUES (1)`); err != nil {
				t.Fatal(err)
			}
			keep, err := db.Conn(ctx) // a connection still open keeps the -wal
			if err != nil {
				t.Fatal(err)
			}
			copyFile(t, path+tt.side, path+tt.side+".kept")
			keep.Close()
			db.Close()
			if err := os.Rename(path+tt.side+".kept", path+tt.side); err != nil {
				t.Fatal(err)
			}
			tt.prepare(t, path+tt.side)
			before := fileInfo(t, path+tt.side)

			db, err = Open(ctx, path)
			if err == nil {
				db.Close()
				t.Fatalf("Open accepted %s", filepath.Base(path+tt.side))
			}
			if !errors.Is(err, ErrSideFile) {
				t.Fatalf("Open: %v, want ErrSideFile", err)
			}
			if !strings.Contains(err.Error(), path+tt.side) {
				t.Errorf("the refusal does not name the file: %v", err)
			}
			if after := fileInfo(t, path+tt.side); after != before {
				t.Errorf("Open changed %s: %s, was %s", filepath.Base(path+tt.side), after, before)
			}
		})
	}
}

func needRoot(root bool) func() string {
	return func() string {
		if !root {
			return "giving a file to another user needs root"
		}
		return ""
	}
}

func needNotRoot(root bool) func() string {
	return func() string {
		if root {
			return "root writes any file"
		}
		return ""
	}
}

// chownOther gives the file at p to nobody (uid 65534).
func chownOther(t *testing.T, p string) {
	t.Helper()
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// fileInfo answers what a check must leave as it was: owner, mode, size.
func fileInfo(t *testing.T, p string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("uid %d mode %o size %d", st.Uid, st.Mode&0o777, st.Size)
}
