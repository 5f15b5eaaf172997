package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
)

// controlAuditCases hold the control plane's writes to the invariant "no
// effect without its audit event": a key, a grant, a deny, a bundle or a
// policy version is stored with its audit event (and its change record)
// in one transaction, or not at all.
var controlAuditCases = []suiteCase{
	{"CredentialInsert", auditedCase(credentialInsertWrite)},
	{"CredentialUpdate", auditedCase(credentialUpdateWrite)},
	{"GrantInsert", auditedCase(grantInsertWrite)},
	{"GrantRevoke", auditedCase(grantRevokeWrite)},
	{"DenyInsert", auditedCase(denyInsertWrite)},
	{"DenyDelete", auditedCase(denyDeleteWrite)},
	{"BundlePut", auditedCase(bundlePutWrite)},
	{"PolicyBundleInsert", auditedCase(policyBundleInsertWrite)},
	{"ConcurrentWritesChainInOrder", testControlAuditConcurrent},
}

// auditedWrite is one audited write of the control plane, prepared in an
// organization: write makes it with a change record (ignored when the
// write takes none) and an event; stored reports whether its effect is
// stored; miss, when not nil, makes a write of the same kind that cannot
// apply (its row in another organization, or a stale version), which
// must answer missErr (errors.Is) and store nothing.
type auditedWrite struct {
	recorded bool
	write    func(ch *toolplane.Change, e *toolplane.AuditEvent) error
	stored   func() bool
	miss     func(ch *toolplane.Change, e *toolplane.AuditEvent) error
	missErr  error
	// taken, when not nil, makes the write with its own row's identity
	// already taken (ErrExists), so neither its record nor its event may
	// be stored.
	taken func(ch *toolplane.Change, e *toolplane.AuditEvent) error
	// revision reports that the write moves the authorization revision,
	// which a write that is not stored must leave alone.
	revision bool
}

// controlEvent answers the audit event of a control-plane change in org,
// every field set as fullEvent's.
func controlEvent(org, id string) *toolplane.AuditEvent {
	e := fullEvent(org, id, at(time.Minute))
	e.Kind, e.Subject, e.Source, e.Outcome = toolplane.AuditGrant, "agent-billing", toolplane.SourceControl, "granted"
	return e
}

