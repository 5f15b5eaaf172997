package sqlruntime

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
)

// A tool's statement is checked at publish time, but a check reads text,
// and a role with power over the database server reaches past any deny
// list: a function it creates runs what the check never saw, a view it
// may read shows the server's configuration files. So the role a SQL
// connection logs in as is inspected too, when the connection is created
// and before its first call, and a role holding any of the powers below is
// refused unless the connection says its operator accepts it
// (ConnectionConfig.AllowPrivilegedRole).
//
// PostgreSQL: superuser; membership in pg_read_server_files,
// pg_write_server_files or pg_execute_server_program (membership, not only
// inherited use: set_config('role', ...) takes a role the session is a
// member of); CREATEROLE, which lets a role grant itself those; CREATE on
// the database (new schemas) or on any schema (functions, triggers, and
// objects left for the next call).
//
// MySQL/MariaDB: any privilege granted on *.* (FILE, SUPER, PROCESS among
// them, and every other global privilege, since a global grant covers the
// mysql system database), and any privilege on the mysql database itself.
// SHOW GRANTS is read, since it is the one view that includes what the
// session's current role and PUBLIC hold. SQLite has no role: its files
// are opened from the organization's own directory, under an authorizer.

// inspectTimeout bounds the inspection made when a connection is created.
const inspectTimeout = 10 * time.Second

// ErrPrivilegedRole is the error of a connection refused for its role's
// powers: a *PrivilegedRoleError wraps it.
var ErrPrivilegedRole = errors.New("the database role holds powers beyond its data")

// PrivilegedRoleError names the powers of a connection's database role
// that make the runtime refuse it. It holds no part of the connection
// string.
type PrivilegedRoleError struct {
	Connection string
	Powers     []string
}

func (e *PrivilegedRoleError) Error() string {
	return "connection " + e.Connection + ": the database role holds powers beyond its data: " + strings.Join(e.Powers, ", ")
}

// Unwrap answers ErrPrivilegedRole.
func (e *PrivilegedRoleError) Unwrap() error { return ErrPrivilegedRole }

// Inspect answers the powers of the database role c's connection string
// logs in as, for the connections service to refuse a privileged role at
// creation: none for a role that reads and changes data only, and none for
// SQLite. It connects as a call would, through the connection's egress
// rules, and closes what it opened. An error says the role could not be
// inspected (the database refused or could not be reached, the connection
// string cannot be used); it never holds the connection string.
func (r *Runtime) Inspect(ctx context.Context, c *toolplane.Connection, dsn toolplane.SecretString) ([]string, error) {
	d, ok := dialectOf(c.Config.Driver)
	if !ok {
		return nil, fmt.Errorf("connection %s names no database driver this deployment runs", c.ID)
	}
	if d == dialectSQLite {
		return nil, nil
	}
	p, err := r.open(c, d, dsn)
	if err != nil {
		return nil, err
	}
	defer p.close()
	ctx, cancel := context.WithTimeout(ctx, inspectTimeout)
	defer cancel()
	id, err := identify(ctx, p.db, d)
	if err != nil {
		e := inspect(err, secretsOf(d, dsn))
		return nil, fmt.Errorf("connection %s: the database role cannot be inspected (%s)", c.ID, e.kind)
	}
	return id.powers, nil
}

// identity is what the runtime learned of a pool's server and role.
type identity struct {
	// powers are the role's powers beyond its data, sorted.
	powers []string
	// mariadb is true for a MariaDB server, whose statement limit is
	// max_statement_time (MySQL's is max_execution_time).
	mariadb bool
}

// identify reads the role's powers, and for MySQL which server it is.
func identify(ctx context.Context, db *sql.DB, d dialect) (identity, error) {
	switch d {
	case dialectPostgres:
		p, err := postgresPowers(ctx, db)
		return identity{powers: p}, err
	case dialectMySQL:
		var version string
		if err := db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version); err != nil {
			return identity{}, err
		}
		mariadb := strings.Contains(strings.ToLower(version), "mariadb")
		p, err := mysqlPowers(ctx, db, mariadb)
		return identity{powers: p, mariadb: mariadb}, err
	}
	return identity{}, nil
}

