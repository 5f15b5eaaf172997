package sqlruntime

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestScanFindsParametersOnlyOutsideQuotesAndComments(t *testing.T) {
	t.Parallel()
	all := []dialect{dialectPostgres, dialectSQLite, dialectMySQL}
	for _, tc := range []struct {
		name     string
		text     string
		dialects []dialect
		want     []string
	}{
		{"plain", "SELECT * FROM t WHERE a = :a AND b = :b_2", all, []string{"a", "b_2"}},
		{"repeated", "SELECT :a, :a", all, []string{"a", "a"}},
		{"single quoted", "SELECT ':a', 'it''s :b', :c", all, []string{"c"}},
		{"double quoted identifier", `SELECT ":a" FROM t WHERE x = :b`, all, []string{"b"}},
		{"backtick", "SELECT `:a` FROM t WHERE x = :b", []dialect{dialectMySQL, dialectSQLite}, []string{"b"}},
		{"line comment", "SELECT 1 -- :a\n, :b", all, []string{"b"}},
		{"block comment", "SELECT /* :a */ :b", all, []string{"b"}},
		{"nested block comment", "SELECT /* /* :a */ :b */ :c", []dialect{dialectPostgres}, []string{"c"}},
		{"unnested block comment", "SELECT /* /* :a */ :b", []dialect{dialectMySQL, dialectSQLite}, []string{"b"}},
		{"mysql hash comment", "SELECT 1 # :a\n, :b", []dialect{dialectMySQL}, []string{"b"}},
		{"mysql -- needs a space", "SELECT 1--:a\n", []dialect{dialectMySQL}, []string{"a"}},
		{"mysql backslash escape", `SELECT 'it\'s :a', :b`, []dialect{dialectMySQL}, []string{"b"}},
		{"postgres backslash is literal", `SELECT 'a\', :b`, []dialect{dialectPostgres, dialectSQLite}, []string{"b"}},
		{"postgres E string", `SELECT E'it\'s :a', :b`, []dialect{dialectPostgres}, []string{"b"}},
		{"dollar quoted", "SELECT $$ :a $$, $tag$ :b $x$ $tag$, :c", []dialect{dialectPostgres}, []string{"c"}},
		{"positional is not a dollar quote", "SELECT $1, :a", []dialect{dialectPostgres}, []string{"a"}},
		{"cast", "SELECT :a::text, x::int", []dialect{dialectPostgres}, []string{"a"}},
		{"assignment", "SELECT @x := :a", []dialect{dialectMySQL}, []string{"a"}},
		{"digit is no name", "SELECT '1:2', :1, :_a", all, []string{"_a"}},
		{"trailing semicolon", "SELECT :a;  -- done\n", all, []string{"a"}},
	} {
		for _, d := range tc.dialects {
			t.Run(tc.name+"/"+d.String(), func(t *testing.T) {
				s, err := scan(tc.text, d)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, p := range s.params {
					got = append(got, p.name)
				}
				if !slices.Equal(got, tc.want) {
					t.Fatalf("params %q, want %q", got, tc.want)
				}
				if s.trailing {
					t.Fatal("read as two statements")
				}
			})
		}
	}
}

func TestScanStatementShape(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text     string
		first    string
		trailing bool
		rows     bool
		err      bool
	}{
		{"SELECT 1", "SELECT", false, true, false},
		{"  (SELECT 1)", "SELECT", false, true, false},
		{"/* c */ -- d\n with x as (select 1) select * from x", "WITH", false, true, false},
		{"WITH x AS (SELECT 1) DELETE FROM t", "WITH", false, false, false},
		{"INSERT INTO t VALUES (1) RETURNING id", "INSERT", false, true, false},
		{"UPDATE t SET a = 'returning'", "UPDATE", false, false, false},
		{"SELECT 1; DROP TABLE t", "SELECT", true, true, false},
		{"SELECT 1; ", "SELECT", false, true, false},
		{"SELECT ';' ; -- x", "SELECT", false, true, false},
		{"SELECT 'open", "", false, false, true},
		{"SELECT /* open", "", false, false, true},
		{`SELECT "open`, "", false, false, true},
		{"'x' SELECT", "-", false, false, false},
	} {
		s, err := scan(tc.text, dialectPostgres)
		if (err != nil) != tc.err {
			t.Fatalf("%q: error %v", tc.text, err)
		}
		if err != nil {
			continue
		}
		if s.first != tc.first || s.trailing != tc.trailing || s.returnsRows() != tc.rows {
			t.Fatalf("%q: first %q trailing %v rows %v", tc.text, s.first, s.trailing, s.returnsRows())
		}
	}
}