// auditedCase runs the checks every audited write passes: an event or a
// change record whose ID is taken stores nothing and answers ErrExists; a
// write that cannot apply stores neither its record nor its event; the
// write stores its effect, its record and its event, the event chained
// after the organization's events before it.
func auditedCase(prepare func(t *testing.T, s toolplane.Store, org string) auditedWrite) func(t *testing.T, s toolplane.Store) {
	return func(t *testing.T, s toolplane.Store) {
		org := newOrg()
		w := prepare(t, s, org)
		appendAudit(t, s, controlEvent(org, "ev-taken"))
		appendChange(t, s, fullChange(org, "chg-taken", base))
		rev := authzRevision(t, s, org)
		chain := []string{"ev-taken"}

		notStored := func(what, change, event string) {
			t.Helper()
			if w.stored() {
				t.Fatalf("%s: the change was stored", what)
			}
			if w.recorded {
				wantNoChange(t, s, org, change)
			}
			if event != "" {
				if e, err := s.GetAudit(t.Context(), org, event); !errors.Is(err, toolplane.ErrNotFound) {
					t.Fatalf("%s: event %s stored (%+v, %v)", what, event, e, err)
				}
			}
			if got := authzRevision(t, s, org); got != rev {
				t.Fatalf("%s: authorization revision moved from %d to %d", what, rev, got)
			}
		}

		// An event that cannot be stored stores nothing.
		err := w.write(fullChange(org, "chg-1", at(time.Minute)), controlEvent(org, "ev-taken"))
		if !errors.Is(err, toolplane.ErrExists) {
			t.Fatalf("write with a taken event ID = %v; want ErrExists", err)
		}
		notStored("an event with a taken ID", "chg-1", "")

		// Nor does a change record that cannot be.
		if w.recorded {
			err := w.write(fullChange(org, "chg-taken", at(time.Minute)), controlEvent(org, "ev-1"))
			if !errors.Is(err, toolplane.ErrExists) {
				t.Fatalf("write with a taken change ID = %v; want ErrExists", err)
			}
			notStored("a change record with a taken ID", "", "ev-1")
		}

		// Nor a write of a row whose identity is taken.
		if w.taken != nil {
			err := w.taken(fullChange(org, "chg-2", at(time.Minute)), controlEvent(org, "ev-2"))
			if !errors.Is(err, toolplane.ErrExists) {
				t.Fatalf("write of a taken identity = %v; want ErrExists", err)
			}
			notStored("a taken identity", "chg-2", "ev-2")
		}

		// Nor a write that does not apply.
		if w.miss != nil {
			err := w.miss(fullChange(org, "chg-3", at(time.Minute)), controlEvent(org, "ev-3"))
			if w.missErr == nil && err != nil || w.missErr != nil && !errors.Is(err, w.missErr) {
				t.Fatalf("write that does not apply = %v; want %v", err, w.missErr)
			}
			notStored("a write that does not apply", "chg-3", "ev-3")
		}

		// The write stores all three, the event as given and next in the
		// organization's chain.
		ch, e := fullChange(org, "chg-4", at(time.Hour)), controlEvent(org, "ev-4")
		want := *e
		if err := w.write(ch, e); err != nil {
			t.Fatalf("write = %v", err)
		}
		if !w.stored() {
			t.Fatal("the write stored no change")
		}
		chain = append(chain, e.ID)
		got, err := s.GetAudit(t.Context(), org, e.ID)
		if err != nil {
			t.Fatalf("GetAudit(%s) = %v", e.ID, err)
		}
		unchained := *got
		unchained.Seq, unchained.PrevHash, unchained.Hash = 0, nil, nil
		if d := diff(unchained, want); d != "" {
			t.Errorf("stored event: %s", d)
		}
		if w.recorded {
			if !slices.Contains(changeIDs(t, s, org), ch.ID) {
				t.Fatalf("change record %s not stored", ch.ID)
			}
		}
		if w.revision {
			wantAuthzGrown(t, s, org, rev, "an audited write")
		}
		wantControlChain(t, s, org, chain...)
	}
}

// wantNoChange fails t unless org's change log lacks id.
func wantNoChange(t *testing.T, s toolplane.Store, org, id string) {
	t.Helper()
	if slices.Contains(changeIDs(t, s, org), id) {
		t.Fatalf("change record %s stored for a change that was not", id)
	}
}

func changeIDs(t *testing.T, s toolplane.Store, org string) []string {
	t.Helper()
	var ids []string
	for _, c := range listChanges(t, s, org, "", "", maxLimit) {
		ids = append(ids, c.ID)
	}
	return ids
}

// wantControlChain fails t unless org's chain holds exactly the events
// ids, numbered from 1 in that order, and verifies, on a store that keeps
// the chain (toolplane.AuditChainStore); on another, unless org's trail
// holds those events.
func wantControlChain(t *testing.T, s toolplane.Store, org string, ids ...string) {
	t.Helper()
	cs, ok := s.(toolplane.AuditChainStore)
	if !ok {
		got := listAudit(t, s, org, toolplane.AuditFilter{}, maxLimit)
		var stored []string
		for _, e := range got {
			stored = append(stored, e.ID)
		}
		slices.Sort(stored)
		want := slices.Sorted(slices.Values(ids))
		if !slices.Equal(stored, want) {
			t.Fatalf("trail = %v; want %v", stored, want)
		}
		return
	}
	evs, err := cs.AuditChain(t.Context(), org, 1, 0, maxLimit)
	if err != nil {
		t.Fatalf("AuditChain = %v", err)
	}
	wantChain(t, evs, ids...)
	r, err := auditchain.VerifyStore(t.Context(), cs, testKeys(), org, 0, 0)
	if err != nil || !r.OK || r.Events != len(ids) {
		t.Fatalf("verify = %+v (break %+v), %v; want OK over %d events", r, r.Break, err, len(ids))
	}
}