// postgresRoleQuery reads, in one statement, what postgresPowers judges.
// Temporary schemas are left out: a session's own is reset after every
// call, and whatever it holds runs with the session's own rights.
const postgresRoleQuery = `SELECT r.rolsuper, r.rolcreaterole,
	pg_has_role(current_user, 'pg_read_server_files', 'MEMBER'),
	pg_has_role(current_user, 'pg_write_server_files', 'MEMBER'),
	pg_has_role(current_user, 'pg_execute_server_program', 'MEMBER'),
	has_database_privilege(current_database(), 'CREATE'),
	current_database(),
	COALESCE((SELECT string_agg(quote_ident(n.nspname), ',' ORDER BY n.nspname) FROM pg_namespace n
		WHERE has_schema_privilege(n.oid, 'CREATE') AND n.nspname !~ '^pg_(toast_)?temp_'), '')
FROM pg_roles r WHERE r.rolname = current_user`

// postgresPowers answers the PostgreSQL role's powers beyond its data.
func postgresPowers(ctx context.Context, db *sql.DB) ([]string, error) {
	var (
		super, createRole, readFiles, writeFiles, program, createDB bool
		database, schemas                                           string
	)
	err := db.QueryRowContext(ctx, postgresRoleQuery).Scan(&super, &createRole, &readFiles, &writeFiles, &program, &createDB, &database, &schemas)
	if err != nil {
		return nil, err
	}
	var out []string
	if super {
		// A superuser is a member of every role and may create anything:
		// the rest adds nothing.
		return []string{"superuser"}, nil
	}
	for _, p := range []struct {
		held bool
		name string
	}{
		{createRole, "CREATEROLE (may grant itself any role but superuser)"},
		{readFiles, "pg_read_server_files"},
		{writeFiles, "pg_write_server_files"},
		{program, "pg_execute_server_program"},
		{createDB, "CREATE on database " + database},
	} {
		if p.held {
			out = append(out, p.name)
		}
	}
	if schemas != "" {
		out = append(out, "CREATE on schema "+strings.ReplaceAll(schemas, ",", ", "))
	}
	return out, nil
}

// mysqlPowers answers the MySQL/MariaDB role's powers beyond its data,
// read from SHOW GRANTS: the session's user, its current role (and the
// roles granted to that role) and PUBLIC. MariaDB lists the current
// role's grants by itself; MySQL 8 lists them only when asked USING the
// roles active in the session (a new session's are its default roles),
// as CURRENT_ROLE() names them, already quoted. Only each grant's
// privileges and target are read; what follows TO (the grantee, a
// password hash) is never kept.
func mysqlPowers(ctx context.Context, db *sql.DB, mariadb bool) ([]string, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	show := `SHOW GRANTS`
	if !mariadb {
		var active sql.NullString
		if err := conn.QueryRowContext(ctx, `SELECT CURRENT_ROLE()`).Scan(&active); err != nil {
			return nil, err
		}
		if active.Valid && active.String != "" && active.String != "NONE" {
			show = `SHOW GRANTS FOR CURRENT_USER() USING ` + active.String
		}
	}
	rows, err := conn.QueryContext(ctx, show)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, err
		}
		for _, p := range grantPowers(line) {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// grantPowers answers the powers one line of SHOW GRANTS gives: each
// privilege of a grant ON *.* but USAGE, and each privilege on the mysql
// database (or a database pattern matching it). A role's grant (GRANT
// `role` TO ...) and a proxy grant give none by themselves: the role's
// own grants are lines of their own.
func grantPowers(line string) []string {
	rest, ok := strings.CutPrefix(line, "GRANT ")
	if !ok {
		return nil
	}
	privs, rest, ok := strings.Cut(rest, " ON ")
	if !ok {
		return nil // a role granted
	}
	target, _, ok := strings.Cut(rest, " TO ")
	if !ok {
		return nil
	}
	target = strings.TrimSpace(target)
	for _, kind := range []string{"FUNCTION ", "PROCEDURE ", "PACKAGE BODY ", "PACKAGE "} {
		target = strings.TrimPrefix(target, kind)
	}
	global := target == "*.*" || target == "*"
	database, _ := splitTarget(target)
	system := !global && likeMatch(database, "mysql")
	if !global && !system {
		return nil
	}
	var out []string
	for _, p := range splitPrivileges(privs) {
		if p == "USAGE" || p == "PROXY" {
			continue
		}
		if global {
			out = append(out, p+" ON *.*")
		} else {
			out = append(out, p+" ON "+target)
		}
	}
	return out
}

// splitTarget answers the database of a grant's target (`db`.* or
// `db`.`table`), unquoted.
func splitTarget(target string) (database, table string) {
	if strings.HasPrefix(target, "`") {
		end := 1
		for end < len(target) {
			if target[end] == '`' {
				if end+1 < len(target) && target[end+1] == '`' {
					end += 2
					continue
				}
				break
			}
			end++
		}
		if end >= len(target) {
			return target, ""
		}
		database = strings.ReplaceAll(target[1:end], "``", "`")
		return database, strings.TrimPrefix(target[end+1:], ".")
	}
	database, table, _ = strings.Cut(target, ".")
	return database, table
}

// splitPrivileges answers the privileges of a grant, upper-cased, without
// their column lists: SELECT (`a`, `b`), INSERT is SELECT and INSERT.
func splitPrivileges(privs string) []string {
	var out []string
	depth, start := 0, 0
	flush := func(end int) {
		p := privs[start:end]
		if i := strings.IndexByte(p, '('); i >= 0 {
			p = p[:i]
		}
		if p = strings.ToUpper(strings.TrimSpace(p)); p != "" {
			out = append(out, p)
		}
	}
	for i := 0; i < len(privs); i++ {
		switch privs[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				flush(i)
				start = i + 1
			}
		}
	}
	flush(len(privs))
	return out
}

