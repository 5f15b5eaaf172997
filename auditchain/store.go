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

// pageSize is how many events a verification reads a query.
const pageSize = 1000

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
	var evs []toolplane.AuditEvent
	for next := read; ; {
		page, err := s.AuditChain(ctx, org, next, to, pageSize)
		if err != nil {
			return Report{}, fmt.Errorf("verify audit chain: %w", err)
		}
		evs = append(evs, page...)
		if len(page) < pageSize || len(evs) >= MaxVerify {
			break
		}
		next = page[len(page)-1].Seq + 1
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
