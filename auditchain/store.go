package auditchain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// MaxVerify bounds how many events one online verification reads: a
// longer chain is verified in ranges (from, to), each anchored on the
// newest checkpoint before it.
const MaxVerify = 2_000_000

// pageSize is how many organizations the checkpoint job reads a query.
const pageSize = 1000

// chainPage is how many events a verification reads a query (one keyset
// query on (organization_id, seq)): the largest page a store answers.
const chainPage = 1000

// VerifyStore verifies the organization's chain as stored, from sequence
// number from to to (0: from the first stored event, to the end). It
// reads from the newest checkpoint before from (or before the first event
// retention left), so what it verifies is anchored, and compares the end
// with the chain's head when it reads to the end.
//
// A retention pass that drops the chain's oldest events while the walk
// reads makes rows vanish from under it, which the walk alone cannot tell
// from a deletion. So a walk that finds a break verifies again from what
// is stored now if the first stored event has moved since it began, up
// to dropRetries times: a tampered chain breaks again, a dropped prefix
// is covered by the checkpoint its drop left.
func VerifyStore(ctx context.Context, s toolplane.AuditChainStore, keys *KeySet, org string, from, to int64) (Report, error) {
	r, first, err := verifyStore(ctx, s, keys, org, from, to)
	for range dropRetries {
		if err != nil || r.OK {
			break
		}
		_, now, herr := s.AuditHead(ctx, org)
		if herr != nil {
			return Report{}, fmt.Errorf("verify audit chain: %w", herr)
		}
		if now == first {
			break
		}
		r, first, err = verifyStore(ctx, s, keys, org, from, to)
	}
	return r, err
}

// dropRetries bounds how many times VerifyStore verifies again after a
// retention drop moved the chain's first event under a walk: drops run
// once a period, so a second one during a walk is rare, and a third
// would be a retention configured to run without pause.
const dropRetries = 3

// verifyStore is one walk of VerifyStore, which also answers the first
// stored event it began from.
func verifyStore(ctx context.Context, s toolplane.AuditChainStore, keys *KeySet, org string, from, to int64) (Report, int64, error) {
	head, first, err := s.AuditHead(ctx, org)
	if err != nil {
		return Report{}, 0, fmt.Errorf("verify audit chain: %w", err)
	}
	cps, err := s.AuditCheckpoints(ctx, org, 0, to)
	if err != nil {
		return Report{}, 0, fmt.Errorf("verify audit chain: %w", err)
	}
	start := max(from, first, 1)
	if from > head.Seq && head.Seq > 0 {
		// Nothing written since: an empty range holds.
		return Report{OrganizationID: org, OK: true, From: from, To: head.Seq}, first, nil
	}
	// The anchor: the newest checkpoint before start; the walk reads from
	// the event after it.
	read := int64(1)
	for i := len(cps) - 1; i >= 0; i-- {
		if cps[i].Seq < start {
			read = cps[i].Seq + 1
			break
		}
	}
	if first > read && from <= first {
		// Events from read on are gone with no checkpoint to say why:
		// read from the first stored, and let Verify name the gap.
		read = first
	}
	if r, ok, err := streamVerify(ctx, s, keys, &head, cps, org, read, to); err != nil || ok {
		if err != nil {
			return Report{}, 0, fmt.Errorf("verify audit chain: %w", err)
		}
		return r, first, nil
	}
	// A broken link: named over the whole range, as the rows around it
	// say how it broke (moved, added, missing).
	evs, err := readPages(ctx, s, org, read, to, MaxVerify)
	if err != nil {
		return Report{}, 0, fmt.Errorf("verify audit chain: %w", err)
	}
	if n := len(evs); n > 0 && evs[n-1].Seq > head.Seq {
		// Rows past the head read first: events appended while the walk
		// read (the trail is live), if the chain's head has reached them
		// since; otherwise rows the chain never had, for Verify to name.
		// The walk then ends where it read.
		now, _, err := s.AuditHead(ctx, org)
		if err != nil {
			return Report{}, 0, fmt.Errorf("verify audit chain: %w", err)
		}
		if now.Seq >= evs[n-1].Seq {
			head, to = now, evs[n-1].Seq
		}
	}
	if len(evs) >= MaxVerify {
		// Read only so far: the rest is another range's, and the head is
		// not where this walk ends.
		to = evs[len(evs)-1].Seq
	}
	r := Verify(Input{Events: evs, Checkpoints: cps, Keys: keys, Head: &head, To: to})
	r.OrganizationID = org
	if len(evs) == 0 && head.Seq == 0 {
		r.From, r.To = 0, 0
	}
	return r, first, nil
}

