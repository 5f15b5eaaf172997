package async

import (
	"context"
	"time"

	"github.com/toolplane/toolplane"
)

// eventsPage is how many chunks one read of a stream answers at most.
const eventsPage = 100

// sink stores the chunks an asynchronous call's handler streams (see
// invoke.Streamed), and tells this node's readers of the call.
type sink struct {
	s       *Service
	org, id string
}

// Chunk implements invoke.ChunkSink.
func (k sink) Chunk(ctx context.Context, c *toolplane.StreamChunk) error {
	c.OrganizationID, c.CallID, c.CreatedAt = k.org, k.id, k.s.cfg.Now()
	if err := k.s.store.AppendStreamChunk(ctx, c); err != nil {
		return err
	}
	k.s.poke(k.org, k.id)
	return nil
}

// Events answers the chunks call id of org streamed that are numbered
// after after (at most a page, in order), and the call as it stood before
// they were read, for who: read as Get reads it (another organization's
// call, or one who may not read, is not found). A call's chunks are all
// stored before it ends, so when the call answered is terminal and no
// chunk follows after, its stream is complete: the caller sends the
// call's result next.
//
// With wait (at most Config.MaxWait), when there is no chunk yet and the
// call is live, Events waits until a chunk is streamed or the call ends,
// on this node (woken at once) or another (read every Config.Poll), or
// until wait runs out or ctx ends, and answers what it then finds.
func (s *Service) Events(ctx context.Context, org, id string, who *toolplane.Credential, after int64, wait time.Duration) (*toolplane.AsyncCall, []toolplane.StreamChunk, error) {
	wait = min(wait, s.cfg.MaxWait)
	poked, done := s.listen(org, id)
	defer done()
	read := func() (*toolplane.AsyncCall, []toolplane.StreamChunk, error) {
		c, err := s.Get(ctx, org, id, who)
		if err != nil {
			return nil, nil, err
		}
		chunks, err := s.store.StreamChunks(ctx, org, id, after, eventsPage)
		if err != nil {
			return nil, nil, err
		}
		return c, chunks, nil
	}
	c, chunks, err := read()
	if err != nil || len(chunks) > 0 || c.Status.Terminal() || wait <= 0 {
		return c, chunks, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	for {
		select {
		case <-poked:
		case <-tick.C:
		case <-timer.C:
			return read()
		case <-ctx.Done():
			return c, nil, nil
		}
		c, chunks, err = read()
		if err != nil || len(chunks) > 0 || c.Status.Terminal() {
			return c, chunks, err
		}
	}
}

// listen registers a local reader of the call's stream: its channel is
// signalled when a chunk is stored on this node, or the call ends here.
// The signal is a hint: the reader reads the store again.
func (s *Service) listen(org, id string) (<-chan struct{}, func()) {
	k := [2]string{org, id}
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	if s.readers == nil {
		s.readers = map[[2]string]map[chan struct{}]struct{}{}
	}
	if s.readers[k] == nil {
		s.readers[k] = map[chan struct{}]struct{}{}
	}
	s.readers[k][ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.readers[k], ch)
		if len(s.readers[k]) == 0 {
			delete(s.readers, k)
		}
	}
}

// poke signals the call's local readers, never blocking: a reader
// already signalled reads everything new once.
func (s *Service) poke(org, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.readers[[2]string{org, id}] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
