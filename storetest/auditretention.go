package storetest

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
)

func init() {
	auditChainCases = append(auditChainCases,
		auditChainCase{"RetentionPolicyDropsExpiredRanges", testRetentionPolicy},
		auditChainCase{"RetentionReusesTheCoveringCheckpoint", testRetentionReusesCheckpoint},
		auditChainCase{"PurgeProposals", testPurgeProposals},
		auditChainCase{"OutboxInTheEventsTransaction", testOutboxTransactional},
		auditChainCase{"OutboxLeasesAcksAndLag", testOutboxLeases},
		auditChainCase{"OutboxClaimsAtOnceShareTheBacklog", testOutboxClaimsAtOnce},
		auditChainCase{"OutboxSinksListedAndDropped", testOutboxSinks},
	)
}

// testRetentionPolicy: the retention pass drops, in each organization,
// the events created before the cutoff as a whole range under a checkpoint
// it signs at the range's end; it records each drop as an event of the
// organization's own chain naming the range and the checkpoint; the chain
// verifies before and after; a second pass finds nothing to drop.
func testRetentionPolicy(t *testing.T, _ AuditChain, s AuditChainStore) {
	a, b := newOrg(), newOrg()
	appendChain(t, s, a, 6)
	appendChain(t, s, b, 2)
	wantValid(t, s, a, 6)
	wantValid(t, s, b, 2)
	cutoff := at(3*time.Second + time.Millisecond) // events 1..3 are older
	now := at(time.Hour)
	drops, err := auditchain.Expire(t.Context(), s, testKeys(), cutoff, now)
	if err != nil {
		t.Fatalf("Expire = %v", err)
	}
	byOrg := map[string]auditchain.Drop{}
	for _, d := range drops {
		byOrg[d.OrganizationID] = d
	}
	if len(drops) != 2 || byOrg[a].From != 1 || byOrg[a].Through != 3 || byOrg[a].Deleted != 3 ||
		byOrg[b].Through != 2 || byOrg[b].Deleted != 2 {
		t.Fatalf("Expire dropped %+v; want a's 1..3 and b's 1..2", drops)
	}
	rest := readChain(t, s, a)
	if got := chainIDs(rest); len(rest) != 4 || rest[0].Seq != 4 || rest[3].Kind != toolplane.AuditRetention {
		t.Fatalf("a's chain after retention: %v; want 4..6 and the drop's event", got)
	}
	r := wantValid(t, s, a, 4)
	if r.Anchor != 3 {
		t.Fatalf("verify after retention = %+v; want anchored at the checkpoint at 3", r)
	}
	ev := rest[3]
	var args map[string]any
	if err := json.Unmarshal(ev.Arguments, &args); err != nil {
		t.Fatalf("the drop's event's arguments %s: %v", ev.Arguments, err)
	}
	if ev.Outcome != "dropped" || ev.PrincipalID != auditchain.RetentionPrincipal || ev.Source != toolplane.SourceControl ||
		args["from"] != 1.0 || args["through"] != 3.0 || args["checkpoint_seq"] != 3.0 || args["checkpoint_key_id"] != testKeys().Keys[0].ID {
		t.Fatalf("the drop's event = %+v, arguments %v", ev, args)
	}
	cps, err := s.AuditCheckpoints(t.Context(), a, 0, 0)
	if err != nil || len(cps) != 1 || cps[0].Seq != 3 {
		t.Fatalf("a's checkpoints = %+v, %v; want the one retention signed at 3", cps, err)
	}
	// b's whole chain went; the drop's event continues it from the
	// checkpoint.
	restB := readChain(t, s, b)
	if len(restB) != 1 || restB[0].Seq != 3 || restB[0].Kind != toolplane.AuditRetention {
		t.Fatalf("b's chain after retention: %v", chainIDs(restB))
	}
	wantValid(t, s, b, 1)
	again, err := auditchain.Expire(t.Context(), s, testKeys(), cutoff, now)
	if err != nil || len(again) != 0 {
		t.Fatalf("second Expire = %+v, %v; want nothing dropped", again, err)
	}
	// The chain goes on, and verifies.
	appendAudit(t, s, chainEvent(a, 7))
	wantValid(t, s, a, 5)
	// A cutoff in the future is refused: events before it are still being
	// written.
	if _, err := auditchain.Retain(t.Context(), s, testKeys(), a, now.Add(time.Hour), now, nil); err == nil {
		t.Fatal("Retain with a cutoff after now was not refused")
	}
}

