package sqlruntime

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/postgres/pgtest"
)

// planted is a password written into every PostgreSQL connection string
// the tests use (the test server trusts loopback, so it is never
// checked): no error or answer may ever show it.
const planted = "Pl4nted-pw-7c1e9"

// mysqlRoot is the test MariaDB server's administrator DSN.
const mysqlRoot = "root@tcp(127.0.0.1:3306)/"

// backend is one database the same cases run on.
type backend struct {
	name string
	// ddl creates the items table; the id is generated.
	ddl string
	// sleepRead and sleepWrite run far past any test's deadline.
	sleepRead, sleepWrite string
	// nul reports whether the database stores a NUL in text (PostgreSQL
	// refuses it).
	nul bool
	// open answers a runtime, the connection a call releases, and an
	// administrator's handle on the same database.
	open func(t testing.TB, cfg Config) (*Runtime, *toolplane.Released, *sql.DB)
}

func randomName() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "tp_" + hex.EncodeToString(b)
}

// testOrg is the organization of the tests' connections.
const testOrg = "acme"

// orgDir answers a SQLite directory for the tests (the runtime's
// SQLiteDir) and, inside it, the test organization's own directory, where
// its files must be.
func orgDir(t testing.TB) (root, org string) {
	root = t.TempDir()
	org = filepath.Join(root, testOrg)
	if err := os.Mkdir(org, 0o700); err != nil {
		t.Fatal(err)
	}
	return root, org
}

// released answers the connection a call releases. The backends log in
// as the servers' administrators (to create and drop what each test
// needs), so their connections accept a privileged role; role_test.go
// tests the refusal of one, and the acceptance of a least-privilege role.
func released(id, driver, dsn string) *toolplane.Released {
	return &toolplane.Released{
		Connection: &toolplane.Connection{ID: id, OrganizationID: testOrg, Version: 1, Config: toolplane.ConnectionConfig{Driver: driver, AllowPrivilegedRole: true}},
		Secrets:    toolplane.Secrets{DSN: toolplane.SecretString(dsn)},
	}
}

func newRuntime(t testing.TB, cfg Config) *Runtime {
	r := New(cfg)
	t.Cleanup(func() { r.Close() })
	return r
}

var backends = []backend{
	{
		name:       "postgres",
		ddl:        `CREATE TABLE items (id SERIAL PRIMARY KEY, name VARCHAR(200) NOT NULL UNIQUE, note TEXT, qty INTEGER CHECK (qty >= 0), price NUMERIC(10,2))`,
		sleepRead:  `SELECT pg_sleep(30)`,
		sleepWrite: `UPDATE items SET note = 'slept' WHERE pg_sleep(30) IS NOT NULL`,
		open: func(t testing.TB, cfg Config) (*Runtime, *toolplane.Released, *sql.DB) {
			base := pgtest.DSN(t)
			schema := pgtest.Schema(t, base)
			admin, err := sql.Open("pgx", pgtest.InSchema(base, schema))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { admin.Close() })
			dsn := strings.Replace(pgtest.InSchema(base, schema), "postgres@", "postgres:"+planted+"@", 1)
			return newRuntime(t, cfg), released("con_pg_"+schema, DriverPostgres, dsn), admin
		},
	},
	{
		name:       "mysql",
		ddl:        `CREATE TABLE items (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(200) NOT NULL UNIQUE, note TEXT, qty INT CHECK (qty >= 0), price DECIMAL(10,2)) ENGINE=InnoDB`,
		sleepRead:  `SELECT SLEEP(30)`,
		sleepWrite: `UPDATE items SET note = SLEEP(30)`,
		nul:        true,
		open: func(t testing.TB, cfg Config) (*Runtime, *toolplane.Released, *sql.DB) {
			name := randomName()
			root, err := sql.Open("mysql", mysqlRoot)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := root.Exec("CREATE DATABASE " + name); err != nil {
				root.Close()
				t.Skipf("no MariaDB at %s: %v", mysqlRoot, err)
			}
			t.Cleanup(func() {
				root.Exec("DROP DATABASE " + name)
				root.Close()
			})
			admin, err := sql.Open("mysql", mysqlRoot+name)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { admin.Close() })
			return newRuntime(t, cfg), released("con_my_"+name, DriverMySQL, mysqlRoot+name), admin
		},
	},
	{
		name:       "sqlite",
		ddl:        `CREATE TABLE items (id INTEGER PRIMARY KEY, name VARCHAR(200) NOT NULL UNIQUE, note TEXT, qty INTEGER CHECK (qty >= 0), price NUMERIC)`,
		sleepRead:  `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c`,
		sleepWrite: `UPDATE items SET note = (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c)`,
		nul:        true,
		open: func(t testing.TB, cfg Config) (*Runtime, *toolplane.Released, *sql.DB) {
			root, dir := orgDir(t)
			path := filepath.Join(dir, "org.db")
			admin, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { admin.Close() })
			if _, err := admin.Exec("PRAGMA journal_mode=WAL"); err != nil {
				t.Fatal(err)
			}
			cfg.SQLiteDir = root
			return newRuntime(t, cfg), released("con_lite_"+randomName(), DriverSQLite, "org.db"), admin
		},
	},
}

