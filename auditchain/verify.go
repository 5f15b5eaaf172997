package auditchain

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/toolplane/toolplane"
)

// Kind says how a chain was broken.
type Kind string

// How a chain can be broken. A break names the first position where the
// trail stops being what was stored; what lies past it is not judged.
const (
	// Changed: a row's content no longer matches its hash, while its link
	// to the row before holds.
	Changed Kind = "changed"
	// Deleted: a sequence number is missing, or a row follows a hash that
	// no row has (its predecessor is gone), or the trail ends before its
	// head.
	Deleted Kind = "deleted"
	// Reordered: rows are out of sequence, or a row is intact but sits at
	// another position than the one its hash was made for.
	Reordered Kind = "reordered"
	// Inserted: a row the chain never held: a sequence number twice, a
	// row whose hash continues nothing, or a row the next one skips.
	Inserted Kind = "inserted"
	// Forged: a checkpoint whose signature is not its key's, or whose key
	// is not one of the operator's.
	Forged Kind = "forged_checkpoint"
	// Rewritten: the chain holds together but disagrees with a signed
	// checkpoint: rows up to that sequence number were changed and their
	// hashes made again.
	Rewritten Kind = "rewritten"
)

// Break is the first broken link of a chain.
type Break struct {
	// Seq is the sequence number where the chain breaks: the row changed,
	// missing, out of place or added, or the checkpoint's.
	Seq  int64 `json:"seq"`
	Kind Kind  `json:"kind"`
	// EventID is the row's ID, when a row is at fault.
	EventID string `json:"event_id,omitempty"`
	Detail  string `json:"detail"`
}

// Input is what Verify checks: one organization's chained events in the
// order they were read (a store reads them in sequence order; a file in
// its lines' order), its checkpoints, and the operator's public keys.
type Input struct {
	Events      []toolplane.AuditEvent
	Checkpoints []toolplane.AuditCheckpoint
	Keys        *KeySet
	// Head, when set, is where the store says the chain stands; the trail
	// must reach it when it was read to its end (To 0).
	Head *toolplane.AuditHead
	// To is the last sequence number asked for (0: to the end).
	To int64
	// Partial accepts a trail that starts past 1 with no checkpoint to
	// vouch for the row before its first (an export of a range): the
	// first row's PrevHash is then taken on trust, which Report says.
	// Without it, such a trail answers Deleted at the first missing
	// number.
	Partial bool
}

// Report is Verify's answer.
type Report struct {
	OrganizationID string `json:"organization_id"`
	// OK is true when no link is broken.
	OK bool `json:"ok"`
	// From and To are the first and last sequence numbers verified;
	// Events how many rows that was (events stored before the chain, Seq
	// 0, are outside it and not counted).
	From   int64 `json:"from"`
	To     int64 `json:"to"`
	Events int   `json:"events"`
	// Anchor is the checkpoint's sequence number the chain was verified
	// from (0: from the chain's start); Unanchored says the first row's
	// predecessor was taken on trust (see Input.Partial).
	Anchor     int64 `json:"anchor"`
	Unanchored bool  `json:"unanchored,omitempty"`
	// Checkpoints is how many checkpoints' signatures were checked, and
	// Matched how many of them were compared with the chain's hash at
	// their sequence number and agreed.
	Checkpoints int    `json:"checkpoints"`
	Matched     int    `json:"matched"`
	Break       *Break `json:"break,omitempty"`
}

// reorderWindow is how far from its place Verify looks for the sequence
// number a misplaced row's hash was made for.
const reorderWindow = 16

// Verify walks in.Events, recomputing each row's hash and its link to
// the row before, checks every checkpoint's signature and, for those the
// walk reaches, that the chain's hash at its sequence number is the one
// signed, and answers the first broken link (the lowest sequence number
// at fault), if any.
func Verify(in Input) Report { return verify(in, true) }

// verify is Verify; hashFirst digests a long trail's rows on every core
// before the walk (sealedAll), which otherwise hashes row after row.
func verify(in Input, hashFirst bool) Report {
	evs := in.Events
	// Events stored before the chain existed are outside it.
	if i := slices.IndexFunc(evs, func(e toolplane.AuditEvent) bool { return e.Seq != 0 }); i > 0 {
		evs = evs[i:]
	} else if i < 0 {
		evs = nil
	}
	var first *toolplane.AuditEvent
	if len(evs) > 0 {
		first = &evs[0]
	}
	w := newWalk(&in, first)
	defer w.close()
	if hashFirst {
		w.held = sealedAll(evs)
	}
	return w.end(&in, w.rows(evs))
}

