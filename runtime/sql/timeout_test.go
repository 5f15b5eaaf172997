package sqlruntime

import (
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// TestTimedOutStatementStopsOnTheServer proves that a statement whose call
// ran out of time stops on the database server too, by the time the call
// has answered (give or take the server's own bookkeeping): a statement
// left running holds a session, locks and a core for as long as it lasts,
// and a model that retries a slow call would pile them up. On MariaDB the
// driver only closes its connection, which a sleeping statement does not
// notice.
func TestTimedOutStatementStopsOnTheServer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		backend string
		effect  toolplane.Effect
		// stmt sleeps 40 s; MARK is replaced by a name unique to the run.
		stmt string
		// running counts the server's sessions running a statement holding
		// the mark, seen from the administrator's session.
		running string
	}{
		{"mysql", toolplane.EffectRead, `SELECT SLEEP(40) AS MARK`,
			`SELECT count(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()`},
		{"mysql", toolplane.EffectWrite, `UPDATE items SET note = SLEEP(40) WHERE name <> 'MARK'`,
			`SELECT count(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()`},
		{"postgres", toolplane.EffectRead, `SELECT pg_sleep(40) AS MARK`,
			`SELECT count(*) FROM pg_stat_activity WHERE query LIKE $1 AND state = 'active' AND pid <> pg_backend_pid()`},
		{"postgres", toolplane.EffectWrite, `UPDATE items SET note = 'MARK' WHERE pg_sleep(40) IS NOT NULL`,
			`SELECT count(*) FROM pg_stat_activity WHERE query LIKE $1 AND state = 'active' AND pid <> pg_backend_pid()`},
	}
	for _, tc := range tests {
		t.Run(tc.backend+"/"+string(tc.effect), func(t *testing.T) {
			t.Parallel()
			var be backend
			for _, b := range backends {
				if b.name == tc.backend {
					be = b
				}
			}
			f := open(t, be, Config{})
			f.insert("a")
			f.warm()
			mark := randomName()
			b, err := f.rt.Bind(tool(tc.effect, strings.ReplaceAll(tc.stmt, "MARK", mark), 0))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = f.run(b, nil, 2*time.Second)
			took := time.Since(start)
			if o := outcome(t, b, err); o.Result.Error == nil || o.Result.Error.Code != toolplane.CodeRetryableUpstream {
				t.Fatalf("outcome %+v (%v)", o, err)
			}
			// The deadline, then at most the kill's own bound (3 s): a
			// loaded machine stops a statement slowly, never not at all.
			if took > 5*time.Second {
				t.Fatalf("the call answered after %v", took)
			}
			// The statement is gone from the server within a second of the
			// answer.
			returned := time.Now()
			for {
				var n int
				if err := f.admin.QueryRow(tc.running, "%"+mark+"%").Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					t.Logf("%s: the call answered after %v; the statement was gone %v later", tc.backend, took.Round(time.Millisecond), time.Since(returned).Round(time.Millisecond))
					break
				}
				if time.Since(returned) > time.Second {
					t.Fatalf("the statement still runs on the server %v after its call answered (after %v)", time.Since(returned).Round(time.Millisecond), took.Round(time.Millisecond))
				}
				time.Sleep(20 * time.Millisecond)
			}
			if tc.effect == toolplane.EffectWrite && f.count("WHERE note IS NOT NULL") != 0 {
				t.Fatal("the stopped write was committed")
			}
		})
	}
}
