package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	sqlruntime "github.com/toolplane/toolplane/runtime/sql"
	"github.com/toolplane/toolplane/toolfile"
)

// TestExampleSQLToolRunsOnTheCatalogue follows examples/sqlite/README.md
// below the server: the catalogue written where a SQLite connection of
// the default organization may open it, and the example tool, as
// published, answering from it through the sql runtime.
func TestExampleSQLToolRunsOnTheCatalogue(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := write(filepath.Join(root, "default", "catalog.db")); err != nil {
		t.Fatal(err)
	}
	// Written twice, it is the same catalogue.
	if err := write(filepath.Join(root, "default", "catalog.db")); err != nil {
		t.Fatal(err)
	}
	d, _, err := toolfile.ReadFile("../tools/find_products.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if problems := sqlruntime.Check(&d); len(problems) > 0 {
		t.Fatalf("the example does not pass the check: %v", problems)
	}
	rt := sqlruntime.New(sqlruntime.Config{SQLiteDir: root})
	t.Cleanup(func() { rt.Close() })
	b, err := rt.Bind(&d)
	if err != nil {
		t.Fatal(err)
	}
	rel := &toolplane.Released{
		Connection: &toolplane.Connection{ID: "con_catalog", OrganizationID: "default", Version: 1, Provider: d.Connection,
			Config: toolplane.ConnectionConfig{Driver: sqlruntime.DriverSQLite}},
		Secrets: toolplane.Secrets{DSN: "catalog.db"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := b.Invoke(ctx, handler.Call{Tool: d.Name, Version: d.Version, Released: rel},
		map[string]any{"term": "mug", "limit": json.Number("2")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(out)
	want := `{"row_count":2,"rows":[{"id":"prd_mug_white","in_stock":0,"name":"White porcelain mug","price_cents":990},` +
		`{"id":"prd_mug_blue","in_stock":32,"name":"Blue enamel mug","price_cents":1450}],"truncated":false}`
	if string(got) != want {
		t.Fatalf("answer %s\nwant   %s", got, want)
	}
}
