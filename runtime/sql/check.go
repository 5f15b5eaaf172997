package sqlruntime

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
)

// MaxRowsLimit is the most rows a binding may ask a read to answer.
const MaxRowsLimit = 10000

// DefaultMaxRows is what a read answers at most when its binding names no
// cap.
const DefaultMaxRows = 100

// readVerbs are the first keywords of a statement that only reads.
var readVerbs = map[string]bool{"SELECT": true, "WITH": true, "VALUES": true, "SHOW": true, "EXPLAIN": true}

// sessionVerbs are first keywords the runtime refuses whatever the tool's
// effect: they control the transaction the runtime owns (BEGIN, COMMIT),
// change the pooled session for the calls after this one (SET, USE), or
// reach beyond the database the connection names (ATTACH, COPY, LOAD).
var sessionVerbs = map[string]bool{
	"BEGIN": true, "START": true, "COMMIT": true, "END": true, "ROLLBACK": true, "ABORT": true,
	"SAVEPOINT": true, "RELEASE": true, "SET": true, "RESET": true, "USE": true, "DISCARD": true,
	"ATTACH": true, "DETACH": true, "PRAGMA": true, "VACUUM": true, "COPY": true, "LOAD": true,
	"LISTEN": true, "UNLISTEN": true, "NOTIFY": true, "PREPARE": true, "EXECUTE": true, "DEALLOCATE": true,
	"LOCK": true, "UNLOCK": true, "HANDLER": true,
}

// outsideClauses are clauses by which a statement reaches outside the
// database: each names what it does there. They are refused whatever the
// tool's effect, since neither database refuses them in a read-only
// transaction (MariaDB writes INTO OUTFILE's file, PostgreSQL runs
// lo_export), and only the database user's privileges (MySQL's FILE,
// PostgreSQL's pg_write_server_files) would stop them otherwise.
var outsideClauses = map[string]string{
	"INTO OUTFILE":  "writes a file on the database server",
	"INTO DUMPFILE": "writes a file on the database server",
}

// outsideCalls are functions by which a statement reaches outside the
// database, the way COPY, LOAD and NOTIFY do as statements: the database
// server's files, other sessions, the server's administration, another
// database. Each names what it does there.
var outsideCalls = map[string]string{
	"lo_export":           "writes a file on the database server",
	"lo_import":           "reads a file on the database server",
	"pg_file_write":       "writes a file on the database server",
	"pg_file_rename":      "renames a file on the database server",
	"pg_file_unlink":      "removes a file on the database server",
	"pg_file_sync":        "touches a file on the database server",
	"pg_read_file":        "reads a file on the database server",
	"pg_read_binary_file": "reads a file on the database server",
	"pg_ls_dir":           "lists a directory on the database server",
	// pg_ls_dir's siblings, each for one of the server's own directories.
	"pg_ls_logdir":            "lists a directory on the database server",
	"pg_ls_waldir":            "lists a directory on the database server",
	"pg_ls_tmpdir":            "lists a directory on the database server",
	"pg_ls_archive_statusdir": "lists a directory on the database server",
	"pg_ls_logicalmapdir":     "lists a directory on the database server",
	"pg_ls_logicalsnapdir":    "lists a directory on the database server",
	"pg_ls_replslotdir":       "lists a directory on the database server",
	"pg_stat_file":            "reads a file's status on the database server",
	"load_file":               "reads a file on the database server",
	"pg_notify":               "notifies other sessions, as NOTIFY does",
	"pg_cancel_backend":       "cancels another session's statement",
	"pg_terminate_backend":    "ends another session",
	"pg_reload_conf":          "reloads the server's configuration",
	"pg_rotate_logfile":       "rotates the server's log",
	"dblink":                  "connects to another database, past the connection's egress rules",
	"dblink_exec":             "connects to another database, past the connection's egress rules",
	"dblink_connect":          "connects to another database, past the connection's egress rules",
	"dblink_connect_u":        "connects to another database, past the connection's egress rules",
	"dblink_send_query":       "connects to another database, past the connection's egress rules",
}

// outsideRelations are the views and catalogues by which a statement reads
// outside the database's data: the server's configuration files and the
// roles' password hashes. Each names what it shows. Only a privileged role
// may read them, and such a role is refused when the connection is
// created and before its first call; the check names them at publish time
// as well, where the author reads it.
var outsideRelations = map[string]string{
	"pg_hba_file_rules":      "shows the server's pg_hba.conf file",
	"pg_ident_file_mappings": "shows the server's pg_ident.conf file",
	"pg_file_settings":       "shows the server's configuration files",
	"pg_authid":              "shows the roles' password hashes",
	"pg_shadow":              "shows the roles' password hashes",
	"pg_user_mapping":        "shows the passwords of foreign servers",
}

