package sqlruntime

import (
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// bindValues answers the values of a translated statement's placeholders,
// in order. An absent argument binds NULL. A number binds as an integer
// when it is one and as its exact text otherwise, so a decimal keeps its
// digits; an object or array binds as its JSON text.
func bindValues(names []string, args any) []any {
	m, _ := args.(map[string]any)
	out := make([]any, len(names))
	for i, name := range names {
		out[i] = bindValue(m[name])
	}
	return out
}

func bindValue(v any) any {
	switch x := v.(type) {
	case nil, bool, string, int64, float64:
		return x
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return n
		}
		return string(x)
	case int:
		return int64(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// collect reads rows into plain values: at most limit of them, and
// whether there were more. A read stops at the first row past the limit;
// a write (all) reads every row its statement answers, since each is a
// row it changed, and counts them all.
func collect(rows *sql.Rows, limit int, all bool) (out []any, n int64, cut bool, err error) {
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, 0, false, err
	}
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, 0, false, err
	}
	kinds := make([]columnKind, len(types))
	for i, t := range types {
		kinds[i] = kindOf(t.DatabaseTypeName())
	}
	out = []any{}
	vals := make([]any, len(names))
	ptrs := make([]any, len(names))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if len(out) == limit {
			cut = true
			if !all {
				break
			}
			n++
			continue
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, 0, false, err
		}
		row := make(map[string]any, len(names))
		for i, name := range names {
			row[name] = plain(vals[i], kinds[i])
		}
		out = append(out, row)
		n++
	}
	if err := rows.Err(); err != nil {
		return nil, 0, false, err
	}
	if err := rows.Close(); err != nil {
		return nil, 0, false, err
	}
	if !all {
		n = int64(len(out))
	}
	return out, n, cut, nil
}

// columnKind is what a column's declared type says about its values'
// text.
type columnKind int

const (
	columnOther columnKind = iota
	columnNumber
	columnJSON
)

func kindOf(typeName string) columnKind {
	t := strings.TrimPrefix(strings.ToUpper(typeName), "UNSIGNED ")
	switch t {
	case "NUMERIC", "DECIMAL", "INT", "INTEGER", "BIGINT", "SMALLINT", "TINYINT", "MEDIUMINT",
		"INT2", "INT4", "INT8", "FLOAT", "FLOAT4", "FLOAT8", "DOUBLE", "REAL", "YEAR":
		return columnNumber
	case "JSON", "JSONB":
		return columnJSON
	}
	return columnOther
}

// plain converts a scanned value to a value of the result's plain tree:
// numbers as json.Number (exactly the database's digits), times as
// RFC 3339, bytes as their UTF-8 text or, when they are not UTF-8,
// base64, JSON columns as the JSON they hold.
func plain(v any, kind columnKind) any {
	switch x := v.(type) {
	case nil:
		return nil
	case bool:
		return x
	case int64:
		return json64(x)
	case int32:
		return json64(int64(x))
	case int:
		return json64(int64(x))
	case uint64:
		return json.Number(strconv.FormatUint(x, 10))
	case float64:
		return float(x, 64)
	case float32:
		return float(float64(x), 32)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case string:
		return text(x, kind)
	case []byte:
		if !utf8.Valid(x) {
			return base64.StdEncoding.EncodeToString(x)
		}
		return text(string(x), kind)
	}
	return fmt.Sprint(v)
}

func text(s string, kind columnKind) any {
	switch kind {
	case columnNumber:
		if number(s) {
			return json.Number(s)
		}
	case columnJSON:
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		var v any
		if d.Decode(&v) == nil && !d.More() {
			return v
		}
	}
	return s
}

// float answers a float as a JSON number, or as text when JSON has no
// number for it (NaN, infinities).
func float(f float64, bits int) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return strconv.FormatFloat(f, 'g', -1, bits)
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, bits))
}

func json64(n int64) json.Number { return json.Number(strconv.FormatInt(n, 10)) }

// number reports whether s is a JSON number:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func number(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}