// streamVerify walks org's chain from read to to as VerifyStore does,
// holding a few pages in memory whatever the chain's length: each range
// reads its next page while it hashes this one, and a range long enough
// is walked as two segments at once (a connection and a core each; the
// second taken on trust from its first row, until the first ends on the
// hash that row follows). ok is false when a row breaks the chain (the
// caller then names the break over the whole range) or nothing was read;
// otherwise r is the report Verify gives for the range read whole.
func streamVerify(ctx context.Context, s toolplane.AuditChainStore, keys *KeySet, head *toolplane.AuditHead, cps []toolplane.AuditCheckpoint, org string, read, to int64) (r Report, ok bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	end := head.Seq
	if to > 0 && to < end {
		end = to
	}
	in := &Input{Checkpoints: cps, Keys: keys}
	var first, second segment
	if span := end - read + 1; span >= splitAt && span <= MaxVerify {
		mid := read + span/2 - 1
		done := make(chan struct{})
		go func() {
			defer close(done)
			second = walkSegment(ctx, s, in, org, mid+1, to, true)
		}()
		first = walkSegment(ctx, s, in, org, read, mid, false)
		if first.err != nil || !first.ok {
			cancel() // the second's work is moot
		}
		<-done
		if second.w != nil {
			defer second.w.close()
		}
		if first.err == nil && first.ok {
			first.err = second.err
		}
		if first.err == nil && first.ok && !first.join(&second) {
			first.ok = false
		}
	} else {
		first = walkSegment(ctx, s, in, org, read, to, false)
	}
	if first.w != nil {
		defer first.w.close()
	}
	if first.err != nil || !first.ok || first.w == nil {
		return Report{}, false, first.err
	}
	if first.n >= MaxVerify {
		to = first.w.prevSeq // read only so far (see VerifyStore)
	}
	if first.w.prevSeq > head.Seq {
		// Rows past the head: appended while the walk read, if the
		// chain's head has reached them since (as VerifyStore does).
		now, _, err := s.AuditHead(ctx, org)
		if err != nil {
			return Report{}, false, err
		}
		if now.Seq >= first.w.prevSeq {
			head, to = &now, first.w.prevSeq
		}
	}
	r = first.w.end(&Input{Head: head, To: to}, true)
	r.OrganizationID = org
	return r, true, nil
}

// splitAt is the length from which a verification walks its range as two
// segments at once: reading the rows is most of what it costs, and each
// segment takes a connection and a core of its own.
const splitAt = 4 * chainPage

// A segment is one range of a chain walked page by page.
type segment struct {
	w *walk // nil: nothing read
	// ok is false when a row broke the chain.
	ok  bool
	n   int // rows read
	err error
	// first is the segment's first row's number and the hash it
	// follows, for the segment before it to meet (join).
	firstSeq  int64
	firstPrev []byte
}

// walkSegment walks org's chained events from read to to (0: to the end)
// with in's checkpoints, reading ahead a page. A segment that continues
// another (cont) starts from its first row's link, taken on trust until
// join checks it, and meets only the checkpoints from its first row on.
func walkSegment(ctx context.Context, s toolplane.AuditChainStore, in *Input, org string, read, to int64, cont bool) segment {
	pages := make(chan chainPageRead, 1)
	// The pages walked, for the reader to read into again: one walked,
	// one waiting, one read.
	free := make(chan []toolplane.AuditEvent, 3)
	ctx, cancel := context.WithCancel(ctx)
	go readAhead(ctx, s, org, read, to, pages, free)
	defer func() {
		cancel()
		for range pages { // let the reader end
		}
	}()
	sg := segment{ok: true}
	for p := range pages {
		if p.err != nil {
			sg.err = p.err
			return sg
		}
		if len(p.events) == 0 {
			break
		}
		if sg.w == nil {
			e := &p.events[0]
			sg.w = newWalk(in, e)
			sg.firstSeq, sg.firstPrev = e.Seq, e.PrevHash
			if cont {
				sg.w.resume(e)
			}
		}
		if !sg.w.rows(p.events) {
			sg.ok = false
			return sg
		}
		sg.n += len(p.events)
		// The walk keeps nothing of a page's events but their hashes,
		// which are memory of their own.
		select {
		case free <- p.events:
		default:
		}
	}
	return sg
}

// join continues sg with next, the segment after it, and answers whether
// next's first row follows sg's last (else the chain breaks there, and
// the caller names how).
func (sg *segment) join(next *segment) bool {
	w := sg.w
	if !next.ok {
		return false // a row of next broke the chain
	}
	if w == nil || next.w == nil {
		return next.w == nil && next.n == 0 && next.ok
	}
	if next.firstSeq != w.expect || !bytes.Equal(next.firstPrev, w.prevHash) {
		return false
	}
	v := next.w
	w.r.Events += v.r.Events
	w.r.Matched += v.r.Matched
	w.r.To = v.r.To
	w.prevHash, w.prevprev, w.prevSeq, w.expect, w.pending = v.prevHash, v.prevprev, v.prevSeq, v.expect, v.pending
	w.note(v.brk)
	sg.n += next.n
	v.close()
	return true
}

// chainPageRead is one page readAhead read, or the error that ended it.
type chainPageRead struct {
	events []toolplane.AuditEvent
	err    error
}

// A chainAppender reads a page of a chain into memory given back
// (AppendAuditChain appends to dst what AuditChain answers): a
// verification reads hundreds of pages a second, each a thousand events
// of about 700 bytes before their strings.
type chainAppender interface {
	AppendAuditChain(ctx context.Context, dst []toolplane.AuditEvent, org string, from, to int64, limit int) ([]toolplane.AuditEvent, error)
}

