package sqlruntime

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/toolplane/toolplane"
)

// failure is what kind of failure a database error is.
type failure int

// The failure kinds.
const (
	failOther      failure = iota // the database failed for a reason not told apart
	failConflict                  // a unique, foreign key or exclusion constraint
	failInvalid                   // a check or not-null constraint, a value the column cannot hold
	failTimeout                   // the statement's time ran out
	failRetry                     // a deadlock, a serialization failure, a busy database
	failReadOnly                  // a change refused by a read-only transaction or database
	failDenied                    // authentication or permission refused
	failDefinition                // the statement does not fit the database (syntax, missing table)
	failConnection                // the connection failed
)

func (f failure) String() string {
	return [...]string{"failed", "conflict", "invalid value", "timeout", "busy", "read-only", "denied", "statement does not fit", "connection failed"}[f]
}

// dbError is what the runtime knows of a database error.
type dbError struct {
	kind failure
	// message is the database's own words, for the failures whose message
	// a model can act on, with the connection's secrets removed. The
	// invoker labels it untrusted.
	message string
	// answered is true when the server itself answered with the error, so
	// the error says what the server did; false for a lost connection or a
	// context that ended, after which what the server did is unknown.
	answered bool
}

// maxQuoted bounds the database's message quoted in an answer.
const maxQuoted = 512

// inspect classifies err by the driver's error codes, never its text.
func inspect(err error, secrets []string) dbError {
	var (
		pe *pgconn.PgError
		me *mysql.MySQLError
		se *sqlite.Error
	)
	switch {
	case errors.As(err, &pe):
		msg := pe.Message
		if pe.Detail != "" {
			msg += " (" + pe.Detail + ")"
		}
		return dbError{kind: postgresKind(pe.Code), message: scrub(msg, secrets), answered: true}
	case errors.As(err, &me):
		return dbError{kind: mysqlKind(me.Number), message: scrub(me.Message, secrets), answered: true}
	case errors.As(err, &se):
		return dbError{kind: sqliteKind(se.Code()), message: scrub(se.Error(), secrets), answered: true}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return dbError{kind: failTimeout}
	}
	return dbError{kind: failConnection}
}

// postgresKind classifies a SQLSTATE.
func postgresKind(code string) failure {
	switch code {
	case "23505", "23503", "23P01":
		return failConflict
	case "57014":
		return failTimeout
	case "40001", "40P01", "55P03", "55006":
		return failRetry
	case "25006":
		return failReadOnly
	case "42501":
		return failDenied
	}
	if len(code) != 5 {
		return failOther
	}
	switch code[:2] {
	case "23", "22":
		return failInvalid
	case "53":
		return failRetry
	case "28":
		return failDenied
	case "42", "0A", "2B", "3F", "3D":
		return failDefinition
	case "08", "57":
		return failConnection
	}
	return failOther
}

// mysqlKind classifies a MySQL or MariaDB error number.
func mysqlKind(n uint16) failure {
	switch n {
	case 1062, 1586, 1451, 1452, 1216, 1217, 1557, 1761, 1762:
		return failConflict
	case 3819, 4025, 1048, 1364, 1264, 1406, 1366, 1292, 1265, 1690, 1411, 1367:
		return failInvalid
	case 1969, 3024, 1317, 1028:
		return failTimeout
	case 1205, 1213, 1040, 1203, 1180, 1181:
		return failRetry
	case 1792, 1290, 1036:
		return failReadOnly
	case 1044, 1045, 1142, 1143, 1227, 1370, 1698:
		return failDenied
	case 1064, 1146, 1054, 1149, 1305, 1049, 1109, 1052, 1060, 1050, 1051, 1210, 1241, 1222:
		return failDefinition
	}
	return failOther
}

// sqliteKind classifies a SQLite extended result code.
func sqliteKind(code int) failure {
	switch code {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY, sqlite3.SQLITE_CONSTRAINT_ROWID:
		return failConflict
	case sqlite3.SQLITE_CONSTRAINT_CHECK, sqlite3.SQLITE_CONSTRAINT_NOTNULL, sqlite3.SQLITE_CONSTRAINT_DATATYPE:
		return failInvalid
	}
	switch code & 0xff {
	case sqlite3.SQLITE_CONSTRAINT:
		return failConflict
	case sqlite3.SQLITE_INTERRUPT:
		return failTimeout
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return failRetry
	case sqlite3.SQLITE_READONLY:
		return failReadOnly
	case sqlite3.SQLITE_AUTH, sqlite3.SQLITE_PERM:
		return failDenied
	case sqlite3.SQLITE_ERROR:
		return failDefinition
	case sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_RANGE:
		return failInvalid
	}
	return failOther
}

// secretsOf answers the strings of a connection string that must never
// appear in an answer: the whole string and the password in it.
func secretsOf(d dialect, dsn toolplane.SecretString) []string {
	s := dsn.Reveal()
	out := []string{s}
	switch d {
	case dialectPostgres:
		if u, err := url.Parse(s); err == nil {
			if pw, ok := u.User.Password(); ok {
				out = append(out, pw, url.QueryEscape(pw))
			}
		}
	case dialectMySQL:
		if c, err := mysql.ParseDSN(s); err == nil && c.Passwd != "" {
			out = append(out, c.Passwd)
		}
	}
	return out
}

// scrub bounds a database's message and removes the connection's secrets
// from it, should a driver or server ever repeat them.
func scrub(msg string, secrets []string) string {
	for _, s := range secrets {
		if len(s) >= 3 {
			msg = strings.ReplaceAll(msg, s, "[secret]")
		}
	}
	if len(msg) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && msg[cut]&0xc0 == 0x80 {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}
