package postgres

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// checkTextPart refuses a cursor part bound for a TEXT column (a tool or an
// ID) that no TEXT value holds: PostgreSQL text is UTF-8 without NUL, so such
// a part cannot come from encodeCursor here, and sending it would answer a
// database error rather than errCursor. A key part is BYTEA and takes any
// byte.
func checkTextPart(p string) error {
	if strings.IndexByte(p, 0) >= 0 || !utf8.ValidString(p) {
		return fmt.Errorf("%w: not text", errCursor)
	}
	return nil
}
