package sqlruntime

import (
	"database/sql"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/postgres/pgtest"
)

// roleCase is a database role a test creates, and the powers the runtime
// must find it holds (none for a least-privilege role).
type roleCase struct {
	name string
	// setup creates the role: statements run by the administrator, with
	// {role} standing for the role's name and {db} for the test's schema
	// or database.
	setup []string
	// want are powers the inspection must name; none: it must name none.
	want []string
}

// roleDatabase is one server the role cases run on: it creates a role
// from a case and answers the connection logging in as it.
type roleDatabase struct {
	backend string
	cases   []roleCase
	// open answers the administrator's handle, the test's schema or
	// database ({db}), a DSN for a role, and how to drop a role.
	open func(t *testing.T) (admin *sql.DB, db string, dsn func(role string) string, drop func(role string))
	// read is a read tool's statement the least-privilege role may run.
	read string
}

var roleDatabases = []roleDatabase{
	{
		backend: "postgres",
		read:    `SELECT count(*) AS n FROM items`,
		cases: []roleCase{
			{name: "least privilege", setup: []string{
				`CREATE ROLE {role} LOGIN`,
				`GRANT USAGE ON SCHEMA {db} TO {role}`,
				`GRANT SELECT, INSERT, UPDATE, DELETE ON {db}.items TO {role}`,
			}},
			{name: "superuser", setup: []string{`CREATE ROLE {role} LOGIN SUPERUSER`}, want: []string{"superuser"}},
			{name: "reads the server's files", setup: []string{
				`CREATE ROLE {role} LOGIN`, `GRANT USAGE ON SCHEMA {db} TO {role}`, `GRANT SELECT ON {db}.items TO {role}`,
				`GRANT pg_read_server_files TO {role}`,
			}, want: []string{"pg_read_server_files"}},
			{name: "member of a role that runs programs, without inheriting", setup: []string{
				`CREATE ROLE {role} LOGIN NOINHERIT`, `GRANT USAGE ON SCHEMA {db} TO {role}`, `GRANT SELECT ON {db}.items TO {role}`,
				`GRANT pg_execute_server_program, pg_write_server_files TO {role}`,
			}, want: []string{"pg_execute_server_program", "pg_write_server_files"}},
			{name: "may grant itself roles", setup: []string{
				`CREATE ROLE {role} LOGIN CREATEROLE`, `GRANT USAGE ON SCHEMA {db} TO {role}`, `GRANT SELECT ON {db}.items TO {role}`,
			}, want: []string{"CREATEROLE (may grant itself any role but superuser)"}},
			{name: "creates in its schema", setup: []string{
				`CREATE ROLE {role} LOGIN`, `GRANT USAGE, CREATE ON SCHEMA {db} TO {role}`, `GRANT SELECT ON {db}.items TO {role}`,
			}, want: []string{"CREATE on schema {db}"}},
		},
		open: func(t *testing.T) (*sql.DB, string, func(string) string, func(string)) {
			base := pgtest.DSN(t)
			schema := pgtest.Schema(t, base)
			admin, err := sql.Open("pgx", pgtest.InSchema(base, schema))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { admin.Close() })
			dsn := func(role string) string {
				u, err := url.Parse(pgtest.InSchema(base, schema))
				if err != nil {
					t.Fatal(err)
				}
				u.User = url.UserPassword(role, planted)
				return u.String()
			}
			drop := func(role string) {
				// Another test's pool may still hold a session of the role
				// for an instant; the role's grants go with DROP OWNED.
				admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role)
				admin.Exec(`DROP OWNED BY ` + role)
				if _, err := admin.Exec(`DROP ROLE ` + role); err != nil {
					t.Errorf("drop role %s: %v", role, err)
				}
			}
			return admin, schema, dsn, drop
		},
	},
	{
		backend: "mysql",
		read:    `SELECT count(*) AS n FROM items`,
		cases: []roleCase{
			{name: "least privilege", setup: []string{
				`CREATE USER '{role}'@'%'`, `GRANT SELECT, INSERT, UPDATE, DELETE ON {db}.* TO '{role}'@'%'`,
			}},
			{name: "file", setup: []string{
				`CREATE USER '{role}'@'%'`, `GRANT SELECT ON {db}.* TO '{role}'@'%'`, `GRANT FILE ON *.* TO '{role}'@'%'`,
			}, want: []string{"FILE ON *.*"}},
			{name: "super and process", setup: []string{
				`CREATE USER '{role}'@'%'`, `GRANT SELECT ON {db}.* TO '{role}'@'%'`, `GRANT SUPER, PROCESS ON *.* TO '{role}'@'%'`,
			}, want: []string{"PROCESS ON *.*", "SUPER ON *.*"}},
			{name: "reads every database", setup: []string{
				`CREATE USER '{role}'@'%'`, `GRANT SELECT ON *.* TO '{role}'@'%'`,
			}, want: []string{"SELECT ON *.*"}},
			{name: "reads the system database", setup: []string{
				`CREATE USER '{role}'@'%'`, `GRANT SELECT ON {db}.* TO '{role}'@'%'`, "GRANT SELECT (`User`, `Host`) ON mysql.user TO '{role}'@'%'",
			}, want: []string{"SELECT ON `mysql`.`user`"}},
			{name: "file through its default role", setup: []string{
				`CREATE ROLE {role}_r`, `GRANT FILE ON *.* TO {role}_r`,
				`CREATE USER '{role}'@'%'`, `GRANT SELECT ON {db}.* TO '{role}'@'%'`, `GRANT {role}_r TO '{role}'@'%'`, `SET DEFAULT ROLE {role}_r FOR '{role}'@'%'`,
			}, want: []string{"FILE ON *.*"}},
		},
		open: func(t *testing.T) (*sql.DB, string, func(string) string, func(string)) {
			name := randomName()
			root, err := sql.Open("mysql", mysqlRoot)
			if err != nil {
				t.Fatal(err)
			}
			root.SetMaxOpenConns(1) // CREATE USER, then the grants, on one session
			if _, err := root.Exec("CREATE DATABASE " + name); err != nil {
				root.Close()
				t.Skipf("no MariaDB at %s: %v", mysqlRoot, err)
			}
			t.Cleanup(func() {
				root.Exec("DROP DATABASE " + name)
				root.Close()
			})
			if _, err := root.Exec("USE " + name); err != nil {
				t.Fatal(err)
			}
			dsn := func(role string) string { return role + ":@tcp(127.0.0.1:3306)/" + name }
			drop := func(role string) {
				if _, err := root.Exec("DROP USER IF EXISTS '" + role + "'@'%'"); err != nil {
					t.Errorf("drop user %s: %v", role, err)
				}
				root.Exec("DROP ROLE IF EXISTS " + role + "_r")
			}
			return root, name, dsn, drop
		},
	},
}

