package sqlruntime

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
)

// BenchmarkReadSQLite runs one parameterised read of ten rows on a warm
// SQLite pool: the runtime's own cost over the database's.
func BenchmarkReadSQLite(b *testing.B) { benchmarkRead(b, backends[2]) }

// BenchmarkReadMySQL runs one parameterised read of ten rows on a warm
// MariaDB pool over loopback, with the session's reset after it.
func BenchmarkReadMySQL(b *testing.B) { benchmarkRead(b, backends[1]) }

// benchmarkRead runs one parameterised read of ten rows of fifty, one call
// at a time, on be.
func benchmarkRead(b *testing.B, be backend) {
	rt, rel, admin := be.open(b, Config{})
	if _, err := admin.Exec(be.ddl); err != nil {
		b.Fatal(err)
	}
	for i := range 50 {
		if _, err := admin.Exec(`INSERT INTO items (name, qty, price) VALUES (?, ?, 1.5)`, fmt.Sprintf("item%d", i), i); err != nil {
			b.Fatal(err)
		}
	}
	bind, err := rt.Bind(tool(toolplane.EffectRead, `SELECT id, name, qty, price FROM items WHERE qty >= :min ORDER BY id`, 10, "min"))
	if err != nil {
		b.Fatal(err)
	}
	call := handler.Call{Released: rel}
	args := map[string]any{"min": json.Number("5")}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bind.Invoke(ctx, call, args); err != nil {
			b.Fatal(err)
		}
	}
}
