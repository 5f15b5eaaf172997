package sqlruntime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/tracectx"
)

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// The comment goes on a line of its own, before a trailing semicolon, so
// a statement ending in a line comment keeps it a comment.
func TestCommented(t *testing.T) {
	t.Parallel()
	const c = "/*traceparent='x'*/"
	tests := []struct{ in, want string }{
		{"SELECT 1", "SELECT 1\n" + c},
		{"SELECT 1;", "SELECT 1\n" + c + ";"},
		{"SELECT 1 -- the one\n", "SELECT 1 -- the one\n" + c + "\n"},
		{"SELECT 1 -- done;  ", "SELECT 1 -- done\n" + c + ";  "},
	}
	for _, tc := range tests {
		if got := commented(tc.in, c); got != tc.want {
			t.Errorf("commented(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := commented("SELECT 1", ""); got != "SELECT 1" {
		t.Errorf("without a trace: %q", got)
	}
}

// A call made with a trace context runs as it would without: the same
// rows for a read ending in a line comment and a semicolon, and a write.
// On MySQL/MariaDB the statement the server runs carries the trace
// context as a sqlcommenter comment; on PostgreSQL the statement is sent
// as written (pgx keeps it prepared by its text), and the trace rides on
// the transaction's SET.
func TestTraceContextReachesTheStatement(t *testing.T) {
	t.Parallel()
	ctx := tracectx.FromStrings(context.Background(), traceparent, "")
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			f := open(t, be, Config{})
			f.insert("a", "b")
			invoke := func(d *toolplane.Definition, args map[string]any) any {
				t.Helper()
				b, err := f.rt.Bind(d)
				if err != nil {
					t.Fatalf("bind %q: %v", d.Binding.SQL.Statement, err)
				}
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				out, err := b.Invoke(cctx, handler.Call{Tool: "db.tool", Version: "1.0.0", Released: f.rel}, args)
				if err != nil {
					t.Fatalf("%q: %v", d.Binding.SQL.Statement, err)
				}
				return out
			}
			rows := rowsOf(t, invoke(tool(toolplane.EffectRead, "SELECT name FROM items WHERE qty >= :min ORDER BY id -- the names;", 10, "min"), map[string]any{"min": json.Number("1")}))
			if len(rows) != 2 || rows[0]["name"] != "a" {
				t.Fatalf("rows %v", rows)
			}
			out := invoke(tool(toolplane.EffectWrite, "UPDATE items SET note = :note WHERE name = :name", 0, "note", "name"), map[string]any{"note": "n", "name": "a"})
			if fmt.Sprint(out.(map[string]any)["rows_affected"]) != "1" {
				t.Fatalf("write answered %v", out)
			}
			var self string
			switch be.name {
			case "postgres":
				self = "SELECT current_query() AS q"
			case "mysql":
				self = "SELECT INFO AS q FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()"
			default:
				return
			}
			q := fmt.Sprint(rowsOf(t, invoke(tool(toolplane.EffectRead, self, 1), nil))[0]["q"])
			comment := "/*traceparent='" + traceparent + "'*/"
			if be.name == "mysql" && !strings.Contains(q, comment) {
				t.Errorf("the statement run was %q, without %s", q, comment)
			}
			if be.name == "postgres" && strings.Contains(q, "traceparent") {
				t.Errorf("the statement run was %q: a comment would defeat pgx's statement cache", q)
			}
		})
	}
}
