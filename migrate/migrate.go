// Package migrate reads a store's embedded schema history: numbered SQL
// files (NNNN_name.sql) applied in version order. Each store applies them
// in its own dialect and records them in its own schema_migrations table;
// what a migration is, and which files make a valid history, is decided
// here once.
package migrate

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// Migration is one schema version and whether a database has it.
type Migration struct {
	Version int
	Name    string
	Applied bool
	// AppliedAt is when it was applied; zero when it was not.
	AppliedAt time.Time
}

// File is one embedded migration.
type File struct {
	Version int
	Name    string
	SQL     string
}

var fileName = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.sql$`)

// Read answers the migrations in dir of fsys in version order, refusing a
// misnamed file or a version used twice: either would apply a schema the
// file names do not describe.
func Read(fsys fs.FS, dir string) ([]File, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []File
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration %s: name is not NNNN_name.sql", e.Name())
		}
		v, err := strconv.Atoi(m[1])
		if err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: bad version", e.Name())
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, File{Version: v, Name: m[2], SQL: string(body)})
	}
	slices.SortFunc(out, func(a, b File) int { return a.Version - b.Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migration version %d used twice", out[i].Version)
		}
	}
	return out, nil
}

// ErrNewerSchema is the error of a database that records a migration the
// running binary does not embed: a newer toolplane migrated it. Its code
// would read or write that schema as the older one it knows (a claim's key
// in a form it cannot find, say, and an effect run twice), so a store
// refuses to serve it.
var ErrNewerSchema = errors.New("the database's schema is newer than this toolplane")

// CheckKnown answers an error wrapping ErrNewerSchema, naming the first
// migration applied records that all does not hold, or nil when this
// binary knows every one.
func CheckKnown(all []File, applied map[int]Migration) error {
	var unknown []Migration
	for v, m := range applied {
		if !slices.ContainsFunc(all, func(f File) bool { return f.Version == v }) {
			unknown = append(unknown, m)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.SortFunc(unknown, func(a, b Migration) int { return a.Version - b.Version })
	newest := 0
	if len(all) > 0 {
		newest = all[len(all)-1].Version
	}
	return fmt.Errorf("%w: it records migration %04d_%s, and this toolplane knows migrations up to %04d; run the toolplane that migrated it, or a newer one",
		ErrNewerSchema, unknown[0].Version, unknown[0].Name, newest)
}
