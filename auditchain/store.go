package auditchain

import (
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

// splitAt is the length from which a verification reads its range in two
// halves at once: reading the rows, not hashing them, is what verification
// costs, and each half takes a core (and a connection) of its own.
const splitAt = 4 * chainPage

// VerifyStore verifies the organization's chain as stored, from sequence
// number from to to (0: from the first stored event, to the end). It
// reads from the newest checkpoint before from (or before the first event
// retention left), so what it verifies is anchored, and compares the end
// with the chain's head when it reads to the end.
func VerifyStore(ctx context.Context, s toolplane.AuditChainStore, keys *KeySet, org string, from, to int64) (Report, error) {
	head, first, err := s.AuditHead(ctx, org)
	if err != nil {
		return Report{}, fmt.Errorf("verify audit chain: %w", err)
	}
	cps, err := s.AuditCheckpoints(ctx, org, 0, to)
	if err != nil {
		return Report{}, fmt.Errorf("verify audit chain: %w", err)
	}
	start := max(from, first, 1)
	if from > head.Seq && head.Seq > 0 {
		// Nothing written since: an empty range holds.
		return Report{OrganizationID: org, OK: true, From: from, To: head.Seq}, nil
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
	evs, err := readChain(ctx, s, org, read, to, head.Seq)
	if err != nil {
		return Report{}, fmt.Errorf("verify audit chain: %w", err)
	}
	if n := len(evs); n > 0 && evs[n-1].Seq > head.Seq {
		// Rows past the head read first: events appended while the walk
		// read (the trail is live), if the chain's head has reached them
		// since; otherwise rows the chain never had, for Verify to name.
		// The walk then ends where it read.
		now, _, err := s.AuditHead(ctx, org)
		if err != nil {
			return Report{}, fmt.Errorf("verify audit chain: %w", err)
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
	return r, nil
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

// readChain reads org's chained events from read to to (0: to the end),
// in Seq order, stopping past MaxVerify events; headSeq (where the chain
// stood when verification began) sizes the reading, and a range long
// enough is read as two halves at once. What it answers is the same rows
// a single walk of pages would read: the halves meet at a sequence number,
// the first bounded by it, the second reading on to to as one walk would.
func readChain(ctx context.Context, s toolplane.AuditChainStore, org string, read, to, headSeq int64) ([]toolplane.AuditEvent, error) {
	end := headSeq
	if to > 0 && to < end {
		end = to
	}
	span := end - read + 1
	if span < splitAt || span > MaxVerify {
		return readPages(ctx, s, org, read, to, max(0, min(span, MaxVerify)), MaxVerify)
	}
	mid := read + span/2 - 1
	var (
		first []toolplane.AuditEvent
		ferr  error
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		first, ferr = readPages(ctx, s, org, read, mid, span, MaxVerify) // room for the second half
	}()
	second, err := readPages(ctx, s, org, mid+1, to, end-mid, MaxVerify-int(mid-read+1))
	<-done
	if err == nil {
		err = ferr
	}
	if err != nil {
		return nil, err
	}
	return append(first, second...), nil
}

// readPages reads org's chained events from next to to (0: to the end)
// page by page, stopping after a short page or once limit events are
// read; expect sizes the answer.
func readPages(ctx context.Context, s toolplane.AuditChainStore, org string, next, to, expect int64, limit int) ([]toolplane.AuditEvent, error) {
	evs := make([]toolplane.AuditEvent, 0, expect)
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
