// Package cursor is the one encoding of the keyset-pagination cursors every
// store answers, so a cursor means the same position on SQLite and on
// PostgreSQL, and a cursor from one list is refused by another.
package cursor

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/toolplane/toolplane"
)

// ErrMalformed: a cursor Encode could not have made for that list. It is a
// toolplane.ErrBadCursor, so every door answers it as the caller's
// mistake, whichever store decoded it.
var ErrMalformed = toolplane.Refine(toolplane.ErrBadCursor, "malformed cursor")

// A cursor is the ordering key of the last row of a page: its created_at and
// the identity columns that break ties. It is encoded in binary, not JSON,
// because a claim key may hold any byte and JSON would rewrite invalid UTF-8.
//
// Layout: format byte, list byte, created_at as a varint, then each part as a
// uvarint length and its bytes; base64url without padding outside.

// format changes when the layout does, so an old cursor is refused
// rather than misread.
const format = 1

// The lists a cursor belongs to: a cursor from one list is refused by the
// others.
const (
	Claims      byte = 'c'
	Approvals   byte = 'a'
	Audit       byte = 'e'
	Credentials byte = 'k'
	// ToolVersions is the catalogue's list, whose created_at slot carries
	// a version's publication time.
	ToolVersions byte = 'v'
	// EveryToolVersion is the deployment-wide list of every
	// organization's versions; its cursor also carries the organization.
	EveryToolVersion byte = 'w'
	// Changes is the registry and authorization change log's list.
	Changes byte = 'h'
	// Connections is one organization's connections, oldest first.
	Connections byte = 'n'
	// EveryConnection is the deployment-wide list of every organization's
	// connections by ID; its cursor carries the organization too, and no
	// time.
	EveryConnection byte = 'x'
	// NewestApprovals is one organization's approvals newest first (a
	// person's inbox and history); its cursor is not one of the
	// oldest-first list.
	NewestApprovals byte = 'A'
	// Anomalies is one organization's anomaly triage items, newest
	// first.
	Anomalies byte = 'y'
)

// Encode answers the cursor after a row of list ordered by createdAt, with
// the identity parts that break ties.
func Encode(list byte, createdAt int64, parts ...string) string {
	b := make([]byte, 0, 2+binary.MaxVarintLen64+len(parts)*16)
	b = append(b, format, list)
	b = binary.AppendVarint(b, createdAt)
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode answers the created_at and the n parts of a cursor from list, or
// an error wrapping ErrMalformed for anything Encode could not have made
// for it.
func Decode(s string, list byte, n int) (int64, []string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: not base64url", ErrMalformed)
	}
	if len(b) < 2 || b[0] != format || b[1] != list {
		return 0, nil, fmt.Errorf("%w: not a cursor of this list", ErrMalformed)
	}
	b = b[2:]
	createdAt, k := binary.Varint(b)
	if k <= 0 {
		return 0, nil, fmt.Errorf("%w: bad time", ErrMalformed)
	}
	b = b[k:]
	parts := make([]string, n)
	for i := range parts {
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return 0, nil, fmt.Errorf("%w: bad part %d", ErrMalformed, i)
		}
		b = b[k:]
		parts[i] = string(b[:size])
		b = b[size:]
	}
	if len(b) != 0 {
		return 0, nil, fmt.Errorf("%w: trailing bytes", ErrMalformed)
	}
	return createdAt, parts, nil
}