func credentialInsertWrite(t *testing.T, s toolplane.Store, org string) auditedWrite {
	c := fullCredential(org, credentialID(org, "new"), base)
	elsewhere := fullCredential(newOrg(), credentialID(org, "taken"), base)
	insertCredential(t, s, elsewhere)
	return auditedWrite{
		write: func(_ *toolplane.Change, e *toolplane.AuditEvent) error {
			return s.InsertCredentialAudited(t.Context(), c, e)
		},
		stored: func() bool {
			_, err := s.GetCredential(t.Context(), c.ID)
			return err == nil
		},
		// A credential's ID is unique across organizations.
		taken: func(_ *toolplane.Change, e *toolplane.AuditEvent) error {
			dup := fullCredential(org, elsewhere.ID, base)
			return s.InsertCredentialAudited(t.Context(), dup, e)
		},
	}
}

func credentialUpdateWrite(t *testing.T, s toolplane.Store, org string) auditedWrite {
	orig := fullCredential(org, credentialID(org, "key"), base)
	orig.RevokedAt = time.Time{}
	insertCredential(t, s, orig)
	revoked := func(c toolplane.Credential) *toolplane.Credential {
		c.RevokedAt = at(time.Hour)
		return &c
	}
	return auditedWrite{
		write: func(_ *toolplane.Change, e *toolplane.AuditEvent) error {
			c := revoked(*orig)
			ok, err := s.UpdateCredentialAudited(t.Context(), c, e)
			switch {
			case err != nil && (ok || c.Version != orig.Version):
				t.Fatalf("UpdateCredentialAudited = %v, %v, version %d; want false and version %d on an update not stored", ok, err, c.Version, orig.Version)
			case err == nil && (!ok || c.Version != orig.Version+1):
				t.Fatalf("UpdateCredentialAudited = %v, version %d; want true, %d", ok, c.Version, orig.Version+1)
			}
			return err
		},
		stored: func() bool {
			c, err := s.GetCredential(t.Context(), orig.ID)
			if err != nil {
				t.Fatalf("GetCredential = %v", err)
			}
			return !c.RevokedAt.IsZero()
		},
		// A stale version, or another organization's credential, does
		// not apply: false, and no error.
		miss: func(_ *toolplane.Change, e *toolplane.AuditEvent) error {
			stale := revoked(*orig)
			stale.Version--
			other := revoked(*orig)
			other.OrganizationID = newOrg()
			for _, c := range []*toolplane.Credential{stale, other} {
				if ok, err := s.UpdateCredentialAudited(t.Context(), c, e); ok || err != nil {
					return fmt.Errorf("UpdateCredentialAudited(not applying) = %v, %v", ok, err)
				}
			}
			return nil
		},
	}
}

func grantInsertWrite(t *testing.T, s toolplane.Store, org string) auditedWrite {
	g := fullGrant(org, "grt-new", "agent-billing", base)
	insertGrant(t, s, fullGrant(org, "grt-taken", "agent-billing", base))
	return auditedWrite{
		recorded: true,
		revision: true,
		write: func(ch *toolplane.Change, e *toolplane.AuditEvent) error {
			return s.InsertGrantAudited(t.Context(), g, ch, e)
		},
		stored: func() bool {
			return slices.ContainsFunc(listGrants(t, s, org, "", true), func(x toolplane.Grant) bool { return x.ID == g.ID })
		},
		taken: func(ch *toolplane.Change, e *toolplane.AuditEvent) error {
			return s.InsertGrantAudited(t.Context(), fullGrant(org, "grt-taken", "agent-other", base), ch, e)
		},
	}
}

func grantRevokeWrite(t *testing.T, s toolplane.Store, org string) auditedWrite {
	g := fullGrant(org, "grt-1", "agent-billing", base)
	insertGrant(t, s, g)
	other := newOrg()
	insertGrant(t, s, fullGrant(other, "grt-elsewhere", "agent-billing", base))
	return auditedWrite{
		recorded: true,
		revision: true,
		write: func(ch *toolplane.Change, e *toolplane.AuditEvent) error {
			return s.RevokeGrantAudited(t.Context(), org, g.ID, "user-ada", at(time.Hour), ch, e)
		},
		stored: func() bool { return len(listGrants(t, s, org, "", false)) == 0 },
		// Another organization's grant is not found from org, and a grant
		// already revoked is no standing grant: neither is written.
		miss: func(ch *toolplane.Change, e *toolplane.AuditEvent) error {
			err := s.RevokeGrantAudited(t.Context(), org, "grt-elsewhere", "user-ada", at(time.Hour), ch, e)
			if len(listGrants(t, s, other, "", false)) != 1 {
				t.Fatal("revoked another organization's grant")
			}
			return err
		},
		missErr: toolplane.ErrNotFound,
	}
}

