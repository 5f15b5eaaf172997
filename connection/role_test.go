package connection_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/postgres/pgtest"
	sqlruntime "github.com/toolplane/toolplane/runtime/sql"
)

// dbRole is a database role created for one test on a real server: the
// DSN logging in as it.
type dbRole struct {
	driver, dsn string
}

// pgRole creates a PostgreSQL role of a unique name with the options
// given (SUPERUSER, or none: a role that may only read one table), dropped
// when t ends.
func pgRole(t *testing.T, options string) dbRole {
	t.Helper()
	base := pgtest.DSN(t)
	schema := pgtest.Schema(t, base)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	name := uniqueName()
	for _, stmt := range []string{
		`CREATE ROLE ` + name + ` LOGIN ` + options,
		`CREATE TABLE ` + schema + `.items (id INT PRIMARY KEY)`,
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + name,
		`GRANT SELECT ON ` + schema + `.items TO ` + name,
	} {
		if _, err := admin.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, name)
		admin.Exec(`DROP OWNED BY ` + name)
		if _, err := admin.Exec(`DROP ROLE ` + name); err != nil {
			t.Errorf("drop role %s: %v", name, err)
		}
	})
	u, err := url.Parse(pgtest.InSchema(base, schema))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, secretToken("pw"))
	return dbRole{driver: "postgres", dsn: u.String()}
}

// mysqlRole creates a MariaDB user of a unique name that may read one
// database, and holds the global privileges given (FILE, or none), dropped
// when t ends. It skips t when no MariaDB runs.
func mysqlRole(t *testing.T, global string) dbRole {
	t.Helper()
	root, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	name := uniqueName()
	if _, err := root.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Skipf("no MariaDB at 127.0.0.1:3306: %v", err)
	}
	stmts := []string{`CREATE USER '` + name + `'@'%'`, `GRANT SELECT ON ` + name + `.* TO '` + name + `'@'%'`}
	if global != "" {
		stmts = append(stmts, `GRANT `+global+` ON *.* TO '`+name+`'@'%'`)
	}
	t.Cleanup(func() {
		root.Exec(`DROP USER IF EXISTS '` + name + `'@'%'`)
		root.Exec(`DROP DATABASE ` + name)
	})
	for _, stmt := range stmts {
		if _, err := root.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return dbRole{driver: "mysql", dsn: name + ":@tcp(127.0.0.1:3306)/" + name}
}

func uniqueName() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "tp_" + hex.EncodeToString(b)
}

