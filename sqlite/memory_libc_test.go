//go:build linux && (amd64 || arm64 || loong64 || ppc64le || s390x || riscv64 || 386 || arm)

package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"modernc.org/libc"
)

// rssAnon answers the process's resident anonymous memory, in bytes.
func rssAnon(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no RssAnon in /proc/self/status")
	return 0
}

// TestReleaseMemoryHandsBackWhatSQLiteFreed: the page caches of
// connections that read a database and closed stay resident in libc's
// allocator until ReleaseMemory hands them back. Not parallel: it reads
// the process's resident memory.
func TestReleaseMemoryHandsBackWhatSQLiteFreed(t *testing.T) {
	ctx := context.Background()
	db := openFilled(t)
	readAtOnce(t, db, 8, readAll)
	db.SetMaxIdleConns(0) // closes them, their memory back in libc's allocator
	debug.FreeOSMemory()
	before := rssAnon(t)
	if err := ReleaseMemory(); err != nil {
		t.Fatal(err)
	}
	after := rssAnon(t)
	t.Logf("resident anonymous memory %.1f → %.1f MB", float64(before)/(1<<20), float64(after)/(1<<20))
	if drop := before - after; drop < 2<<20 {
		t.Errorf("ReleaseMemory handed back %.1f MB of resident memory (%.1f → %.1f MB), want at least 2 MB of the closed connections' page caches",
			float64(drop)/(1<<20), float64(before)/(1<<20), float64(after)/(1<<20))
	}
	// The pool goes on: a connection opened afresh reads the table.
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 2000 {
		t.Errorf("count after the release = %d, %v; want 2000", n, err)
	}
}

// TestLinkedNamesAreLibcs pins releaseRetained's two go:linkname
// variables to libc's own allocator and the mutex its malloc holds. A
// libc that renamed either would still link (the declaration here then
// defines the name itself), and trimming the live allocator without its
// mutex would corrupt SQLite's memory; so a libc upgrade that breaks the
// pairing fails here: a malloc must wait while libcAllocatorMu is held,
// and libc.MemStat must read libcAllocator's fields.
func TestLinkedNamesAreLibcs(t *testing.T) {
	// The allocator: a mark written in libcAllocator's statistics field
	// (unused without the memory.counters build tag) reads back through
	// libc's own MemStat.
	const mark = 0x5eed_cafe
	libcAllocatorMu.Lock()
	kept := libcAllocator.Allocs
	libcAllocator.Allocs = mark
	libcAllocatorMu.Unlock()
	got := libc.MemStat().Allocs
	libcAllocatorMu.Lock()
	libcAllocator.Allocs = kept
	libcAllocatorMu.Unlock()
	if got != mark {
		t.Fatalf("libc.MemStat reads %#x, not the mark %#x written in libcAllocator: it is not libc's allocator", got, mark)
	}

	// The mutex: libc's malloc waits while libcAllocatorMu is held.
	libcAllocatorMu.Lock()
	done := make(chan uintptr, 1)
	go func() {
		tls := libc.NewTLS()
		defer tls.Close()
		done <- libc.Xmalloc(tls, 64)
	}()
	var p uintptr
	held := true
	select {
	case p = <-done:
		held = false
	case <-time.After(100 * time.Millisecond):
	}
	libcAllocatorMu.Unlock()
	if held {
		p = <-done
	}
	tls := libc.NewTLS()
	defer tls.Close()
	libc.Xfree(tls, p)
	if !held {
		t.Fatal("libc's malloc ran while libcAllocatorMu was held: it is not the mutex libc's allocator takes")
	}
}

// TestReleaseMemoryClosesIdleConnections checks that connections left
// idle in the pool (a node's heartbeat's, its sweep's, which are used too
// often to be closed for idleness) are closed and what they held (their
// page caches, filled here) handed back, and that the pool goes on: it
// reads through a connection opened afresh, and keeps idle connections
// again.
func TestReleaseMemoryClosesIdleConnections(t *testing.T) {
	ctx := context.Background()
	db := openFilled(t)
	const conns = 4
	// Back in the pool, idle, each with its page cache full; then what
	// earlier tests left released.
	readAtOnce(t, db, conns, readAll)
	if err := ReleaseMemory(); err != nil {
		t.Fatal(err)
	}
	debug.FreeOSMemory()
	readAtOnce(t, db, conns, readAll) // filled again: the release above emptied them
	before := rssAnon(t)
	if err := ReleaseMemory(); err != nil {
		t.Fatal(err)
	}
	after := rssAnon(t)
	t.Logf("resident anonymous memory %.1f → %.1f MB", float64(before)/(1<<20), float64(after)/(1<<20))
	if drop := before - after; drop < 2<<20 {
		t.Errorf("ReleaseMemory handed back %.1f MB of resident memory (%.1f → %.1f MB), want at least 2 MB of the idle connections' page caches",
			float64(drop)/(1<<20), float64(before)/(1<<20), float64(after)/(1<<20))
	}
	if got := db.Stats().OpenConnections; got != 0 {
		t.Errorf("%d connections open after the release, want none (all were idle)", got)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 2000 {
		t.Errorf("count after the release = %d, %v; want 2000", n, err)
	}
	if got := db.Stats().Idle; got != 1 {
		t.Errorf("%d connections idle after a read, want the one it opened kept", got)
	}
}

// readAll reads every row of openFilled's table.
const readAll = `SELECT sum(length(v)) FROM t`

// openFilled opens a store holding a table of 8 MB of rows, so that a
// full read fills a connection's 2 MB page cache.
func openFilled(t *testing.T) *sql.DB {
	t.Helper()
	ctx := t.Context()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "toolplane.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
		INSERT INTO t (id, v) SELECT i, randomblob(4000) FROM n`); err != nil {
		t.Fatal(err)
	}
	return db
}
