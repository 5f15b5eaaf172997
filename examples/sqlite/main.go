// Command sqlite writes the SQLite database the example SQL tool
// (examples/tools/find_products.yaml) reads: a small product catalogue,
// from catalog.sql. The file must be in the organization's own directory
// under the server's SQLite directory (by default the data directory's
// sql/default/), the only place a SQLite connection may open a file.
//
//	go run ./examples/sqlite toolplane-data/sql/default/catalog.db
package main

import (
	"database/sql"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"
)

//go:embed catalog.sql
var catalog string

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./examples/sqlite FILE   (for example toolplane-data/sql/default/catalog.db)")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "sqlite:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", os.Args[1])
}

// write creates path afresh (its directory too) holding the catalogue.
func write(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(catalog); err != nil {
		return fmt.Errorf("write the catalogue: %w", err)
	}
	return db.Close()
}