// parallelFrom is the length from which Verify hashes a trail's rows on
// every core (sealedAll): below it, starting the workers costs more than
// they save.
const parallelFrom = 4096

// hashBlock is how many rows a worker of sealedAll takes at once.
const hashBlock = 512

// sealedAll answers, for each of evs, whether its Hash is the one its
// content, number and PrevHash make, hashed on every core, or nil for a
// trail too short or a single core. A row's hash depends only on the row
// and the hash it says it follows, so the rows can be hashed in any order
// and only their links walked in order: the walk then recomputes a row's
// hashes only where it breaks.
func sealedAll(evs []toolplane.AuditEvent) []bool {
	procs := runtime.GOMAXPROCS(0)
	if procs < 2 || len(evs) < parallelFrom {
		return nil
	}
	held := make([]bool, len(evs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range procs {
		wg.Go(func() {
			x := hashers.Get().(*hasher)
			defer hashers.Put(x)
			for {
				lo := int(next.Add(hashBlock)) - hashBlock
				if lo >= len(evs) {
					return
				}
				for i := lo; i < min(lo+hashBlock, len(evs)); i++ {
					e := &evs[i]
					d := x.digest(e)
					h := x.linkHash(e.PrevHash, e.Seq, d[:])
					held[i] = bytes.Equal(h[:], e.Hash)
				}
			}
		})
	}
	wg.Wait()
	return held
}

// A walk is Verify's state between rows, so a trail can be walked a page
// at a time (see VerifyStore): the checkpoints and their signatures, the
// anchor, and the last link walked.
type walk struct {
	r       Report
	cps     []toolplane.AuditCheckpoint
	brk     *Break
	pending []int // indexes of cps the walk must still meet, by Seq
	x       *hasher
	// held, when set, is sealedAll's answer for the rows the walk is
	// given (one call of rows).
	held []bool
	// prevHash is the last row's hash (the anchor's before the first),
	// prevprev the one before it; prevSeq the last row's number and
	// expect the next one's.
	prevHash, prevprev []byte
	prevSeq, expect    int64
}

// newWalk checks in's checkpoints' signatures and anchors the walk of a
// trail whose first chained row is first (nil: none).
func newWalk(in *Input, first *toolplane.AuditEvent) *walk {
	w := &walk{x: hashers.Get().(*hasher)}
	r := &w.r
	if first != nil {
		r.OrganizationID = first.OrganizationID
	}
	cps := slices.Clone(in.Checkpoints)
	slices.SortStableFunc(cps, func(a, b toolplane.AuditCheckpoint) int { return compare(a.Seq, b.Seq) })
	w.cps = cps
	// Signatures first: only a checkpoint the operator signed anchors.
	valid := make([]bool, len(cps))
	for i := range cps {
		cp := &cps[i]
		if r.OrganizationID == "" {
			r.OrganizationID = cp.OrganizationID
		}
		r.Checkpoints++
		known, ok := false, false
		if in.Keys != nil {
			known, ok = in.Keys.checkSignature(cp)
		}
		switch {
		case cp.OrganizationID != r.OrganizationID:
			w.note(&Break{Seq: cp.Seq, Kind: Forged, Detail: fmt.Sprintf("checkpoint at %d names organization %q", cp.Seq, cp.OrganizationID)})
		case !known:
			w.note(&Break{Seq: cp.Seq, Kind: Forged, Detail: fmt.Sprintf("checkpoint at %d is signed by key %q, not one of the operator's", cp.Seq, cp.KeyID)})
		case !ok:
			w.note(&Break{Seq: cp.Seq, Kind: Forged, Detail: fmt.Sprintf("checkpoint at %d: signature does not verify with key %q", cp.Seq, cp.KeyID)})
		default:
			valid[i] = true
		}
	}
	// The anchor: the newest signed checkpoint before the first row.
	w.expect = 1
	if first != nil {
		for i := len(cps) - 1; i >= 0; i-- {
			if valid[i] && cps[i].Seq < first.Seq {
				r.Anchor, w.prevHash, w.expect = cps[i].Seq, cps[i].Hash, cps[i].Seq+1
				break
			}
		}
		if r.Anchor == 0 && first.Seq > 1 && in.Partial {
			r.Unanchored, w.prevHash, w.expect = true, first.PrevHash, first.Seq
		}
		r.From = w.expect
	} else {
		// Nothing stored to walk (retention dropped every event): the
		// newest signed checkpoint is where the chain stands, and the
		// head is compared with it.
		for i := len(cps) - 1; i >= 0; i-- {
			if valid[i] {
				r.Anchor, w.prevHash, w.expect = cps[i].Seq, cps[i].Hash, cps[i].Seq+1
				break
			}
		}
	}
	// Checkpoints the walk must meet, by sequence number.
	for i := range cps {
		if valid[i] && cps[i].Seq > r.Anchor {
			w.pending = append(w.pending, i)
		}
	}
	w.prevSeq = w.expect - 1
	return w
}

// resume makes w the walk of a segment of a longer trail that starts at
// e: e's link is taken as it is (the segment before checks it), and the
// checkpoints before e are the other segment's.
func (w *walk) resume(e *toolplane.AuditEvent) {
	w.prevHash, w.expect, w.prevSeq = e.PrevHash, e.Seq, e.Seq-1
	w.pending = slices.DeleteFunc(w.pending, func(i int) bool { return w.cps[i].Seq < e.Seq })
}

// note keeps b when it is the first break so far (the lowest Seq).
func (w *walk) note(b *Break) {
	if b != nil && (w.brk == nil || b.Seq < w.brk.Seq) {
		w.brk = b
	}
}

// close returns the walk's hasher.
func (w *walk) close() {
	if w.x != nil {
		hashers.Put(w.x)
		w.x = nil
	}
}

// rows walks evs, the trail's next rows, and answers false at the first
// broken one (noted). Whether a row holds depends only on it and the row
// before, except when it does not: the break is then named looking at
// evs around it, so a break found in one page of a longer trail is named
// again over the whole trail (VerifyStore does).
func (w *walk) rows(evs []toolplane.AuditEvent) bool {
	cps := w.cps
	held := w.held
	if len(held) != len(evs) {
		held = nil
	}
	for i := range evs {
		e := &evs[i]
		// With the rows hashed before (held), a row that is the one
		// expected, not numbered twice, hashed right and following the
		// row before holds, which is what check answers nil for; any
		// other is checked, and named, by check.
		fast := held != nil && held[i] && e.Seq == w.expect && (i+1 == len(evs) || evs[i+1].Seq != e.Seq) &&
			bytes.Equal(e.PrevHash, w.prevHash)
		if !fast {
			if b := w.x.check(evs, i, w.expect, w.prevSeq, w.prevHash, w.prevprev); b != nil {
				w.note(b)
				return false
			}
		}
		for len(w.pending) > 0 && cps[w.pending[0]].Seq <= e.Seq {
			cp := &cps[w.pending[0]]
			w.pending = w.pending[1:]
			if cp.Seq < e.Seq {
				continue // the walk never met its number (a gap, noted)
			}
			if !bytes.Equal(cp.Hash, e.Hash) {
				w.note(&Break{Seq: cp.Seq, Kind: Rewritten, EventID: e.ID, Detail: fmt.Sprintf("the chain's hash at %d is not the one the checkpoint signed: rows up to it were rewritten", cp.Seq)})
			} else {
				w.r.Matched++
			}
		}
		w.prevprev, w.prevHash, w.prevSeq = w.prevHash, e.Hash, e.Seq
		w.expect = e.Seq + 1
		w.r.Events++
		w.r.To = e.Seq
	}
	return true
}

// end answers the walk's report: complete says every row read held, and
// only then is where the trail ends compared with the checkpoints and the
// head.
func (w *walk) end(in *Input, complete bool) Report {
	r, cps, prevSeq := w.r, w.cps, w.prevSeq
	// A checkpoint signed past where the trail ends, on a walk that read
	// to the end: the rows it vouched for are gone, whatever the head (a
	// head can be moved back, or be the newest row left). An export of a
	// range (Partial) may simply end before it, so only a walk that knows
	// where the chain stands (Head) says so.
	if w.brk == nil && complete && in.Head != nil {
		for _, i := range w.pending {
			if cp := &cps[i]; cp.Seq > prevSeq && (in.To == 0 || in.To >= cp.Seq) {
				w.note(&Break{Seq: prevSeq + 1, Kind: Deleted, Detail: fmt.Sprintf("a checkpoint signed the chain at %d but the trail ends at %d", cp.Seq, prevSeq)})
				break
			}
		}
	}
	if w.brk == nil && complete && in.Head != nil && (in.To == 0 || in.To >= in.Head.Seq) {
		switch {
		case in.Head.Seq > prevSeq:
			w.note(&Break{Seq: prevSeq + 1, Kind: Deleted, Detail: fmt.Sprintf("the chain's head is at %d but the trail ends at %d", in.Head.Seq, prevSeq)})
		case in.Head.Seq < prevSeq:
			w.note(&Break{Seq: in.Head.Seq + 1, Kind: Inserted, Detail: fmt.Sprintf("the trail goes past the chain's head at %d", in.Head.Seq)})
		case in.Head.Seq > 0 && !bytes.Equal(in.Head.Hash, w.prevHash):
			w.note(&Break{Seq: prevSeq, Kind: Rewritten, Detail: fmt.Sprintf("the chain's head hash at %d is not the trail's", prevSeq)})
		}
	}
	r.Break = w.brk
	r.OK = w.brk == nil
	return r
}

// check answers the break at evs[i], expected to be numbered expect and
// to follow the row numbered prevSeq whose hash is prevHash (the one
// before it had prevprev), or nil when the link holds.
func (x *hasher) check(evs []toolplane.AuditEvent, i int, expect, prevSeq int64, prevHash, prevprev []byte) *Break {
	e := &evs[i]
	switch {
	case i+1 < len(evs) && evs[i+1].Seq == e.Seq:
		// Two rows of one number: the one whose hash does not hold is
		// the one added (the first when both hold).
		bad := e
		d := x.digest(e)
		if h := x.linkHash(e.PrevHash, e.Seq, d[:]); bytes.Equal(h[:], e.Hash) && bytes.Equal(e.PrevHash, prevHash) {
			bad = &evs[i+1]
		}
		return &Break{Seq: e.Seq, Kind: Inserted, EventID: bad.ID, Detail: fmt.Sprintf("sequence number %d appears twice", e.Seq)}
	case e.Seq == prevSeq && i > 0:
		return &Break{Seq: e.Seq, Kind: Inserted, EventID: e.ID, Detail: fmt.Sprintf("sequence number %d appears twice", e.Seq)}
	case e.Seq < expect:
		return &Break{Seq: e.Seq, Kind: Reordered, EventID: e.ID, Detail: fmt.Sprintf("row %d comes after row %d", e.Seq, prevSeq)}
	case e.Seq > expect:
		for _, later := range evs[i+1:] {
			if later.Seq == expect {
				return &Break{Seq: expect, Kind: Reordered, EventID: later.ID, Detail: fmt.Sprintf("row %d comes after row %d", expect, e.Seq)}
			}
		}
		return &Break{Seq: expect, Kind: Deleted, Detail: fmt.Sprintf("rows %d to %d are missing", expect, e.Seq-1)}
	}
	d := x.digest(e)
	h := x.linkHash(e.PrevHash, e.Seq, d[:])
	selfOK := bytes.Equal(h[:], e.Hash)
	linkOK := bytes.Equal(e.PrevHash, prevHash)
	if selfOK && linkOK {
		return nil
	}
	if !linkOK && prevprev != nil && bytes.Equal(e.PrevHash, prevprev) {
		// This row follows the one before the previous: that one is extra.
		prev := &evs[i-1]
		return &Break{Seq: prev.Seq, Kind: Inserted, EventID: prev.ID, Detail: fmt.Sprintf("row %d is not in the chain: row %d follows the row before it", prev.Seq, e.Seq)}
	}
	switch {
	case linkOK:
		return &Break{Seq: e.Seq, Kind: Changed, EventID: e.ID, Detail: fmt.Sprintf("row %d's content does not match its hash", e.Seq)}
	case selfOK:
		for j := range evs {
			if j != i-1 && bytes.Equal(evs[j].Hash, e.PrevHash) {
				return &Break{Seq: e.Seq, Kind: Reordered, EventID: e.ID, Detail: fmt.Sprintf("row %d follows row %d, not row %d", e.Seq, evs[j].Seq, prevSeq)}
			}
		}
		return &Break{Seq: e.Seq, Kind: Deleted, EventID: e.ID, Detail: fmt.Sprintf("row %d follows a row that is missing", e.Seq)}
	}
	// Neither its content nor its link holds: is it an intact row moved
	// from another position?
	for s := max(1, e.Seq-reorderWindow); s <= e.Seq+reorderWindow; s++ {
		if s == e.Seq {
			continue
		}
		if h := x.linkHash(e.PrevHash, s, d[:]); bytes.Equal(h[:], e.Hash) {
			return &Break{Seq: e.Seq, Kind: Reordered, EventID: e.ID, Detail: fmt.Sprintf("row %d holds the event made as row %d", e.Seq, s)}
		}
	}
	return &Break{Seq: e.Seq, Kind: Inserted, EventID: e.ID, Detail: fmt.Sprintf("row %d continues nothing in the chain", e.Seq)}
}

func compare(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
