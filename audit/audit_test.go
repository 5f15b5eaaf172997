package audit

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

var discard = slog.New(slog.DiscardHandler)

var base = time.Date(2026, 7, 1, 8, 0, 0, 0, time.UTC)

// event answers the i-th event of a test, one microsecond after the one
// before it.
func event(i int) *toolplane.AuditEvent {
	return &toolplane.AuditEvent{
		ID: fmt.Sprintf("aud_%04d", i), OrganizationID: "org-1", RunID: fmt.Sprintf("run-%d", i),
		AgentID: "agent-1", PrincipalID: "agent-1", UserID: "user-1", Tool: "crm.read", ToolVersion: "1.0.0",
		Source: toolplane.SourceSDK, Outcome: "ok", ArgumentsHash: "sha256:x", LatencyMicros: int64(i),
		CreatedAt: base.Add(time.Duration(i) * time.Microsecond),
	}
}

// stored answers the organization's events oldest first, read through
// ListAudit.
func stored(t *testing.T, s toolplane.AuditStore) []toolplane.AuditEvent {
	t.Helper()
	var out []toolplane.AuditEvent
	after := ""
	for {
		page, next, err := s.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{}, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if after = next; after == "" {
			break
		}
	}
	slices.Reverse(out)
	return out
}

func ids(evs []toolplane.AuditEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// insertionOrder answers the stored event ids in the order the rows were
// inserted.
func insertionOrder(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT id FROM audit_events ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitFor waits until cond holds: the writer's goroutine reaching a state.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// gatedStore is the real store behind a gate: appends wait until release,
// so a test can hold the writer while it queues a batch. It records the
// batches the writer commits and, with failBatch, fails every batch commit
// as a database would.
type gatedStore struct {
	*sqlite.Store
	gate      chan struct{}
	entered   chan struct{} // closed when the first append reaches the store
	enterOnce sync.Once
	failBatch bool

	mu      sync.Mutex
	batches [][]string // ids of each batch commit attempted
	results []error    // what each batch commit answered
}

var errCommit = errors.New("disk I/O error")

func gate(s *sqlite.Store) *gatedStore {
	return &gatedStore{Store: s, gate: make(chan struct{}), entered: make(chan struct{})}
}

func (g *gatedStore) wait() {
	g.enterOnce.Do(func() { close(g.entered) })
	<-g.gate
}

func (g *gatedStore) release() { close(g.gate) }

func (g *gatedStore) AppendAudit(ctx context.Context, e *toolplane.AuditEvent) error {
	g.wait()
	return g.Store.AppendAudit(ctx, e)
}

func (g *gatedStore) AppendAuditBatch(ctx context.Context, evs []*toolplane.AuditEvent) error {
	g.wait()
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	err := errCommit
	if !g.failBatch {
		err = g.Store.AppendAuditBatch(ctx, evs)
	}
	g.mu.Lock()
	g.batches = append(g.batches, ids)
	g.results = append(g.results, err)
	g.mu.Unlock()
	return err
}

// hold starts a writer over g with room for queue events and parks its
// goroutine in the store on a first event, aud_0000, so that everything
// queued next waits in the queue.
func hold(t *testing.T, g *gatedStore, queue int, log *slog.Logger) *Writer {
	t.Helper()
	w := NewWriter(WriterConfig{Store: g, Queue: queue, Logger: log})
	if err := w.Append(context.Background(), event(0), false); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	if n := len(w.ch); n != 0 {
		t.Fatalf("%d events queued behind the held one, want 0", n)
	}
	return w
}

func TestNewWriterQueueSize(t *testing.T) {
	t.Parallel()
	tests := []struct{ queue, want int }{{0, 4096}, {-1, 4096}, {1, 1}, {64, 64}}
	for _, tt := range tests {
		s := sqlitetest.New(t)
		w := NewWriter(WriterConfig{Store: s, Queue: tt.queue})
		if got := cap(w.ch); got != tt.want {
			t.Errorf("NewWriter(queue %d) has room for %d, want %d", tt.queue, got, tt.want)
		}
		if w.log == nil {
			t.Error("NewWriter with a nil logger kept it nil")
		}
		w.Close()
	}
}

func TestEventsQueuedWithoutWaitingAreAllStoredInQueueOrderByClose(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		queue int
		n     int
	}{
		{"one event", 0, 1},
		{"more than a batch", 0, 3*maxBatch + 7},
		{"small queue", 8, 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, db := sqlitetest.NewDB(t)
			w := NewWriter(WriterConfig{Store: s, Queue: tt.queue, Logger: discard})
			var queued []*toolplane.AuditEvent
			for i := range tt.n {
				e := event(i)
				queued = append(queued, e)
				if err := w.Append(context.Background(), e, false); err != nil {
					t.Fatalf("Append %d: %v", i, err)
				}
			}
			w.Close()
			// The store numbered and hashed each event it stored (its place
			// in the organization's chain): in queue order.
			var want []toolplane.AuditEvent
			for i, e := range queued {
				if e.Seq != int64(i+1) {
					t.Fatalf("event %d is number %d of the chain, want %d", i, e.Seq, i+1)
				}
				want = append(want, *e)
			}
			got := stored(t, s)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("stored %d events %v\nwant %d %v", len(got), ids(got), len(want), ids(want))
			}
			if order := insertionOrder(t, db); !slices.Equal(order, ids(want)) {
				t.Fatalf("insertion order %v\nwant queue order %v", order, ids(want))
			}
		})
	}
}