// TestPrivilegedRoleIsRefused proves the structural defence against a
// tool reaching the database server's files: whatever a statement's check
// misses (a function created by one tool and called by another, a view of
// the server's configuration files), a role that holds such power is
// refused before the connection's first call, with the powers named to
// the operator, unless the connection says its operator accepts it; and a
// least-privilege role runs. Each case creates a real role on the server.
func TestPrivilegedRoleIsRefused(t *testing.T) {
	t.Parallel()
	for _, rd := range roleDatabases {
		for _, tc := range rd.cases {
			t.Run(rd.backend+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				admin, db, dsnOf, drop := rd.open(t)
				ddl := `CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))`
				if _, err := admin.Exec(ddl); err != nil {
					t.Fatal(err)
				}
				role := randomName()
				t.Cleanup(func() { drop(role) })
				for _, stmt := range tc.setup {
					stmt = strings.NewReplacer("{role}", role, "{db}", db).Replace(stmt)
					if _, err := admin.Exec(stmt); err != nil {
						t.Fatalf("%s: %v", stmt, err)
					}
				}
				want := make([]string, len(tc.want))
				for i, w := range tc.want {
					want[i] = strings.ReplaceAll(w, "{db}", db)
				}
				driver := map[string]string{"postgres": DriverPostgres, "mysql": DriverMySQL}[rd.backend]

				// At creation: the connections service asks Inspect.
				log := &syncbuf.Buffer{}
				rt := newRuntime(t, Config{Logger: slog.New(slog.NewJSONHandler(log, nil))})
				rel := released("con_role_"+role, driver, dsnOf(role))
				rel.Connection.Config.AllowPrivilegedRole = false
				powers, err := rt.Inspect(t.Context(), rel.Connection, rel.Secrets.DSN)
				if err != nil {
					t.Fatalf("Inspect: %v", err)
				}
				for _, w := range want {
					if !slices.Contains(powers, w) {
						t.Errorf("Inspect = %q, want it to name %q", powers, w)
					}
				}
				if len(want) == 0 && len(powers) > 0 {
					t.Errorf("Inspect = %q for a least-privilege role, want none", powers)
				}

				// At the first call: refused, unless the operator allowed it.
				b, err := rt.Bind(tool(toolplane.EffectRead, rd.read, 0))
				if err != nil {
					t.Fatal(err)
				}
				f := &fixture{t: t, rt: rt, rel: rel}
				out, err := f.run(b, nil, 10*time.Second)
				if len(want) == 0 {
					if err != nil {
						t.Fatalf("a least-privilege role's call: %v", err)
					}
					if rows := rowsOf(t, out); len(rows) != 1 {
						t.Fatalf("rows = %v", rows)
					}
					return
				}
				o := outcome(t, b, err)
				if o.Result.Error == nil || o.Result.Error.Code != toolplane.CodeUnavailable ||
					!strings.Contains(o.Result.Error.Message, "least-privilege") {
					t.Fatalf("a privileged role's call = %+v, %v; want unavailable naming a least-privilege role", out, err)
				}
				if !strings.Contains(log.String(), "powers beyond its data") || !strings.Contains(log.String(), want[0]) {
					t.Errorf("the operator's log does not name the powers %q:\n%s", want, log.String())
				}
				// Refused again on the next call: the refusal is not forgotten.
				if _, err := f.run(b, nil, 10*time.Second); err == nil {
					t.Fatal("a privileged role's second call ran")
				}

				// The operator's explicit acceptance, a new connection version.
				allowed := released(rel.Connection.ID, driver, dsnOf(role))
				allowed.Connection.Version = 2
				f.rel = allowed
				if _, err := f.run(b, nil, 10*time.Second); err != nil {
					t.Fatalf("a privileged role allowed by its operator: %v", err)
				}
				if !strings.Contains(log.String(), "allow_privileged_role") {
					t.Errorf("the operator's log does not warn of the accepted role:\n%s", log.String())
				}
			})
		}
	}
}