// testRetentionReusesCheckpoint: a checkpoint already stored at the end of
// the expired range covers the drop (none is signed again), and a chain
// changed in the range is not dropped.
func testRetentionReusesCheckpoint(t *testing.T, h AuditChain, s AuditChainStore) {
	org := newOrg()
	evs := appendChain(t, s, org, 5)
	cp := signCheckpoint(t, s, evs[3])
	drops, err := auditchain.Retain(t.Context(), s, testKeys(), org, at(4*time.Second+time.Millisecond), at(time.Hour), nil)
	if err != nil || len(drops) != 1 || drops[0].Through != 4 || drops[0].CheckpointKey != cp.KeyID {
		t.Fatalf("Retain = %+v, %v; want 1..4 under the stored checkpoint", drops, err)
	}
	if cps, _ := s.AuditCheckpoints(t.Context(), org, 0, 0); len(cps) != 1 {
		t.Fatalf("checkpoints = %+v; want the one stored before", cps)
	}
	wantValid(t, s, org, 1)

	broken := newOrg()
	appendChain(t, s, broken, 4)
	for _, st := range h.Unguard {
		exec(t, h, s, st)
	}
	exec(t, h, s, `UPDATE audit_events SET outcome = 'denied' WHERE organization_id = '`+broken+`' AND seq = 2`)
	if _, err := auditchain.Retain(t.Context(), s, testKeys(), broken, at(3*time.Second+time.Millisecond), at(time.Hour), nil); err == nil {
		t.Fatal("Retain dropped a range of a broken chain")
	}
	if got := readChain(t, s, broken); len(got) != 4 {
		t.Fatalf("the broken chain lost rows: %v", chainIDs(got))
	}
}

