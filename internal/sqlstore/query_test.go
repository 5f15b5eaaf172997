package sqlstore

import (
	"errors"
	"reflect"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/cursor"
)

// TestShapes writes each shape in both dialects and compares the text and
// the arguments with what each database is sent.
func TestShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		build    func(d Dialect) *Query
		sqlite   string
		postgres string
		args     []any
	}{
		{
			name:     "start",
			build:    func(d Dialect) *Query { return New(d, `SELECT a FROM t WHERE org = ? AND status = ?`, "o", "s") },
			sqlite:   `SELECT a FROM t WHERE org = ? AND status = ?`,
			postgres: `SELECT a FROM t WHERE org = $1 AND status = $2`,
			args:     []any{"o", "s"},
		},
		{
			name: "optional filters, set and unset",
			build: func(d Dialect) *Query {
				q := New(d, `SELECT a FROM t WHERE org = ?`, "o")
				q.Eq("run_id", "r")
				q.Eq("agent_id", "")
				q.Eq("tool", "x")
				return q
			},
			sqlite:   `SELECT a FROM t WHERE org = ? AND run_id = ? AND tool = ?`,
			postgres: `SELECT a FROM t WHERE org = $1 AND run_id = $2 AND tool = $3`,
			args:     []any{"o", "r", "x"},
		},
		{
			name: "no filter set",
			build: func(d Dialect) *Query {
				q := New(d, `SELECT a FROM t WHERE org = ?`, "o")
				q.Eq("run_id", "")
				q.In("outcome", nil)
				return q
			},
			sqlite:   `SELECT a FROM t WHERE org = ?`,
			postgres: `SELECT a FROM t WHERE org = $1`,
			args:     []any{"o"},
		},
		{
			name: "one of a list",
			build: func(d Dialect) *Query {
				q := New(d, `SELECT a FROM t WHERE org = ?`, "o")
				q.In("outcome", []string{"ok", "denied"})
				q.Add(` AND created_at >= ?`, int64(7))
				return q
			},
			sqlite:   `SELECT a FROM t WHERE org = ? AND outcome IN (?, ?) AND created_at >= ?`,
			postgres: `SELECT a FROM t WHERE org = $1 AND outcome = ANY($2) AND created_at >= $3`,
		},
		{
			name: "page after a cursor, descending",
			build: func(d Dialect) *Query {
				q := New(d, `SELECT a FROM t WHERE org = ?`, "o")
				q.After("created_at, id", "<", int64(5), "id-1")
				q.Page("created_at DESC, id DESC", 20)
				return q
			},
			sqlite:   `SELECT a FROM t WHERE org = ? AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?`,
			postgres: `SELECT a FROM t WHERE org = $1 AND (created_at, id) < ($2, $3) ORDER BY created_at DESC, id DESC LIMIT $4`,
			args:     []any{"o", int64(5), "id-1", 21},
		},
		{
			name: "page after a cursor with no condition before it",
			build: func(d Dialect) *Query {
				q := New(d, `SELECT a FROM t`)
				q.WhereAfter("id, org", ">", "id-1", "o")
				q.Page("id, org", 1)
				return q
			},
			sqlite:   `SELECT a FROM t WHERE (id, org) > (?, ?) ORDER BY id, org LIMIT ?`,
			postgres: `SELECT a FROM t WHERE (id, org) > ($1, $2) ORDER BY id, org LIMIT $3`,
			args:     []any{"id-1", "o", 2},
		},
		{
			name: "reads joined, numbered across them",
			build: func(d Dialect) *Query {
				q := New(d, ``)
				for i, g := range []string{"a", "b"} {
					if i > 0 {
						q.Add(` UNION ALL `)
					}
					q.Add(`SELECT * FROM (SELECT a FROM t WHERE g = ?`, g)
					q.Page("a", 3)
					q.Add(`)`)
				}
				q.Page("a", 3)
				return q
			},
			sqlite:   `SELECT * FROM (SELECT a FROM t WHERE g = ? ORDER BY a LIMIT ?) UNION ALL SELECT * FROM (SELECT a FROM t WHERE g = ? ORDER BY a LIMIT ?) ORDER BY a LIMIT ?`,
			postgres: `SELECT * FROM (SELECT a FROM t WHERE g = $1 ORDER BY a LIMIT $2) UNION ALL SELECT * FROM (SELECT a FROM t WHERE g = $3 ORDER BY a LIMIT $4) ORDER BY a LIMIT $5`,
			args:     []any{"a", 4, "b", 4, 4},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, d := range []struct {
				name    string
				dialect Dialect
				want    string
			}{{"sqlite", SQLite, tt.sqlite}, {"postgres", Postgres, tt.postgres}} {
				q := tt.build(d.dialect)
				if got := q.String(); got != d.want {
					t.Errorf("%s text:\n got %s\nwant %s", d.name, got, d.want)
				}
				if tt.args != nil && !reflect.DeepEqual(q.Args(), tt.args) {
					t.Errorf("%s args = %#v, want %#v", d.name, q.Args(), tt.args)
				}
				if q.Unbindable() {
					t.Errorf("%s: Unbindable() for text every database binds", d.name)
				}
			}
		})
	}
}