// TestInspectUnreachableIsAnError proves a role that cannot be inspected
// is said to be so (an error, never a clean bill), and the error holds no
// part of the connection string.
func TestInspectUnreachableIsAnError(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, Config{})
	for _, tc := range []struct{ driver, dsn string }{
		{DriverPostgres, "postgres://u:" + planted + "@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"},
		{DriverMySQL, "u:" + planted + "@tcp(127.0.0.1:1)/x?timeout=2s"},
	} {
		rel := released("con_gone", tc.driver, tc.dsn)
		powers, err := rt.Inspect(t.Context(), rel.Connection, rel.Secrets.DSN)
		if err == nil {
			t.Fatalf("%s: Inspect = %q, nil; want an error", tc.driver, powers)
		}
		if strings.Contains(err.Error(), planted) {
			t.Fatalf("%s: the error shows the password: %v", tc.driver, err)
		}
	}
	// SQLite has no role to inspect.
	rel := released("con_lite", DriverSQLite, "x.db")
	if powers, err := rt.Inspect(t.Context(), rel.Connection, rel.Secrets.DSN); err != nil || len(powers) > 0 {
		t.Fatalf("SQLite: Inspect = %q, %v", powers, err)
	}
}

// TestGrantPowers reads lines of SHOW GRANTS as MariaDB and MySQL print
// them.
func TestGrantPowers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want []string
	}{
		{"GRANT USAGE ON *.* TO `app`@`%` IDENTIFIED BY PASSWORD '*D821809F681A40A6E379B50D0463EFAE20BDD122'", nil},
		{"GRANT SELECT, INSERT, UPDATE, DELETE ON `shop`.* TO `app`@`%`", nil},
		{"GRANT FILE ON *.* TO `app`@`%`", []string{"FILE ON *.*"}},
		{"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION", []string{"ALL PRIVILEGES ON *.*"}},
		{"GRANT SELECT, PROCESS, SUPER ON *.* TO `app`@`%`", []string{"SELECT ON *.*", "PROCESS ON *.*", "SUPER ON *.*"}},
		{"GRANT BACKUP_ADMIN,CONNECTION_ADMIN ON *.* TO `app`@`%`", []string{"BACKUP_ADMIN ON *.*", "CONNECTION_ADMIN ON *.*"}},
		{"GRANT SELECT (`User`, `Host`), INSERT ON `mysql`.`user` TO `app`@`%`", []string{"SELECT ON `mysql`.`user`", "INSERT ON `mysql`.`user`"}},
		{"GRANT SELECT ON `mysql`.* TO PUBLIC", []string{"SELECT ON `mysql`.*"}},
		{"GRANT SELECT ON `%`.* TO `app`@`%`", []string{"SELECT ON `%`.*"}},
		{"GRANT SELECT ON `my_ql`.* TO `app`@`%`", []string{"SELECT ON `my_ql`.*"}},
		{"GRANT SELECT ON `my\\_ql`.* TO `app`@`%`", nil},
		{"GRANT SELECT ON `mysqlx`.* TO `app`@`%`", nil},
		{"GRANT EXECUTE ON PROCEDURE `mysql`.`p` TO `app`@`%`", []string{"EXECUTE ON `mysql`.`p`"}},
		{"GRANT `reader` TO `app`@`%`", nil},
		{"GRANT PROXY ON ''@'%' TO 'app'@'%'", nil},
		{"SET DEFAULT ROLE `reader` FOR `app`@`%`", nil},
	}
	for _, tc := range tests {
		if got := grantPowers(tc.line); !slices.Equal(got, tc.want) {
			t.Errorf("grantPowers(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestServerFilesUnreachableThroughAFunction is the route the statement
// check cannot see: a function whose quoted body reads the server's files,
// called by a read tool whose own text is a plain SELECT. On a connection
// logging in as a superuser it answered the file; now the role is refused
// before the statement runs.
func TestServerFilesUnreachableThroughAFunction(t *testing.T) {
	t.Parallel()
	admin, schema, dsnOf, drop := roleDatabases[0].open(t)
	role := randomName()
	t.Cleanup(func() { drop(role) })
	for _, stmt := range []string{
		`CREATE ROLE ` + role + ` LOGIN SUPERUSER`,
		`CREATE FUNCTION ` + schema + `.f() RETURNS text LANGUAGE sql AS 'SELECT pg_read_file(''PG_VERSION'')'`,
	} {
		if _, err := admin.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	rt := newRuntime(t, Config{})
	d := tool(toolplane.EffectRead, `SELECT f() AS v`, 0)
	if problems := Check(d); len(problems) > 0 {
		t.Fatalf("the read passes the check, as it did: %v", problems)
	}
	b, err := rt.Bind(d)
	if err != nil {
		t.Fatal(err)
	}
	rel := released("con_fn_"+role, DriverPostgres, dsnOf(role))
	rel.Connection.Config.AllowPrivilegedRole = false
	f := &fixture{t: t, rt: rt, rel: rel}
	out, err := f.run(b, nil, 10*time.Second)
	if err == nil {
		t.Fatalf("a read tool read the server's PG_VERSION file through a function: %v", out)
	}
	if o := outcome(t, b, err); o.Result.Error == nil || o.Result.Error.Code != toolplane.CodeUnavailable {
		t.Fatalf("outcome %+v (%v)", o, err)
	}
}
