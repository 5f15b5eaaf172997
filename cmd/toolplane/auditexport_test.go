package main_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// exportBacklog is how many events the SIGKILL export test queues: enough
// that the node is killed with part of them published and part not.
const exportBacklog = 30000

// TestAuditExportSurvivesSIGKILL: a `toolplane serve` node exporting the
// audit trail to JetStream is SIGKILLed mid-export and started again;
// when its outbox has drained (the lag gauge reads 0), a consumer of the
// stream sees every event exactly once: the batch the kill interrupted is
// published again after its lease ends, and the stream's duplicate window
// drops what had been published already.
func TestAuditExportSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills serve processes")
	}
	nc, err := nats.Connect("nats://127.0.0.1:4222", nats.Timeout(2*time.Second))
	if err != nil {
		t.Skipf("no NATS at 127.0.0.1:4222: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := build()
	if err != nil {
		t.Fatalf("go build: %v", err)
	}
	cases := map[string]string{"sqlite": ""}
	if dsn, ok := pgtest.LookupDSN(); ok {
		cases["postgres"] = pgtest.SchemaDSN(t, dsn)
	} else {
		t.Log("PostgreSQL not tested: set " + pgtest.DSNVariable)
	}
	for kind, dsn := range cases {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			exportSurvivesKill(t, bin, js, kind, dsn)
		})
	}
}

type outboxStore interface {
	AppendAuditBatch(ctx context.Context, events []*toolplane.AuditEvent) error
}

func exportSurvivesKill(t *testing.T, bin string, js jetstream.JetStream, kind, dsn string) {
	dir := t.TempDir()
	stream := "KILLED_" + strings.ToUpper(rand.Text()[:10])
	t.Cleanup(func() { js.DeleteStream(context.Background(), stream) })
	database := filepath.Join(dir, "data", "toolplane.db")
	if kind == "postgres" {
		database = dsn
	}
	node := &chaosNode{name: "exporter", addr: freeAddr(t), database: database, dataDir: filepath.Join(dir, "data"),
		args: []string{"--audit-export-nats", "nats://127.0.0.1:4222", "--audit-export-nats-stream", stream}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", node.logs())
		}
		if err := node.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	if err := node.start(bin); err != nil {
		t.Fatal(err)
	}
	// The node registered its sink at start: from now on every event
	// stored, by any process, is queued for it. The test stores a backlog
	// beside the node, as another node of the cluster would.
	var s outboxStore
	closeDB := func() error { return nil }
	if kind == "postgres" {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s = postgres.New(pool)
	} else {
		store, db := sqlitetest.OpenDB(t, database)
		closeDB = db.Close
		s = store
	}
	org := "org-export-" + kind
	now := time.Now()
	var ids []string
	for from := 0; from < exportBacklog; from += 500 {
		batch := make([]*toolplane.AuditEvent, 0, 500)
		for i := from; i < from+500; i++ {
			ev := &toolplane.AuditEvent{ID: fmt.Sprintf("aud_k%06d", i), OrganizationID: org, RunID: "run-kill", Tool: "demo.refund_order",
				Outcome: "ok", Source: toolplane.SourceREST, CreatedAt: now.Add(time.Duration(i) * time.Microsecond)}
			batch = append(batch, ev)
			ids = append(ids, org+"/"+ev.ID)
		}
		if err := s.AppendAuditBatch(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	// Closed once the backlog is stored: the node is then the database's
	// only writer again, as in a deployment.
	closeDB()
	// Kill the node once part of the backlog is in the stream.
	deadline := time.Now().Add(60 * time.Second)
	var published uint64
	for {
		if info, err := js.Stream(context.Background(), stream); err == nil {
			st, err := info.Info(context.Background())
			if err == nil && st.State.Msgs > 0 {
				published = st.State.Msgs
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the node published nothing within a minute")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := node.kill(); err != nil {
		t.Fatal(err)
	}
	if published >= exportBacklog {
		t.Fatalf("the whole backlog was published before the kill (%d): nothing was interrupted", published)
	}
	t.Logf("killed with %d of %d events published", published, exportBacklog)
	if err := node.start(bin); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	// The lag gauge reads 0 once every queued event is acknowledged.
	lagRE := regexp.MustCompile(`(?m)^toolplane_audit_export_lag_events\{sink="jetstream:` + stream + `"\} (\S+)$`)
	deadline = time.Now().Add(180 * time.Second)
	for {
		resp, err := http.Get("http://" + node.addr + "/metrics")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if m := lagRE.FindSubmatch(body); m != nil {
				if n, _ := strconv.ParseFloat(string(m[1]), 64); n == 0 {
					took := time.Since(restarted)
					t.Logf("drained %d events in %s after the restart: %.0f events/s",
						exportBacklog-int(published), took.Round(time.Millisecond), float64(exportBacklog-int(published))/took.Seconds())
					break
				}
			}
		}
		if time.Now().After(deadline) {
			var lines []string
			if resp, err := http.Get("http://" + node.addr + "/metrics"); err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				for _, l := range strings.Split(string(body), "\n") {
					if strings.Contains(l, "audit_export") {
						lines = append(lines, l)
					}
				}
			}
			t.Fatalf("the outbox did not drain within 180s of the restart: %q", lines)
		}
		time.Sleep(200 * time.Millisecond)
	}
	seen := map[string]int{}
	cons, err := js.OrderedConsumer(context.Background(), stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		batch, err := cons.FetchNoWait(2000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			seen[msg.Headers().Get(jetstream.MsgIDHeader)]++
		}
		if n == 0 {
			break
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Fatalf("event %s seen %d times by the consumer, want once", id, seen[id])
		}
	}
	if len(seen) != len(ids) {
		t.Fatalf("the consumer saw %d events, want %d", len(seen), len(ids))
	}
}