// routineObjects are what a CREATE or ALTER may make that holds code the
// database runs later, out of this check's sight: a function's quoted
// body, a trigger's, an event's, a rule's, an extension's or a language's
// functions. A tool that makes one lets another tool (or a later call of
// its own) run what was never checked, with whatever the role may do.
var routineObjects = map[string]bool{
	"FUNCTION": true, "PROCEDURE": true, "ROUTINE": true, "AGGREGATE": true, "TRIGGER": true,
	"EVENT": true, "RULE": true, "EXTENSION": true, "LANGUAGE": true, "PACKAGE": true,
}

// plainObjects are what a CREATE or ALTER makes that holds no code: the
// first of them in a statement names its object, so a table, column or
// index named like a routine (CREATE TABLE event, ALTER TABLE t RENAME
// COLUMN trigger) is not one.
var plainObjects = map[string]bool{
	"TABLE": true, "INDEX": true, "VIEW": true, "MATERIALIZED": true, "SCHEMA": true, "SEQUENCE": true,
	"TYPE": true, "DOMAIN": true, "DATABASE": true, "UNIQUE": true, "COLLATION": true, "STATISTICS": true,
}

// routine answers what the statement's CREATE or ALTER makes that holds
// code (FUNCTION, TRIGGER, ...), "" when it makes none: the first object
// keyword after the modifiers (OR REPLACE, a MySQL DEFINER, TEMPORARY)
// decides.
func (s scanned) routine() string {
	if len(s.lead) == 0 || (s.lead[0] != "CREATE" && s.lead[0] != "ALTER") {
		return ""
	}
	for _, w := range s.lead[1:] {
		switch {
		case routineObjects[w]:
			return w
		case plainObjects[w]:
			return ""
		}
	}
	return ""
}

// textCalls are PostgreSQL functions that run the SQL text they are given,
// as DO runs its block: the check cannot read that text, so a function
// outsideCalls names could hide in it.
var textCalls = map[string]bool{
	"query_to_xml": true, "query_to_xmlschema": true, "query_to_xml_and_xmlschema": true,
}

// Kind is the kind of binding the runtime runs: binding.sql.
const Kind = toolplane.BindingSQL

// Checks answers the runtime's contract as the registry reads it: its
// kind, the binding it runs and its checks, binding nothing (see
// Runtime.Contract).
func Checks() handler.Runtime {
	return handler.Runtime{Kind: Kind, Check: Check, Spec: func(b *toolplane.Binding) (any, bool) { return b.SQL, b.SQL != nil }}
}

// Check answers the problems that keep d's SQL binding from running, for
// the registry to refuse it at publish time. The driver is the
// connection's, known only at a call, so the statement is read as every
// driver would read it. A definition without binding.sql has none.
func Check(d *toolplane.Definition) []toolplane.Problem {
	_, out := compile(d)
	return out
}