// TestCreateRefusesAPrivilegedDatabaseRole proves a SQL connection whose
// role holds powers beyond its data (a PostgreSQL superuser, a MariaDB
// user with FILE) is refused at creation, naming the powers and the way
// out, and stores nothing; that the operator's explicit acceptance is
// recorded on the connection and in the change log with the powers it
// accepted; and that a least-privilege role is created, its inspection
// recorded. Each role is real, created on the server for the test.
func TestCreateRefusesAPrivilegedDatabaseRole(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		role func(t *testing.T) dbRole
		// power is what the refusal must name; "" for a least-privilege
		// role, which is created.
		power string
	}{
		{"postgres superuser", func(t *testing.T) dbRole { return pgRole(t, "SUPERUSER") }, "superuser"},
		{"postgres reads server files", func(t *testing.T) dbRole { return pgRole(t, "IN ROLE pg_read_server_files") }, "pg_read_server_files"},
		{"postgres least privilege", func(t *testing.T) dbRole { return pgRole(t, "") }, ""},
		{"mariadb file", func(t *testing.T) dbRole { return mysqlRole(t, "FILE") }, "FILE ON *.*"},
		{"mariadb least privilege", func(t *testing.T) dbRole { return mysqlRole(t, "") }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			role := tc.role(t)
			e := newEnv(t)
			rt := sqlruntime.New(sqlruntime.Config{})
			t.Cleanup(func() { rt.Close() })
			s := e.serviceOf(connection.Config{Store: e.store, Keys: e.keys, Node: "n1", Roles: rt})
			in := connection.Input{Name: "db", Provider: "db", Kind: toolplane.ConnectionStatic,
				Config: toolplane.ConnectionConfig{Driver: role.driver}, Secrets: toolplane.Secrets{DSN: toolplane.SecretString(role.dsn)}}
			if c, _ := url.Parse(role.dsn); c != nil && c.User != nil {
				if pw, ok := c.User.Password(); ok {
					e.plant(pw)
				}
			}

			c, err := s.Create(t.Context(), admin, in)
			e.saw(err)
			if tc.power == "" {
				if err != nil {
					t.Fatalf("a least-privilege role: Create = %v", err)
				}
				if rec := createRecord(t, e, c.ID); rec["role_checked"] != true || rec["privileged_powers"] != nil {
					t.Fatalf("the change log records %v, want the role inspected and no powers", rec)
				}
				return
			}
			var inv *connection.InvalidError
			if c != nil || !errors.As(err, &inv) || !errors.Is(err, toolplane.ErrInvalid) ||
				!strings.Contains(inv.Why, tc.power) || !strings.Contains(inv.Why, "allow_privileged_role") || !strings.Contains(inv.Why, "least-privilege") {
				t.Fatalf("Create = %v, %v; want an InvalidError naming %q and the way out", c, err, tc.power)
			}
			if all, _, _ := e.store.ListConnections(t.Context(), org, toolplane.ConnectionFilter{}, "", 10); len(all) != 0 {
				t.Fatal("a refused connection was stored")
			}

			// The operator's explicit acceptance: created, and recorded.
			in.Config.AllowPrivilegedRole = true
			c = e.create(s, admin, in)
			if !c.Config.AllowPrivilegedRole {
				t.Fatalf("the answer does not show the acceptance: %+v", c.Config)
			}
			got, err := s.Get(t.Context(), admin, c.ID)
			if err != nil || !got.Config.AllowPrivilegedRole {
				t.Fatalf("Get = %+v, %v; want the acceptance shown", got, err)
			}
			rec := createRecord(t, e, c.ID)
			powers, _ := rec["privileged_powers"].([]any)
			if rec["allow_privileged_role"] != true || rec["role_checked"] != true || len(powers) == 0 || !strings.Contains(strings.ToLower(jsonText(powers)), strings.ToLower(tc.power)) {
				t.Fatalf("the change log records %v, want the acceptance and the powers", rec)
			}
			if !strings.Contains(e.logs.String(), "allow_privileged_role") {
				t.Errorf("the operator's log does not tell of the accepted role:\n%s", e.logs.String())
			}
		})
	}
}

// TestCreateWithAnUnreachableDatabaseRecordsTheRoleUnchecked proves a SQL
// connection whose database cannot be reached at creation is created (the
// database may come later), its role recorded as not inspected and the
// operator told; the runtime inspects it before the first call.
func TestCreateWithAnUnreachableDatabaseRecordsTheRoleUnchecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rt := sqlruntime.New(sqlruntime.Config{})
	t.Cleanup(func() { rt.Close() })
	s := e.serviceOf(connection.Config{Store: e.store, Keys: e.keys, Node: "n1", Roles: rt})
	pw := secretToken("pw")
	c := e.create(s, admin, connection.Input{Name: "db", Provider: "db", Kind: toolplane.ConnectionStatic,
		Config:  toolplane.ConnectionConfig{Driver: "postgres"},
		Secrets: toolplane.Secrets{DSN: toolplane.SecretString("postgres://u:" + pw + "@127.0.0.1:1/x?connect_timeout=2")}})
	if rec := createRecord(t, e, c.ID); rec["role_checked"] != false {
		t.Fatalf("the change log records %v, want the role not inspected", rec)
	}
	if !strings.Contains(e.logs.String(), "could not be inspected") {
		t.Fatalf("the operator was not told:\n%s", e.logs.String())
	}
}

// createRecord answers the detail of the connection.create change of id.
func createRecord(t *testing.T, e *env, id string) map[string]any {
	t.Helper()
	chs, _, err := e.store.ListChanges(t.Context(), org, "connection.create", id, "", 10)
	if err != nil || len(chs) != 1 {
		t.Fatalf("changes %v, %v", chs, err)
	}
	var d map[string]any
	if err := json.Unmarshal(chs[0].Detail, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