// testPurgeProposals: a proposal is stored with its event; its proposer
// cannot confirm it; another person can, once, with the confirmation's
// event in the same write (a refused confirmation stores none); an
// expired one cannot be confirmed; another organization does not see it.
// A confirmed purge is listed unfinished (across organizations, once
// confirmed before the asked time) until it is completed, once, with its
// event; an unconfirmed one cannot be completed.
func testPurgeProposals(t *testing.T, _ AuditChain, s AuditChainStore) {
	ps, ok := s.(toolplane.AuditPurgeStore)
	if !ok {
		t.Fatal("the store keeps no audit purges")
	}
	org := newOrg()
	p := &toolplane.AuditPurge{ID: "purge-1" + org, OrganizationID: org, Before: at(time.Hour), ProposedBy: "ada",
		ProposedAt: at(2 * time.Hour), ExpiresAt: at(3 * time.Hour)}
	ev := chainEvent(org, 1)
	if err := ps.CreateAuditPurge(t.Context(), p, ev); err != nil {
		t.Fatalf("CreateAuditPurge = %v", err)
	}
	if ev.Seq != 1 {
		t.Fatalf("the proposal's event was numbered %d; want 1", ev.Seq)
	}
	old := *p
	old.ID, old.ProposedAt, old.ExpiresAt = "purge-0"+org, at(time.Hour), at(90*time.Minute)
	if err := ps.CreateAuditPurge(t.Context(), &old, chainEvent(org, 2)); err != nil {
		t.Fatalf("CreateAuditPurge = %v", err)
	}
	got, err := ps.GetAuditPurge(t.Context(), org, p.ID)
	if err != nil || got.ProposedBy != "ada" || !got.Before.Equal(stored(p.Before)) || got.ConfirmedBy != "" || !got.DoneAt.IsZero() {
		t.Fatalf("GetAuditPurge = %+v, %v", got, err)
	}
	if _, err := ps.GetAuditPurge(t.Context(), newOrg(), p.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetAuditPurge(another organization) = %v; want ErrNotFound", err)
	}
	if ok, err := ps.CompleteAuditPurge(t.Context(), org, p.ID, at(140*time.Minute), chainEvent(org, 3)); err != nil || ok {
		t.Fatalf("CompleteAuditPurge of an unconfirmed purge = %v, %v; want false", ok, err)
	}
	n := 3 // the events stored: both proposals', and one of each change that wins
	for _, c := range []struct {
		name, id, by string
		at           time.Duration
		want         bool
	}{
		{"by its proposer", p.ID, "ada", 150 * time.Minute, false},
		{"expired", old.ID, "grace", 150 * time.Minute, false},
		{"another organization's", "purge-x", "grace", 150 * time.Minute, false},
		{"by another person", p.ID, "grace", 150 * time.Minute, true},
		{"twice", p.ID, "linus", 151 * time.Minute, false},
	} {
		ev := chainEvent(org, n)
		ok, err := ps.ConfirmAuditPurge(t.Context(), org, c.id, c.by, at(c.at), ev)
		if err != nil || ok != c.want {
			t.Errorf("ConfirmAuditPurge %s = %v, %v; want %v", c.name, ok, err, c.want)
		}
		if ok {
			if ev.Seq != int64(n) {
				t.Errorf("the confirmation's event was numbered %d; want %d", ev.Seq, n)
			}
			n++
		}
	}
	list, err := ps.ListAuditPurges(t.Context(), org, 10)
	if err != nil || len(list) != 2 || list[0].ID != p.ID || list[0].ConfirmedBy != "grace" || list[1].ConfirmedBy != "" {
		t.Fatalf("ListAuditPurges = %+v, %v; want purge-1 confirmed by grace, then purge-0", list, err)
	}
	unfinished := func(before time.Duration) bool {
		t.Helper()
		for after := ""; ; {
			page, err := ps.UnfinishedAuditPurges(t.Context(), at(before), after, 2)
			if err != nil {
				t.Fatalf("UnfinishedAuditPurges = %v", err)
			}
			for _, u := range page {
				if u.ID == old.ID {
					t.Fatalf("UnfinishedAuditPurges lists the unconfirmed purge-0")
				}
				if u.ID == p.ID {
					return u.OrganizationID == org && u.ConfirmedBy == "grace"
				}
			}
			if len(page) < 2 {
				return false
			}
			after = page[len(page)-1].ID
		}
	}
	if unfinished(150 * time.Minute) {
		t.Fatal("UnfinishedAuditPurges lists a purge confirmed at the asked time")
	}
	if !unfinished(time.Duration(151) * time.Minute) {
		t.Fatal("UnfinishedAuditPurges does not list the confirmed purge")
	}
	done := chainEvent(org, n)
	if ok, err := ps.CompleteAuditPurge(t.Context(), newOrg(), p.ID, at(160*time.Minute), chainEvent(org, n)); err != nil || ok {
		t.Fatalf("CompleteAuditPurge of another organization's = %v, %v; want false", ok, err)
	}
	if ok, err := ps.CompleteAuditPurge(t.Context(), org, p.ID, at(160*time.Minute), done); err != nil || !ok || done.Seq != int64(n) {
		t.Fatalf("CompleteAuditPurge = %v, %v (event at %d); want true, its event at %d", ok, err, done.Seq, n)
	}
	n++
	if ok, err := ps.CompleteAuditPurge(t.Context(), org, p.ID, at(170*time.Minute), chainEvent(org, n)); err != nil || ok {
		t.Fatalf("CompleteAuditPurge twice = %v, %v; want false", ok, err)
	}
	if got, err := ps.GetAuditPurge(t.Context(), org, p.ID); err != nil || !got.DoneAt.Equal(stored(at(160*time.Minute))) {
		t.Fatalf("GetAuditPurge after its completion = %+v, %v", got, err)
	}
	if unfinished(time.Duration(200) * time.Minute) {
		t.Fatal("UnfinishedAuditPurges lists a completed purge")
	}
	wantValid(t, s, org, n-1)
}