// TestListArgs: a dialect that binds arrays sends a list as one argument,
// the other one argument a value.
func TestListArgs(t *testing.T) {
	t.Parallel()
	values := []string{"ok", "denied"}
	for _, tt := range []struct {
		name string
		d    Dialect
		want []any
	}{
		{"sqlite", SQLite, []any{"o", "ok", "denied"}},
		{"postgres", Postgres, []any{"o", values}},
	} {
		q := New(tt.d, `SELECT a FROM t WHERE org = ?`, "o")
		q.In("outcome", values)
		if !reflect.DeepEqual(q.Args(), tt.want) {
			t.Errorf("%s args = %#v, want %#v", tt.name, q.Args(), tt.want)
		}
	}
}

// TestText: PostgreSQL text holds UTF-8 without NUL; SQLite's holds any
// string. A query given what its dialect cannot bind says so.
func TestText(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		s            string
		sqlite, pg   bool
		list, filter bool
	}{
		{"plain", true, true, false, false},
		{"", true, true, false, false},
		{"ünïcode", true, true, false, false},
		{"nul\x00inside", true, false, true, true},
		{"bad\xffutf8", true, false, true, true},
	} {
		if got := SQLite.Text(tt.s); got != tt.sqlite {
			t.Errorf("SQLite.Text(%q) = %v, want %v", tt.s, got, tt.sqlite)
		}
		if got := Postgres.Text(tt.s); got != tt.pg {
			t.Errorf("Postgres.Text(%q) = %v, want %v", tt.s, got, tt.pg)
		}
		for _, d := range []struct {
			name string
			d    Dialect
			want bool
		}{{"sqlite", SQLite, false}, {"postgres", Postgres, !tt.pg}} {
			eq := New(d.d, `SELECT a FROM t WHERE org = ?`, "o")
			eq.Eq("tool", tt.s)
			in := New(d.d, `SELECT a FROM t WHERE org = ?`, "o")
			in.In("outcome", []string{"ok", tt.s})
			after := New(d.d, `SELECT a FROM t WHERE org = ?`, "o")
			after.After("created_at, id", ">", int64(1), tt.s)
			start := New(d.d, `SELECT a FROM t WHERE org = ?`, tt.s)
			for _, q := range []*Query{eq, in, after, start} {
				if got := q.Unbindable(); got != d.want {
					t.Errorf("%s %q: Unbindable() = %v, want %v (%s)", d.name, tt.s, got, d.want, q.String())
				}
			}
		}
	}
	groups := []string{"a", "nul\x00", "b", "\xff"}
	if got := SQLite.Texts(groups); !reflect.DeepEqual(got, groups) {
		t.Errorf("SQLite.Texts = %q, want every group", got)
	}
	if got := Postgres.Texts(groups); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("Postgres.Texts = %q, want [a b]", got)
	}
	if groups[1] != "nul\x00" {
		t.Errorf("Texts changed its argument: %q", groups)
	}
}

// TestAddCountsPlaceholders: text whose placeholders and arguments differ
// in number is a store's mistake, caught where the statement is written.
func TestAddCountsPlaceholders(t *testing.T) {
	t.Parallel()
	for _, d := range []Dialect{SQLite, Postgres} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%+v) with 2 placeholders and 1 argument did not panic", d)
				}
			}()
			New(d, `SELECT a FROM t WHERE org = ? AND id = ?`, "o")
		}()
	}
}

func TestPlaceholders(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		d       Dialect
		from, n int
		want    string
	}{
		{SQLite, 1, 3, "?, ?, ?"},
		{Postgres, 1, 3, "$1, $2, $3"},
		{Postgres, 27, 2, "$27, $28"},
		{Postgres, 4, 0, ""},
	} {
		if got := tt.d.Placeholders(tt.from, tt.n); got != tt.want {
			t.Errorf("Placeholders(%d, %d) = %q, want %q", tt.from, tt.n, got, tt.want)
		}
	}
}

