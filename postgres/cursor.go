package postgres

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// A cursor is the ordering key of the last row of a page: its created_at and
// the identity columns that break ties. It is encoded in binary, not JSON,
// because a claim key may hold any byte and JSON would rewrite invalid UTF-8.
//
// Layout: format byte, list byte, created_at as a varint, then each part as a
// uvarint length and its bytes; base64url without padding outside. The
// layout, the format byte and the list bytes are the SQLite store's, so a
// cursor names the same position on either backend.

// cursorFormat changes when the layout does, so an old cursor is refused
// rather than misread.
const cursorFormat = 1

// The lists a cursor belongs to: a cursor from one list is refused by the
// others.
const (
	cursorClaims    byte = 'c'
	cursorApprovals byte = 'a'
	cursorAudit     byte = 'e'
)

func encodeCursor(list byte, createdAt int64, parts ...string) string {
	b := make([]byte, 0, 2+binary.MaxVarintLen64+len(parts)*16)
	b = append(b, cursorFormat, list)
	b = binary.AppendVarint(b, createdAt)
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor answers the created_at and the n parts of a cursor from list,
// or errCursor for anything encodeCursor could not have made for it.
func decodeCursor(s string, list byte, n int) (int64, []string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: not base64url", errCursor)
	}
	if len(b) < 2 || b[0] != cursorFormat || b[1] != list {
		return 0, nil, fmt.Errorf("%w: not a cursor of this list", errCursor)
	}
	b = b[2:]
	createdAt, k := binary.Varint(b)
	if k <= 0 {
		return 0, nil, fmt.Errorf("%w: bad time", errCursor)
	}
	b = b[k:]
	parts := make([]string, n)
	for i := range parts {
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return 0, nil, fmt.Errorf("%w: bad part %d", errCursor, i)
		}
		b = b[k:]
		parts[i] = string(b[:size])
		b = b[size:]
	}
	if len(b) != 0 {
		return 0, nil, fmt.Errorf("%w: trailing bytes", errCursor)
	}
	return createdAt, parts, nil
}

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
