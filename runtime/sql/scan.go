package sqlruntime

import (
	"errors"
	"strconv"
	"strings"
)

// dialect is the SQL a statement is read as. The lexical rules that decide
// what is a parameter differ: MySQL strings take backslash escapes and #
// starts a comment, PostgreSQL has dollar-quoted strings and nested block
// comments, and only PostgreSQL numbers its placeholders.
type dialect int

// The dialects, one per driver a connection may name.
const (
	dialectPostgres dialect = iota + 1
	dialectSQLite
	dialectMySQL
)

// dialects lists every dialect, for checks made before the driver is
// known.
var dialects = []dialect{dialectPostgres, dialectSQLite, dialectMySQL}

// The drivers a connection's Config.Driver may name.
const (
	DriverPostgres = "postgres"
	DriverSQLite   = "sqlite"
	DriverMySQL    = "mysql"
)

func dialectOf(driver string) (dialect, bool) {
	switch driver {
	case DriverPostgres:
		return dialectPostgres, true
	case DriverSQLite:
		return dialectSQLite, true
	case DriverMySQL:
		return dialectMySQL, true
	}
	return 0, false
}

func (d dialect) String() string {
	switch d {
	case dialectPostgres:
		return DriverPostgres
	case dialectSQLite:
		return DriverSQLite
	case dialectMySQL:
		return DriverMySQL
	}
	return "dialect(" + strconv.Itoa(int(d)) + ")"
}

// param is one :name in a statement: its name and the byte span of the
// whole :name.
type param struct {
	name       string
	start, end int
}

// scanned is what the scanner learned of a statement.
type scanned struct {
	params []param
	// end is the offset of the first top-level semicolon, or the text's
	// length when there is none.
	end int
	// trailing is true when anything but whitespace and comments follows
	// that semicolon: a second statement.
	trailing bool
	// first is the first keyword, upper-cased ("SELECT"), past leading
	// whitespace, comments and opening parentheses.
	first string
	// words holds the upper-cased keywords of interest seen outside
	// strings, identifiers and comments, and the clauses of two keywords
	// ("INTO OUTFILE").
	words map[string]bool
	// calls holds the lower-cased names of the functions the statement
	// calls: a name, bare or quoted, followed by an opening parenthesis.
	calls map[string]bool
	// executable is true when a MySQL comment that MySQL runs as SQL
	// (/*! ... */, /*M! ... */) is in the text.
	executable bool
	// escapedName is true when a PostgreSQL identifier is written with
	// Unicode escapes (U&"..."), whose name the text does not show.
	escapedName bool
	// prev is the keyword just before the current token, "" when another
	// token came between.
	prev string
	// lead holds the statement's first keywords, upper-cased, outside
	// parentheses and before AS (at most maxLead): what a CREATE or ALTER
	// makes (CREATE OR REPLACE FUNCTION, CREATE DEFINER = x TRIGGER), and
	// not the name of a column it declares.
	lead     []string
	leadDone bool
	// depth is the parentheses' nesting at the current token.
	depth int
	// names holds the lower-cased bare and quoted identifiers of the
	// statement (every keyword among them), for the relations a statement
	// may not read.
	names map[string]bool
}

// maxLead bounds scanned.lead.
const maxLead = 8

// interesting are the keywords whose presence says whether a statement
// answers rows.
var interesting = map[string]bool{"RETURNING": true, "INSERT": true, "UPDATE": true, "DELETE": true, "MERGE": true, "REPLACE": true}

// intoClauses are the words that, after INTO, make a MySQL query write a
// file on the database server.
var intoClauses = map[string]bool{"OUTFILE": true, "DUMPFILE": true}

// errUnterminated: a string, quoted identifier or comment never ends, so
// where the parameters are cannot be told.
var errUnterminated = errors.New("a quoted string, quoted identifier or comment is not closed")

