// Package pgtest gives tests a place of their own on the test PostgreSQL
// server: a fresh schema per test, dropped when the test ends, so tests
// run in parallel on one database without seeing each other's rows. It
// imports no toolplane package, so the postgres package's own tests use
// it too.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// DSNVariable names the environment variable holding the test server's
// DSN (for example
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable).
const DSNVariable = "TOOLPLANE_TEST_POSTGRES"

// LookupDSN answers the test server's DSN, and false when none is set:
// for a test that runs on SQLite always and on PostgreSQL when it can.
func LookupDSN() (string, bool) {
	dsn := os.Getenv(DSNVariable)
	return dsn, dsn != ""
}

// DSN answers the test server's DSN, or skips t when none is set.
func DSN(t testing.TB) string {
	t.Helper()
	dsn, ok := LookupDSN()
	if !ok {
		t.Skip("set " + DSNVariable + " to a PostgreSQL DSN (for example postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the PostgreSQL tests")
	}
	return dsn
}

// Schema creates an empty schema of a random name on dsn's database and
// answers its name: lower-case letters, digits and underscores, so it
// needs no quoting in SQL or in a search_path. t.Cleanup drops it with
// everything in it; cleanups run last in, first out, so pools a test
// opens on it afterwards are closed first.
func Schema(t testing.TB, dsn string) string {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	name := "tp_" + hex.EncodeToString(b)
	ctx := context.Background() // t's context is done before cleanups run
	admin := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatalf("connect to %s: %v", DSNVariable, err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	admin(`CREATE SCHEMA ` + name)
	t.Cleanup(func() { admin(`DROP SCHEMA ` + name + ` CASCADE`) })
	return name
}

// InSchema answers dsn with its search_path set to schema, for code that
// takes a DSN (a backend, a server, the CLI): everything it creates lands
// in the schema.
func InSchema(dsn, schema string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "search_path=" + schema
}

// SchemaDSN creates a schema as Schema does and answers dsn scoped to it.
func SchemaDSN(t testing.TB, dsn string) string {
	t.Helper()
	return InSchema(dsn, Schema(t, dsn))
}
