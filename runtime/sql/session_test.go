package sqlruntime

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// TestStatementLeavesNothingOnThePooledSession proves that what one call's
// statement sets on its database session ends with the call: a lock held
// by the session (PostgreSQL's advisory locks, MySQL's named locks)
// outlives a transaction and would keep blocking others, and a setting
// changed for the session would change how the next call through the same
// pooled connection runs. A read tool's statement can do either, however
// read-only its transaction.
func TestStatementLeavesNothingOnThePooledSession(t *testing.T) {
	t.Parallel()
	var b [4]byte
	rand.Read(b[:])
	key := int64(binary.BigEndian.Uint32(b[:]) & 0x7fffffff)
	lockName := randomName()
	tests := []struct {
		backend string
		name    string
		effect  toolplane.Effect
		// stmt is the call that sets something on its session; held
		// answers, from the administrator's session, whether it still
		// holds.
		stmt string
		held func(t *testing.T, f *fixture) bool
	}{
		{"postgres", "read takes an advisory lock", toolplane.EffectRead, `SELECT pg_advisory_lock(:key) IS NULL AS locked`,
			func(t *testing.T, f *fixture) bool { return !f.scanBool(`SELECT pg_try_advisory_lock($1)`, key) }},
		{"postgres", "write takes an advisory lock", toolplane.EffectWrite, `SELECT pg_advisory_lock(:key) IS NULL AS locked`,
			func(t *testing.T, f *fixture) bool { return !f.scanBool(`SELECT pg_try_advisory_lock($1)`, key) }},
		{"postgres", "write changes the search path", toolplane.EffectWrite, `SELECT set_config('search_path', 'nowhere', false) AS s`,
			func(t *testing.T, f *fixture) bool {
				_, err := f.call(tool(toolplane.EffectRead, `SELECT count(*) AS n FROM items`, 0), nil, 5*time.Second)
				return err != nil
			}},
		{"mysql", "read takes a named lock", toolplane.EffectRead, `SELECT GET_LOCK(:name, 0) AS got`,
			func(t *testing.T, f *fixture) bool { return !f.scanBool(`SELECT IS_FREE_LOCK(?)`, lockName) }},
		{"mysql", "write takes a named lock", toolplane.EffectWrite, `SELECT GET_LOCK(:name, 0) AS got`,
			func(t *testing.T, f *fixture) bool { return !f.scanBool(`SELECT IS_FREE_LOCK(?)`, lockName) }},
		{"mysql", "read sets a user variable", toolplane.EffectRead, `SELECT @tp_left := :name AS v`, userVariableLeft},
		{"mysql", "write sets a user variable", toolplane.EffectWrite, `SELECT @tp_left := :name AS v`, userVariableLeft},
		{"mysql", "write creates a temporary table", toolplane.EffectWrite, `CREATE TEMPORARY TABLE tp_left (v INT)`,
			func(t *testing.T, f *fixture) bool {
				_, err := f.call(tool(toolplane.EffectRead, `SELECT count(*) AS n FROM tp_left`, 0), nil, 5*time.Second)
				return err == nil
			}},
	}
	for _, tc := range tests {
		t.Run(tc.backend+"/"+tc.name, func(t *testing.T) {
			var be *backend
			for i := range backends {
				if backends[i].name == tc.backend {
					be = &backends[i]
				}
			}
			// One pooled connection: the next call runs on the session
			// the first one used.
			f := open(t, *be, Config{MaxOpenConns: 1})
			if tc.backend == "postgres" {
				t.Cleanup(func() { f.admin.Exec(`SELECT pg_advisory_unlock_all()`) })
			}
			before := f.sessionID()
			d := tool(tc.effect, tc.stmt, 0, "key", "name")
			if _, err := f.call(d, map[string]any{"key": key, "name": lockName}, 5*time.Second); err != nil {
				t.Fatalf("call: %v", err)
			}
			if tc.held(t, f) {
				t.Fatal("what the statement set on its session outlived the call")
			}
			// A PostgreSQL session is reset, not thrown away: the pool
			// keeps serving calls on it. A MySQL session cannot be reset
			// through its driver and is closed instead.
			after := f.sessionID()
			if kept := tc.backend == "postgres"; kept != (after == before) {
				t.Fatalf("the call ran on session %s and the next on %s; want the session kept: %v", before, after, kept)
			}
		})
	}
}

// userVariableLeft answers whether the next call through the pool still
// sees the user variable @tp_left.
func userVariableLeft(t *testing.T, f *fixture) bool {
	out, err := f.call(tool(toolplane.EffectRead, `SELECT @tp_left IS NOT NULL AS v`, 0), nil, 5*time.Second)
	if err != nil {
		t.Fatalf("read the user variable: %v", err)
	}
	return fmt.Sprint(rowsOf(t, out)[0]["v"]) != "0"
}

// sessionID answers the database session the runtime's next call runs
// on.
func (f *fixture) sessionID() string {
	f.t.Helper()
	stmt := `SELECT CAST(pg_backend_pid() AS TEXT) AS id`
	if f.be.name == "mysql" {
		stmt = `SELECT CAST(CONNECTION_ID() AS CHAR) AS id`
	}
	out, err := f.call(tool(toolplane.EffectRead, stmt, 0), nil, 5*time.Second)
	if err != nil {
		f.t.Fatalf("session id: %v", err)
	}
	return fmt.Sprint(rowsOf(f.t, out)[0]["id"])
}

// scanBool answers the administrator's query's one boolean.
func (f *fixture) scanBool(query string, args ...any) bool {
	f.t.Helper()
	var v bool
	if err := f.admin.QueryRow(query, args...).Scan(&v); err != nil {
		f.t.Fatalf("%s: %v", query, err)
	}
	return v
}
