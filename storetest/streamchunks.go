package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

var streamCases = []suiteCase{
	{"NumberedInOrder", testStreamOrder},
	{"ConcurrentAppendsNumberedOnce", testStreamConcurrent},
	{"RemovedWithTheirCall", testStreamRetention},
	{"OrganizationsApart", testStreamIsolation},
}

// chunk answers a chunk of org's call with data.
func chunk(org, call, data string) *toolplane.StreamChunk {
	return &toolplane.StreamChunk{OrganizationID: org, CallID: call, Data: []byte(data), CreatedAt: at(time.Second)}
}

// testStreamOrder: chunks are numbered from 1 as appended and stored as
// given (a cut marker, the labels, the time to the microsecond); a read
// after n answers what follows n, in order, at most limit; a chunk of a
// call that does not exist is refused as not found.
func testStreamOrder(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	if err := s.InsertAsyncCall(ctx, asyncCall("org", "inv_1", "")); err != nil {
		t.Fatal(err)
	}
	var want []toolplane.StreamChunk
	for i := range 5 {
		c := chunk("org", "inv_1", fmt.Sprintf(`{"row":%d}`, i+1))
		c.Truncated, c.Untrusted = i == 1, i%2 == 0
		c.Cut = i == 4
		if err := s.AppendStreamChunk(ctx, c); err != nil {
			t.Fatal(err)
		}
		if c.Seq != int64(i+1) {
			t.Fatalf("chunk %d numbered %d", i+1, c.Seq)
		}
		w := *c
		w.CreatedAt = stored(c.CreatedAt).UTC()
		want = append(want, w)
	}
	got, err := s.StreamChunks(ctx, "org", "inv_1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d chunks, want %d", len(got), len(want))
	}
	for i := range got {
		if d := diff(got[i], want[i]); d != "" {
			t.Errorf("chunk %d: %s", i+1, d)
		}
	}
	page, err := s.StreamChunks(ctx, "org", "inv_1", 2, 2)
	if err != nil || len(page) != 2 || page[0].Seq != 3 || page[1].Seq != 4 {
		t.Fatalf("after 2, limit 2: %v, %v; want chunks 3 and 4", page, err)
	}
	if rest, err := s.StreamChunks(ctx, "org", "inv_1", 5, 10); err != nil || len(rest) != 0 {
		t.Fatalf("after the last: %v, %v; want none", rest, err)
	}
	if err := s.AppendStreamChunk(ctx, chunk("org", "inv_9", `1`)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("a chunk of no call: %v, want ErrNotFound", err)
	}
}

// testStreamConcurrent: appends racing on one call (two workers running
// it after a lost lease) each get a number of their own, with no gap.
func testStreamConcurrent(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	if err := s.InsertAsyncCall(ctx, asyncCall("org", "inv_1", "")); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- s.AppendStreamChunk(ctx, chunk("org", "inv_1", fmt.Sprint(i)))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.StreamChunks(ctx, "org", "inv_1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range got {
		if c.Seq != int64(i+1) {
			t.Fatalf("chunk %d numbered %d", i+1, c.Seq)
		}
	}
	if len(got) != n {
		t.Fatalf("%d chunks stored, want %d", len(got), n)
	}
}

// testStreamRetention: retention removes an ended call's chunks with it,
// and leaves a kept call's.
func testStreamRetention(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	for _, id := range []string{"inv_done", "inv_live"} {
		c := asyncCall("org", id, "")
		if id == "inv_done" {
			c.Status, c.EndedAt = toolplane.AsyncSucceeded, at(0)
		}
		if err := s.InsertAsyncCall(ctx, c); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := s.AppendStreamChunk(ctx, chunk("org", id, `"x"`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, err := s.DeleteEndedAsyncCalls(ctx, at(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("retention removed %d, %v; want 1", n, err)
	}
	if got, err := s.StreamChunks(ctx, "org", "inv_done", 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("the removed call's chunks: %d, %v; want none", len(got), err)
	}
	if got, err := s.StreamChunks(ctx, "org", "inv_live", 0, 10); err != nil || len(got) != 3 {
		t.Fatalf("the kept call's chunks: %d, %v; want 3", len(got), err)
	}
	// A call of the same id made later starts its stream afresh.
	if err := s.InsertAsyncCall(ctx, asyncCall("org", "inv_done", "")); err != nil {
		t.Fatal(err)
	}
	c := chunk("org", "inv_done", `1`)
	if err := s.AppendStreamChunk(ctx, c); err != nil || c.Seq != 1 {
		t.Fatalf("first chunk of a new call numbered %d, %v", c.Seq, err)
	}
}

// testStreamIsolation: an organization neither reads another's chunks
// nor appends to another's call, even knowing its id.
func testStreamIsolation(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	if err := s.InsertAsyncCall(ctx, asyncCall("a", "inv_1", "")); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendStreamChunk(ctx, chunk("a", "inv_1", `"a's"`)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.StreamChunks(ctx, "b", "inv_1", 0, 10); err != nil || len(got) != 0 {
		t.Errorf("b read a's chunks: %v, %v", got, err)
	}
	if err := s.AppendStreamChunk(ctx, chunk("b", "inv_1", `"b's"`)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("b appended to a's call: %v", err)
	}
	got, err := s.StreamChunks(ctx, "a", "inv_1", 0, 10)
	if err != nil || len(got) != 1 || string(got[0].Data) != `"a's"` {
		t.Errorf("a's stream: %v, %v", got, err)
	}
}