// scan reads text as d and finds its parameters: :name outside
// single-quoted strings, double-quoted (and, for MySQL and SQLite,
// backtick-quoted) identifiers, -- and /* */ comments (# comments for
// MySQL) and PostgreSQL dollar-quoted strings; a PostgreSQL :: cast is
// not a parameter. It never looks at an argument: it reads the tool's
// own statement, once.
func scan(text string, d dialect) (scanned, error) {
	s := scanned{end: len(text)}
	top := true // before the first top-level semicolon
	n := len(text)
	i := 0
	for i < n {
		c := text[i]
		switch {
		case c == '\'':
			j, err := skipQuoted(text, i, '\'', d == dialectMySQL || escapeString(text, i, d))
			if err != nil {
				return s, err
			}
			s.note(top)
			i = j
		case c == '"':
			// A MySQL string, or an identifier.
			j, err := skipQuoted(text, i, '"', d == dialectMySQL)
			if err != nil {
				return s, err
			}
			if d == dialectPostgres && unicodeIdent(text, i) {
				s.escapedName = true
			}
			if top && d != dialectMySQL {
				s.name(text[i+1 : j-1])
			}
			s.note(top)
			s.call(top, text, text[i+1:j-1], j, d)
			i = j
		case c == '`' && d != dialectPostgres:
			j, err := skipQuoted(text, i, '`', false)
			if err != nil {
				return s, err
			}
			if top {
				s.name(text[i+1 : j-1])
			}
			s.note(top)
			s.call(top, text, text[i+1:j-1], j, d)
			i = j
		case c == '-' && i+1 < n && text[i+1] == '-' && (d != dialectMySQL || i+2 == n || text[i+2] <= ' '):
			i = skipLine(text, i)
		case c == '#' && d == dialectMySQL:
			i = skipLine(text, i)
		case c == '/' && i+1 < n && text[i+1] == '*':
			j, err := skipBlock(text, i, d == dialectPostgres)
			if err != nil {
				return s, err
			}
			if d == dialectMySQL && (strings.HasPrefix(text[i:], "/*!") || strings.HasPrefix(text[i:], "/*M!")) {
				s.executable = true
			}
			i = j
		case c == '$' && d == dialectPostgres:
			j, ok, err := skipDollar(text, i)
			if err != nil {
				return s, err
			}
			if !ok {
				i++ // a positional $1, or a lone $
				s.note(top)
				continue
			}
			s.note(top)
			i = j
		case c == ':':
			if i+1 < n && text[i+1] == ':' {
				i += 2 // a cast
				s.note(top)
				continue
			}
			if i+1 < n && nameStart(text[i+1]) {
				j := i + 2
				for j < n && nameChar(text[j]) {
					j++
				}
				s.note(top)
				if top {
					s.params = append(s.params, param{name: text[i+1 : j], start: i, end: j})
				}
				i = j
				continue
			}
			s.note(top)
			i++
		case c == ';':
			if top {
				s.end = i
				top = false
			} else {
				s.trailing = true
			}
			i++
		case nameStart(c) || (c >= '0' && c <= '9'):
			j := i + 1
			for j < n && (nameChar(text[j]) || (text[j] == '$' && d != dialectSQLite)) {
				j++
			}
			if top && nameStart(c) {
				w := strings.ToUpper(text[i:j])
				if s.first == "" {
					s.first = w
				}
				s.leading(w)
				s.name(text[i:j])
				if interesting[w] {
					s.word(w)
				}
				if s.prev == "INTO" && intoClauses[w] {
					s.word("INTO " + w)
				}
			}
			s.note(top)
			if top && nameStart(c) {
				s.prev = strings.ToUpper(text[i:j])
				s.call(top, text, text[i:j], j, d)
			}
			i = j
		case c == '(':
			if top {
				s.depth++
			}
			i++
		case c == ')' && top:
			s.depth--
			s.note(top)
			i++
		case c <= ' ':
			i++
		default:
			s.note(top)
			i++
		}
	}
	return s, nil
}

// note records that a token was seen: after the first top-level semicolon
// it is a second statement. Before it, a token other than a keyword ends
// the search for the first keyword.
func (s *scanned) note(top bool) {
	s.prev = ""
	if !top {
		s.trailing = true
		return
	}
	if s.first == "" {
		s.first = "-"
	}
}

// leading records w as one of the statement's first keywords, until AS,
// outside parentheses.
func (s *scanned) leading(w string) {
	if s.leadDone || s.depth > 0 {
		return
	}
	if w == "AS" || len(s.lead) == maxLead {
		s.leadDone = true
		return
	}
	s.lead = append(s.lead, w)
}

// name records an identifier, lower-cased.
func (s *scanned) name(n string) {
	if s.names == nil {
		s.names = make(map[string]bool)
	}
	s.names[strings.ToLower(n)] = true
}

// word records a keyword or clause of interest.
func (s *scanned) word(w string) {
	if s.words == nil {
		s.words = make(map[string]bool)
	}
	s.words[w] = true
}

// call records name as a function the statement calls when the token
// ending at j is followed, past whitespace and comments, by an opening
// parenthesis. Names are compared lower-cased: the functions the checks
// look for are lower-case in PostgreSQL, and MySQL ignores case.
func (s *scanned) call(top bool, text, name string, j int, d dialect) {
	if !top || !opensParen(text, j, d) {
		return
	}
	if s.calls == nil {
		s.calls = make(map[string]bool)
	}
	s.calls[strings.ToLower(name)] = true
}

// opensParen reports whether the next token at or after i, past
// whitespace and comments, is an opening parenthesis.
func opensParen(text string, i int, d dialect) bool {
	for i < len(text) {
		c := text[i]
		switch {
		case c <= ' ':
			i++
		case c == '-' && i+1 < len(text) && text[i+1] == '-' && (d != dialectMySQL || i+2 == len(text) || text[i+2] <= ' '):
			i = skipLine(text, i)
		case c == '#' && d == dialectMySQL:
			i = skipLine(text, i)
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			j, err := skipBlock(text, i, d == dialectPostgres)
			if err != nil {
				return false
			}
			i = j
		default:
			return c == '('
		}
	}
	return false
}