func denyInsertWrite(t *testing.T, s toolplane.Store, org string) auditedWrite {
	d := fullDeny(org, "dny-new", base)
	insertDeny(t, s, fullDeny(org, "dny-taken", base))
	return auditedWrite{
		recorded: true,
		revision: true,
		write: func(ch *toolplane.Change, e *toolplane.AuditEvent) error {
			return s.InsertDenyAudited(t.Context(), d, ch, e)
		},
		stored: func() bool {
			return slices.ContainsFunc(listDenies(t, s, org), func(x toolplane.Deny) bool { return x.ID == d.ID })
		},
		taken: func(ch *toolplane.Change, e *toolplane.AuditEvent) error {
			return s.InsertDenyAudited(t.Context(), fullDeny(org, "dny-taken", base), ch, e)
		},
	}
}

func denyDeleteWrite(t *testing.T, s toolplane.Store, org string) auditedWrite {
	d := fullDeny(org, "dny-1", base)
	insertDeny(t, s, d)
	other := newOrg()
	insertDeny(t, s, fullDeny(other, "dny-elsewhere", base))
	return auditedWrite{
		recorded: true,
		revision: true,
		write: func(ch *toolplane.Change, e *toolplane.AuditEvent) error {
			return s.DeleteDenyAudited(t.Context(), org, d.ID, ch, e)
		},
		stored: func() bool { return len(listDenies(t, s, org)) == 0 },
		miss: func(ch *toolplane.Change, e *toolplane.AuditEvent) error {
			err := s.DeleteDenyAudited(t.Context(), org, "dny-elsewhere", ch, e)
			if len(listDenies(t, s, other)) != 1 {
				t.Fatal("lifted another organization's deny")
			}
			return err
		},
		missErr: toolplane.ErrNotFound,
	}
}

func bundlePutWrite(t *testing.T, s toolplane.Store, org string) auditedWrite {
	b := fullBundle(org, "billing", base)
	putBundle(t, s, b)
	next := *b
	next.Refs = []string{"payments.refund_order@^3.0.0"}
	next.UpdatedAt = at(time.Hour)
	return auditedWrite{
		recorded: true,
		revision: true,
		write: func(ch *toolplane.Change, e *toolplane.AuditEvent) error {
			return s.PutBundleAudited(t.Context(), &next, ch, e)
		},
		stored: func() bool {
			got, err := s.GetBundle(t.Context(), org, b.Name)
			if err != nil {
				t.Fatalf("GetBundle = %v", err)
			}
			return slices.Equal(got.Refs, next.Refs)
		},
	}
}

func policyBundleInsertWrite(t *testing.T, s toolplane.Store, org string) auditedWrite {
	insertPolicyBundle(t, s, fullPolicyBundle(org, 1, base))
	b := fullPolicyBundle(org, 2, at(time.Minute))
	return auditedWrite{
		recorded: true,
		write: func(ch *toolplane.Change, e *toolplane.AuditEvent) error {
			return s.InsertPolicyBundleAudited(t.Context(), b, ch, e)
		},
		stored: func() bool {
			v, err := s.PolicyBundleVersion(t.Context(), org)
			if err != nil {
				t.Fatalf("PolicyBundleVersion = %v", err)
			}
			return v == 2
		},
		// A version taken (of concurrent publishes one is stored).
		taken: func(ch *toolplane.Change, e *toolplane.AuditEvent) error {
			return s.InsertPolicyBundleAudited(t.Context(), fullPolicyBundle(org, 1, at(time.Minute)), ch, e)
		},
	}
}