func outbox(t *testing.T, s AuditChainStore) toolplane.AuditOutboxStore {
	t.Helper()
	o, ok := s.(toolplane.AuditOutboxStore)
	if !ok {
		t.Fatal("the store keeps no audit outbox")
	}
	return o
}

// testOutboxTransactional: an event is queued for each registered sink in
// the transaction that stores it: a batch refused whole queues nothing,
// an event stored is queued at once, and a sink registered later queues
// only what is stored after.
func testOutboxTransactional(t *testing.T, _ AuditChain, s AuditChainStore) {
	o := outbox(t, s)
	org := newOrg()
	if err := o.RegisterAuditSink(t.Context(), "files", base); err != nil {
		t.Fatal(err)
	}
	appendAudit(t, s, chainEvent(org, 1))
	// A duplicate ID refuses the batch: the event before it in the batch
	// is rolled back with its outbox row.
	if err := s.AppendAuditBatch(t.Context(), []*toolplane.AuditEvent{chainEvent(org, 2), chainEvent(org, 1)}); err == nil {
		t.Fatal("a batch with a duplicate was stored")
	}
	if err := o.RegisterAuditSink(t.Context(), "nats", base); err != nil {
		t.Fatal(err)
	}
	appendAudit(t, s, chainEvent(org, 3))
	for sink, want := range map[string][]string{"files": {"ev-001", "ev-003"}, "nats": {"ev-003"}} {
		got, err := o.ClaimAuditOutbox(t.Context(), sink, "node-a", 0, at(time.Hour), at(time.Hour+time.Minute), 100)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range got {
			if e.OrganizationID != org || e.Event == nil || e.Event.ID != e.EventID {
				t.Fatalf("entry %+v does not carry its event", e)
			}
			ids = append(ids, e.EventID)
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("%s's outbox = %v; want %v", sink, ids, want)
		}
	}
}

