package sqlruntime

import (
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		def  *toolplane.Definition
		// want is a fragment of the one problem expected, "" for none.
		field, want string
	}{
		{"a read", tool(toolplane.EffectRead, "SELECT * FROM t WHERE a = :a", 0, "a"), "", ""},
		{"a write", tool(toolplane.EffectWrite, "UPDATE t SET a = :a;", 0, "a"), "", ""},
		{"a read with a CTE", tool(toolplane.EffectRead, "/* c */ WITH x AS (SELECT 1) SELECT * FROM x", 10000, ""), "", ""},
		{"empty", tool(toolplane.EffectRead, "  \n ", 0), "binding.sql.statement", "empty"},
		{"two statements", tool(toolplane.EffectWrite, "DELETE FROM t; DELETE FROM u", 0), "binding.sql.statement", "more than one"},
		{"semicolon in a string is one statement", tool(toolplane.EffectRead, "SELECT ';DROP TABLE t'", 0), "", ""},
		{"parameter not in the schema", tool(toolplane.EffectRead, "SELECT :missing", 0, "a"), "binding.sql.statement", ":missing"},
		{"parameter in a comment needs no property", tool(toolplane.EffectRead, "SELECT 1 -- :missing", 0), "", ""},
		{"no connection", func() *toolplane.Definition {
			d := tool(toolplane.EffectRead, "SELECT 1", 0)
			d.Connection = ""
			return d
		}(), "connection", "none is named"},
		{"max rows too high", tool(toolplane.EffectRead, "SELECT 1", 10001), "binding.sql.max_rows", "outside"},
		{"max rows negative", tool(toolplane.EffectRead, "SELECT 1", -1), "binding.sql.max_rows", "outside"},
		{"a read that writes", tool(toolplane.EffectRead, "DELETE FROM t", 0), "binding.sql.statement", "not a query"},
		{"transaction control", tool(toolplane.EffectWrite, "COMMIT", 0), "binding.sql.statement", "controls the session"},
		{"attach", tool(toolplane.EffectWrite, "ATTACH DATABASE '/x' AS x", 0), "binding.sql.statement", "controls the session"},
		{"session settings", tool(toolplane.EffectWrite, "SET search_path = evil", 0), "binding.sql.statement", "controls the session"},
		{"mysql writes a file", tool(toolplane.EffectRead, "SELECT name FROM t INTO OUTFILE '/tmp/x'", 0), "binding.sql.statement", "INTO OUTFILE writes a file"},
		{"mysql dumps a file", tool(toolplane.EffectRead, "SELECT name INTO /* c */ DumpFile '/tmp/x' FROM t", 0), "binding.sql.statement", "INTO DUMPFILE writes a file"},
		{"a write writes a file too", tool(toolplane.EffectWrite, "SELECT name FROM t INTO OUTFILE '/tmp/x'", 0), "binding.sql.statement", "INTO OUTFILE"},
		{"into a variable is no file", tool(toolplane.EffectRead, "SELECT name INTO @outfile FROM t", 0), "", ""},
		{"outfile in a string is no clause", tool(toolplane.EffectRead, "SELECT 'INTO OUTFILE' AS x -- INTO OUTFILE", 0), "", ""},
		{"an executable comment", tool(toolplane.EffectRead, "SELECT name FROM t /*!50000 INTO OUTFILE '/tmp/x' */", 0), "binding.sql.statement", "/*! */ comment"},
		{"a mariadb executable comment", tool(toolplane.EffectRead, "SELECT 1 /*M! , 2 */", 0), "binding.sql.statement", "/*! */ comment"},
		{"a hint is no executable comment", tool(toolplane.EffectRead, "SELECT /*+ MAX_EXECUTION_TIME(1) */ 1", 0), "", ""},
		{"copy to a file", tool(toolplane.EffectRead, "COPY (SELECT 1) TO '/tmp/x'", 0), "binding.sql.statement", "controls the session"},
		{"postgres exports a large object", tool(toolplane.EffectRead, "SELECT lo_export(:o, '/tmp/x')", 0, "o"), "binding.sql.statement", "lo_export() writes a file"},
		{"qualified and spaced", tool(toolplane.EffectRead, "SELECT pg_catalog.LO_EXPORT /* c */ (1, '/tmp/x')", 0), "binding.sql.statement", "lo_export() writes a file"},
		{"quoted function name", tool(toolplane.EffectRead, `SELECT "pg_read_file"('/etc/passwd')`, 0), "binding.sql.statement", "pg_read_file() reads a file"},
		{"postgres lists its log directory", tool(toolplane.EffectRead, "SELECT name FROM pg_ls_logdir()", 0), "binding.sql.statement", "pg_ls_logdir() lists a directory"},
		{"postgres lists its WAL directory", tool(toolplane.EffectRead, "SELECT * FROM pg_ls_waldir()", 0), "binding.sql.statement", "pg_ls_waldir() lists a directory"},
		{"postgres lists its temporary directory", tool(toolplane.EffectRead, "SELECT * FROM pg_ls_tmpdir()", 0), "binding.sql.statement", "pg_ls_tmpdir() lists a directory"},
		{"postgres lists its archive status", tool(toolplane.EffectRead, "SELECT * FROM pg_ls_archive_statusdir()", 0), "binding.sql.statement", "pg_ls_archive_statusdir() lists a directory"},
		{"a unicode-escaped function name", tool(toolplane.EffectRead, `SELECT U&"pg_read_\0066ile"('/etc/passwd')`, 0), "binding.sql.statement", `U&"..."`},
		{"a unicode-escaped name with its own escape", tool(toolplane.EffectRead, `SELECT * FROM u&"pg_ls_!0064ir" UESCAPE '!' ('.')`, 0), "binding.sql.statement", `U&"..."`},
		{"a column and-ed with a quoted one", tool(toolplane.EffectRead, `SELECT menu&"flags" FROM t`, 0), "", ""},
		{"sql in a string", tool(toolplane.EffectRead, `SELECT query_to_xml('SELECT pg_read_file(''/etc/passwd'')', true, true, '')`, 0), "binding.sql.statement", "query_to_xml() runs the SQL text"},
		{"a table as xml is the table's data", tool(toolplane.EffectRead, `SELECT table_to_xml('t', true, true, '')`, 0), "", ""},
		{"mysql reads a file", tool(toolplane.EffectRead, "SELECT LOAD_FILE('/etc/passwd') AS f", 0), "binding.sql.statement", "load_file() reads a file"},
		{"notify as a function", tool(toolplane.EffectRead, "SELECT pg_notify('c', 'x')", 0), "binding.sql.statement", "pg_notify() notifies"},
		{"another database", tool(toolplane.EffectWrite, "SELECT * FROM dblink('host=10.0.0.1', 'SELECT 1') AS t(a int)", 0), "binding.sql.statement", "dblink() connects"},
		{"a column named like a function", tool(toolplane.EffectRead, "SELECT lo_export, load_file FROM t", 0), "", ""},
		{"a procedural block", tool(toolplane.EffectWrite, "DO 'BEGIN PERFORM lo_export(1, ''/tmp/x''); END'", 0), "binding.sql.statement", "DO runs"},
		{"a function whose body reads a file", tool(toolplane.EffectWrite, "CREATE FUNCTION f() RETURNS text LANGUAGE sql AS 'SELECT pg_read_file(''PG_VERSION'')'", 0), "binding.sql.statement", "CREATE FUNCTION makes code"},
		{"a function replaced", tool(toolplane.EffectWrite, "create or replace function f() returns int as $$ select 1 $$ language sql", 0), "binding.sql.statement", "CREATE FUNCTION makes code"},
		{"a plpgsql function running text", tool(toolplane.EffectWrite, "CREATE FUNCTION f(c text) RETURNS void AS $b$ BEGIN EXECUTE c END $b$ LANGUAGE plpgsql", 0), "binding.sql.statement", "CREATE FUNCTION"},
		{"a mysql procedure with a definer", tool(toolplane.EffectWrite, "CREATE DEFINER = CURRENT_USER() PROCEDURE p() SELECT 1", 0), "binding.sql.statement", "CREATE PROCEDURE makes code"},
		{"a quoted definer", tool(toolplane.EffectWrite, "CREATE DEFINER=`root`@`%` FUNCTION f() RETURNS INT RETURN 1", 0), "binding.sql.statement", "CREATE FUNCTION makes code"},
		{"a trigger", tool(toolplane.EffectWrite, "CREATE TRIGGER t BEFORE INSERT ON items FOR EACH ROW SET NEW.qty = 0", 0), "binding.sql.statement", "CREATE TRIGGER makes code"},
		{"an event", tool(toolplane.EffectWrite, "CREATE EVENT e ON SCHEDULE EVERY 1 HOUR DO DELETE FROM items", 0), "binding.sql.statement", "CREATE EVENT makes code"},
		{"an aggregate", tool(toolplane.EffectWrite, "CREATE AGGREGATE a (int) (sfunc = int4pl, stype = int)", 0), "binding.sql.statement", "CREATE AGGREGATE makes code"},
		{"a rule", tool(toolplane.EffectWrite, "CREATE RULE r AS ON INSERT TO t DO ALSO NOTIFY c", 0), "binding.sql.statement", "CREATE RULE makes code"},
		{"an extension", tool(toolplane.EffectWrite, "CREATE EXTENSION IF NOT EXISTS dblink", 0), "binding.sql.statement", "CREATE EXTENSION makes code"},
		{"a function made safe later", tool(toolplane.EffectWrite, "ALTER FUNCTION f() SECURITY DEFINER", 0), "binding.sql.statement", "ALTER FUNCTION makes code"},
		{"a table named event", tool(toolplane.EffectWrite, "CREATE TABLE event (id int)", 0), "", ""},
		{"a column named trigger renamed", tool(toolplane.EffectWrite, "ALTER TABLE t RENAME COLUMN trigger TO x", 0), "", ""},
		{"a column named language added", tool(toolplane.EffectWrite, "ALTER TABLE docs ADD COLUMN language text", 0), "", ""},
		{"an index on a table named rule", tool(toolplane.EffectWrite, "CREATE INDEX ON rule (a)", 0), "", ""},
		{"a constraint trigger", tool(toolplane.EffectWrite, "CREATE CONSTRAINT TRIGGER t AFTER INSERT ON items FOR EACH ROW EXECUTE FUNCTION f()", 0), "binding.sql.statement", "CREATE TRIGGER makes code"},
		{"a temporary function", tool(toolplane.EffectWrite, "CREATE TEMPORARY FUNCTION f() RETURNS int AS $$ select 1 $$ LANGUAGE sql", 0), "binding.sql.statement", "CREATE FUNCTION makes code"},
		{"a table with a column named event", tool(toolplane.EffectWrite, "CREATE TABLE log (event TEXT, function TEXT)", 0), "", ""},
		{"a view selecting a trigger column", tool(toolplane.EffectWrite, "CREATE VIEW v AS SELECT trigger, event FROM log", 0), "", ""},
		{"postgres reads pg_hba.conf", tool(toolplane.EffectRead, "SELECT * FROM pg_hba_file_rules", 0), "binding.sql.statement", "pg_hba_file_rules shows"},
		{"postgres reads its settings files", tool(toolplane.EffectRead, `SELECT name, setting FROM pg_catalog."pg_file_settings"`, 0), "binding.sql.statement", "pg_file_settings shows"},
		{"postgres reads pg_ident.conf", tool(toolplane.EffectRead, "SELECT * FROM PG_IDENT_FILE_MAPPINGS", 0), "binding.sql.statement", "pg_ident_file_mappings shows"},
		{"a column named like a view, in a string", tool(toolplane.EffectRead, "SELECT 'pg_hba_file_rules' AS v", 0), "", ""},
		{"unterminated", tool(toolplane.EffectRead, "SELECT 'x", 0), "binding.sql.statement", "not closed"},
		{"not a schema", func() *toolplane.Definition {
			d := tool(toolplane.EffectRead, "SELECT :a", 0)
			d.InputSchema = []byte(`[1]`)
			return d
		}(), "input_schema", "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			problems := Check(tc.def)
			if tc.want == "" {
				if len(problems) != 0 {
					t.Fatalf("problems %v", problems)
				}
				return
			}
			if len(problems) != 1 || problems[0].Field != tc.field || !strings.Contains(problems[0].Message, tc.want) || problems[0].Fix == "" {
				t.Fatalf("problems %v, want one on %s saying %q", problems, tc.field, tc.want)
			}
		})
	}
	if Check(&toolplane.Definition{}) != nil {
		t.Fatal("a definition without binding.sql has problems")
	}
}
