package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

// AuditChainStore is what the audit chain cases need: a store and its
// chain's reads, checkpoints and retention.
type AuditChainStore interface {
	toolplane.Store
	toolplane.AuditChainStore
	AppendAuditBatch(ctx context.Context, events []*toolplane.AuditEvent) error
}

// AuditChain is how RunAuditChain reaches a store of one dialect.
type AuditChain struct {
	Open func(t *testing.T) AuditChainStore
	// Exec runs statement on s's database as its owner, answering the
	// database's error: the cases play an attacker with the owner's
	// rights, and check what the database itself refuses. A statement
	// may be a script opening a transaction; one refused leaves no
	// transaction open.
	Exec func(t *testing.T, s AuditChainStore, statement string) error
	// Unguard is the statements that take the trail's protections away
	// (its append-only triggers, the unique index of sequence numbers), as
	// such an attacker could, before a case tampers with the rows.
	Unguard []string
	// HeadTable says the store keeps where each chain stands in a table of
	// its own (audit_heads: organization_id, seq, hash), which an attacker
	// moves too; without it the head is the newest event.
	HeadTable bool
	// Bytes answers the dialect's literal of b (X'..' or '\x..'::bytea).
	Bytes func(b []byte) string
	// Writers is how many goroutines append at once in the concurrency
	// case (zero: 8).
	Writers int
}

// auditChainCase is one named chain check.
type auditChainCase struct {
	name string
	run  func(t *testing.T, h AuditChain, s AuditChainStore)
}

var auditChainCases = []auditChainCase{
	{"EveryInsertPathChains", testChainEveryPath},
	{"OrganizationsChainApart", testChainOrganizationsApart},
	{"ConcurrentAppendsLeaveNoGap", testChainConcurrent},
	{"TamperChanged", testTamper(auditchain.Changed)},
	{"TamperDeleted", testTamper(auditchain.Deleted)},
	{"TamperReordered", testTamper(auditchain.Reordered)},
	{"TamperInserted", testTamper(auditchain.Inserted)},
	{"TamperInsertedAtEnd", testTamperInsertedAtEnd},
	{"TamperForgedCheckpoint", testTamper(auditchain.Forged)},
	{"TamperRewrittenUnderCheckpoint", testTamper(auditchain.Rewritten)},
	{"UpdateAndDeleteRefused", testChainRefusesChange},
	{"RetentionKeepsVerification", testChainRetention},
	{"RetentionPassesAtOnceDropOnce", testChainRetentionRaced},
	{"VerifyBesideADrop", testChainVerifyBesideDrop},
	{"TamperBesideADrop", testChainTamperBesideDrop},
	{"CheckpointsSignMovedChains", testChainCheckpoints},
	{"ChainReadsWhatGetReads", testChainReadsWhatGetReads},
	{"TamperAcrossPages", testTamperAcrossPages},
	{"PolicyInputsKeptExactly", testChainPolicyInputs},
}

// RunAuditChain runs the audit chain cases, each on a store of its own
// (a tamper case spoils its store).
func RunAuditChain(t *testing.T, h AuditChain) {
	t.Helper()
	for _, c := range auditChainCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, h, h.Open(t))
		})
	}
}

// testKeys is a signing key set made once for the suite.
var testKeys = sync.OnceValue(func() *auditchain.KeySet {
	ks := &auditchain.KeySet{}
	if _, err := ks.Generate(base); err != nil {
		panic(err)
	}
	return ks
})

func chainEvent(org string, n int) *toolplane.AuditEvent {
	return fullEvent(org, fmt.Sprintf("ev-%03d", n), at(time.Duration(n)*time.Second))
}

// appendChain appends n events to org's chain, one by one, and answers
// them as stored.
func appendChain(t *testing.T, s AuditChainStore, org string, n int) []toolplane.AuditEvent {
	t.Helper()
	for i := 1; i <= n; i++ {
		appendAudit(t, s, chainEvent(org, i))
	}
	return readChain(t, s, org)
}