// compile reads d's statement once for each dialect: the scans a binding
// translates, and the problems that keep it from running (Check's). One
// reading serves both, so what is bound is what was checked.
func compile(d *toolplane.Definition) (scans map[dialect]scanned, out []toolplane.Problem) {
	b := d.Binding.SQL
	if b == nil {
		return nil, nil
	}
	add := func(field, msg, fix string) {
		for _, p := range out {
			if p.Field == field && p.Message == msg {
				return
			}
		}
		out = append(out, toolplane.Problem{Field: field, Message: msg, Fix: fix})
	}
	if d.Connection == "" {
		add("connection", "a SQL tool runs on a connection, and none is named",
			"name the provider of the database's connection in connection")
	}
	if b.MaxRows < 0 || b.MaxRows > MaxRowsLimit {
		add("binding.sql.max_rows", fmt.Sprintf("max_rows %d is outside 0..%d", b.MaxRows, MaxRowsLimit),
			fmt.Sprintf("set max_rows between 1 and %d, or leave it out for %d", MaxRowsLimit, DefaultMaxRows))
	}
	const field = "binding.sql.statement"
	if strings.TrimSpace(b.Statement) == "" {
		add(field, "the statement is empty", "write the one SQL statement the tool runs")
		return nil, out
	}
	props, propsErr := properties(d.InputSchema)
	if propsErr != nil {
		add("input_schema", "the input schema is not a JSON object: "+propsErr.Error(),
			"declare the statement's parameters as properties of an object schema")
	}
	var unscanned []string
	scans = make(map[dialect]scanned, len(dialects))
	for _, dl := range dialects {
		s, err := scan(b.Statement, dl)
		if err != nil {
			unscanned = append(unscanned, dl.String())
			continue
		}
		scans[dl] = s
		if s.trailing {
			add(field, "the statement holds more than one statement (a ; is followed by more SQL)",
				"keep one statement; a tool runs exactly one")
		}
		if s.first == "" || s.first == "-" {
			add(field, "the statement does not start with a SQL keyword", "start the statement with its verb (SELECT, INSERT, ...)")
		} else if s.first == "DO" {
			add(field, "DO runs a block of procedural code, whose statements the check cannot read",
				"run one query or change; put procedural code in a function the database's owner defines")
		} else if obj := s.routine(); obj != "" {
			add(field, s.lead[0]+" "+obj+" makes code the database runs later, which the check cannot read and another call could run",
				"run one query or change; functions, procedures, triggers and events are the database owner's to define, outside toolplane")
		} else if sessionVerbs[s.first] {
			add(field, s.first+" controls the session or transaction the runtime owns, or reaches outside the database",
				"run a query or a change (SELECT, INSERT, UPDATE, DELETE); the runtime opens and ends the transaction")
		} else if !d.Writes() && !readVerbs[s.first] {
			add(field, "a read tool's statement starts with "+s.first+", which is not a query",
				"start a read with SELECT, WITH, VALUES, SHOW or EXPLAIN, or declare the tool a write")
		}
		for _, clause := range slices.Sorted(maps.Keys(outsideClauses)) {
			if s.words[clause] {
				add(field, clause+" "+outsideClauses[clause]+", outside the database",
					"drop the "+clause+" clause; the tool's answer carries the rows")
			}
		}
		for _, fn := range slices.Sorted(maps.Keys(s.calls)) {
			if what, ok := outsideCalls[fn]; ok {
				add(field, fn+"() "+what+", outside the database",
					"drop the call to "+fn+"; a tool reads and changes the database's own data only")
			}
			if textCalls[fn] {
				add(field, fn+"() runs the SQL text it is given, which the check cannot read",
					"run the query itself; the tool's answer carries its rows")
			}
		}
		for _, rel := range slices.Sorted(maps.Keys(outsideRelations)) {
			if s.names[rel] {
				add(field, rel+" "+outsideRelations[rel]+", outside the database's data",
					"read the database's own tables; the server's files are its administrator's")
			}
		}
		if s.escapedName {
			add(field, `a U&"..." identifier spells its name in Unicode escapes, which the check cannot compare (a function it refuses may hide there)`,
				"write the identifier plainly")
		}
		if s.executable {
			add(field, "a /*! */ comment is run as SQL by MySQL, and the check cannot read it",
				"write the SQL plainly, outside the comment")
		}
		if propsErr != nil {
			continue
		}
		var missing []string
		for _, p := range s.params {
			if !props[p.name] && !slices.Contains(missing, p.name) {
				missing = append(missing, p.name)
			}
		}
		sort.Strings(missing)
		for _, name := range missing {
			add(field, "parameter :"+name+" names no property of the input schema",
				"add "+name+" to the input schema's properties, or correct the parameter's name")
		}
	}
	if pr := d.Price; pr != nil && pr.Field != "" {
		priceColumn(pr.Field, b.Statement, scans, add)
	}
	if len(unscanned) > 0 {
		// A backslash escapes in a MySQL string only, so a statement may
		// scan for one driver and not another.
		add(field, "read as "+strings.Join(unscanned, ", ")+", "+errUnterminated.Error(),
			"close every string, quoted identifier and comment")
	}
	return scans, out
}

// priceColumn checks a price read from a result column, where that is
// knowable: the statement must answer rows, and, unless it selects every
// column (*), name the column somewhere (a column or its alias).
func priceColumn(col, statement string, scans map[dialect]scanned, add func(field, msg, fix string)) {
	const field = "price.field"
	if len(col) > maxColumnName || strings.ContainsFunc(col, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		add(field, "is not a column name", fmt.Sprintf("name the result column that states the call's cost in cents (at most %d bytes)", maxColumnName))
		return
	}
	for _, dl := range dialects {
		s, ok := scans[dl]
		if !ok {
			continue
		}
		if !s.returnsRows() {
			add(field, "the statement answers no rows, so no column can state the call's cost",
				"add RETURNING with the cost column, or set a fixed price (cents)")
			return
		}
		if !strings.Contains(statement, "*") && !s.names[strings.ToLower(col)] {
			add(field, fmt.Sprintf("the statement names no column %s", strconv.Quote(col)),
				"select the column that states the call's cost in cents (or alias it: cost AS "+col+")")
			return
		}
	}
}

// maxColumnName bounds a price column's name: past any database's limit.
const maxColumnName = 128

// properties answers the names of the top-level properties an input
// schema declares.
func properties(schema json.RawMessage) (map[string]bool, error) {
	out := map[string]bool{}
	if len(schema) == 0 {
		return out, nil
	}
	var doc struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schema, &doc); err != nil {
		return nil, err
	}
	for name := range doc.Properties {
		out[name] = true
	}
	return out, nil
}
