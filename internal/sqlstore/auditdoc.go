package sqlstore

import (
	"errors"
	"fmt"
)

// A policy input document (the JSON an audit event keeps for a shadow run,
// see toolplane.AuditEvent.PolicyInput) is two thirds of a read call's
// audit row, and most of it repeats from call to call: the keys, the
// grants' answer, a read tool's annotations, the "sha256:" of every
// digested text (issue 35). PackDocument stores it by reference to what
// repeats: each fragment of docFragments as one byte, and a text digest's
// 32 hex digits as their 16 bytes. Compressing it with flate and a preset
// dictionary was measured near 100 B but at 150 µs of CPU a row (the
// compressor's state is reset per document), more than a whole read call;
// this costs about a microsecond.
//
// The packed form is docMarker, then a sequence of:
//   - a fragment byte (docFragmentBase+i, below 0x20): docFragments[i];
//   - docDigest and 16 bytes: "sha256:" and the bytes' 32 lowercase hex
//     digits;
//   - docEscape and one byte: that byte, for a byte below 0x20 in the
//     document (a JSON text holds none outside whitespace, but a document
//     is packed whatever it holds);
//   - any other byte: itself.
//
// JSON text never starts with docMarker, so a document stored before
// packing (it starts with '{') reads back as it was. The fragments are
// part of the stored format: a fragment is never changed or removed, only
// a new marker could introduce another table.
const (
	docMarker       = 0x1f
	docEscape       = 0x01
	docDigest       = 0x02
	docFragmentBase = 0x03
)

// docFragments are the pieces of policy.Request's JSON (as the rules
// record it) that recur, longest first where one is a prefix of another.
// At most docMarker-docFragmentBase of them.
var docFragments = [...]string{
	`{"grants":"allow","request":{"principal":{"agent":"`,
	`{"grants":"require_approval","request":{"principal":{"agent":"`,
	`","roles":[],"attributes":{}},"tool":{"name":"`,
	`","roles":[`,
	`],"attributes":{`,
	`}},"tool":{"name":"`,
	`","version":"`,
	`","effect":"read","destructive":false,"read_only":true,"tags":[],"sensitive":[]},"arguments":{`,
	`","effect":"write","destructive":false,"read_only":false,"tags":[],"sensitive":[]},"arguments":{`,
	`","effect":"`,
	`","destructive":`,
	`,"read_only":`,
	`,"tags":[`,
	`],"sensitive":[`,
	`]},"arguments":{`,
	`},"facts":{},"context":{"time":"`,
	`},"facts":{`,
	`},"context":{"time":"`,
	`,"hour":`,
	`,"weekday":`,
	`,"run_cost_cents":0,"source":"`,
	`,"run_cost_cents":`,
	`,"source":"`,
	`"}}}`,
	`,"user":{`,
	`","person":"`,
	`false`,
	`true`,
}

// Every fragment has a byte of its own below docMarker.
var _ [docMarker - docFragmentBase - len(docFragments)]struct{}

// fragmentsAt lists, by their first byte, the fragments in docFragments'
// order: a byte of the document is compared with the few that may start
// there.
var fragmentsAt = func() (m [256][]byte) {
	for k, f := range docFragments {
		m[f[0]] = append(m[f[0]], byte(k))
	}
	return m
}()

// digestPrefix is what a digested text starts with.
const digestPrefix = "sha256:"

// ErrDocument is the error reading a packed document that does not hold
// one.
var ErrDocument = errors.New("sqlstore: corrupt packed document")

// PackDocument answers doc packed for storage (see docMarker), nil for an
// empty doc.
func PackDocument(doc []byte) []byte {
	if len(doc) == 0 {
		return nil
	}
	out := make([]byte, 0, len(doc)/2+16)
	out = append(out, docMarker)
	s := doc
next:
	for i := 0; i < len(s); {
		// Most bytes are written as they are (packedAsIs): a run of them
		// is copied at once.
		j := i
		for j < len(s) && packedAsIs[s[j]] {
			j++
		}
		out = append(out, s[i:j]...)
		if i = j; i == len(s) {
			break
		}
		c := s[i]
		if c == 's' && isDigest(s[i:]) {
			out = append(out, docDigest)
			h := s[i+len(digestPrefix) : i+len(digestPrefix)+32]
			for j := 0; j < 32; j += 2 {
				out = append(out, unhex(h[j])<<4|unhex(h[j+1]))
			}
			i += len(digestPrefix) + 32
			continue
		}
		for _, k := range fragmentsAt[c] {
			// Every fragment is longer than a byte; its second is
			// compared first, which most candidates fail.
			if f := docFragments[k]; len(s)-i > 1 && s[i+1] == f[1] && hasPrefix(s[i:], f) {
				out = append(out, docFragmentBase+k)
				i += len(f)
				continue next
			}
		}
		if c < 0x20 {
			out = append(out, docEscape)
		}
		out = append(out, c)
		i++
	}
	return out
}

// packedAsIs marks the bytes PackDocument writes as they are wherever
// they are: none starts a fragment or a digest, and none is below 0x20.
var packedAsIs = func() (m [256]bool) {
	for c := 0x20; c < 256; c++ {
		m[c] = len(fragmentsAt[c]) == 0 && c != int(digestPrefix[0])
	}
	return m
}()

// Every fragment is longer than a byte (PackDocument compares its second
// byte before the rest).
var _ = func() bool {
	for _, f := range docFragments {
		if len(f) < 2 {
			panic("sqlstore: a fragment of one byte")
		}
	}
	return true
}()

// isDigest reports whether s starts with a digest: "sha256:" and 32
// lowercase hex digits.
func isDigest(s []byte) bool {
	if !hasPrefix(s, digestPrefix) || len(s) < len(digestPrefix)+32 {
		return false
	}
	for _, c := range s[len(digestPrefix) : len(digestPrefix)+32] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// hasPrefix reports whether s starts with prefix, without converting
// either (a conversion would copy the document).
func hasPrefix(s []byte, prefix string) bool {
	return len(s) >= len(prefix) && string(s[:len(prefix)]) == prefix
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// UnpackDocument answers the document b holds: b itself when it is not
// packed (a document stored before packing), or what PackDocument packed.
func UnpackDocument(b []byte) ([]byte, error) {
	if len(b) == 0 || b[0] != docMarker {
		return b, nil
	}
	out := make([]byte, 0, 3*len(b))
	const hexDigits = "0123456789abcdef"
	for i := 1; i < len(b); i++ {
		c := b[i]
		switch {
		case c == docEscape:
			if i+1 >= len(b) {
				return nil, fmt.Errorf("%w: an escape at its end", ErrDocument)
			}
			i++
			out = append(out, b[i])
		case c == docDigest:
			if i+16 >= len(b) {
				return nil, fmt.Errorf("%w: a digest cut short", ErrDocument)
			}
			out = append(out, digestPrefix...)
			for _, x := range b[i+1 : i+17] {
				out = append(out, hexDigits[x>>4], hexDigits[x&0xf])
			}
			i += 16
		case c >= docFragmentBase && c < docMarker:
			k := int(c - docFragmentBase)
			if k >= len(docFragments) {
				return nil, fmt.Errorf("%w: unknown fragment %#x", ErrDocument, c)
			}
			out = append(out, docFragments[k]...)
		case c < 0x20:
			return nil, fmt.Errorf("%w: byte %#x", ErrDocument, c)
		default:
			out = append(out, c)
		}
	}
	return out, nil
}