func readChain(t *testing.T, s AuditChainStore, org string) []toolplane.AuditEvent {
	t.Helper()
	evs, err := s.AuditChain(t.Context(), org, 1, 0, 1000)
	if err != nil {
		t.Fatalf("AuditChain = %v", err)
	}
	return evs
}

func verifyStored(t *testing.T, s AuditChainStore, org string) auditchain.Report {
	t.Helper()
	r, err := auditchain.VerifyStore(t.Context(), s, testKeys(), org, 0, 0)
	if err != nil {
		t.Fatalf("VerifyStore = %v", err)
	}
	return r
}

func wantValid(t *testing.T, s AuditChainStore, org string, events int) auditchain.Report {
	t.Helper()
	r := verifyStored(t, s, org)
	if !r.OK || r.Events != events {
		t.Fatalf("verify = %+v (break %+v); want OK over %d events", r, r.Break, events)
	}
	return r
}

// wantSeqs checks evs are numbered 1..n in order, with the IDs ids.
func wantChain(t *testing.T, evs []toolplane.AuditEvent, ids ...string) {
	t.Helper()
	if len(evs) != len(ids) {
		t.Fatalf("chain has %d events, want %d: %v", len(evs), len(ids), chainIDs(evs))
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) || e.ID != ids[i] {
			t.Fatalf("chain = %v; want %v numbered from 1", chainIDs(evs), ids)
		}
		if len(e.Hash) != auditchain.HashSize {
			t.Fatalf("event %d has hash %x", e.Seq, e.Hash)
		}
	}
}

func chainIDs(evs []toolplane.AuditEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%d:%s", e.Seq, e.ID)
	}
	return out
}

// testChainEveryPath: AppendAudit, a batch of several organizations, and
// the writes that record an event (a claim updated, a claim deleted) all
// continue the organization's chain, and a write that stores no event (a
// stale version, a duplicate ID) takes no number.
func testChainEveryPath(t *testing.T, _ AuditChain, s AuditChainStore) {
	org, other := newOrg(), newOrg()
	e1 := chainEvent(org, 1)
	appendAudit(t, s, e1)
	if e1.Seq != 1 || len(e1.PrevHash) != 0 || len(e1.Hash) != auditchain.HashSize {
		t.Fatalf("AppendAudit set Seq %d, PrevHash %x, Hash %x; want 1, empty, a hash", e1.Seq, e1.PrevHash, e1.Hash)
	}
	// A duplicate takes no number.
	if err := s.AppendAudit(t.Context(), chainEvent(org, 1)); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("AppendAudit(duplicate) = %v; want ErrExists", err)
	}
	batch := []*toolplane.AuditEvent{chainEvent(org, 2), chainEvent(other, 1), chainEvent(org, 3), chainEvent(other, 2), chainEvent(org, 4)}
	if err := s.AppendAuditBatch(t.Context(), batch); err != nil {
		t.Fatalf("AppendAuditBatch = %v", err)
	}
	c := fullClaim(org, "payments.refund_order", "k", base)
	insertClaim(t, s, c)
	cur := getClaim(t, s, org, c.Tool, c.Key)
	// A stale version stores no event and takes no number.
	stale := *cur
	stale.Version--
	if ok, err := s.UpdateClaimAudited(t.Context(), &stale, chainEvent(org, 99)); ok || err != nil {
		t.Fatalf("UpdateClaimAudited(stale) = %v, %v", ok, err)
	}
	next := *cur
	next.Status = toolplane.ClaimCompleted
	if ok, err := s.UpdateClaimAudited(t.Context(), &next, chainEvent(org, 5)); !ok || err != nil {
		t.Fatalf("UpdateClaimAudited = %v, %v", ok, err)
	}
	if ok, err := s.DeleteClaimAudited(t.Context(), org, next.Tool, next.Key, next.Version, chainEvent(org, 6)); !ok || err != nil {
		t.Fatalf("DeleteClaimAudited = %v, %v", ok, err)
	}
	appendAudit(t, s, chainEvent(org, 7))
	evs := readChain(t, s, org)
	wantChain(t, evs, "ev-001", "ev-002", "ev-003", "ev-004", "ev-005", "ev-006", "ev-007")
	if d := diff(evs[0], *e1); d != "" {
		t.Fatalf("stored event differs from the one AppendAudit sealed: %s", d)
	}
	for i := 1; i < len(evs); i++ {
		if string(evs[i].PrevHash) != string(evs[i-1].Hash) {
			t.Fatalf("event %d's PrevHash is not event %d's Hash", evs[i].Seq, evs[i-1].Seq)
		}
	}
	wantValid(t, s, org, 7)
	wantChain(t, readChain(t, s, other), "ev-001", "ev-002")
	wantValid(t, s, other, 2)
	// The stored hash is the one auditchain computes from the stored event.
	for _, e := range evs {
		if want := auditchain.Link(e.PrevHash, e.Seq, auditchain.Digest(&e)); string(want) != string(e.Hash) {
			t.Fatalf("event %d: stored hash %x, computed %x", e.Seq, e.Hash, want)
		}
	}
}

