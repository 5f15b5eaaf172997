// Package auditchain makes an organization's audit trail tamper-evident.
// Each event stored gets the next number of its organization's sequence
// and a hash over its own content, its number and the hash of the event
// before it, so a row changed, deleted, moved or added breaks the chain at
// that row. Someone able to rewrite the whole table could recompute every
// hash after the row they changed; signed checkpoints (the operator's
// Ed25519 signature of the chain's hash at a sequence number, kept beside
// the trail and checkable by anyone holding the published public keys)
// catch that too.
//
// The stores assign the chain in the transaction that stores an event:
// Digest is computed in Go from the event as it will be stored, and Link
// chains it (PostgreSQL computes Link itself, with sha256(), so that the
// organization's head row is locked by the insert's own statement).
package auditchain

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"sync"

	"github.com/toolplane/toolplane"
)

// HashSize is the length of every hash of the chain.
const HashSize = sha256.Size

// digestVersion opens the encoding, so a later encoding cannot be taken
// for this one.
const digestVersion = "toolplane-audit-event/1\x00"

// encoder writes the canonical encoding of an event: each field in a fixed
// order, a string as its length then its bytes, so no two events encode
// alike.
type encoder struct {
	buf []byte
}

func (w *encoder) str(s string) {
	w.buf = binary.AppendUvarint(w.buf, uint64(len(s)))
	w.buf = append(w.buf, s...)
}

func (w *encoder) bytes(b []byte) {
	w.buf = binary.AppendUvarint(w.buf, uint64(len(b)))
	w.buf = append(w.buf, b...)
}

func (w *encoder) int(v int64) { w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v)) }