// tool builds a definition bound to stmt whose input schema declares
// props.
func tool(effect toolplane.Effect, stmt string, maxRows int, props ...string) *toolplane.Definition {
	p := map[string]any{}
	for _, name := range props {
		p[name] = map[string]any{}
	}
	schema, _ := json.Marshal(map[string]any{"type": "object", "properties": p})
	return &toolplane.Definition{
		Name: "db.tool", Version: "1.0.0", Effect: effect, Connection: "warehouse",
		InputSchema: schema, Binding: toolplane.Binding{SQL: &toolplane.SQLBinding{Statement: stmt, MaxRows: maxRows}},
	}
}

// fixture is one backend opened for one test.
type fixture struct {
	t     *testing.T
	rt    *Runtime
	rel   *toolplane.Released
	admin *sql.DB
	nul   bool
	be    backend
}

func open(t *testing.T, be backend, cfg Config) *fixture {
	rt, rel, admin := be.open(t, cfg)
	if _, err := admin.Exec(be.ddl); err != nil {
		t.Fatalf("create items: %v", err)
	}
	return &fixture{t: t, rt: rt, rel: rel, admin: admin, nul: be.nul, be: be}
}

// call binds d (checked) and runs it with args under a deadline.
func (f *fixture) call(d *toolplane.Definition, args map[string]any, deadline time.Duration) (any, error) {
	f.t.Helper()
	b, err := f.rt.Bind(d)
	if err != nil {
		f.t.Fatalf("bind %q: %v", d.Binding.SQL.Statement, err)
	}
	return f.run(b, args, deadline)
}

func (f *fixture) run(b *handler.Binding, args map[string]any, deadline time.Duration) (any, error) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var in any = args
	if args == nil {
		in = map[string]any{}
	}
	out, err := b.Invoke(ctx, handler.Call{Tool: "db.tool", Version: "1.0.0", Released: f.rel}, in)
	noSecret(f.t, f.rel, out, err, b)
	return out, err
}

// noSecret fails t when the connection string or its password shows in
// an answer, an error, or the outcome the invoker would derive.
func noSecret(t *testing.T, rel *toolplane.Released, out any, err error, b *handler.Binding) {
	t.Helper()
	var texts []string
	if out != nil {
		j, _ := json.Marshal(out)
		texts = append(texts, string(j))
	}
	if err != nil {
		o := b.Classify(err)
		texts = append(texts, err.Error(), fmt.Sprintf("%+v", err), o.Reason)
		if o.Result.Error != nil {
			texts = append(texts, o.Result.Error.Message)
		}
	}
	dsn := rel.Secrets.DSN.Reveal()
	for _, s := range texts {
		if strings.Contains(s, planted) || (len(dsn) > 8 && strings.Contains(s, dsn)) {
			t.Fatalf("a secret leaked into %q", s)
		}
	}
}