// testControlAuditConcurrent: audited control-plane writes of every kind
// racing each other and plain appends in one organization each store
// their event once, and leave the organization's chain gapless and
// valid, with every change's event on it.
func testControlAuditConcurrent(t *testing.T, s toolplane.Store) {
	org := newOrg()
	const each = 6
	kinds := []func(ctx context.Context, id string) error{
		func(ctx context.Context, id string) error {
			c := fullCredential(org, credentialID(org, id), base)
			return s.InsertCredentialAudited(ctx, c, controlEvent(org, id))
		},
		func(ctx context.Context, id string) error {
			return s.InsertGrantAudited(ctx, fullGrant(org, "grt-"+id, "agent-billing", base), fullChange(org, "chg-"+id, base), controlEvent(org, id))
		},
		func(ctx context.Context, id string) error {
			return s.InsertDenyAudited(ctx, fullDeny(org, "dny-"+id, base), fullChange(org, "chg-"+id, base), controlEvent(org, id))
		},
		func(ctx context.Context, id string) error {
			return s.PutBundleAudited(ctx, fullBundle(org, "bundle-"+id, base), fullChange(org, "chg-"+id, base), controlEvent(org, id))
		},
		func(ctx context.Context, id string) error {
			return s.AppendAudit(ctx, controlEvent(org, id))
		},
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(kinds)*each)
	for k, write := range kinds {
		for i := range each {
			wg.Go(func() {
				if err := write(t.Context(), fmt.Sprintf("w%d-%d", k, i)); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var want []string
	for k := range kinds {
		for i := range each {
			want = append(want, fmt.Sprintf("w%d-%d", k, i))
		}
	}
	cs, ok := s.(toolplane.AuditChainStore)
	if !ok {
		wantControlChain(t, s, org, want...)
		return
	}
	// The order of racing writes is the store's: the chain must hold each
	// event once, numbered from 1 with no gap, and verify.
	evs, err := cs.AuditChain(t.Context(), org, 1, 0, maxLimit)
	if err != nil {
		t.Fatalf("AuditChain = %v", err)
	}
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	wantControlChain(t, s, org, ids...)
	slices.Sort(ids)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("chain holds %v; want %v", ids, want)
	}
}

// RunAuditRefused holds the control plane's audited writes to the
// invariant when the audit chain itself fails: refuse makes s's database
// refuse to chain any event of the organization it is given (a trigger on
// the chain's table, as a broken chain or a full disk would), and every
// audited write of that organization must then answer an error and store
// neither its change, nor its change record, nor its event. Each write
// runs in an organization of its own on the one store s.
func RunAuditRefused(t *testing.T, s toolplane.Store, refuse func(t *testing.T, org string)) {
	t.Helper()
	writes := []struct {
		name    string
		prepare func(t *testing.T, s toolplane.Store, org string) auditedWrite
	}{
		{"CredentialInsert", credentialInsertWrite},
		{"CredentialUpdate", credentialUpdateWrite},
		{"GrantInsert", grantInsertWrite},
		{"GrantRevoke", grantRevokeWrite},
		{"DenyInsert", denyInsertWrite},
		{"DenyDelete", denyDeleteWrite},
		{"BundlePut", bundlePutWrite},
		{"PolicyBundleInsert", policyBundleInsertWrite},
	}
	for _, tt := range writes {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			org := newOrg()
			w := tt.prepare(t, s, org)
			rev := authzRevision(t, s, org)
			refuse(t, org)
			err := w.write(fullChange(org, "chg-1", at(time.Minute)), controlEvent(org, "ev-1"))
			if err == nil {
				t.Fatal("a write whose event the chain refused answered no error")
			}
			if w.stored() {
				t.Fatalf("the change was stored, its event refused (%v)", err)
			}
			if w.recorded {
				wantNoChange(t, s, org, "chg-1")
			}
			if got := listAudit(t, s, org, toolplane.AuditFilter{}, maxLimit); len(got) != 0 {
				t.Fatalf("events stored: %+v", got)
			}
			if got := authzRevision(t, s, org); got != rev {
				t.Fatalf("authorization revision moved from %d to %d", rev, got)
			}
		})
	}
}
