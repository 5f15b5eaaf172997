package toolplane

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"time"
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
	return fmt.Sprintf("%s%013x%06x%s", prefix, time.Now().UnixMicro(), idSeq.Add(1)&0xffffff, hex.EncodeToString(r[:]))
}