// testOutboxLeases: an exporter's claim leases the entries; another
// exporter (another node) claiming meanwhile skips them and takes the
// rest; acknowledged entries are gone and the lag counts what waits, per
// organization; a lease that ended frees its entries for another.
func testOutboxLeases(t *testing.T, _ AuditChain, s AuditChainStore) {
	o := outbox(t, s)
	if err := o.RegisterAuditSink(t.Context(), "nats", base); err != nil {
		t.Fatal(err)
	}
	org, other := newOrg(), newOrg()
	for i := 1; i <= 6; i++ {
		appendAudit(t, s, chainEvent(org, i))
	}
	appendAudit(t, s, chainEvent(other, 1))
	// Both organizations have an ev-001: an entry is named by which of
	// the two organizations it is of, never by a part of a random ID (two
	// IDs' last two characters are the same once in 1024 draws).
	role := map[string]string{org: "org", other: "other"}
	now, lease := at(time.Hour), time.Minute
	claim := func(owner string, when, until time.Time, limit int) ([]string, []int64) {
		t.Helper()
		got, err := o.ClaimAuditOutbox(t.Context(), "nats", owner, 0, when, until, limit)
		if err != nil {
			t.Fatalf("ClaimAuditOutbox(%s) = %v", owner, err)
		}
		var ids []string
		var seqs []int64
		for _, e := range got {
			r, ok := role[e.OrganizationID]
			if !ok {
				t.Fatalf("ClaimAuditOutbox(%s) answered %s's entry %+v, an organization this case never wrote", owner, e.OrganizationID, e)
			}
			ids = append(ids, r+"/"+e.EventID)
			seqs = append(seqs, e.Seq)
		}
		return ids, seqs
	}
	want := func(what string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s claimed %v; want %v", what, got, want)
		}
	}
	lag := func(org *string) int64 {
		t.Helper()
		l, err := o.AuditOutboxLag(t.Context(), "nats", org)
		if err != nil {
			t.Fatal(err)
		}
		return l.Pending
	}
	if n := lag(&org); n != 6 {
		t.Fatalf("lag of org = %d; want 6", n)
	}
	if n := lag(&other); n != 1 {
		t.Fatalf("lag of other = %d; want 1", n)
	}
	a, _ := claim("node-a", now, now.Add(lease), 4)
	want("node-a", a, "org/ev-001", "org/ev-002", "org/ev-003", "org/ev-004")
	b, _ := claim("node-b", now.Add(time.Second), now.Add(time.Second+lease), 10)
	want("node-b, while node-a holds its four,", b, "org/ev-005", "org/ev-006", "other/ev-001")
	again, _ := claim("node-b", now.Add(2*time.Second), now.Add(2*time.Second+lease), 10)
	want("node-b again", again, b...)
	// node-a acknowledges two of its four.
	own, seqs := claim("node-a", now.Add(3*time.Second), now.Add(lease), 2)
	want("node-a, its own again,", own, a[:2]...)
	if err := o.DeleteAuditOutbox(t.Context(), "nats", seqs); err != nil {
		t.Fatal(err)
	}
	if err := o.DeleteAuditOutbox(t.Context(), "nats", seqs[:1]); err != nil {
		t.Fatalf("deleting an acknowledged entry again = %v; want no error", err)
	}
	if n := lag(nil); n != 5 {
		t.Fatalf("lag = %d; want 5 after two acknowledged", n)
	}
	// node-a stops; once its lease ended, node-b takes what it held.
	late, _ := claim("node-b", now.Add(2*lease), now.Add(3*lease), 10)
	want("node-b after node-a's lease", late, "org/ev-003", "org/ev-004", "org/ev-005", "org/ev-006", "other/ev-001")
}

