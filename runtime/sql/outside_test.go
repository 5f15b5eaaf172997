package sqlruntime

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// TestStatementReachingOutsideTheDatabaseIsRefused proves that a tool's
// statement cannot write a file on the database server, read-only
// transaction or not: neither MariaDB (INTO OUTFILE, INTO DUMPFILE) nor
// PostgreSQL (lo_export) refuses it there, and the test databases' users
// may write files. The runtime refuses to bind such a statement, naming
// the clause, and nothing is written.
func TestStatementReachingOutsideTheDatabaseIsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		backend string
		effect  toolplane.Effect
		// stmt writes the file named %s (PostgreSQL: the large object %o
		// into it); want names the clause.
		stmt, want string
	}{
		{"mysql", toolplane.EffectRead, `SELECT 'leaked' AS v INTO OUTFILE '%s'`, "INTO OUTFILE"},
		{"mysql", toolplane.EffectRead, `SELECT 'leaked' AS v INTO DUMPFILE '%s'`, "INTO DUMPFILE"},
		{"mysql", toolplane.EffectWrite, `SELECT 'leaked' AS v INTO OUTFILE '%s'`, "INTO OUTFILE"},
		{"mysql", toolplane.EffectRead, `SELECT 'leaked' AS v /*!50000 INTO OUTFILE '%s' */`, "/*! */"},
		{"postgres", toolplane.EffectRead, `SELECT lo_export(%o, '%s') AS n`, "lo_export()"},
	}
	for _, tc := range tests {
		t.Run(tc.backend+"/"+tc.want+"/"+string(tc.effect), func(t *testing.T) {
			t.Parallel()
			var be *backend
			for i := range backends {
				if backends[i].name == tc.backend {
					be = &backends[i]
				}
			}
			f := open(t, *be, Config{})
			// Where the server would write the file, as the server names
			// it and as this test finds it (the server is local).
			name := randomName() + ".out"
			var serverPath, localPath string
			if tc.backend == "mysql" {
				// A relative name is the database's own directory.
				var dir, db string
				if err := f.admin.QueryRow(`SELECT @@datadir, DATABASE()`).Scan(&dir, &db); err != nil {
					t.Fatal(err)
				}
				serverPath, localPath = name, filepath.Join(dir, db, name)
			} else {
				serverPath = filepath.Join(os.TempDir(), name)
				localPath = serverPath
				var oid string
				if err := f.admin.QueryRow(`SELECT CAST(lo_from_bytea(0, 'leaked') AS TEXT)`).Scan(&oid); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.admin.Exec(`SELECT lo_unlink(CAST($1 AS OID))`, oid) })
				tc.stmt = strings.Replace(tc.stmt, "%o", oid, 1)
			}
			t.Cleanup(func() { os.Remove(localPath) })
			d := tool(tc.effect, strings.Replace(tc.stmt, "%s", serverPath, 1), 0)
			b, err := f.rt.Bind(d)
			if err == nil {
				_, rerr := f.run(b, nil, 5*time.Second)
				if _, serr := os.Stat(localPath); serr == nil {
					t.Fatalf("the statement was bound, and the call wrote %s on the database server", localPath)
				}
				t.Fatalf("the statement was bound (its call: %v)", rerr)
			}
			if !errors.Is(err, toolplane.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("bind: %v; want ErrInvalid naming %s", err, tc.want)
			}
			if _, serr := os.Stat(localPath); serr == nil {
				t.Fatalf("%s was written", localPath)
			}
		})
	}
}
