package postgres

import "strings"

// guarded answers write, a change of at most one row (an update or delete
// guarded by the expected version, an insert, an upsert) with placeholders
// numbered from 1 to writeArgs, and an insert into table of n columns (an
// audit event, a change record) as one statement that inserts only when
// write changed a row: a write that matched nothing (a stale version)
// stores no record, and a record that cannot be stored undoes the write.
// The insert's arguments follow write's. It is PostgreSQL's data-modifying
// WITH (the SQLite store runs the two statements in one transaction). The
// statements are built once, at package initialization, so a write that
// already says RETURNING panics there.
func guarded(write string, writeArgs int, table, columns string, n int) string {
	if strings.Contains(write, "RETURNING") {
		panic("postgres: a guarded write cannot say RETURNING itself")
	}
	if table == "audit_events" {
		// An event is chained: the insert advances its organization's
		// head, only when write changed a row.
		if columns != auditColumns || n != auditArgCount {
			panic("postgres: a guarded audit insert takes auditArgs")
		}
		return `WITH changed AS (` + write + ` RETURNING 1), ` + chainedAudit("changed", writeArgs+1)
	}
	return `WITH changed AS (` + write + ` RETURNING 1)
	INSERT INTO ` + table + ` (` + columns + `)
	SELECT ` + dialect.Placeholders(writeArgs+1, n) + ` FROM changed`
}