// testOutboxClaimsAtOnce: exporters claiming a sink's backlog at the
// same moment share it. Each entry is leased to one of them (none is sent
// by two nodes at once), together they lease all of it (a claim passes
// over only what another holds), and each, claiming again, gets back its
// own entries and no other's. On PostgreSQL the claims run at once on the
// pool's connections, so a claim's snapshot may predate a rival's commit
// and find the rows it leased free there: the lease must be checked again
// on the row it locks.
func testOutboxClaimsAtOnce(t *testing.T, _ AuditChain, s AuditChainStore) {
	o := outbox(t, s)
	if err := o.RegisterAuditSink(t.Context(), "nats", base); err != nil {
		t.Fatal(err)
	}
	// Fewer entries than the claims can take between them: the last
	// claims find the backlog gone and come back short.
	const claimers, each, entries = 8, 10, 60
	org := newOrg()
	batch := make([]*toolplane.AuditEvent, entries)
	for i := range batch {
		batch[i] = chainEvent(org, i+1)
	}
	if err := s.AppendAuditBatch(t.Context(), batch); err != nil {
		t.Fatalf("AppendAuditBatch = %v", err)
	}
	lease := time.Minute
	// claimAll has every claimer (owners[c]) claim once, all released at
	// once, and answers the sequence numbers each got.
	claimAll := func(owners []string, now, until time.Time, limit int) [][]int64 {
		t.Helper()
		got := make([][]int64, claimers)
		errs := make([]error, claimers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c := range claimers {
			wg.Go(func() {
				<-start
				es, err := o.ClaimAuditOutbox(t.Context(), "nats", owners[c], 0, now, until, limit)
				for _, e := range es {
					got[c] = append(got[c], e.Seq)
				}
				errs[c] = err
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("ClaimAuditOutbox = %v", err)
		}
		return got
	}
	// A round's leases have ended by the next, which shares the whole
	// backlog again: the rounds are more chances for claims to meet. Each
	// round's claimers are new, as each exporter's owner name is (and a
	// store may know an owner only once it claimed): their first claims
	// meet.
	for round := range 8 {
		owners := make([]string, claimers)
		for c := range owners {
			owners[c] = fmt.Sprintf("node-%d-%s", c, rand.Text())
		}
		now := at(time.Hour + time.Duration(round)*2*lease)
		first := claimAll(owners, now, now.Add(lease), each)
		holder := make(map[int64]int, entries)
		for c, seqs := range first {
			for _, seq := range seqs {
				if d, ok := holder[seq]; ok {
					t.Fatalf("round %d: entry %d leased to node-%d and node-%d at once; claims %v", round, seq, d, c, first)
				}
				holder[seq] = c
			}
		}
		if len(holder) != entries {
			t.Fatalf("round %d: the claims leased %d entries between them; want all %d: %v", round, len(holder), entries, first)
		}
		// Within the lease, each claimer's claim answers what it holds.
		again := claimAll(owners, now.Add(time.Second), now.Add(lease), entries)
		for c := range claimers {
			if !slices.Equal(again[c], first[c]) {
				t.Fatalf("round %d: node-%d claimed again %v; want its own %v", round, c, again[c], first[c])
			}
		}
	}
}

// testOutboxSinks: the registered sinks are listed; dropping one stops
// queueing for it and deletes what waited, leaving the others.
func testOutboxSinks(t *testing.T, _ AuditChain, s AuditChainStore) {
	o := outbox(t, s)
	for _, name := range []string{"nats", "files"} {
		if err := o.RegisterAuditSink(t.Context(), name, base); err != nil {
			t.Fatal(err)
		}
	}
	org := newOrg()
	appendAudit(t, s, chainEvent(org, 1))
	sinks, err := o.AuditSinks(t.Context())
	if err != nil || len(sinks) != 2 || sinks[0].Name != "files" || sinks[1].Name != "nats" || !sinks[0].RegisteredAt.Equal(stored(base)) {
		t.Fatalf("AuditSinks = %+v, %v; want files and nats", sinks, err)
	}
	// Another organization's event waits for files too: an organization
	// may not discard it, and nothing is dropped; the operator may.
	other := newOrg()
	appendAudit(t, s, chainEvent(other, 1))
	if err := o.DropAuditSink(t.Context(), "files", org); !errors.Is(err, toolplane.ErrSinkShared) {
		t.Fatalf("an organization's drop of a shared sink = %v; want ErrSinkShared", err)
	}
	if l, err := o.AuditOutboxLag(t.Context(), "files", &other); err != nil || l.Pending != 1 {
		t.Fatalf("the other organization's lag after a refused drop = %+v, %v; want 1", l, err)
	}
	if err := o.DropAuditSink(t.Context(), "files", ""); err != nil {
		t.Fatal(err)
	}
	appendAudit(t, s, chainEvent(org, 2))
	if l, err := o.AuditOutboxLag(t.Context(), "files", nil); err != nil || l.Pending != 0 {
		t.Fatalf("dropped sink's lag = %+v, %v; want nothing", l, err)
	}
	if l, err := o.AuditOutboxLag(t.Context(), "nats", nil); err != nil || l.Pending != 3 {
		t.Fatalf("nats's lag = %+v, %v; want 3", l, err)
	}
	if sinks, _ := o.AuditSinks(t.Context()); len(sinks) != 1 || sinks[0].Name != "nats" {
		t.Fatalf("AuditSinks after the drop = %+v", sinks)
	}
}