func TestTranslatePlaceholders(t *testing.T) {
	t.Parallel()
	text := "SELECT ':x', :a, :b, :a FROM t WHERE c = :b;"
	for _, tc := range []struct {
		d     dialect
		text  string
		binds []string
	}{
		{dialectPostgres, "SELECT ':x', $1, $2, $1 FROM t WHERE c = $2", []string{"a", "b"}},
		{dialectSQLite, "SELECT ':x', ?, ?, ? FROM t WHERE c = ?", []string{"a", "b", "a", "b"}},
		{dialectMySQL, "SELECT ':x', ?, ?, ? FROM t WHERE c = ?", []string{"a", "b", "a", "b"}},
	} {
		s, err := scan(text, tc.d)
		if err != nil {
			t.Fatal(err)
		}
		got := translate(text, s, tc.d)
		if got.text != tc.text || !slices.Equal(got.binds, tc.binds) {
			t.Fatalf("%s: %q %q", tc.d, got.text, got.binds)
		}
	}
}

// FuzzScan: the scanner never panics on any text; a translation holds one
// placeholder per parameter found, and every byte outside the parameters
// is the statement's own.
func FuzzScan(f *testing.F) {
	for _, seed := range []string{
		"SELECT :a, ':b', \":c\", `:d`, $$ :e $$, /* :f */ -- :g\n:h::int;",
		"SELECT E'\\' :a', $t$ $x$ :b $t$ # :c\n :d",
		"SELECT /* /* */ :a */ :b",
		"", ":", "::", ":a", "$", "$$", "'", "/*", "--", "#", ";", "; :a", "\x00:a",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, d := range dialects {
			s, err := scan(text, d)
			if err != nil {
				continue
			}
			if s.end > len(text) {
				t.Fatalf("end %d past the text", s.end)
			}
			tr := translate(text, s, d)
			// Rebuild the source from the translation: replacing each
			// placeholder by its parameter's text must answer the
			// statement up to its end.
			var want strings.Builder
			at := 0
			for _, p := range s.params {
				if p.start < at || p.end > s.end || text[p.start] != ':' {
					t.Fatalf("%s: parameter span %d..%d out of order", d, p.start, p.end)
				}
				want.WriteString(text[at:p.start])
				at = p.end
			}
			want.WriteString(text[at:s.end])
			var rest strings.Builder
			out := tr.text
			n := 0
			for _, p := range s.params {
				gap := text[pStart(s, n, p):p.start]
				if !strings.HasPrefix(out, gap) {
					t.Fatalf("%s: text before :%s changed: %q does not start %q", d, p.name, out, gap)
				}
				rest.WriteString(gap)
				out = out[len(gap):]
				ph := "?"
				if d == dialectPostgres {
					i := slices.Index(tr.binds, p.name)
					ph = "$" + strconv.Itoa(i+1)
				}
				if !strings.HasPrefix(out, ph) {
					t.Fatalf("%s: placeholder for :%s missing in %q", d, p.name, out)
				}
				out = out[len(ph):]
				n++
			}
			rest.WriteString(out)
			if rest.String() != want.String() {
				t.Fatalf("%s: text outside parameters changed: %q, want %q", d, rest.String(), want.String())
			}
			if d != dialectPostgres && (len(tr.binds) != len(s.params) || strings.Count(tr.text, "?")-strings.Count(want.String(), "?") != len(s.params)) {
				t.Fatalf("%s: %d placeholders for %d parameters", d, len(tr.binds), len(s.params))
			}
			if utf8.ValidString(text) && !utf8.ValidString(tr.text) {
				t.Fatalf("%s: translation broke UTF-8", d)
			}
		}
	})
}

// pStart answers where the text before the n-th parameter starts.
func pStart(s scanned, n int, _ param) int {
	if n == 0 {
		return 0
	}
	return s.params[n-1].end
}