// warm runs a read and a write first, so the connections a timed test
// uses are open and its deadline is the statement's alone.
func (f *fixture) warm() {
	f.t.Helper()
	if _, err := f.call(tool(toolplane.EffectRead, `SELECT 1 AS one`, 0), nil, 10*time.Second); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.call(tool(toolplane.EffectWrite, `UPDATE items SET qty = qty WHERE 1 = 0`, 0), nil, 10*time.Second); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) count(where string) int {
	f.t.Helper()
	var n int
	if err := f.admin.QueryRow("SELECT count(*) FROM items " + where).Scan(&n); err != nil {
		f.t.Fatalf("count items: %v", err)
	}
	return n
}

func (f *fixture) insert(names ...string) {
	f.t.Helper()
	for _, n := range names {
		if _, err := f.admin.Exec("INSERT INTO items (name, qty) VALUES ('" + n + "', 1)"); err != nil {
			f.t.Fatalf("insert %s: %v", n, err)
		}
	}
}

// outcome is how the invoker would end a call that answered err.
func outcome(t *testing.T, b *handler.Binding, err error) handler.Outcome {
	t.Helper()
	if err == nil {
		t.Fatal("the call answered no error")
	}
	return b.Classify(err)
}

func rowsOf(t *testing.T, out any) []map[string]any {
	t.Helper()
	m, ok := out.(map[string]any)
	if !ok {
		t.Fatalf("answer %#v is not an object", out)
	}
	list, ok := m["rows"].([]any)
	if !ok {
		t.Fatalf("answer %#v has no rows", out)
	}
	rows := make([]map[string]any, len(list))
	for i, r := range list {
		rows[i] = r.(map[string]any)
	}
	return rows
}

