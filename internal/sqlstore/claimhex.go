package sqlstore

import "strings"

// A write call's claim on SQLite carries two values spelled in hex
// digits: its request hash (the arguments' 64 digits) and, when the key
// was derived rather than given by the caller, its idempotency key, which
// ends with the same 64 digits ("3:run,7:agent-1,5:run-1,5:agent,64:6e0f…").
// As text they were 128 bytes of every claim's row, and the key's 99
// again in the primary key's index (issue 35). SQLite stores them as a
// BLOB (migration 0051): the hash as the 32 bytes its digits spell, the
// key as its text before the digits and then their 32 bytes. Every other
// value (a caller's key, a hash of another form) is stored as the text it
// is, and every reader reads a BLOB back as the text it was
// (ClaimKeyRead, ClaimHashRead), so each value reads back byte for byte.
// PostgreSQL stores the text.
//
// The primary key (organization, tool, key) stays exactly as unique as it
// was: the stored form is a function of the text alone, the same for a
// claim's insert and for every lookup (which bind PackClaimKey's form, so
// they are still searches of the primary key's index), and it is
// injective: a BLOB is never equal to a TEXT in SQLite, text is stored as
// itself, and a BLOB's text is its bytes but the last 32 and then those
// in lowercase hex, one text for one BLOB.

// The derived key's form: canonical.Key's parts "run", the principal, …,
// and last the arguments' hash (invoke.Key). A caller's key begins with
// the part "caller" and is never of it.
const (
	derivedKeyPrefix = "3:run,"
	derivedKeyHash   = ",64:"
	hashDigits       = 64
)

// PackClaimKey answers the form SQLite stores the claim key k in,
// appended to dst, when k is a derived key: it begins with "3:run,", ends
// with ",64:" and 64 lowercase hex digits, and holds no NUL byte. Then
// the form is the text before the digits and the 32 bytes they spell. ok
// is false for any other key, stored as its text.
//
// The NUL byte is refused because migration 0051 converts the keys
// stored before it by SQL's text functions, some of which stop at one:
// a key is packed there exactly when it is here.
func PackClaimKey(dst []byte, k string) (_ []byte, ok bool) {
	if !derivedKey(k) {
		return dst, false
	}
	return appendUnhex(append(dst, k[:len(k)-hashDigits]...), k[len(k)-hashDigits:]), true
}

// derivedKey reports whether k is of a derived key's form (see
// PackClaimKey).
func derivedKey(k string) bool {
	if len(k) < len(derivedKeyPrefix)+len(derivedKeyHash)+hashDigits || k[:len(derivedKeyPrefix)] != derivedKeyPrefix {
		return false
	}
	text, h := k[:len(k)-hashDigits], k[len(k)-hashDigits:]
	return strings.HasSuffix(text, derivedKeyHash) && strings.IndexByte(text, 0) < 0 && lowerHex(h)
}

// PackClaimHash answers the form SQLite stores a claim's request hash h
// in, appended to dst, when h is 64 lowercase hex digits (canonical.Hash's
// form): the 32 bytes they spell. ok is false for any other value, stored
// as its text. (A hash equal to its derived key's digits is not stored at
// all: see ClaimHashArg.)
func PackClaimHash(dst []byte, h string) (_ []byte, ok bool) {
	if len(h) != hashDigits || !lowerHex(h) {
		return dst, false
	}
	return appendUnhex(dst, h), true
}

// SameHash is the request_hash SQLite stores for a claim whose key is
// derived and ends with the request hash's own digits, which a derived
// key always does (invoke.Key): the integer 0, which a record holds in
// its header alone. The hash is read back from the key (ClaimHashRead).
// No other value is ever stored as an integer: a hash is bound as text or
// as bytes.
const SameHash int64 = 0

// ClaimKeyArg answers k as SQLite binds it to the claims' key column: its
// packed form (a []byte, bound as a BLOB) or k itself (bound as TEXT).
func ClaimKeyArg(k string) any {
	if !derivedKey(k) {
		return k
	}
	b, _ := PackClaimKey(make([]byte, 0, len(k)-hashDigits/2), k)
	return b
}

// ClaimHashArg answers h, the request hash of the claim on key k, as
// SQLite binds it to the claims' request_hash column: SameHash when k is
// a derived key ending with h's digits, else its packed form (a []byte)
// or h itself.
func ClaimHashArg(k, h string) any {
	if len(h) != hashDigits || !lowerHex(h) {
		return h
	}
	if derivedKey(k) && k[len(k)-hashDigits:] == h {
		return SameHash
	}
	b, _ := PackClaimHash(make([]byte, 0, hashDigits/2), h)
	return b
}

// ClaimKeyRead answers the SQL expression, in SQLite, reading the claims'
// key column expr back as its text: a BLOB as the text its bytes start
// with and its last 32 bytes in lowercase hex, a text as it is.
func ClaimKeyRead(expr string) string {
	return "iif(typeof(" + expr + ") = 'blob', CAST(substr(" + expr + ", 1, length(" + expr + ") - 32) AS TEXT) || lower(hex(substr(" +
		expr + ", -32))), " + expr + ")"
}

// ClaimHashRead answers the SQL expression, in SQLite, reading the claims'
// request_hash column expr back as its text: a BLOB as its bytes in
// lowercase hex, SameHash as the digits of the key, whose column is key
// (see ClaimKeyRead), a text as it is.
func ClaimHashRead(expr, key string) string {
	return "iif(typeof(" + expr + ") = 'blob', lower(hex(" + expr + ")), iif(typeof(" + expr + ") = 'integer', lower(hex(substr(" +
		key + ", -32))), " + expr + "))"
}

// ClaimSelect answers ClaimColumns as the store of d reads them: on
// SQLite, the key and the request hash read back as their text.
func (d Dialect) ClaimSelect() string {
	if !d.hexAudit {
		return ClaimColumns
	}
	return sqliteClaimSelect
}

// sqliteClaimKeyText is the key's text on SQLite, as claims_by_status
// holds it (migration 0051).
var sqliteClaimKeyText = ClaimKeyRead("key")

// sqliteClaimSelect is SQLite's ClaimSelect, written once.
var sqliteClaimSelect = `organization_id, tool, ` + sqliteClaimKeyText + `, ` + ClaimHashRead("request_hash", "key") + `, status, result, owner,
	lease_until, dispatched, attempts, run_id, step_path, arguments, reason,
	reconciled_by, note, version, created_at, updated_at, invocation, node`

// lowerHex reports whether h is lowercase hex digits alone.
func lowerHex(h string) bool {
	for j := 0; j < len(h); j++ {
		if x := h[j]; (x < '0' || x > '9') && (x < 'a' || x > 'f') {
			return false
		}
	}
	return true
}

// appendUnhex appends the bytes an even count of lowercase hex digits
// spell.
func appendUnhex(dst []byte, h string) []byte {
	for j := 0; j < len(h); j += 2 {
		dst = append(dst, unhex(h[j])<<4|unhex(h[j+1]))
	}
	return dst
}