func TestCheckLimit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		limit int
		bad   bool
	}{{-1, true}, {0, true}, {1, false}, {MaxLimit, false}, {MaxLimit + 1, true}} {
		err := CheckLimit(tt.limit)
		if bad := err != nil; bad != tt.bad {
			t.Errorf("CheckLimit(%d) = %v, want refused %v", tt.limit, err, tt.bad)
		}
		if tt.bad && (!errors.Is(err, ErrLimit) || !errors.Is(err, toolplane.ErrInvalid)) {
			t.Errorf("CheckLimit(%d) = %v; want ErrLimit, an ErrInvalid", tt.limit, err)
		}
	}
}

// TestCursor: a cursor part bound for a TEXT column that the dialect's
// text cannot hold is malformed there; the same cursor reads in SQLite.
func TestCursor(t *testing.T) {
	t.Parallel()
	good := cursor.Encode(cursor.Audit, 42, "ev-1")
	bad := cursor.Encode(cursor.Audit, 42, "ev\x00")
	for _, d := range []Dialect{SQLite, Postgres} {
		at, parts, err := d.Cursor(good, cursor.Audit, 1)
		if err != nil || at != 42 || !reflect.DeepEqual(parts, []string{"ev-1"}) {
			t.Errorf("Cursor(good) = %d, %q, %v", at, parts, err)
		}
		if _, _, err := d.Cursor(good, cursor.Changes, 1); !errors.Is(err, cursor.ErrMalformed) {
			t.Errorf("Cursor(another list's) = %v, want ErrMalformed", err)
		}
	}
	if _, parts, err := SQLite.Cursor(bad, cursor.Audit, 1); err != nil || parts[0] != "ev\x00" {
		t.Errorf("SQLite.Cursor(NUL part) = %q, %v; want it read", parts, err)
	}
	if _, _, err := Postgres.Cursor(bad, cursor.Audit, 1); !errors.Is(err, cursor.ErrMalformed) {
		t.Errorf("Postgres.Cursor(NUL part) = %v, want ErrMalformed", err)
	}
}

func TestPage(t *testing.T) {
	t.Parallel()
	next := func(last *int) string { return string(rune('a' + *last)) }
	for _, tt := range []struct {
		rows  []int
		limit int
		want  []int
		after string
	}{
		{nil, 2, nil, ""},
		{[]int{0, 1}, 2, []int{0, 1}, ""},
		{[]int{0, 1, 2}, 2, []int{0, 1}, "b"},
		{[]int{0, 1}, 1, []int{0}, "a"},
	} {
		got, after := Page(tt.rows, tt.limit, next)
		if !reflect.DeepEqual(got, tt.want) || after != tt.after {
			t.Errorf("Page(%v, %d) = %v, %q; want %v, %q", tt.rows, tt.limit, got, after, tt.want, tt.after)
		}
	}
}

// TestAfterCursor: the first page has no condition; a cursor of the list
// becomes the keyset condition in the dialect's placeholders; another
// list's cursor, or one whose ID the dialect cannot bind, is malformed.
func TestAfterCursor(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		d    Dialect
		want string
	}{
		{SQLite, `SELECT a FROM t WHERE org = ? AND (created_at, id) > (?, ?)`},
		{Postgres, `SELECT a FROM t WHERE org = $1 AND (created_at, id) > ($2, $3)`},
	} {
		first := New(tt.d, `SELECT a FROM t WHERE org = ?`, "o")
		if err := first.AfterCursor("", cursor.Changes, ">"); err != nil || first.String() != `SELECT a FROM t WHERE org = `+tt.d.Placeholders(1, 1) {
			t.Errorf("AfterCursor(first page) = %v, %s", err, first.String())
		}
		q := New(tt.d, `SELECT a FROM t WHERE org = ?`, "o")
		if err := q.AfterCursor(cursor.Encode(cursor.Changes, 9, "ch-1"), cursor.Changes, ">"); err != nil {
			t.Fatalf("AfterCursor = %v", err)
		}
		if q.String() != tt.want || !reflect.DeepEqual(q.Args(), []any{"o", int64(9), "ch-1"}) {
			t.Errorf("AfterCursor: %s %#v; want %s", q.String(), q.Args(), tt.want)
		}
		if err := New(tt.d, `SELECT a FROM t`).AfterCursor(cursor.Encode(cursor.Audit, 9, "ev-1"), cursor.Changes, ">"); !errors.Is(err, cursor.ErrMalformed) {
			t.Errorf("AfterCursor(another list's) = %v, want ErrMalformed", err)
		}
	}
	if err := New(Postgres, `SELECT a FROM t`).AfterCursor(cursor.Encode(cursor.Changes, 9, "\xff"), cursor.Changes, ">"); !errors.Is(err, cursor.ErrMalformed) {
		t.Errorf("Postgres AfterCursor(not text) = %v, want ErrMalformed", err)
	}
}