// testChainOrganizationsApart: each organization's chain counts its own
// events, and reading one organization's chain never shows another's.
func testChainOrganizationsApart(t *testing.T, _ AuditChain, s AuditChainStore) {
	a, b := newOrg(), newOrg()
	for i := 1; i <= 3; i++ {
		appendAudit(t, s, chainEvent(a, i))
		appendAudit(t, s, chainEvent(b, i))
	}
	appendAudit(t, s, chainEvent(a, 4))
	wantChain(t, readChain(t, s, a), "ev-001", "ev-002", "ev-003", "ev-004")
	wantChain(t, readChain(t, s, b), "ev-001", "ev-002", "ev-003")
	for _, e := range readChain(t, s, b) {
		if e.OrganizationID != b {
			t.Fatalf("organization %s's chain holds %s's event", b, e.OrganizationID)
		}
	}
	ha, _, err := s.AuditHead(t.Context(), a)
	if err != nil || ha.Seq != 4 {
		t.Fatalf("AuditHead(a) = %+v, %v; want seq 4", ha, err)
	}
	if h, first, err := s.AuditHead(t.Context(), newOrg()); err != nil || h.Seq != 0 || first != 0 {
		t.Fatalf("AuditHead(unknown) = %+v, %d, %v; want zero", h, first, err)
	}
	wantValid(t, s, a, 4)
	wantValid(t, s, b, 3)
}

// testChainConcurrent: many goroutines appending to two organizations at
// once, singly and in batches, leave each chain gapless and valid.
func testChainConcurrent(t *testing.T, h AuditChain, s AuditChainStore) {
	writers := h.Writers
	if writers == 0 {
		writers = 8
	}
	const each = 12
	orgs := []string{newOrg(), newOrg()}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id := func(org string) *toolplane.AuditEvent {
					return fullEvent(org, fmt.Sprintf("w%d-%d", w, i), at(time.Duration(i)*time.Millisecond))
				}
				var err error
				if i%3 == 2 {
					err = s.AppendAuditBatch(t.Context(), []*toolplane.AuditEvent{id(orgs[(w+1)%2]), id(orgs[w%2])})
				} else {
					err = s.AppendAudit(t.Context(), id(orgs[w%2]))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := 0
	for _, org := range orgs {
		evs := readChain(t, s, org)
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("organization's chain has a gap: %v", chainIDs(evs))
			}
		}
		wantValid(t, s, org, len(evs))
		total += len(evs)
	}
	if want := writers * (each + each/3); total != want {
		t.Fatalf("%d events chained, want %d", total, want)
	}
}