// unicodeIdent reports whether the double quote at i opens a PostgreSQL
// identifier with Unicode escapes: U& (either case) right before it, the
// U starting a token of its own.
func unicodeIdent(text string, i int) bool {
	return i >= 2 && text[i-1] == '&' && (text[i-2] == 'U' || text[i-2] == 'u') &&
		(i == 2 || !nameChar(text[i-3]) && text[i-3] != '$')
}

func nameStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func nameChar(c byte) bool { return nameStart(c) || (c >= '0' && c <= '9') }

// escapeString reports whether the quote at i opens a PostgreSQL E'...'
// string, the one PostgreSQL string in which a backslash escapes.
func escapeString(text string, i int, d dialect) bool {
	if d != dialectPostgres || i == 0 || (text[i-1] != 'E' && text[i-1] != 'e') {
		return false
	}
	return i == 1 || !nameChar(text[i-2]) && text[i-2] != '$'
}

// skipQuoted answers the offset past the quoted run opening at i with q.
// A doubled quote is the quote itself; with backslash, a backslash
// escapes the byte after it.
func skipQuoted(text string, i int, q byte, backslash bool) (int, error) {
	for j := i + 1; j < len(text); j++ {
		switch text[j] {
		case '\\':
			if backslash {
				j++
			}
		case q:
			if j+1 < len(text) && text[j+1] == q {
				j++
				continue
			}
			return j + 1, nil
		}
	}
	return 0, errUnterminated
}

// skipLine answers the offset past the line comment at i: after its
// newline, or the end of the text.
func skipLine(text string, i int) int {
	if k := strings.IndexByte(text[i:], '\n'); k >= 0 {
		return i + k + 1
	}
	return len(text)
}

// skipBlock answers the offset past the /* */ comment at i. PostgreSQL
// nests them; MySQL and SQLite end at the first */.
func skipBlock(text string, i int, nested bool) (int, error) {
	depth := 0
	for j := i; j+1 < len(text); {
		switch {
		case text[j] == '/' && text[j+1] == '*':
			if depth == 0 || nested {
				depth++
			}
			j += 2
		case text[j] == '*' && text[j+1] == '/':
			depth--
			j += 2
			if depth == 0 {
				return j, nil
			}
		default:
			j++
		}
	}
	return 0, errUnterminated
}

// skipDollar answers the offset past the PostgreSQL dollar-quoted string
// opening at i ($$...$$ or $tag$...$tag$), and false when the $ opens
// none (a positional parameter, or a $ inside a word, which the word
// scanner consumed already).
func skipDollar(text string, i int) (int, bool, error) {
	j := i + 1
	if j < len(text) && nameStart(text[j]) {
		j++
		for j < len(text) && nameChar(text[j]) {
			j++
		}
	}
	if j >= len(text) || text[j] != '$' {
		return 0, false, nil
	}
	tag := text[i : j+1]
	k := strings.Index(text[j+1:], tag)
	if k < 0 {
		return 0, false, errUnterminated
	}
	return j + 1 + k + len(tag), true, nil
}

// translated is a statement rewritten for one driver: the parameters
// replaced by the driver's placeholders, and the argument name each
// placeholder binds, in the order the driver takes its values.
type translated struct {
	text  string
	binds []string
	// returnsRows is true when the statement answers rows: a query, or a
	// change with RETURNING.
	returnsRows bool
}

// translate rewrites text for d from what scan found. PostgreSQL numbers
// its placeholders, so a name used twice reuses its number; SQLite and
// MySQL take one value per ?, so a name used twice is bound twice. Only
// the parameters' spans change: every other byte is the tool's own text,
// up to the first top-level semicolon.
func translate(text string, s scanned, d dialect) translated {
	var b strings.Builder
	t := translated{returnsRows: s.returnsRows()}
	numbers := map[string]int{}
	at := 0
	for _, p := range s.params {
		b.WriteString(text[at:p.start])
		if d == dialectPostgres {
			n, ok := numbers[p.name]
			if !ok {
				t.binds = append(t.binds, p.name)
				n = len(t.binds)
				numbers[p.name] = n
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		} else {
			t.binds = append(t.binds, p.name)
			b.WriteByte('?')
		}
		at = p.end
	}
	b.WriteString(text[at:s.end])
	t.text = b.String()
	return t
}

// returnsRows reports whether the statement answers rows: it starts as a
// query does, or it changes rows and says RETURNING. A WITH that holds no
// change is a query.
func (s scanned) returnsRows() bool {
	if s.words["RETURNING"] {
		return true
	}
	switch s.first {
	case "SELECT", "VALUES", "SHOW", "EXPLAIN", "TABLE", "DESCRIBE", "DESC":
		return true
	case "WITH":
		return !(s.words["INSERT"] || s.words["UPDATE"] || s.words["DELETE"] || s.words["MERGE"] || s.words["REPLACE"])
	}
	return false
}