func TestAppendWithWaitReturnsOnlyOnceTheEventIsStored(t *testing.T) {
	t.Parallel()
	s := sqlitetest.New(t)
	w := NewWriter(WriterConfig{Store: s, Logger: discard})
	defer w.Close()
	for i := range 50 {
		e := event(i)
		if err := w.Append(context.Background(), e, true); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		got, _, err := s.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{RunID: e.RunID}, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !reflect.DeepEqual(got[0], *e) {
			t.Fatalf("after Append %d returned the store holds %+v", i, got)
		}
	}
}

func TestAppendWithWaitBlocksWhileTheStoreHasNotCommitted(t *testing.T) {
	t.Parallel()
	s := sqlitetest.New(t)
	g := gate(s)
	w := NewWriter(WriterConfig{Store: g, Logger: discard})
	done := make(chan error, 1)
	go func() { done <- w.Append(context.Background(), event(1), true) }()
	<-g.entered
	select {
	case err := <-done:
		t.Fatalf("Append returned (%v) before the store committed", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := ids(stored(t, s)); !slices.Equal(got, []string{"aud_0001"}) {
		t.Fatalf("stored %v", got)
	}
	w.Close()
}

func TestAppendAfterCloseAnswersErrClosed(t *testing.T) {
	t.Parallel()
	s := sqlitetest.New(t)
	w := NewWriter(WriterConfig{Store: s, Logger: discard})
	if err := w.Append(context.Background(), event(1), false); err != nil {
		t.Fatal(err)
	}
	w.Close()
	w.Close() // a second Close is harmless
	for _, wait := range []bool{false, true} {
		if err := w.Append(context.Background(), event(2), wait); !errors.Is(err, ErrClosed) {
			t.Fatalf("Append(wait %v) after Close = %v, want ErrClosed", wait, err)
		}
	}
	if got := ids(stored(t, s)); !slices.Equal(got, []string{"aud_0001"}) {
		t.Fatalf("stored %v, want only the event appended before Close", got)
	}
}

func TestFullQueueAppliesBackpressureAndDropsNothing(t *testing.T) {
	t.Parallel()
	s := sqlitetest.New(t)
	g := gate(s)
	w := hold(t, g, 1, discard)
	if err := w.Append(context.Background(), event(1), false); err != nil { // fills the queue
		t.Fatal(err)
	}
	const writers, each = 4, 50
	var wg sync.WaitGroup
	returned := make(chan struct{}, writers*each)
	for k := range writers {
		wg.Go(func() {
			for i := range each {
				if err := w.Append(context.Background(), event(2+k*each+i), false); err != nil {
					t.Errorf("Append: %v", err)
				}
				returned <- struct{}{}
			}
		})
	}
	// The queue is full and the writer held: nobody's Append returns.
	select {
	case <-returned:
		t.Fatal("an Append into a full queue returned")
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	wg.Wait()
	w.Close()
	got := stored(t, s)
	if len(got) != 2+writers*each {
		t.Fatalf("stored %d events, want %d", len(got), 2+writers*each)
	}
	for i, e := range got {
		if want := event(i); e.ID != want.ID {
			t.Fatalf("event %d is %s, want %s", i, e.ID, want.ID)
		}
	}
}

func TestFullQueueWithoutAGateStoresEverything(t *testing.T) {
	t.Parallel()
	s := sqlitetest.New(t)
	w := NewWriter(WriterConfig{Store: s, Queue: 1, Logger: discard})
	const n = 500
	for i := range n {
		if err := w.Append(context.Background(), event(i), false); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if got := stored(t, s); len(got) != n {
		t.Fatalf("stored %d of %d events", len(got), n)
	}
}

func TestBatchWithADuplicateStoresTheOthersAndFailsOnlyTheDuplicate(t *testing.T) {
	t.Parallel()
	s := sqlitetest.New(t)
	// An event already in the store, and one the batch itself repeats.
	if err := s.AppendAudit(context.Background(), event(9)); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	g := gate(s)
	w := hold(t, g, 0, slog.New(slog.NewTextHandler(&logged, nil)))

	first, again, earlier := event(1), event(1), event(9)
	again.Outcome, earlier.Outcome = "second", "second"
	items := []struct {
		ev   *toolplane.AuditEvent
		wait bool
		dup  bool
	}{
		{first, false, false},
		{event(2), true, false},
		{again, true, true},
		{event(3), false, false},
		{earlier, true, true},
		{event(4), true, false},
	}
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		if !it.wait {
			if err := w.Append(context.Background(), it.ev, false); err != nil {
				t.Fatal(err)
			}
			continue
		}
		wg.Go(func() { errs[i] = w.Append(context.Background(), it.ev, true) })
		// Each waiter is in the queue before the next event, so the
		// writer takes all of them in one batch, in this order.
		waitFor(t, "the waiter's event to be queued", func() bool { return len(w.ch) == i+1 })
	}
	g.release()
	wg.Wait()
	w.Close()

	for i, it := range items {
		if !it.wait {
			continue
		}
		if it.dup {
			if !errors.Is(errs[i], toolplane.ErrExists) {
				t.Errorf("waiter of duplicate %s got %v, want ErrExists", it.ev.ID, errs[i])
			}
		} else if errs[i] != nil {
			t.Errorf("waiter of %s got %v, want nil", it.ev.ID, errs[i])
		}
	}
	g.mu.Lock()
	batches, results := g.batches, g.results
	g.mu.Unlock()
	wantBatch := []string{"aud_0001", "aud_0002", "aud_0001", "aud_0003", "aud_0009", "aud_0004"}
	if len(batches) != 1 || !slices.Equal(batches[0], wantBatch) || !errors.Is(results[0], toolplane.ErrExists) {
		t.Fatalf("batch commits %v answered %v, want one of %v failing with ErrExists", batches, results, wantBatch)
	}
	got := stored(t, s)
	if want := []string{"aud_0000", "aud_0001", "aud_0002", "aud_0003", "aud_0004", "aud_0009"}; !slices.Equal(ids(got), want) {
		t.Fatalf("stored %v, want %v", ids(got), want)
	}
	for _, e := range got {
		if e.Outcome != "ok" {
			t.Fatalf("a duplicate replaced %s: outcome %q", e.ID, e.Outcome)
		}
	}
	if n := bytes.Count(logged.Bytes(), []byte("audit append failed")); n != 2 {
		t.Fatalf("logged %d append failures, want 2:\n%s", n, logged.String())
	}
}

func TestFailedBatchCommitFallsBackToOneEventAtATime(t *testing.T) {
	t.Parallel()
	s, db := sqlitetest.NewDB(t)
	g := gate(s)
	g.failBatch = true
	w := hold(t, g, 0, discard)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range 5 {
		wg.Go(func() { errs[i] = w.Append(context.Background(), event(1+i), true) })
		waitFor(t, "the event to be queued", func() bool { return len(w.ch) == i+1 })
	}
	g.release()
	wg.Wait()
	w.Close()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
	g.mu.Lock()
	batches := g.batches
	g.mu.Unlock()
	if len(batches) != 1 || len(batches[0]) != 5 {
		t.Fatalf("batch commits %v, want one of 5 events", batches)
	}
	want := []string{"aud_0000", "aud_0001", "aud_0002", "aud_0003", "aud_0004", "aud_0005"}
	if got := insertionOrder(t, db); !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v in queue order", got, want)
	}
}

func TestCancelledContextEndsABlockedAppend(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// wait: the cancelled Append waits for its own event, which is
		// queued; otherwise it waits for room in a full queue.
		wait       bool
		wantPrefix string
		wantStored []string
	}{
		{"waiting for room in the queue", false, "queue audit event: ", []string{"aud_0000", "aud_0001"}},
		{"waiting for its event to be stored", true, "store audit event: ", []string{"aud_0000", "aud_0002"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := sqlitetest.New(t)
			g := gate(s)
			w := hold(t, g, 1, discard)
			if !tt.wait {
				if err := w.Append(context.Background(), event(1), false); err != nil { // fills the queue
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Append(ctx, event(2), tt.wait) }()
			if tt.wait {
				waitFor(t, "the event to be queued", func() bool { return len(w.ch) == 1 })
			}
			cancel()
			err := <-done
			if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), tt.wantPrefix) {
				t.Fatalf("Append = %v, want %q wrapping context.Canceled", err, tt.wantPrefix)
			}
			g.release()
			w.Close()
			// A queued event is still stored; one never queued is not.
			if got := ids(stored(t, s)); !slices.Equal(got, tt.wantStored) {
				t.Fatalf("stored %v, want %v", got, tt.wantStored)
			}
		})
	}
}

// TestStoredEventsAreNotKeptByTheWriter checks that the writer lets go of
// each event once it is stored: a batch's events (and the calls that made
// them) are not kept alive by the batch's array until the next batch as
// large, which at rest is never.
func TestStoredEventsAreNotKeptByTheWriter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		n    int
	}{
		{"a batch nobody waits for", 40},
		{"more than a batch", maxBatch + 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := sqlitetest.New(t)
			w := NewWriter(WriterConfig{Store: s, Logger: discard})
			defer w.Close()
			var freed sync.WaitGroup
			freed.Add(tt.n)
			for i := range tt.n {
				e := event(i)
				runtime.AddCleanup(e, func(struct{}) { freed.Done() }, struct{}{})
				if err := w.Append(context.Background(), e, false); err != nil {
					t.Fatalf("Append %d: %v", i, err)
				}
			}
			// Stored once a waited-for event that follows is: the writer keeps
			// queue order.
			if err := w.Append(context.Background(), event(tt.n), true); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { freed.Wait(); close(done) }()
			deadline := time.After(5 * time.Second)
			for {
				runtime.GC()
				select {
				case <-done:
					return
				case <-deadline:
					t.Fatalf("stored events still reachable 5 s after they were stored")
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
	}
}
