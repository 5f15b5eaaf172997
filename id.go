package toolplane

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"
)

// idSeq orders ids minted in the same microsecond.
var idSeq atomic.Uint64

// NewID answers a fresh, unguessable id that sorts by creation time, after
// prefix ("apr_", "aud_"). Rows inserted in id order land at the right edge
// of their index instead of on a random page, which keeps append-heavy
// tables cheap to write.
func NewID(prefix string) string {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // the runtime's source never fails
	}
	// Written as fmt's "%s%013x%06x%x" would write it, without boxing
	// each part on the way: an id is minted for every call's audit event.
	b := make([]byte, 0, len(prefix)+13+6+2*len(r))
	b = append(b, prefix...)
	b = appendHex(b, uint64(time.Now().UnixMicro()), 13)
	b = appendHex(b, idSeq.Add(1)&0xffffff, 6)
	b = hex.AppendEncode(b, r[:])
	// b is not written again: the id is its bytes, without a copy (as
	// strings.Builder answers its text).
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// appendHex appends v in lower-case hex, padded with zeros to width digits.
func appendHex(dst []byte, v uint64, width int) []byte {
	var buf [16]byte
	digits := strconv.AppendUint(buf[:0], v, 16)
	for range width - len(digits) {
		dst = append(dst, '0')
	}
	return append(dst, digits...)
}
