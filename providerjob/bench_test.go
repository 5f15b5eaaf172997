package providerjob_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/journal"
	"github.com/toolplane/toolplane/providerjob"
)

// inline settles at once, in the delivery's request: what the River job
// does, without the queue's latency, so the figure is the route's and the
// settlement's work.
type inline struct{ svc *providerjob.Service }

func (s inline) EnqueueSettlement(ctx context.Context, org, id string) error {
	_, err := s.svc.Settle(ctx, org, id)
	return err
}

// BenchmarkWebhookSettle measures a vendor's ending delivered to the
// webhook route on the embedded store: signature verification, the job's
// read and conditional transition with its audit event, the delivery's
// claim, and the settlement (one usage row, stamped), each delivery for
// a job of its own. Parallel runs deliveries from 16 goroutines per
// GOMAXPROCS.
func BenchmarkWebhookSettle(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		name := "serial"
		if parallel {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			be, err := backend.Open(ctx, filepath.Join(b.TempDir(), "toolplane.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			if err := be.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			svc, err := providerjob.New(providerjob.Config{Store: be.Store, PublicURL: "http://127.0.0.1"})
			if err != nil {
				b.Fatal(err)
			}
			mux := http.NewServeMux()
			mux.Handle(providerjob.Route, &providerjob.Receiver{Jobs: svc, Journal: journal.New(be.Store, time.Now), Settler: inline{svc},
				Adapters: map[string]providerjob.Adapter{enrich: &providerjob.BodySigned{Name: enrich, Secret: enrichKey, CentsPerCredit: 10}},
				Node:     "bench", Log: slog.New(slog.DiscardHandler)})
			type delivery struct {
				path string
				body []byte
				sig  string
			}
			ds := make([]delivery, b.N)
			now := time.Now()
			for i := range ds {
				j := &toolplane.ProviderJob{ID: fmt.Sprintf("pj_bench_%s_%d", name, i), OrganizationID: "org-bench", RootRunID: "run-1", RunID: "run-1",
					Tool: "enrich.submit", Key: fmt.Sprint(i), StepPath: "agent", Provider: enrich, ProviderJobID: fmt.Sprint("v-", i),
					Refs: []string{"a"}, State: toolplane.JobSubmitted, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
				if _, _, err := be.Store.ReserveProviderJob(ctx, j); err != nil {
					b.Fatal(err)
				}
				body := batchBody(j.ProviderJobID, j.ID, "FINISHED", 3, `[{"ref":"a","email":"a@b.example"}]`)
				ds[i] = delivery{"/v1/webhooks/enrich/" + j.ID, body, hex.EncodeToString(providerjob.SignSHA1(enrichKey, body))}
			}
			deliver := func(d delivery) {
				req := httptest.NewRequest(http.MethodPost, d.path, bytes.NewReader(d.body))
				req.Header.Set("X-Signature-SHA1", d.sig)
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Errorf("delivery = %d %s", rec.Code, rec.Body)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			if parallel {
				// Vendors deliver concurrently; the embedded store commits
				// concurrent writes together.
				b.SetParallelism(16)
				var next atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						deliver(ds[next.Add(1)-1])
					}
				})
			} else {
				for i := range b.N {
					deliver(ds[i])
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
			if cost, err := be.Store.RunTreeCost(ctx, "org-bench", "run-1"); err != nil || cost != int64(30*b.N) {
				b.Errorf("run tree cost %d, %v; want %d (one row a delivery)", cost, err, 30*b.N)
			}
		})
	}
}