func (w *encoder) bool(v bool) {
	if v {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

func (w *encoder) strs(ss []string) {
	w.buf = binary.AppendUvarint(w.buf, uint64(len(ss)))
	for _, s := range ss {
		w.str(s)
	}
}

// encode appends e's canonical encoding: every field a store keeps but
// the chain's own (Seq, PrevHash, Hash), as a store reads it back. A time
// counts in microseconds (what a store keeps); an empty and a missing
// list, or JSON document, are the same.
func (w *encoder) encode(e *toolplane.AuditEvent) {
	w.buf = append(w.buf, digestVersion...)
	w.str(e.OrganizationID)
	w.str(e.ID)
	w.str(string(e.Kind))
	w.str(e.Subject)
	w.str(e.TenantID)
	w.str(e.RunID)
	w.str(e.StepPath)
	w.str(e.AgentID)
	w.str(e.PrincipalID)
	w.str(e.UserID)
	w.str(e.KeyID)
	w.str(e.Tool)
	w.str(e.ToolVersion)
	w.str(string(e.Effect))
	w.bool(e.Destructive)
	w.str(string(e.Source))
	w.str(e.TraceID)
	w.str(e.SpanID)
	w.str(e.Outcome)
	w.str(e.ArgumentsHash)
	w.str(e.Key)
	w.str(e.Reason)
	w.str(e.ApprovalID)
	w.str(e.AuthorizedBy)
	w.str(e.ApproverID)
	w.bytes(e.Arguments)
	w.strs(e.PIIFields)
	w.strs(e.Classifications)
	w.str(e.OutputHash)
	w.int(e.CostCents)
	w.int(int64(e.Attempts))
	w.str(e.ConnectionID)
	w.str(e.ParentID)
	w.str(e.PolicyDecision)
	w.int(e.PolicyBundle)
	w.str(e.PolicyRule)
	w.bool(e.PolicyDegraded)
	w.bytes(e.PolicyInput)
	w.bool(e.Replayed)
	w.int(e.LatencyMicros)
	w.int(e.CreatedAt.UnixMicro())
}

// A hasher is a reusable encoder and link buffer: Digest and Verify run
// once per event, and allocating nothing is most of their speed.
type hasher struct {
	enc  encoder
	link []byte
}

var hashers = sync.Pool{New: func() any { return new(hasher) }}

func (x *hasher) digest(e *toolplane.AuditEvent) [HashSize]byte {
	x.enc.buf = x.enc.buf[:0]
	x.enc.encode(e)
	return sha256.Sum256(x.enc.buf)
}

// linkHash hashes prev, seq and digest as one buffer: through a
// hash.Hash the arguments would escape, two allocations an event.
func (x *hasher) linkHash(prev []byte, seq int64, digest []byte) [HashSize]byte {
	x.link = append(x.link[:0], prev...)
	x.link = binary.BigEndian.AppendUint64(x.link, uint64(seq))
	x.link = append(x.link, digest...)
	return sha256.Sum256(x.link)
}

// Digest answers the SHA-256 of e's canonical encoding: every stored
// field but the chain's own. Call Normalize on an event before storing
// it, so that its digest survives a JSON round trip.
func Digest(e *toolplane.AuditEvent) []byte {
	x := hashers.Get().(*hasher)
	d := x.digest(e)
	hashers.Put(x)
	return d[:]
}

// Link answers the chain hash of the event numbered seq whose digest is
// digest, after the event whose hash is prev (empty for the first):
// SHA-256(prev || seq as 8 bytes big-endian || digest). PostgreSQL
// computes the same as sha256(prev || int8send(seq) || digest).
func Link(prev []byte, seq int64, digest []byte) []byte {
	x := hashers.Get().(*hasher)
	h := x.linkHash(prev, seq, digest)
	hashers.Put(x)
	return h[:]
}

// Seal sets e's chain fields as the event numbered seq after prev.
func Seal(e *toolplane.AuditEvent, seq int64, prev []byte) {
	x := hashers.Get().(*hasher)
	d := x.digest(e)
	h := x.linkHash(prev, seq, d[:])
	hashers.Put(x)
	// One allocation for both hashes: Seal runs once per event stored.
	buf := make([]byte, len(prev)+HashSize)
	copy(buf, prev)
	copy(buf[len(prev):], h[:])
	e.Seq = seq
	e.PrevHash = nil // the first event's: none
	if len(prev) > 0 {
		e.PrevHash = buf[:len(prev):len(prev)]
	}
	e.Hash = buf[len(prev):]
}

// Normalize rewrites e's JSON documents (Arguments, PolicyInput) in the
// form encoding/json writes them (compact, HTML characters escaped) when
// they are not already: an exported event is JSON, and its digest must be
// the same read back from an export as from the store. Documents that are
// not JSON are left alone.
func Normalize(e *toolplane.AuditEvent) {
	e.Arguments = normalizeJSON(e.Arguments)
	e.PolicyInput = normalizeJSON(e.PolicyInput)
}

func normalizeJSON(doc json.RawMessage) json.RawMessage {
	if written(doc) {
		// The common case costs one scan.
		return doc
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		return doc
	}
	var out bytes.Buffer
	json.HTMLEscape(&out, compact.Bytes())
	if bytes.Equal(out.Bytes(), doc) {
		return doc
	}
	return out.Bytes()
}

// written reports whether doc holds nothing encoding/json would rewrite:
// no whitespace between tokens, no '<', '>' or '&', and no byte 0xe2
// (U+2028 and U+2029, which it escapes, start with it). A space inside a
// string is the string's own: a document's texts (a query, a name) often
// hold spaces, and compacting them again cost more than the rest of
// storing the event. Raw tabs and line breaks are taken for whitespace
// wherever they are, as a JSON string cannot hold them. A doc that is not
// JSON may be read wrongly here, which changes nothing: normalizeJSON
// leaves such a document alone either way.
func written(doc []byte) bool {
	in := false // inside a string
	for i := 0; i < len(doc); i++ {
		switch doc[i] {
		case '"':
			in = !in
		case '\\':
			if in {
				i++ // the escaped byte, a quote perhaps
			}
		case ' ':
			if !in {
				return false
			}
		case '\t', '\r', '\n', '<', '>', '&', 0xe2:
			return false
		}
	}
	return true
}
