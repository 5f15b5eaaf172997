package webhook_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/toolplane/toolplane/webhook"
)

// BenchmarkHeaders is the sender's cost of one signed request during a
// rotation (two secrets) for a 1 KiB body.
func BenchmarkHeaders(b *testing.B) {
	payload := make([]byte, 1024)
	keys := [][]byte{newKey, oldKey}
	at := time.Unix(1_800_000_000, 0)
	b.ReportAllocs()
	for b.Loop() {
		webhook.Headers(keys, "dlv_1", payload, at)
	}
}

// BenchmarkVerify is a receiver's whole check of one request (1 KiB
// body, two secrets held, each request new) with the in-memory
// replay memory.
func BenchmarkVerify(b *testing.B) {
	payload := make([]byte, 1024)
	at := time.Unix(1_800_000_000, 0)
	v, err := webhook.NewVerifier(webhook.Config{Secrets: [][]byte{newKey, oldKey}, Now: func() time.Time { return at },
		Memory: webhook.NewRecent(1 << 22)})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		// Each request its own: a body of its own, a delivery of its own.
		copy(payload, strconv.Itoa(i))
		h := webhook.Headers([][]byte{oldKey}, "dlv_"+strconv.Itoa(i), payload, at)
		if err := v.Verify(b.Context(), h, payload); err != nil {
			b.Fatal(err)
		}
	}
}
