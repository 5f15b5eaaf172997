package policytest

import (
	"encoding/json"
	"fmt"
	"strings"
)

// CollidingNumbers answers the array of numbers that made a Cedar decision
// take seconds: n integers 1..n, then n decimals 0.0001..n/10000. Cedar
// keeps a set in a table indexed by each value's hash, and the hash of
// a Long is the number and that of a decimal its count of ten-thousandths,
// so the second half collides with the first and every insertion probes
// the whole run of taken slots: the cost of building the set is quadratic
// in its size.
func CollidingNumbers(n int) []any {
	out := make([]any, 0, 2*n)
	for i := 1; i <= n; i++ {
		out = append(out, json.Number(fmt.Sprint(i)))
	}
	for i := 1; i <= n; i++ {
		out = append(out, json.Number(fmt.Sprintf("%d.%04d", i/10000, i%10000)))
	}
	return out
}

// PlainNumbers answers the integers 1..2n: an array as long as
// CollidingNumbers(n) whose hashes do not collide, what a hostile
// request's cost is compared with.
func PlainNumbers(n int) []any {
	out := make([]any, 0, 2*n)
	for i := 1; i <= 2*n; i++ {
		out = append(out, json.Number(fmt.Sprint(i)))
	}
	return out
}

// CollidingNumbersJSON is CollidingNumbers written as a JSON array, the
// form a test table or a request body holds it in.
func CollidingNumbersJSON(n int) string { return arrayJSON(CollidingNumbers(n)) }

// PlainNumbersJSON is PlainNumbers written as a JSON array.
func PlainNumbersJSON(n int) string { return arrayJSON(PlainNumbers(n)) }

func arrayJSON(vs []any) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(v.(json.Number)))
	}
	b.WriteByte(']')
	return b.String()
}