// likeMatch reports whether name matches a grant's database pattern, as
// the server matches it: % any run, _ any one character, a backslash
// escaping the next.
func likeMatch(pattern, name string) bool {
	if pattern == "" {
		return name == ""
	}
	switch c := pattern[0]; c {
	case '%':
		for i := 0; i <= len(name); i++ {
			if likeMatch(pattern[1:], name[i:]) {
				return true
			}
		}
		return false
	case '_':
		return name != "" && likeMatch(pattern[1:], name[1:])
	case '\\':
		if len(pattern) > 1 {
			return name != "" && name[0] == pattern[1] && likeMatch(pattern[2:], name[1:])
		}
	}
	return name != "" && name[0] == pattern[0] && likeMatch(pattern[1:], name[1:])
}

// vet inspects p's role before its first call: a role holding powers
// beyond its data refuses the call (a *PrivilegedRoleError, told to the
// operator in the log with the powers it holds) unless c allows it, which
// is logged as a warning once per pool. An accepted role is not inspected
// again for the pool's life, which ends when the connection changes; a
// refused one is inspected again on the next call, so a role whose powers
// were revoked is accepted without a restart. Any other error is the
// database's, not yet any statement's.
func (r *Runtime) vet(ctx context.Context, p *pool, c *toolplane.Connection) error {
	if p.dialect == dialectSQLite || p.vetted.Load() {
		return nil
	}
	p.vetMu.Lock()
	defer p.vetMu.Unlock()
	if p.vetted.Load() {
		return nil
	}
	db := p.db
	if p.ctl != nil {
		db = p.ctl
	}
	id, err := identify(ctx, db, p.dialect)
	if err != nil {
		return err
	}
	if len(id.powers) > 0 {
		if !c.Config.AllowPrivilegedRole {
			r.cfg.Logger.Error("a SQL connection's calls are refused: its database role holds powers beyond its data; connect it with a least-privilege role, or create it with allow_privileged_role",
				"connection", c.ID, "organization", c.OrganizationID, "powers", id.powers)
			return &PrivilegedRoleError{Connection: c.ID, Powers: id.powers}
		}
		r.cfg.Logger.Warn("a SQL connection runs with a privileged database role, as its operator allowed (allow_privileged_role)",
			"connection", c.ID, "organization", c.OrganizationID, "powers", id.powers)
	}
	p.mariadb = id.mariadb
	p.vetted.Store(true)
	return nil
}
