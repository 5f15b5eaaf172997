package sqlite

import (
	"context"
	"strconv"
	"testing"
	"time"
)

func BenchmarkZZGetPrepared(b *testing.B) {
	s := newTestStore(b)
	ctx := context.Background()
	now := time.Now()
	for i := range 1000 {
		s.InsertClaim(ctx, benchClaim(strconv.Itoa(i), now))
	}
	st, err := s.db.PrepareContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE organization_id = ? AND tool = ? AND key = ?`)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := scanClaim(st.QueryRowContext(ctx, "org-bench", "payments.refund_order", "500")); err != nil {
			b.Fatal(err)
		}
	}
}
func BenchmarkZZSelect1(b *testing.B) {
	s := newTestStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var x int
		if err := s.db.QueryRowContext(ctx, `SELECT 1`).Scan(&x); err != nil {
			b.Fatal(err)
		}
	}
}