func TestRuntime(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, open(t, be, Config{}))
				})
			}
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, f *fixture)
}{
	{"read cuts at max rows", func(t *testing.T, f *fixture) {
		f.insert("a", "b", "c", "d", "e")
		stmt := `SELECT id, name, qty FROM items WHERE qty >= :min ORDER BY id`
		for _, tc := range []struct {
			max, want int
			cut       bool
		}{{3, 3, true}, {5, 5, false}, {10, 5, false}, {0, 5, false}} {
			d := tool(toolplane.EffectRead, stmt, tc.max, "min")
			out, err := f.call(d, map[string]any{"min": json.Number("1")}, 5*time.Second)
			if err != nil {
				t.Fatalf("max %d: %v", tc.max, err)
			}
			rows := rowsOf(t, out)
			m := out.(map[string]any)
			if len(rows) != tc.want || m["truncated"] != tc.cut || m["row_count"] != json64(int64(tc.want)) {
				t.Fatalf("max %d: %d rows, truncated %v, row_count %v; want %d, %v", tc.max, len(rows), m["truncated"], m["row_count"], tc.want, tc.cut)
			}
			if rows[0]["name"] != "a" || rows[0]["qty"] != json.Number("1") {
				t.Fatalf("first row %#v", rows[0])
			}
		}
	}},
	{"read-only transaction refuses a write", func(t *testing.T, f *fixture) {
		f.insert("a")
		// A read whose statement writes passes no check; the runtime's
		// own transaction must refuse it anyway.
		d := tool(toolplane.EffectRead, `DELETE FROM items WHERE name = :name`, 0, "name")
		b, err := f.rt.bind(d)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.run(b, map[string]any{"name": "a"}, 5*time.Second)
		o := outcome(t, b, err)
		if o.Kind != handler.Release || o.Result.Error.Code != toolplane.CodeUnavailable || !strings.Contains(o.Result.Error.Message, "read tool") {
			t.Fatalf("outcome %+v (%v)", o, err)
		}
		if f.count("") != 1 {
			t.Fatal("the read deleted a row")
		}
	}},
	{"write commits", func(t *testing.T, f *fixture) {
		d := tool(toolplane.EffectWrite, `INSERT INTO items (name, note, qty, price) VALUES (:name, :note, :qty, :price)`, 0, "name", "note", "qty", "price")
		out, err := f.call(d, map[string]any{"name": "widget", "qty": json.Number("4"), "price": json.Number("12.50")}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if out.(map[string]any)["rows_affected"] != json.Number("1") {
			t.Fatalf("answer %#v", out)
		}
		if f.count("WHERE name = 'widget' AND note IS NULL AND qty = 4 AND price = 12.5") != 1 {
			t.Fatal("the row was not committed as sent (an absent argument binds NULL)")
		}
		read := tool(toolplane.EffectRead, `SELECT price FROM items WHERE name = :name`, 0, "name")
		out, err = f.call(read, map[string]any{"name": "widget"}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if p := rowsOf(t, out)[0]["price"]; p != json.Number("12.50") && p != json.Number("12.5") {
			t.Fatalf("price read back as %#v", p)
		}
	}},
	{"write answers RETURNING rows", func(t *testing.T, f *fixture) {
		d := tool(toolplane.EffectWrite, `INSERT INTO items (name, qty) VALUES (:name, :qty) RETURNING id, name`, 0, "name", "qty")
		out, err := f.call(d, map[string]any{"name": "gadget", "qty": json.Number("2")}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		rows := rowsOf(t, out)
		if len(rows) != 1 || rows[0]["name"] != "gadget" || out.(map[string]any)["rows_affected"] != json.Number("1") {
			t.Fatalf("answer %#v", out)
		}
		if _, ok := rows[0]["id"].(json.Number); !ok {
			t.Fatalf("id %#v is not a number", rows[0]["id"])
		}
		if f.count("WHERE name = 'gadget'") != 1 {
			t.Fatal("the row was not committed")
		}
	}},
	{"unique violation is a conflict", func(t *testing.T, f *fixture) {
		f.insert("taken")
		d := tool(toolplane.EffectWrite, `INSERT INTO items (name) VALUES (:name)`, 0, "name")
		b, _ := f.rt.Bind(d)
		_, err := f.run(b, map[string]any{"name": "taken"}, 5*time.Second)
		o := outcome(t, b, err)
		if o.Kind != handler.Definite || o.Result.Error.Code != toolplane.CodeConflict || !o.Quoted {
			t.Fatalf("outcome %+v (%v)", o, err)
		}
		if f.count("") != 1 {
			t.Fatal("the table changed")
		}
	}},
	{"check violation is invalid input", func(t *testing.T, f *fixture) {
		d := tool(toolplane.EffectWrite, `INSERT INTO items (name, qty) VALUES (:name, :qty)`, 0, "name", "qty")
		b, _ := f.rt.Bind(d)
		_, err := f.run(b, map[string]any{"name": "neg", "qty": json.Number("-1")}, 5*time.Second)
		o := outcome(t, b, err)
		if o.Kind != handler.Definite || o.Result.Error.Code != toolplane.CodeInvalidInput {
			t.Fatalf("outcome %+v (%v)", o, err)
		}
		if f.count("") != 0 {
			t.Fatal("the table changed")
		}
	}},
	{"metacharacters in arguments stay values", func(t *testing.T, f *fixture) {
		values := []string{
			`'; DROP TABLE items; --`,
			`Robert'); DELETE FROM items WHERE ('1'='1`,
			`"double" 'single' ''doubled'' \backslash\ \' \"`,
			`:name $1 ? @x /* not a comment */ -- nor this`,
			"tab\tnewline\nunicode ☃",
			"nul\x00byte",
		}
		insert := tool(toolplane.EffectWrite, `INSERT INTO items (name, note) VALUES (:name, :note) RETURNING id`, 0, "name", "note")
		read := tool(toolplane.EffectRead, `SELECT name, note FROM items WHERE id = :id`, 0, "id")
		for i, v := range values {
			out, err := f.call(insert, map[string]any{"name": fmt.Sprintf("v%d", i), "note": v}, 5*time.Second)
			if strings.Contains(v, "\x00") && !f.nul {
				b, _ := f.rt.Bind(insert)
				if o := outcome(t, b, err); o.Result.Error == nil || o.Result.Error.Code != toolplane.CodeInvalidInput {
					t.Fatalf("NUL: outcome %+v (%v)", o, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("insert %q: %v", v, err)
			}
			id := rowsOf(t, out)[0]["id"]
			out, err = f.call(read, map[string]any{"id": id}, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if got := rowsOf(t, out)[0]["note"]; got != v {
				t.Fatalf("stored %q, read back %q", v, got)
			}
		}
		if n := f.count(""); n < len(values)-1 {
			t.Fatalf("%d rows left: the table was touched", n)
		}
	}},
	{"parameters in strings and comments are text", func(t *testing.T, f *fixture) {
		stmt := "SELECT ':name' AS lit, /* :x */ :name AS val -- :y\n"
		out, err := f.call(tool(toolplane.EffectRead, stmt, 0, "name"), map[string]any{"name": "v"}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		row := rowsOf(t, out)[0]
		if row["lit"] != ":name" || row["val"] != "v" {
			t.Fatalf("row %#v", row)
		}
	}},
	{"a repeated parameter binds the same value", func(t *testing.T, f *fixture) {
		f.insert("a", "b")
		stmt := `SELECT name FROM items WHERE name = :n OR (name <> :n AND name = :other) ORDER BY name`
		out, err := f.call(tool(toolplane.EffectRead, stmt, 0, "n", "other"), map[string]any{"n": "a", "other": "b"}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if rows := rowsOf(t, out); len(rows) != 2 {
			t.Fatalf("rows %#v", rows)
		}
	}},
	{"a read past its time stops in time", func(t *testing.T, f *fixture) {
		f.warm()
		d := tool(toolplane.EffectRead, f.be.sleepRead, 0)
		b, _ := f.rt.Bind(d)
		start := time.Now()
		_, err := f.run(b, nil, time.Second)
		if took := time.Since(start); took > 1500*time.Millisecond {
			t.Fatalf("the read answered after %v", took)
		}
		o := outcome(t, b, err)
		if o.Kind != handler.Release || o.Result.Error.Code != toolplane.CodeRetryableUpstream || !strings.Contains(o.Result.Error.Message, "time limit") {
			t.Fatalf("outcome %+v (%v)", o, err)
		}
	}},
	{"a write past its time commits nothing", func(t *testing.T, f *fixture) {
		f.insert("a")
		f.warm()
		d := tool(toolplane.EffectWrite, f.be.sleepWrite, 0)
		b, _ := f.rt.Bind(d)
		start := time.Now()
		_, err := f.run(b, nil, time.Second)
		if took := time.Since(start); took > 1500*time.Millisecond {
			t.Fatalf("the write answered after %v", took)
		}
		o := outcome(t, b, err)
		if o.Kind != handler.Release || !strings.Contains(o.Result.Error.Message, "nothing was committed") {
			t.Fatalf("outcome %+v (%v)", o, err)
		}
		// The server may still be finishing the statement it was told to
		// stop; what it did is undone.
		deadline := time.Now().Add(5 * time.Second)
		for f.count("WHERE note IS NOT NULL") != 0 {
			if time.Now().After(deadline) {
				t.Fatal("the stopped write was committed")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}},
	{"values convert to plain JSON", func(t *testing.T, f *fixture) {
		if _, err := f.admin.Exec(`INSERT INTO items (name, qty, price) VALUES ('x', 7, 3.25)`); err != nil {
			t.Fatal(err)
		}
		out, err := f.call(tool(toolplane.EffectRead, `SELECT qty, price, note, name FROM items`, 0), nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		row := rowsOf(t, out)[0]
		if row["qty"] != json.Number("7") || row["price"] != json.Number("3.25") || row["note"] != nil || row["name"] != "x" {
			t.Fatalf("row %#v", row)
		}
	}},
}

func TestSQLitePathsOutsideTheDirectoryAreRefused(t *testing.T) {
	t.Parallel()
	root, dir := orgDir(t)
	outside := t.TempDir()
	// Another organization's file, beside this one's directory.
	other := filepath.Join(root, "globex")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "theirs.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "platform.db")
	for _, p := range []string{secret, filepath.Join(dir, "inside.db")} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link.db")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	d := tool(toolplane.EffectRead, `SELECT 1 AS one`, 0)
	for _, tc := range []struct {
		dir, dsn string
		ok       bool
	}{
		{root, "inside.db", true},
		{root, "../globex/theirs.db", false},
		{root, filepath.Join(other, "theirs.db"), false},
		{root, filepath.Join(dir, "inside.db"), true},
		{root, "file:" + filepath.Join(dir, "inside.db"), true},
		{root, "sub/../inside.db", true},
		{root, secret, false},
		{root, "file:" + secret, false},
		{root, "../../" + filepath.Base(outside) + "/platform.db", false},
		{root, "link.db", false},
		{root, "sub", false},
		{root, "missing.db", false},
		{root, "inside.db?_pragma=journal_mode(DELETE)", false},
		{root, "file:inside.db?vfs=unix-none", false},
		{root, "file://host/inside.db", false},
		{root, ":memory:", false},
		{root, "", false},
		{"", filepath.Join(dir, "inside.db"), false},
	} {
		t.Run(tc.dsn, func(t *testing.T) {
			t.Parallel()
			rt := newRuntime(t, Config{SQLiteDir: tc.dir})
			b, err := rt.Bind(d)
			if err != nil {
				t.Fatal(err)
			}
			f := &fixture{t: t, rt: rt, rel: released("con_path", DriverSQLite, tc.dsn)}
			_, err = f.run(b, nil, 5*time.Second)
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			o := outcome(t, b, err)
			if o.Kind != handler.Release || o.Result.Error.Code != toolplane.CodeUnavailable || !strings.Contains(o.Result.Error.Message, "con_path") {
				t.Fatalf("outcome %+v (%v)", o, err)
			}
			if tc.dsn != "" && strings.Contains(o.Result.Error.Message, tc.dsn) {
				t.Fatalf("the refusal repeats the path: %s", o.Result.Error.Message)
			}
		})
	}
}

func TestSQLiteStatementsCannotReachOtherFiles(t *testing.T) {
	t.Parallel()
	f := open(t, backends[2], Config{})
	other := filepath.Join(t.TempDir(), "other.db")
	for _, stmt := range []string{
		`ATTACH DATABASE '` + other + `' AS other`,
		`VACUUM INTO '` + other + `'`,
		`PRAGMA query_only = 0`,
		`CREATE TEMP TABLE t (x)`,
	} {
		// These fail Check; the authorizer refuses them even unchecked.
		b, err := f.rt.bind(tool(toolplane.EffectWrite, stmt, 0))
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.run(b, nil, 5*time.Second)
		if err == nil {
			t.Fatalf("%s ran", stmt)
		}
		if _, serr := os.Stat(other); !errors.Is(serr, os.ErrNotExist) {
			t.Fatalf("%s created %s", stmt, other)
		}
	}
}

func TestPostgresOnlyTakesURLsWithoutFileKeys(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, Config{})
	b, err := rt.Bind(tool(toolplane.EffectRead, `SELECT 1 AS one`, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, dsn := range []string{
		"host=127.0.0.1 user=postgres password=" + planted + " dbname=test",
		"postgres://postgres:" + planted + "@127.0.0.1:5432/test?passfile=/etc/passwd",
		"postgres://postgres:" + planted + "@127.0.0.1:5432/test?sslrootcert=/etc/passwd",
		"postgres://postgres:" + planted + "@127.0.0.1:5432/test?servicefile=/etc/passwd&service=x",
		"postgres://postgres:" + planted + "@[::1:5432/test",
	} {
		f := &fixture{t: t, rt: rt, rel: released("con_url", DriverPostgres, dsn)}
		_, err := f.run(b, nil, 5*time.Second)
		o := outcome(t, b, err)
		if o.Kind != handler.Release || !strings.Contains(o.Result.Error.Message, "con_url") {
			t.Fatalf("%s: outcome %+v", dsn, o)
		}
	}
}

func TestMySQLCredentialsRefusedWithoutTheSecret(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, Config{})
	b, err := rt.Bind(tool(toolplane.EffectRead, `SELECT 1 AS one`, 0))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, rt: rt, rel: released("con_my", DriverMySQL, "root:"+planted+"@tcp(127.0.0.1:3306)/mysql")}
	_, err = f.run(b, nil, 5*time.Second)
	o := outcome(t, b, err)
	if o.Kind != handler.Release {
		t.Fatalf("outcome %+v (%v)", o, err)
	}
}

func TestRotatedConnectionOpensANewPool(t *testing.T) {
	t.Parallel()
	root, dir := orgDir(t)
	for i, name := range []string{"old.db", "new.db"} {
		db, err := sql.Open("sqlite", filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(fmt.Sprintf(`CREATE TABLE v (n INTEGER); INSERT INTO v VALUES (%d)`, i)); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	rt := newRuntime(t, Config{SQLiteDir: root})
	b, err := rt.Bind(tool(toolplane.EffectRead, `SELECT n FROM v`, 0))
	if err != nil {
		t.Fatal(err)
	}
	read := func(version int64, dsn string) any {
		rel := released("con_rot", DriverSQLite, dsn)
		rel.Connection.Version = version
		f := &fixture{t: t, rt: rt, rel: rel}
		out, err := f.run(b, nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return rowsOf(t, out)[0]["n"]
	}
	if n := read(1, "old.db"); n != json.Number("0") {
		t.Fatalf("version 1 read %v", n)
	}
	if n := read(2, "new.db"); n != json.Number("1") {
		t.Fatalf("version 2 read %v", n)
	}
	// A call still carrying the old version is served, by a pool of its
	// own, and the cache keeps only the newest.
	if n := read(1, "old.db"); n != json.Number("0") {
		t.Fatalf("late version 1 read %v", n)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.pools) != 1 || rt.pools[poolKey{"con_rot", 2}] == nil {
		t.Fatalf("pools %v", rt.pools)
	}
}

func TestUnknownDriverIsUnavailable(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, Config{})
	b, _ := rt.Bind(tool(toolplane.EffectRead, `SELECT 1 AS one`, 0))
	f := &fixture{t: t, rt: rt, rel: released("con_x", "oracle", "whatever")}
	_, err := f.run(b, nil, time.Second)
	if o := outcome(t, b, err); o.Kind != handler.Release || o.Result.Error.Code != toolplane.CodeUnavailable {
		t.Fatalf("outcome %+v", o)
	}
}

// bind builds the binding of a definition whose statement scans, checked
// or not, for the tests of the runtime's own defences (the read-only
// transaction, the SQLite authorizer), which hold without Check.
func (r *Runtime) bind(d *toolplane.Definition) (*handler.Binding, error) {
	scans, _ := compile(d)
	return r.bindScanned(d, scans)
}