// tamperChain makes a chain of six events with a checkpoint at 2, takes
// the protections away, and answers the organization.
func tamperChain(t *testing.T, h AuditChain, s AuditChainStore) string {
	t.Helper()
	org := newOrg()
	evs := appendChain(t, s, org, 6)
	signCheckpoint(t, s, evs[1])
	wantValid(t, s, org, 6)
	for _, st := range h.Unguard {
		if err := h.Exec(t, s, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	return org
}

func signCheckpoint(t *testing.T, s AuditChainStore, e toolplane.AuditEvent) *toolplane.AuditCheckpoint {
	t.Helper()
	cp := &toolplane.AuditCheckpoint{OrganizationID: e.OrganizationID, Seq: e.Seq, Hash: e.Hash, CreatedAt: at(time.Hour)}
	if err := testKeys().Sign(cp); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAuditCheckpoint(t.Context(), cp); err != nil {
		t.Fatalf("AppendAuditCheckpoint = %v", err)
	}
	return cp
}

func exec(t *testing.T, h AuditChain, s AuditChainStore, statements ...string) {
	t.Helper()
	for _, st := range statements {
		if err := h.Exec(t, s, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
}

// copyRow answers an INSERT of a copy of org's event at seq, with
// replacements for some of its columns (SQL expressions by column name).
func copyRow(org string, seq int64, set map[string]string) string {
	cols := strings.Split(sqlstore.AuditColumns, ",")
	sel := make([]string, len(cols))
	for i, c := range cols {
		c = strings.TrimSpace(c)
		cols[i] = c
		sel[i] = c
		if v, ok := set[c]; ok {
			sel[i] = v
		}
	}
	return fmt.Sprintf(`INSERT INTO audit_events (%s) SELECT %s FROM audit_events WHERE organization_id = '%s' AND seq = %d`,
		strings.Join(cols, ", "), strings.Join(sel, ", "), org, seq)
}

// testTamper: a change of each kind, made with the owner's rights and the
// protections off, is named with its kind and exact position.
func testTamper(kind auditchain.Kind) func(t *testing.T, h AuditChain, s AuditChainStore) {
	return func(t *testing.T, h AuditChain, s AuditChainStore) {
		org := tamperChain(t, h, s)
		where := func(seq int) string { return fmt.Sprintf(" WHERE organization_id = '%s' AND seq = %d", org, seq) }
		var want int64
		switch kind {
		case auditchain.Changed:
			exec(t, h, s, `UPDATE audit_events SET outcome = 'denied'`+where(4))
			want = 4
		case auditchain.Deleted:
			exec(t, h, s, `DELETE FROM audit_events`+where(4))
			want = 4
		case auditchain.Reordered:
			// Rows 4 and 5 trade places (their numbers swapped).
			exec(t, h, s, `UPDATE audit_events SET seq = -5`+where(5),
				`UPDATE audit_events SET seq = 5`+where(4),
				`UPDATE audit_events SET seq = 4`+where(-5))
			want = 4
		case auditchain.Inserted:
			// A second row numbered 4, a copy of row 4 made to say
			// something else.
			exec(t, h, s, copyRow(org, 4, map[string]string{"id": "'forged'", "outcome": "'ok'", "tool": "'payments.noop'"}))
			want = 4
		case auditchain.Forged:
			evs := readChain(t, s, org)
			// A checkpoint at 5 signed by a key that is not the operator's.
			forger := &auditchain.KeySet{}
			if _, err := forger.Generate(base); err != nil {
				t.Fatal(err)
			}
			cp := &toolplane.AuditCheckpoint{OrganizationID: org, Seq: 5, Hash: evs[4].Hash, CreatedAt: at(time.Hour)}
			if err := forger.Sign(cp); err != nil {
				t.Fatal(err)
			}
			if err := s.AppendAuditCheckpoint(t.Context(), cp); err != nil {
				t.Fatal(err)
			}
			want = 5
		case auditchain.Rewritten:
			// Row 2 changed and every hash from it on made again: the chain
			// holds together, but not with the checkpoint signed at 2.
			evs := readChain(t, s, org)
			prev := evs[0].Hash
			for _, e := range evs[1:] {
				if e.Seq == 2 {
					e.Outcome = "denied"
				}
				auditchain.Seal(&e, e.Seq, prev)
				prev = e.Hash
				exec(t, h, s, fmt.Sprintf(`UPDATE audit_events SET outcome = '%s', prev_hash = %s, hash = %s`, e.Outcome, h.Bytes(e.PrevHash), h.Bytes(e.Hash))+where(int(e.Seq)))
			}
			if h.HeadTable {
				exec(t, h, s, `UPDATE audit_heads SET hash = `+h.Bytes(prev)+` WHERE organization_id = '`+org+`'`)
			}
			want = 2
		}
		r := verifyStored(t, s, org)
		if r.OK || r.Break == nil || r.Break.Kind != kind || r.Break.Seq != want {
			t.Fatalf("verify = %+v, break %+v; want %s at %d", r, r.Break, kind, want)
		}
		if kind == auditchain.Inserted && r.Break.EventID != "forged" {
			t.Fatalf("break names event %q; want the forged one", r.Break.EventID)
		}
	}
}

// testTamperInsertedAtEnd: a row added after the last, whose hash
// continues nothing, is named as inserted.
func testTamperInsertedAtEnd(t *testing.T, h AuditChain, s AuditChainStore) {
	org := tamperChain(t, h, s)
	exec(t, h, s, copyRow(org, 2, map[string]string{"id": "'forged'", "seq": "7"}))
	if h.HeadTable {
		// The store's own head is moved too, as the attacker would.
		exec(t, h, s, `UPDATE audit_heads SET seq = 7 WHERE organization_id = '`+org+`'`)
	}
	r := verifyStored(t, s, org)
	if r.OK || r.Break.Kind != auditchain.Inserted || r.Break.Seq != 7 || r.Break.EventID != "forged" {
		t.Fatalf("verify = %+v, break %+v; want inserted at 7", r, r.Break)
	}
}

// testChainRefusesChange: the database itself refuses an UPDATE or DELETE
// of an event or a checkpoint, and an event inserted outside the chain.
func testChainRefusesChange(t *testing.T, h AuditChain, s AuditChainStore) {
	org := newOrg()
	evs := appendChain(t, s, org, 3)
	signCheckpoint(t, s, evs[2])
	for _, st := range []string{
		`UPDATE audit_events SET outcome = 'denied' WHERE organization_id = '` + org + `' AND seq = 2`,
		`DELETE FROM audit_events WHERE organization_id = '` + org + `' AND seq = 3`,
		`DELETE FROM audit_events WHERE organization_id = '` + org + `'`,
		`UPDATE audit_checkpoints SET seq = 2 WHERE organization_id = '` + org + `'`,
		`DELETE FROM audit_checkpoints WHERE organization_id = '` + org + `'`,
		copyRow(org, 3, map[string]string{"id": "'unchained'", "seq": "0", "hash": "NULL", "prev_hash": "NULL"}),
	} {
		if err := h.Exec(t, s, st); err == nil {
			t.Errorf("%s was not refused", st)
		}
	}
	wantChain(t, readChain(t, s, org), "ev-001", "ev-002", "ev-003")
	wantValid(t, s, org, 3)
}

// testChainRetention: retention drops a range after a checkpoint at its
// end, what remains still verifies (anchored on that checkpoint), and the
// chain goes on.
func testChainRetention(t *testing.T, _ AuditChain, s AuditChainStore) {
	org, other := newOrg(), newOrg()
	evs := appendChain(t, s, org, 6)
	appendChain(t, s, other, 2)
	// A checkpoint that is not the chain's is refused.
	bad := &toolplane.AuditCheckpoint{OrganizationID: org, Seq: 4, Hash: evs[2].Hash, CreatedAt: at(time.Hour)}
	if err := testKeys().Sign(bad); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DropAudit(t.Context(), 1, bad, nil); !errors.Is(err, toolplane.ErrConflict) {
		t.Fatalf("DropAudit(wrong hash) = %v; want ErrConflict", err)
	}
	cp := &toolplane.AuditCheckpoint{OrganizationID: org, Seq: 4, Hash: evs[3].Hash, CreatedAt: at(time.Hour)}
	if err := testKeys().Sign(cp); err != nil {
		t.Fatal(err)
	}
	// No event where the checkpoint says.
	far := *cp
	far.Seq = 40
	if _, err := s.DropAudit(t.Context(), 1, &far, nil); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("DropAudit(past the head) = %v; want ErrNotFound", err)
	}
	// A range read to start elsewhere than the first stored event is
	// refused, and nothing is dropped nor recorded.
	if _, err := s.DropAudit(t.Context(), 2, cp, chainEvent(org, 99)); !errors.Is(err, toolplane.ErrConflict) {
		t.Fatalf("DropAudit(from 2, the first stored being 1) = %v; want ErrConflict", err)
	}
	wantChain(t, readChain(t, s, org), "ev-001", "ev-002", "ev-003", "ev-004", "ev-005", "ev-006")
	ev := chainEvent(org, 100)
	n, err := s.DropAudit(t.Context(), 1, cp, ev)
	if err != nil || n != 4 {
		t.Fatalf("DropAudit = %d, %v; want 4", n, err)
	}
	if ev.Seq != 7 {
		t.Fatalf("the drop's event is numbered %d; want 7, after the head", ev.Seq)
	}
	rest := readChain(t, s, org)
	if len(rest) != 3 || rest[0].Seq != 5 || rest[2].ID != ev.ID {
		t.Fatalf("after retention: %v", chainIDs(rest))
	}
	// The same range again (a pass that read it before the drop) is
	// refused, and its drop is not recorded twice; so is a longer one
	// read from the same start.
	if _, err := s.DropAudit(t.Context(), 1, cp, chainEvent(org, 101)); !errors.Is(err, toolplane.ErrConflict) {
		t.Fatalf("DropAudit(the dropped range again) = %v; want ErrConflict", err)
	}
	longer := &toolplane.AuditCheckpoint{OrganizationID: org, Seq: 5, Hash: rest[0].Hash, CreatedAt: at(time.Hour)}
	if err := testKeys().Sign(longer); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DropAudit(t.Context(), 1, longer, chainEvent(org, 102)); !errors.Is(err, toolplane.ErrConflict) {
		t.Fatalf("DropAudit(from the dropped start, through 5) = %v; want ErrConflict", err)
	}
	if again := readChain(t, s, org); len(again) != 3 || again[2].ID != ev.ID {
		t.Fatalf("after refused drops: %v; want 5, 6 and the one drop's event", chainIDs(again))
	}
	if got, err := s.AuditCheckpoints(t.Context(), org, 5, 5); err != nil || len(got) != 0 {
		t.Fatalf("a refused drop stored its checkpoint: %+v, %v", got, err)
	}
	r := wantValid(t, s, org, 3)
	if r.Anchor != 4 || r.From != 5 {
		t.Fatalf("verify after retention = %+v; want anchored at 4", r)
	}
	appendAudit(t, s, chainEvent(org, 7))
	wantValid(t, s, org, 4)
	// Another organization's trail is untouched.
	wantChain(t, readChain(t, s, other), "ev-001", "ev-002")
	if got, err := s.AuditCheckpoints(t.Context(), org, 0, 0); err != nil || len(got) != 1 || got[0].Seq != 4 {
		t.Fatalf("AuditCheckpoints = %+v, %v", got, err)
	}
}

// testChainCheckpoints: the checkpoint job signs each chain that moved
// since its last checkpoint, once, and verification then checks the
// chain against them.
func testChainCheckpoints(t *testing.T, _ AuditChain, s AuditChainStore) {
	a, b := newOrg(), newOrg()
	appendChain(t, s, a, 3)
	appendChain(t, s, b, 2)
	checkpoint := func(want int) {
		t.Helper()
		// Other cases' organizations share the store only in their own
		// cases: each case opens a store of its own.
		n, err := auditchain.Checkpoint(t.Context(), s, testKeys(), at(time.Hour))
		if err != nil || n != want {
			t.Fatalf("Checkpoint = %d, %v; want %d", n, err, want)
		}
	}
	checkpoint(2)
	checkpoint(0)
	appendAudit(t, s, chainEvent(a, 4))
	checkpoint(1)
	cps, err := s.AuditCheckpoints(t.Context(), a, 0, 0)
	if err != nil || len(cps) != 2 || cps[0].Seq != 3 || cps[1].Seq != 4 {
		t.Fatalf("AuditCheckpoints(a) = %+v, %v; want at 3 and 4", cps, err)
	}
	if r := wantValid(t, s, a, 4); r.Checkpoints != 2 || r.Matched != 2 {
		t.Fatalf("verify = %+v; want both checkpoints checked and matched", r)
	}
	if r := wantValid(t, s, b, 2); r.Matched != 1 {
		t.Fatalf("verify = %+v; want b's checkpoint matched", r)
	}
}

// testChainReadsWhatGetReads: AuditChain answers each event as GetAudit
// does (it reads a row in another form, see sqlstore.AuditPacked), for
// events whose fields hold separators, digits, bytes that are not UTF-8,
// long documents and empty values.
func testChainReadsWhatGetReads(t *testing.T, _ AuditChain, s AuditChainStore) {
	org := newOrg()
	odd := fullEvent(org, "ev-odd:12:", at(time.Second))
	odd.Reason = "3:abc:" + strings.Repeat("é", 200)
	odd.Arguments = []byte(`{"note":"` + strings.Repeat("x:9", 300) + `"}`)
	odd.PIIFields, odd.Classifications = []string{"email", "a,b", ":"}, []string{"pii"}
	odd.CostCents, odd.Attempts, odd.PolicyBundle = -3, 7, 1<<40
	bare := &toolplane.AuditEvent{OrganizationID: org, ID: "ev-bare", CreatedAt: at(2 * time.Second)}
	for _, e := range []*toolplane.AuditEvent{chainEvent(org, 1), odd, bare} {
		appendAudit(t, s, e)
	}
	evs := readChain(t, s, org)
	if len(evs) != 3 {
		t.Fatalf("chain = %v", chainIDs(evs))
	}
	for _, e := range evs {
		got, err := s.GetAudit(t.Context(), org, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%+v", *got)
		if have := fmt.Sprintf("%+v", e); have != want {
			t.Fatalf("AuditChain's %s =\n%s\nGetAudit's =\n%s", e.ID, have, want)
		}
		if string(auditchain.Digest(&e)) != string(auditchain.Digest(got)) {
			t.Fatalf("%s: digests differ", e.ID)
		}
	}
}

// testTamperAcrossPages: on a chain long enough that VerifyStore reads it
// in pages and as two segments at once (they meet after row 2100), a
// change past the segments' meeting, a deletion at it and a move at a
// page's edge are named as on a short chain.
func testTamperAcrossPages(t *testing.T, h AuditChain, s AuditChainStore) {
	const n = 4200
	orgs := []string{newOrg(), newOrg(), newOrg()}
	for _, org := range orgs {
		for i := 0; i < n; i += 700 {
			evs := make([]*toolplane.AuditEvent, 700)
			for j := range evs {
				evs[j] = chainEvent(org, i+j+1)
				evs[j].ID = fmt.Sprintf("ev-%05d", i+j+1)
			}
			if err := s.AppendAuditBatch(t.Context(), evs); err != nil {
				t.Fatal(err)
			}
		}
		wantValid(t, s, org, n)
	}
	exec(t, h, s, h.Unguard...)
	where := func(org string, seq int) string {
		return fmt.Sprintf(" WHERE organization_id = '%s' AND seq = %d", org, seq)
	}
	exec(t, h, s, `UPDATE audit_events SET outcome = 'denied'`+where(orgs[0], 2101),
		`DELETE FROM audit_events`+where(orgs[1], 2100),
		`UPDATE audit_events SET seq = -5`+where(orgs[2], 1001),
		`UPDATE audit_events SET seq = 1001`+where(orgs[2], 1000),
		`UPDATE audit_events SET seq = 1000`+where(orgs[2], -5))
	for i, want := range []struct {
		kind auditchain.Kind
		seq  int64
	}{{auditchain.Changed, 2101}, {auditchain.Deleted, 2100}, {auditchain.Reordered, 1000}} {
		r := verifyStored(t, s, orgs[i])
		if r.OK || r.Break == nil || r.Break.Kind != want.kind || r.Break.Seq != want.seq {
			t.Fatalf("verify = %+v, break %+v; want %s at %d", r, r.Break, want.kind, want.seq)
		}
	}
}

// testChainPolicyInputs: a call's policy input document (which a store
// may keep packed, issue 35) reads back byte for byte through every read
// (ListAudit, GetAudit, the chain's), appended alone or in a batch, and
// the chain over it verifies; an event without one (the grants refused
// the call, or no rules read it) reads back without one.
func testChainPolicyInputs(t *testing.T, _ AuditChain, s AuditChainStore) {
	org := newOrg()
	docs := []struct {
		id  string
		doc string
	}{
		{"ev-none", ""},
		{"ev-read", `{"grants":"allow","request":{"principal":{"agent":"agent-1","roles":[],"attributes":{}},"tool":{"name":"crm.get_contact","version":"1.0.0","effect":"read","destructive":false,"read_only":true,"tags":[],"sensitive":[]},"arguments":{"body":"sha256:7170e6742875a9b564e3cf9442a19400","to":"sha256:fc7df777c08a00350a62876ea699ec18"},"facts":{},"context":{"time":"2026-12-06T07:54:06.998273306Z","hour":7,"weekday":0,"run_cost_cents":0,"source":"sdk"}}}`},
		{"ev-approval", `{"grants":"require_approval","request":{"principal":{"agent":"a","roles":["ops"],"attributes":{"team":"x"}},"tool":{"name":"p.refund","version":"2.1.0","effect":"write","destructive":true,"read_only":false,"tags":["finance"],"sensitive":["/to"]},"arguments":{"to":"sha256:7170E6742875A9B564E3CF9442A19400","n":"sha256:7170"},"facts":{"org_time":{"hour":3}},"context":{"time":"2026-12-06T07:54:06Z","hour":7,"weekday":0,"run_cost_cents":250,"source":"rest"}}}`},
		{"ev-not-json", "\x1f\x01\x02not json\x00\xff"},
	}
	var batch []*toolplane.AuditEvent
	for i, d := range docs {
		e := fullEvent(org, d.id, at(time.Duration(i)*time.Second))
		e.PolicyInput = nil
		if d.doc != "" {
			e.PolicyInput = []byte(d.doc)
		}
		if i%2 == 0 {
			appendAudit(t, s, e)
		} else {
			batch = append(batch, e)
		}
	}
	if err := s.AppendAuditBatch(t.Context(), batch); err != nil {
		t.Fatalf("AppendAuditBatch = %v", err)
	}
	wantValid(t, s, org, len(docs))
	listed := map[string]toolplane.AuditEvent{}
	for _, e := range listAudit(t, s, org, toolplane.AuditFilter{}, 10) {
		listed[e.ID] = e
	}
	chained := map[string]toolplane.AuditEvent{}
	for _, e := range readChain(t, s, org) {
		chained[e.ID] = e
	}
	for _, d := range docs {
		got, err := s.GetAudit(t.Context(), org, d.id)
		if err != nil {
			t.Fatalf("GetAudit(%s) = %v", d.id, err)
		}
		for read, e := range map[string]toolplane.AuditEvent{"GetAudit": *got, "ListAudit": listed[d.id], "AuditChain": chained[d.id]} {
			if string(e.PolicyInput) != d.doc || (d.doc == "" && e.PolicyInput != nil) {
				t.Errorf("%s's %s policy input = %q; want %q", read, d.id, e.PolicyInput, d.doc)
			}
		}
	}
}