// readAhead sends org's chained events from next to to (0: to the end),
// page by page, on pages, and closes it after a short page, an error,
// MaxVerify events or ctx's end. A page is read into one from free, when
// the store can (chainAppender) and one is there.
func readAhead(ctx context.Context, s toolplane.AuditChainStore, org string, next, to int64, pages chan<- chainPageRead, free <-chan []toolplane.AuditEvent) {
	defer close(pages)
	app, _ := s.(chainAppender)
	for n := 0; n < MaxVerify; {
		var page []toolplane.AuditEvent
		var err error
		if app != nil {
			var dst []toolplane.AuditEvent
			select {
			case dst = <-free:
			default:
			}
			page, err = app.AppendAuditChain(ctx, dst[:0], org, next, to, chainPage)
		} else {
			page, err = s.AuditChain(ctx, org, next, to, chainPage)
		}
		select {
		case pages <- chainPageRead{page, err}:
		case <-ctx.Done():
			return
		}
		if err != nil || len(page) < chainPage {
			return
		}
		n += len(page)
		next = page[len(page)-1].Seq + 1
	}
}

// Checkpoint signs a checkpoint at the head of every organization whose
// chain moved past its newest one, with keys' newest key, made at now,
// and answers how many it wrote: the periodic job's work. A checkpoint
// another node wrote meanwhile at the same number is no error.
//
// It verifies what it signs first: the events since the newest checkpoint
// before the head, linked to it. A chain broken there is not signed (a
// signature would vouch for the break); the others are, and the answer's
// error names the broken ones.
func Checkpoint(ctx context.Context, s toolplane.AuditChainStore, keys *KeySet, now time.Time) (int, error) {
	n := 0
	var broken []error
	for after := ""; ; {
		orgs, err := s.AuditOrganizations(ctx, after, pageSize)
		if err != nil {
			return n, fmt.Errorf("audit checkpoints: %w", err)
		}
		for _, org := range orgs {
			head, _, err := s.AuditHead(ctx, org)
			if err != nil {
				return n, fmt.Errorf("audit checkpoint of %s: %w", org, err)
			}
			if head.Seq == 0 {
				continue
			}
			r, err := VerifyStore(ctx, s, keys, org, head.Seq, head.Seq)
			if err != nil {
				return n, fmt.Errorf("audit checkpoint of %s: %w", org, err)
			}
			if !r.OK {
				broken = append(broken, fmt.Errorf("audit checkpoint of %s not signed: %s at %d: %s", org, r.Break.Kind, r.Break.Seq, r.Break.Detail))
				continue
			}
			cp := &toolplane.AuditCheckpoint{OrganizationID: org, Seq: head.Seq, Hash: head.Hash, CreatedAt: now}
			if err := keys.Sign(cp); err != nil {
				return n, err
			}
			switch err := s.AppendAuditCheckpoint(ctx, cp); {
			case errors.Is(err, toolplane.ErrExists):
			case err != nil:
				return n, err
			default:
				n++
			}
		}
		if len(orgs) < pageSize {
			return n, errors.Join(broken...)
		}
		after = orgs[len(orgs)-1]
	}
}

// Moved answers whether Checkpoint has a chain to sign: an organization
// whose head has no checkpoint at it (a read of the organizations, and
// two per organization). It is the periodic job's check, so a deployment
// whose trail did not move runs no pass.
func Moved(ctx context.Context, s toolplane.AuditChainStore) (bool, error) {
	for after := ""; ; {
		orgs, err := s.AuditOrganizations(ctx, after, pageSize)
		if err != nil {
			return false, fmt.Errorf("audit checkpoints: %w", err)
		}
		for _, org := range orgs {
			head, _, err := s.AuditHead(ctx, org)
			if err != nil {
				return false, fmt.Errorf("audit checkpoint of %s: %w", org, err)
			}
			if head.Seq == 0 {
				continue
			}
			cps, err := s.AuditCheckpoints(ctx, org, head.Seq, head.Seq)
			if err != nil {
				return false, fmt.Errorf("audit checkpoint of %s: %w", org, err)
			}
			if len(cps) == 0 {
				return true, nil
			}
		}
		if len(orgs) < pageSize {
			return false, nil
		}
		after = orgs[len(orgs)-1]
	}
}

// readPages reads org's chained events from next to to (0: to the end)
// page by page, stopping after a short page or once limit events are
// read.
func readPages(ctx context.Context, s toolplane.AuditChainStore, org string, next, to int64, limit int) ([]toolplane.AuditEvent, error) {
	var evs []toolplane.AuditEvent
	for {
		page, err := s.AuditChain(ctx, org, next, to, chainPage)
		if err != nil {
			return nil, err
		}
		evs = append(evs, page...)
		if len(page) < chainPage || len(evs) >= limit {
			return evs, nil
		}
		next = page[len(page)-1].Seq + 1
	}
}
